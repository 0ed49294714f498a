"""No module imports another module's private names.

A leading underscore says "this module's own business": importing it from
elsewhere ties two modules together through a name neither documents. Such a
name is either made public (renamed, documented) or moved to where it is used.

Checked on the source with :mod:`ast`: every ``from X import _name`` inside
``trtwidgets`` (at any depth, multi-line imports included) fails, except dunder
names such as ``__version__`` and the standard library's or third parties'
modules (``import html as _html`` binds a private *alias*, which is fine).
"""

from __future__ import annotations

import ast
from pathlib import Path
from typing import List, Tuple

from tests.conftest import ROOT

PKG = ROOT / "trtwidgets"

#: Known exceptions, by file and name, each with the change that removes it.
#: core/qdq/planner.py's ``_resolve_high_precision`` goes when the `contract`
#: work moves the planner to core/plan/ (issue 20, part 2); drop the entry then.
ALLOWED = {
    ("trtwidgets/core/qdq/planner.py", "_resolve_high_precision"),
}


def _is_private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _is_package_module(node: ast.ImportFrom) -> bool:
    """True when the import names a module of this package (relative or absolute)."""
    if node.level:
        return True
    return (node.module or "").split(".")[0] == "trtwidgets"


def private_imports(root: Path = PKG) -> List[Tuple[str, int, str, str]]:
    """(file, line, module, name) for every private name imported from the package."""
    found = []
    for path in sorted(root.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and _is_package_module(node):
                for alias in node.names:
                    if _is_private(alias.name):
                        module = "." * node.level + (node.module or "")
                        found.append((path.relative_to(root.parent).as_posix(), node.lineno, module, alias.name))
    return found


def test_no_private_name_is_imported_across_modules():
    bad = [f"{f}:{line}: from {mod} import {name}" for f, line, mod, name in private_imports()
           if (f, name) not in ALLOWED]
    assert not bad, ("private names imported across modules (make them public or move them to their user):\n"
                     + "\n".join(bad))


def test_the_checker_finds_a_multiline_private_import(tmp_path):
    pkg = tmp_path / "trtwidgets" / "sub"
    pkg.mkdir(parents=True)
    (pkg / "a.py").write_text("def _hidden():\n    return 1\n__version__ = '1'\n")
    (pkg / "b.py").write_text("from .a import (\n    __version__,\n    _hidden,\n)\nimport json as _json\n"
                              "from os.path import join as _join\n")
    found = private_imports(tmp_path / "trtwidgets")
    assert [(name, line) for _f, line, _m, name in found] == [("_hidden", 1)]


def test_allowed_exceptions_still_exist():
    """An allow-list entry whose import is gone must be dropped, so the list cannot go stale."""
    present = {(f, name) for f, _line, _mod, name in private_imports()}
    stale = sorted(ALLOWED - present)
    assert not stale, f"drop these from ALLOWED, the imports are gone: {stale}"
