"""Package hygiene: the layering rules of docs/architecture.md, checked on the source.

(a) every module of ``trtwidgets.core`` and ``trtwidgets.trt`` imports with
pandas, onnxruntime, tqdm, ipywidgets, IPython, plotly and tensorrt blocked (the
GPU machine's Python 3.9 has only numpy, onnx and tensorrt); (b) core never
imports widgets or plots; (c) vermin finds no syntax or library use newer than
Python 3.9 in core and trt; (d) the stages of ``trtwidgets.core`` import each
other one way only, as :data:`STAGE_IMPORTS` says; (e) no module is over
:data:`MAX_MODULE_LINES` lines; (f) docs/architecture.md's module tree (said
once: README.md points to it) names every subpackage, its core stages in pipeline order; (g) docs/architecture.md
states the stage rules and names only rooms that exist.
"""

from __future__ import annotations

import ast
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Optional

import pytest

from tests.conftest import ROOT

PKG = ROOT / "trtwidgets"
BLOCKED = ("pandas", "onnxruntime", "tqdm", "ipywidgets", "IPython", "plotly", "tensorrt", "traitlets", "anywidget")

_IMPORT_ALL = r"""
import importlib, importlib.abc, pkgutil, sys
BLOCKED = set(sys.argv[1].split(","))

class Blocker(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in BLOCKED:
            raise ImportError(f"{name} is blocked: core/trt must not import it at module level")
        return None

sys.meta_path.insert(0, Blocker())
failed = []
count = 0
for pkg_name in ("trtwidgets.core", "trtwidgets.trt"):
    pkg = importlib.import_module(pkg_name)
    for info in pkgutil.walk_packages(pkg.__path__, pkg_name + "."):
        count += 1
        try:
            importlib.import_module(info.name)
        except Exception as exc:
            failed.append(f"{info.name}: {type(exc).__name__}: {exc}")
leaked = sorted(m for m in sys.modules if m.split(".")[0] in BLOCKED)
print(f"imported {count}")
for line in failed:
    print("FAILED", line)
for m in leaked:
    print("LEAKED", m)
sys.exit(1 if failed or leaked else 0)
"""


