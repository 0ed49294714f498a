"""Every document the code cites exists.

A docstring or comment that sends the reader to a document the repository lacks is a door painted on
a wall (issue 30: the package and its layering tests cited a design document that was never in the
repository). Checked on the source: every ``*.md`` path written in a docstring or a comment of
``trtwidgets/``, ``tests/``, ``scripts/`` or ``benchmarks/`` names a file of the repository, taken
from the repository's root, from the citing file's folder, or from ``docs/``. Documents of other
projects are :data:`ELSEWHERE`, each with where it is.
"""

from __future__ import annotations

import ast
import io
import re
import tokenize
import warnings
from pathlib import Path
from typing import Dict, Iterable, List, Tuple

from tests.conftest import ROOT

FOLDERS = ("trtwidgets", "tests", "scripts", "benchmarks")

#: Documents of other projects that the code cites by name, each with where it is.
ELSEWHERE: Dict[str, str] = {
    "operators.md": "onnx-tensorrt's list of the ONNX operators its parser supports (docs/operators.md there)",
}

_CITED = re.compile(r"(?<![\w/.*-])((?:\.\./|[\w.-]+/)*[\w-][\w.-]*\.md)\b")


def _docstrings(tree: ast.AST) -> Iterable[Tuple[int, str]]:
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            doc = ast.get_docstring(node, clean=False)
            if doc:
                yield (node.body[0].lineno, doc)


def _comments(source: str) -> Iterable[Tuple[int, str]]:
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type == tokenize.COMMENT:
            yield tok.start[0], tok.string


def citations(path: Path) -> List[Tuple[int, str]]:
    """``(line, cited path)`` of every ``*.md`` path in ``path``'s docstrings and comments."""
    source = path.read_text(encoding="utf-8")
    with warnings.catch_warnings():  # a script's invalid escape is not this test's business
        warnings.simplefilter("ignore")
        tree = ast.parse(source, str(path))
    found = []
    for line, text in list(_docstrings(tree)) + list(_comments(source)):
        found.extend((line + text[:m.start()].count("\n"), m.group(1)) for m in _CITED.finditer(text))
    return found


def resolves(cited: str, citing: Path, root: Path = ROOT) -> bool:
    return any((base / cited).is_file() for base in (root, citing.parent, root / "docs"))


def missing_citations(root: Path = ROOT) -> List[str]:
    bad = []
    for folder in FOLDERS:
        for path in sorted((root / folder).rglob("*.py")):
            for line, cited in citations(path):
                if Path(cited).name not in ELSEWHERE and not resolves(cited, path, root):
                    bad.append(f"{path.relative_to(root)}:{line} cites {cited}")
    return bad


def test_every_document_the_code_cites_exists():
    bad = missing_citations()
    assert bad == [], ("documents cited but not in the repository (point the citation at one that is, "
                       "docs/architecture.md for the design, or add the document):\n" + "\n".join(bad))


def test_the_check_reads_docstrings_and_comments_and_resolves_paths(tmp_path):
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "here.md").write_text("x")
    (tmp_path / "README.md").write_text("x")
    pkg = tmp_path / "trtwidgets"
    pkg.mkdir()
    (pkg / "m.py").write_text('"""See docs/here.md and README.md."""\n\n'
                              'def f():\n    """The rules of DESIGN.md."""\n    return "gone.md"  # and ../shared/x.md\n')
    assert [c for _l, c in citations(pkg / "m.py")] == ["docs/here.md", "README.md", "DESIGN.md", "../shared/x.md"]
    assert missing_citations(tmp_path) == ["trtwidgets/m.py:4 cites DESIGN.md", "trtwidgets/m.py:5 cites ../shared/x.md"]
    assert resolves("here.md", pkg / "m.py", tmp_path)  # from docs/
