"""``getattr(obj, "name", default)`` stays rare in the package (issue 30: "getattr(…, default) calls halved").

A three-argument ``getattr`` reads an object whose type the code does not trust. The package passes typed
artifacts (Calibration, Plan, QdqSpec, QdqExport, LoadedModel, Recipe, the Session's traits, argparse
Namespaces whose arguments the command's ``add_arguments`` always defines): those are read as attributes, and
what is genuinely optional is typed ``Optional`` and checked with ``is None``.

Where a default is still right, it stays:

- TensorRT probing: its Python API differs across 8.6 / 10 / 11, so flags, enums, classes and properties are
  asked for through :func:`trtwidgets.trt.probe.probe` (the one ``getattr`` with a default in trtwidgets.trt's
  probing), never spelled out again;
- duck-typed third-party objects: plotly figures, ipywidgets, numpy/onnx objects across versions, exceptions
  of other libraries (``exc.what``), ctypes libraries' optional symbols (trt/cuda.py), a caller's logger;
- modules' optional attributes (a CLI command module's ``DESCRIPTION`` / ``OUTPUTS``, ``sre_parse`` constants
  of one Python or another, a metric module's function);
- documented public entry points that accept several forms of a source (``as_graph``: a graph, a build result,
  text or a path).

The count may go down; raising it needs a reason of the kinds above, and this ceiling raised with it.
"""

from __future__ import annotations

import ast
from collections import Counter
from pathlib import Path

import trtwidgets

#: The count reached by issue 30 (197 by the issue's grep, 216 by this test's AST count, before; main added 5 meanwhile).
CEILING = 80


def _three_argument_getattrs(root: Path) -> Counter:
    """File (relative to ``root``'s parent) -> its ``getattr`` calls with three arguments."""
    found: Counter = Counter()
    for path in sorted(root.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for node in ast.walk(tree):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "getattr"
                    and len(node.args) == 3):
                found[str(path.relative_to(root.parent))] += 1
    return found


def test_the_counter_sees_three_argument_getattrs_only(tmp_path):
    pkg = tmp_path / "pkg"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "a.py").write_text("x = getattr(a, 'b', None)\ny = getattr(a, 'b')\nz = obj.getattr(a, 'b', 1)\n")
    (pkg / "sub" / "b.py").write_text("def f(o):\n    return getattr(getattr(o, 's', o),\n                   'n', 0)\n")
    assert _three_argument_getattrs(pkg) == {"pkg/a.py": 1, "pkg/sub/b.py": 2}


def test_getattr_with_a_default_does_not_creep_back():
    found = _three_argument_getattrs(Path(trtwidgets.__file__).parent)
    total = sum(found.values())
    listing = "\n".join(f"  {n:3d} {path}" for path, n in found.most_common())
    assert total <= CEILING, (
        f"{total} getattr(obj, name, default) calls in the package, more than the {CEILING} allowed "
        f"(tests/test_getattr_defaults.py says which kinds may stay):\n{listing}")
    assert CEILING <= 85  # issue 30's target: half of the ~170 the issue counted