def test_core_and_trt_import_with_heavy_packages_blocked():
    proc = subprocess.run([sys.executable, "-c", _IMPORT_ALL, ",".join(BLOCKED)], cwd=ROOT, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert int(proc.stdout.split("imported ")[1].split()[0]) >= 3


def _imports(path: Path, module: Optional[str] = None):
    """(line, dotted name) of every import in ``path``, wherever it stands; relative ones resolved.

    ``module`` is the file's dotted name (with ``__init__`` for a package); default from its path.
    """
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    module = module or ".".join(path.relative_to(ROOT).with_suffix("").parts)
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                # module ends in its own name (or "__init__"), so level 1 drops exactly that part.
                base = module.split(".")[: -node.level]
                if node.module:
                    yield node.lineno, ".".join(base + [node.module])
                else:
                    # "from .. import recipe": the names are the modules imported.
                    for alias in node.names:
                        yield node.lineno, ".".join(base + [alias.name])
            else:
                yield node.lineno, node.module or ""


@pytest.mark.parametrize("layer, forbidden", [
    ("core", ("trtwidgets.widgets", "trtwidgets.plots", "trtwidgets.trt", "trtwidgets.cli", "ipywidgets", "IPython",
              "plotly", "tensorrt", "traitlets")),
    ("trt", ("trtwidgets.widgets", "trtwidgets.plots", "trtwidgets.cli", "ipywidgets", "IPython", "plotly")),
])
def test_layers_import_only_downwards(layer, forbidden):
    bad = []
    for path in sorted((PKG / layer).rglob("*.py")):
        for lineno, name in _imports(path):
            if any(name == f or name.startswith(f + ".") for f in forbidden):
                bad.append(f"{path.relative_to(ROOT)}:{lineno} imports {name}")
    assert bad == []


def test_import_scan_sees_relative_imports():
    # The scan resolves "from ..widgets import x" in core; check it on this package's own modules.
    names = {n for _, n in _imports(PKG / "widgets" / "session.py")}
    assert "trtwidgets.core.model.lint" in names and "trtwidgets.core.common.errors" in names


# -- the stages of trtwidgets.core -------------------------------------------------------------

#: Which stages of ``trtwidgets.core`` each stage may import: at module level, inside a
#: function or under ``if TYPE_CHECKING``, all alike (a lazy import is still an arrow).
#: Read top to bottom it is the pipeline, each stage standing on the ones above it. A new
#: arrow needs its reason here, and the table must stay one-way (checked below); where
#: code wants an arrow the other way, it belongs in the other stage.
STAGE_IMPORTS = {
    # Errors, atomic writes, frozen values: what every stage stands on, so it stands on nothing.
    "common": (),
    # Loading, summarising and linting an ONNX model is the first step; it needs nothing later.
    "model": ("common",),
    # Statistics are collected by running the model (load_model, as_model_proto).
    "calibration": ("common", "model"),
    # A recipe holds a CalibrationDataSpec and takes its profiles from the data's shapes.
    "recipe": ("common", "model", "calibration"),
    # The calibration step runs a recipe's calibration (calibrate() makes the recipe from the
    # data's shapes) and returns the Calibration: it stands on both.
    "calibrate": ("common", "model", "calibration", "recipe"),
    # The reference run takes a model and exposes tensors the way calibration instruments it;
    # a layer-precision sweep step is a recipe.
    "accuracy": ("common", "model", "calibration", "recipe"),
    # Why-not-INT8 reads the calibration cache; a saved build's records carry the recipe
    # that made it (staleness).
    "engine": ("common", "calibration", "recipe"),
    # Placement walks the model's graph, export writes a Calibration's ranges into Q/DQ nodes,
    # validation measures the Q/DQ model's accuracy (accuracy's metrics).
    "qdq": ("common", "model", "calibration", "accuracy"),
    # The planner exports candidates (qdq), scores them (accuracy), fits statistics (calibration)
    # and reads where INT8 pays from a saved implicit-INT8 build (engine: its latency oracle).
    "plan": ("common", "model", "calibration", "accuracy", "engine", "qdq"),
}

CORE = PKG / "core"


def _stage_dirs():
    return sorted(p.name for p in CORE.iterdir() if (p / "__init__.py").is_file())


def _stage_of(name: str):
    """The stage of a dotted ``trtwidgets.core.<stage>...`` name, else None."""
    parts = name.split(".")
    return parts[2] if len(parts) > 2 and parts[:2] == ["trtwidgets", "core"] else None


def _stage_arrows(path: Path):
    """(line, imported stage) for each import of another stage in ``path`` (a module of a stage)."""
    own = path.relative_to(CORE).parts[0]
    for lineno, name in _imports(path):
        stage = _stage_of(name)
        if stage is not None and stage != own:
            yield lineno, stage


def test_every_stage_has_a_rule():
    assert sorted(STAGE_IMPORTS) == _stage_dirs()
    for stage, allowed in STAGE_IMPORTS.items():
        assert stage not in allowed and set(allowed) <= set(STAGE_IMPORTS), stage


def test_stage_rules_are_one_way():
    # Peel off stages whose allowed imports are all peeled already; a circle is what is left.
    remaining = {stage: set(allowed) for stage, allowed in STAGE_IMPORTS.items()}
    while True:
        ready = [s for s, deps in remaining.items() if not deps & set(remaining)]
        if not ready:
            break
        for s in ready:
            del remaining[s]
    assert remaining == {}, f"the stage table has a circle among {sorted(remaining)}"


def test_core_stages_import_only_what_their_rule_allows():
    bad = []
    for stage in _stage_dirs():
        allowed = set(STAGE_IMPORTS.get(stage, ()))
        for path in sorted((CORE / stage).rglob("*.py")):
            for lineno, other in _stage_arrows(path):
                if other not in allowed:
                    bad.append(f"{path.relative_to(ROOT)}:{lineno} ({stage}) imports {other}")
    assert bad == [], "arrows STAGE_IMPORTS does not allow (move the code, or give the arrow a reason there):\n" \
        + "\n".join(bad)


def test_stage_scan_sees_function_level_and_package_imports(tmp_path):
    # sweep.py imports the recipe stage only inside a function (the layer-precision step).
    assert "recipe" in {stage for _, stage in _stage_arrows(CORE / "accuracy" / "sweep.py")}
    # "from .. import x" names the module x; TYPE_CHECKING imports count too.
    src = tmp_path / "m.py"
    src.write_text("from typing import TYPE_CHECKING\nfrom .. import recipe, model as m\n"
                   "if TYPE_CHECKING:\n    from ..engine.layer_table import LayerTable\n", encoding="utf-8")
    names = {n for _, n in _imports(src, "trtwidgets.core.qdq.m")}
    assert {"trtwidgets.core.recipe", "trtwidgets.core.model", "trtwidgets.core.engine.layer_table"} <= names
    assert {_stage_of(n) for n in names} >= {"recipe", "model", "engine"} and "trtwidgets.core" not in names


# -- room sizes -------------------------------------------------------------------------------

#: No module should be so big that a newcomer must scroll to find its parts (docs/architecture.md).
MAX_MODULE_LINES = 500

#: Modules over the limit, each with the reason it may be; expected to be empty. An entry
#: whose module is back under the limit (or gone) fails the test, so the list only shrinks.
OVER_LIMIT_ALLOWED: dict = {}


def _line_counts():
    return {str(p.relative_to(ROOT)): len(p.read_text(encoding="utf-8").splitlines()) for p in sorted(PKG.rglob("*.py"))}


def test_no_module_is_over_the_size_limit():
    counts = _line_counts()
    over = sorted(f"{path} ({n} lines)" for path, n in counts.items()
                  if n > MAX_MODULE_LINES and path not in OVER_LIMIT_ALLOWED)
    assert over == [], f"modules over {MAX_MODULE_LINES} lines: split them by concern"
    stale = sorted(path for path in OVER_LIMIT_ALLOWED if counts.get(path, 0) <= MAX_MODULE_LINES)
    assert stale == [], "no longer over the limit: remove from OVER_LIMIT_ALLOWED"


# -- the module tree (docs/architecture.md, "Where each concept lives") ---------------------------


def _architecture_tree() -> str:
    """The fenced tree of docs/architecture.md's "Where each concept lives" section (README.md points there)."""
    text = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    m = re.search(r"^## Where each concept lives\n(.*?)(?=^## |\Z)", text, re.M | re.S)
    assert m, 'docs/architecture.md has no "## Where each concept lives" section'
    tree = re.search(r"^```\w*\n(trtwidgets/\n.*?)^```", m.group(1), re.M | re.S)
    assert tree, 'the "Where each concept lives" section has no fenced tree starting with "trtwidgets/"'
    return tree.group(1)


def test_readme_points_to_the_tree_and_does_not_repeat_it():
    """The module tree is said once: README.md's Architecture section links to docs/architecture.md."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    m = re.search(r"^## Architecture\n(.*?)(?=^## |\Z)", text, re.M | re.S)
    assert m and "docs/architecture.md" in m.group(1)
    assert "trtwidgets/\n" not in text and "├──" not in text


def test_module_tree_names_every_subpackage():
    section = _architecture_tree()
    packages = sorted(p.parent.relative_to(PKG) for p in PKG.rglob("__init__.py") if p.parent != PKG)
    # Each subpackage is a line of the tree: its name and a slash, indented.
    missing = [str(p) for p in packages if not re.search(rf"^[ \t│├└─]*{re.escape(p.name)}/", section, re.M)]
    assert missing == [], "docs/architecture.md's module tree does not name these subpackages"


def test_module_tree_names_only_modules_that_exist():
    section = _architecture_tree()
    existing = {p.name for p in PKG.rglob("*.py")}
    named = set(re.findall(r"\b(\w+\.py)\b", section))
    assert named and sorted(named - existing) == []


def test_module_tree_lists_the_core_stages_in_pipeline_order():
    """The tree's core folders read top to bottom as the pipeline: the order of :data:`STAGE_IMPORTS`."""
    section = _architecture_tree()
    core = section[section.index("core/"):section.index("trt/")]
    listed = [name for name in re.findall(r"^[ \t│├└─]*(\w+)/", core, re.M) if name in STAGE_IMPORTS]
    assert listed == list(STAGE_IMPORTS)


# -- docs/architecture.md -------------------------------------------------------------------


def _architecture_doc() -> str:
    return (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")


def test_architecture_doc_states_the_stage_rules():
    """Its table "who may import whom" is :data:`STAGE_IMPORTS`, row for row and in order."""
    rows = re.findall(r"^\| `(\w+)` \| ([^|]*) \|", _architecture_doc(), re.M)
    doc = {stage: tuple(x.strip() for x in allowed.split(",") if x.strip() not in ("", "—"))
           for stage, allowed in rows if stage in STAGE_IMPORTS}
    assert list(doc) == list(STAGE_IMPORTS) and doc == STAGE_IMPORTS


def test_architecture_doc_names_only_rooms_that_exist():
    """Every package path its tables name (``core/...``, ``trt/...``) is a module or folder of the package."""
    named = set(re.findall(r"`((?:core|trt|plots|widgets|cli|demo)/[\w/]*?(?:\.py|/)|plan_api\.py)`",
                           _architecture_doc()))
    assert named and sorted(p for p in named if not (PKG / p).exists()) == []


def test_every_module_has_future_annotations():
    missing = []
    for layer in ("core", "trt", "widgets", "cli"):
        for path in sorted((PKG / layer).rglob("*.py")):
            tree = ast.parse(path.read_text(encoding="utf-8"))
            code = [n for n in tree.body if not (isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant))]
            if code and not any(isinstance(n, ast.ImportFrom) and n.module == "__future__"
                                     and any(a.name == "annotations" for a in n.names) for n in tree.body):
                missing.append(str(path.relative_to(ROOT)))
    assert missing == []


def test_vermin_python39():
    vermin = shutil.which("vermin", path=str(Path(sys.executable).parent)) or shutil.which("vermin")
    if vermin is None:
        pytest.skip("vermin is not installed (pip install '.[test]')")
    # Not --feature union-types: it also flags `X | Y` in annotations, which
    # `from __future__ import annotations` makes fine on 3.9 (runtime unions are checked below).
    proc = subprocess.run([vermin, "--target=3.9-", "--no-tips", "--violations", "--no-parse-comments",
                           str(PKG / "core"), str(PKG / "trt")],
                          cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def _runtime_unions(tree):
    """``A | B`` of names inside isinstance/issubclass calls (3.10+ at run time)."""
    for node in ast.walk(tree):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("isinstance", "issubclass")
                and len(node.args) == 2 and isinstance(node.args[1], ast.BinOp) and isinstance(node.args[1].op, ast.BitOr)):
            yield node.lineno


def test_no_runtime_union_types():
    bad = [f"{p.relative_to(ROOT)}:{line}" for layer in ("core", "trt") for p in sorted((PKG / layer).rglob("*.py"))
           for line in _runtime_unions(ast.parse(p.read_text(encoding="utf-8")))]
    assert bad == []
    assert list(_runtime_unions(ast.parse("isinstance(x, int | str)"))) == [1]


def test_core_and_trt_import_on_python39_with_tensorrt():
    """Where the TensorRT 8.6 + Python 3.9 bundle exists (TRTWIDGETS_PY39_ENV=path/to/env.sh), import there too."""
    import os

    env_sh = os.environ.get("TRTWIDGETS_PY39_ENV")
    if not env_sh:
        pytest.skip("TRTWIDGETS_PY39_ENV is not set (path of the TensorRT 8.6 bundle's env.sh)")
    script = (f"source {env_sh} && PYTHONPATH=$PYTHONPATH:{ROOT} $PY39 -c {_shell_quote(_IMPORT_ALL)} "
              + ",".join(b for b in BLOCKED if b != "tensorrt"))
    proc = subprocess.run(["bash", "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def _shell_quote(text):
    import shlex

    return shlex.quote(text)
