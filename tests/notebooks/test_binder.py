"""binder/ runs the notebooks on saved artifacts: its pins cover what the package and the notebooks import."""

from __future__ import annotations

import ast
import json
import re
import sys

from tests.conftest import ROOT

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - the CPU suite runs on 3.11+
    tomllib = None

#: Import name -> distribution name, where they differ.
DISTRIBUTION = {"PIL": "pillow", "skimage": "scikit-image", "IPython": "ipykernel", "google": "protobuf"}
STDLIB = set(getattr(sys, "stdlib_module_names", ())) | {"trtwidgets", "__future__"}


def _pins() -> dict:
    pins = {}
    for line in (ROOT / "binder" / "requirements.txt").read_text().splitlines():
        line = line.split("#")[0].strip()
        if line:
            name, _, version = line.partition("==")
            assert version, f"binder pins every package: {line!r}"
            pins[name.lower().replace("_", "-")] = version
    return pins


def _name(requirement: str) -> str:
    return re.split(r"[<>=!~\[; ]", requirement, maxsplit=1)[0].lower().replace("_", "-")


def test_binder_pins_every_runtime_and_lab_dependency():
    if tomllib is None:
        return
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    needed = {_name(r) for r in project["dependencies"] + project["optional-dependencies"]["lab"]}
    missing = needed - set(_pins())
    assert not missing, f"binder/requirements.txt lacks {sorted(missing)}"


def test_binder_pins_what_the_notebooks_import():
    pins = _pins()
    for path in sorted((ROOT / "notebooks").glob("*.ipynb")):
        cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
        for cell in cells:
            if cell["cell_type"] != "code":
                continue
            for node in ast.walk(ast.parse("".join(cell["source"]))):
                names = [a.name for a in node.names] if isinstance(node, ast.Import) else (
                    [node.module] if isinstance(node, ast.ImportFrom) and node.module and not node.level else [])
                for name in names:
                    top = name.split(".")[0]
                    if top in STDLIB:
                        continue
                    dist = DISTRIBUTION.get(top, top).lower().replace("_", "-")
                    assert dist in pins, f"{path.name} imports {name}; binder/requirements.txt has no {dist}"


def test_binder_installs_the_package_and_names_a_python_it_supports():
    post = (ROOT / "binder" / "postBuild").read_text()
    assert re.search(r"pip install .*\s\.(\s|$)", post), "postBuild installs this repository"
    runtime = (ROOT / "binder" / "runtime.txt").read_text().strip()
    major, minor = map(int, re.fullmatch(r"python-(\d+)\.(\d+)", runtime).groups())
    assert (major, minor) >= (3, 9)
