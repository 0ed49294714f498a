"""Package hygiene: the layering rules of DESIGN.md, checked on the source.

(a) every module of ``trtwidgets.core`` and ``trtwidgets.trt`` imports with
pandas, onnxruntime, tqdm, ipywidgets, IPython, plotly and tensorrt blocked (the
GPU machine's Python 3.9 has only numpy, onnx and tensorrt); (b) core never
imports widgets or plots; (c) vermin finds no syntax or library use newer than
Python 3.9 in core and trt.
"""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
from pathlib import Path

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


def _imports(path: Path):
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    module = ".".join(path.relative_to(ROOT).with_suffix("").parts)
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                # module ends in its own name (or "__init__"), so level 1 drops exactly that part.
                base = module.split(".")[: -node.level]
                yield node.lineno, ".".join(base + ([node.module] if node.module else []))
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
