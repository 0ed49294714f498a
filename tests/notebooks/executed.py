"""Each notebook of notebooks/ executed once per test run, and shared by every test that reads its outputs.

Executing the notebooks is the heaviest thing the suite does (minutes on 2 CPU cores),
and three kinds of test read the executed outputs: the notebook tests (errors, the nbconvert
export), the share checks (size, plotly.js once) and the real-browser test of the shared pages.
:func:`executed` runs a notebook the first time any of them asks and hands the same result to
the others, in whichever order pytest runs them.

Under pytest-xdist the workers of one run share the executed copies through a folder of the run (a file lock
per notebook): the first worker that asks executes it.

With ``$TRTWIDGETS_EXECUTED_NOTEBOOKS`` set to a folder, the executed copies are also kept
there, named by a digest of the notebook, of the package's source and of the Python running
it: a later run with the same notebook and package reads them instead of executing again
(a developer re-running the share or browser checks). Any change to either executes anew.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Optional

from tests.conftest import ROOT

CELL_TIMEOUT = 600
KERNEL_NAME = "trtwidgets-test"
#: Where executed copies are kept between runs (unset: not kept).
KEEP_ENV = "TRTWIDGETS_EXECUTED_NOTEBOOKS"

_DONE = {}
_KERNELS = []


def _kernel_dir() -> Path:
    """A kernelspec that runs this interpreter (found through JUPYTER_PATH; nothing is installed)."""
    if not _KERNELS:
        base = Path(tempfile.mkdtemp(prefix="trtwidgets-kernels-"))
        kdir = base / "kernels" / KERNEL_NAME
        kdir.mkdir(parents=True)
        (kdir / "kernel.json").write_text(json.dumps({
            "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
            "display_name": "trtwidgets tests", "language": "python"}))
        _KERNELS.append(base)
    return _KERNELS[0]


@contextlib.contextmanager
def _jupyter_path(path: Path):
    old = os.environ.get("JUPYTER_PATH")
    os.environ["JUPYTER_PATH"] = str(path) + (os.pathsep + old if old else "")
    try:
        yield
    finally:
        if old is None:
            os.environ.pop("JUPYTER_PATH", None)
        else:
            os.environ["JUPYTER_PATH"] = old


def digest(path: Path) -> str:
    """What an executed copy depends on: the notebook, every file of the package, the Python."""
    h = hashlib.sha256(path.read_bytes())
    for f in sorted((ROOT / "trtwidgets").rglob("*")):
        if f.is_file() and "__pycache__" not in f.parts:
            h.update(str(f.relative_to(ROOT)).encode())
            h.update(f.read_bytes())
    h.update(sys.version.encode())
    return h.hexdigest()[:16]


def _execute(path: Path):
    import nbclient
    import nbformat

    work = Path(tempfile.mkdtemp(prefix=f"trtwidgets-{path.stem}-"))
    try:
        shutil.copy(path, work / path.name)
        nb = nbformat.read(str(work / path.name), as_version=4)
        client = nbclient.NotebookClient(nb, timeout=CELL_TIMEOUT, kernel_name=KERNEL_NAME,
                                         resources={"metadata": {"path": str(work)}}, allow_errors=True,
                                         shutdown_kernel="immediate")  # a graceful shutdown once hung for minutes
        with _jupyter_path(_kernel_dir()):
            client.execute()
        return nb
    finally:
        shutil.rmtree(work, ignore_errors=True)


def executed(path: Path):
    """The notebook at ``path`` after a run top to bottom (errors kept as outputs); one run per test session.

    The node is shared: tests read it and never change it.
    """
    import nbformat

    path = Path(path)
    if path in _DONE:
        return _DONE[path]
    keep = _kept_folder()
    if keep is None:
        _DONE[path] = _execute(path)
        return _DONE[path]
    kept = keep / f"{path.stem}-{digest(path)}.ipynb"
    kept.parent.mkdir(parents=True, exist_ok=True)
    with open(kept.with_suffix(".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # one process executes; the others wait and read its copy
        if kept.is_file():
            nb = nbformat.read(str(kept), as_version=4)
        else:
            nb = _execute(path)
            tmp = kept.with_suffix(".tmp")
            nbformat.write(nb, str(tmp))
            os.replace(tmp, kept)
    _DONE[path] = nb
    return nb


def _kept_folder() -> Optional[Path]:
    """Where executed copies are shared: ``$TRTWIDGETS_EXECUTED_NOTEBOOKS``, else, when pytest-xdist runs the
    suite in several processes (the README's test command), a folder of this run that its workers share (each
    notebook is executed once per run, not once per worker); None for a run in one process."""
    keep = os.environ.get(KEEP_ENV)
    if keep:
        return Path(keep)
    run = os.environ.get("PYTEST_XDIST_TESTRUNUID")
    return Path(tempfile.gettempdir()) / f"trtwidgets-executed-{run}" if run else None


def written(path: Path, folder: Path) -> Path:
    """The executed notebook saved under ``folder`` (as a user would save it before sharing)."""
    import nbformat

    out = Path(folder) / path.name
    nbformat.write(executed(path), str(out))
    return out
