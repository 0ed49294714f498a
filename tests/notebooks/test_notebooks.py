"""Every notebook in notebooks/ runs top to bottom, headless, without an error output.

Notebooks run on a copy in a temporary directory (the committed ones never get
outputs), with the kernel of the Python running the tests, so the package under
test is the one the kernel imports.
"""

from __future__ import annotations

import json
import shutil
import sys

import pytest

from tests.conftest import ROOT

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")

NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
CELL_TIMEOUT = 600


@pytest.fixture
def kernel_name(tmp_path, monkeypatch):
    """A kernelspec that runs this interpreter, so the notebook imports the package under test.

    Found through JUPYTER_PATH, so no kernel is installed into the user's Jupyter.
    """
    kdir = tmp_path / "jupyter" / "kernels" / "trtwidgets-test"
    kdir.mkdir(parents=True)
    (kdir / "kernel.json").write_text(json.dumps({
        "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "trtwidgets tests", "language": "python"}))
    monkeypatch.setenv("JUPYTER_PATH", str(tmp_path / "jupyter"))
    return "trtwidgets-test"


def test_there_are_notebooks():
    assert any(p.name == "01_quickstart.ipynb" for p in NOTEBOOKS)


@pytest.mark.slow
@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_notebook_runs(path, tmp_path, kernel_name):
    pytest.importorskip("ipykernel")
    work = tmp_path / path.name
    shutil.copy(path, work)
    nb = nbformat.read(str(work), as_version=4)
    tagged = [c for c in nb.cells if "parameters" in c.get("metadata", {}).get("tags", [])]
    assert len(tagged) <= 1, "at most one cell tagged 'parameters' (papermill)"
    client = nbclient.NotebookClient(nb, timeout=CELL_TIMEOUT, kernel_name=kernel_name,
                                     resources={"metadata": {"path": str(tmp_path)}}, allow_errors=True)
    client.execute()
    errors = []
    for i, cell in enumerate(nb.cells):
        for out in cell.get("outputs", []):
            if out.get("output_type") == "error":
                errors.append(f"cell {i}: {out.get('ename')}: {out.get('evalue')}")
            elif out.get("output_type") == "stream" and out.get("name") == "stderr" and "Traceback" in out.get("text", ""):
                errors.append(f"cell {i}: traceback on stderr: {out['text'][-500:]}")
    assert not errors, "\n".join(errors)
    assert all(c.get("execution_count") for c in nb.cells if c.cell_type == "code"), "a code cell did not run"
