"""Every function and class of the package has a caller outside the tests, or is public, documented API.

Code that only tests call is kept alive by its tests alone: a reader takes it for part of the house, and a
change must keep it working for nobody (issue 30). Checked on the source with :mod:`ast`, by name:

- the *definitions* are the functions, classes and methods of ``trtwidgets`` defined at module or class level
  (a function nested in a function is its parent's business);
- a definition is *used* when its name is read outside its own body: a name, an attribute, an imported name,
  a keyword argument, or a string that is exactly the name (``_LAZY``, tables of names; not ``__all__``,
  which offers names rather than using them), in ``trtwidgets/``, ``scripts/``, ``benchmarks/`` or a
  notebook's code cells. Reads inside definitions that are themselves unused do not count, so a chain of
  functions that only call each other is found whole;
- *public, documented API* stays: the names of ``trtwidgets/__init__.py`` (``_LAZY``) with the public methods
  of the classes among them, and names written as code (backticks or a fenced block) in README.md,
  DEVELOPERS.md, docs/*.md or a notebook's Markdown;
- methods that something outside the package calls by protocol are :data:`CALLED_FROM_OUTSIDE`; dunders and
  traitlets' handlers (``@observe``, ``@validate``, ``@default``) are called by Python and traitlets.

By name is coarse on purpose: a name read anywhere keeps every definition of that name, so the check can miss
dead code but never calls live code dead. ``python -m tests.test_dead_code`` prints what it finds.
"""

from __future__ import annotations

import ast
import functools
import json
import re
import warnings
from collections import defaultdict
from pathlib import Path
from typing import Dict, Iterable, List, Optional, Set, Tuple

from tests.conftest import ROOT

CALLER_DIRS = ("trtwidgets", "scripts", "benchmarks")
DOCS = ("README.md", "DEVELOPERS.md", "docs/*.md")

#: Method names that code outside this package calls by protocol, each with who calls it.
CALLED_FROM_OUTSIDE: Dict[str, str] = {
    # tensorrt.IInt8Calibrator: the builder calls these on trt/calibrators.py's calibrators.
    "get_batch": "TensorRT's calibrator interface",
    "get_batch_size": "TensorRT's calibrator interface",
    "read_calibration_cache": "TensorRT's calibrator interface",
    "write_calibration_cache": "TensorRT's calibrator interface",
    "get_quantile": "TensorRT's IInt8LegacyCalibrator",
    "get_regression_cutoff": "TensorRT's IInt8LegacyCalibrator",
    "read_histogram_cache": "TensorRT's IInt8LegacyCalibrator",
    "write_histogram_cache": "TensorRT's IInt8LegacyCalibrator",
    # A text stream: whoever writes to sys.stdout/stderr (the CLI's safe streams) may call it.
    "writelines": "io.TextIOBase, for code writing to the CLI's streams",
    # plotly's BaseFigureWidget sends each change through these; plots/live_figure.py overrides them.
    "_send_relayout_msg": "plotly's BaseFigureWidget",
    "_send_restyle_msg": "plotly's BaseFigureWidget",
    "_send_addTraces_msg": "plotly's BaseFigureWidget",
    "_send_moveTraces_msg": "plotly's BaseFigureWidget",
    "_send_update_msg": "plotly's BaseFigureWidget",
    "_send_animate_msg": "plotly's BaseFigureWidget",
    "_send_deleteTraces_msg": "plotly's BaseFigureWidget",
    # IPython's display protocol: a Prose left as a cell's value is shown through it.
    "_repr_markdown_": "IPython's display protocol",
    # html.parser.HTMLParser calls these on plots/html_sanitize.py's parser as it reads a notebook's HTML.
    "handle_starttag": "html.parser.HTMLParser", "handle_startendtag": "html.parser.HTMLParser",
    "handle_endtag": "html.parser.HTMLParser", "handle_data": "html.parser.HTMLParser",
    "handle_comment": "html.parser.HTMLParser", "handle_decl": "html.parser.HTMLParser",
    "handle_pi": "html.parser.HTMLParser", "unknown_decl": "html.parser.HTMLParser",
}

#: Definitions kept although nothing outside the tests calls them, by qualified name, each with its reason.
#: An entry that is used after all (or gone) fails :func:`test_allowed_entries_are_still_needed`.
ALLOWED: Dict[str, str] = {
    "engine_inspector_json": "inspector_json's refusal names it as what writes an engine file's JSON again "
                             "(tests/gpu/make_fixtures.py makes the committed fixtures with it)",
    # Being reworked on other branches of issue 30; whichever lands decides.
    "TaskMetric.as_pair": "task_metrics.py is being split on the plan-harden branch (builtin_metrics.py)",
    "CalibrationExplorer.error_message": "widgets/ are being reworked on the app branch",
    "Claim.counter_example": "a claim's contract that its word follows its values: the notebook prose test turns "
                             "every executed claim with it (tests/notebooks/test_prose.py)",
    "schemes_table": "core/plan/regions is the regions helper's room; remove it there or print with it",
}

_TRAITLETS_HANDLERS = {"observe", "validate", "default"}


def _scan(tree: ast.Module) -> Tuple[List[Tuple[str, ast.AST]], Dict[Optional[str], Set[str]]]:
    """(qualified name, node) of the module- and class-level definitions, and the names read inside each
    (key: its qualified name; None for the module's own statements)."""
    defs: List[Tuple[str, ast.AST]] = []
    uses: Dict[Optional[str], Set[str]] = defaultdict(set)

    def read(owner, nodes):
        for node in nodes:
            for sub in ast.walk(node):
                uses[owner].update(_names_read(sub))

    def body(nodes, owner: Optional[str]):
        for node in nodes:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                qualified = f"{owner}.{node.name}" if owner else node.name
                defs.append((qualified, node))
                read(owner, node.decorator_list)
                if isinstance(node, ast.ClassDef):
                    read(qualified, node.bases + node.keywords)
                    body(node.body, qualified)
                else:
                    # Nested functions are their parent's business: their reads are the parent's.
                    read(qualified, [node.args] + ([node.returns] if node.returns else []) + node.body)
            elif not (isinstance(node, ast.Assign)
                      and any(isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets)):
                # ``__all__`` lists what a module offers; offering a name is not using it.
                read(owner, [node])

    body(tree.body, None)
    return defs, uses


def _names_read(node) -> Iterable[str]:
    if isinstance(node, ast.Name):
        yield node.id
    elif isinstance(node, ast.Attribute):
        yield node.attr
    elif isinstance(node, ast.alias):
        yield node.name.split(".")[-1]
    elif isinstance(node, ast.keyword) and node.arg:
        yield node.arg
    elif isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.isidentifier():
        yield node.value


def _is_traitlets_handler(node) -> bool:
    return any(isinstance(d, ast.Call) and getattr(d.func, "id", getattr(d.func, "attr", "")) in _TRAITLETS_HANDLERS
               for d in node.decorator_list)


_WORD = re.compile(r"[A-Za-z_]\w*")
_FENCE = re.compile(r"^```.*?^```", re.M | re.S)
_SPAN = re.compile(r"(?<!`)(`+)(?!`)((?:(?!\n\s*\n).)+?)(?<!`)\1(?!`)", re.S)


def _documented_words(markdown: str) -> Set[str]:
    """Identifiers written as code in Markdown: inside fenced blocks and backticks."""
    words = {w for block in _FENCE.findall(markdown) for w in _WORD.findall(block)}
    # A code span opens with a run of backticks and closes at the next run as long (``a `b` c`` is one);
    # it may run over a line break, not over a paragraph's end.
    for _ticks, span in _SPAN.findall(_FENCE.sub("", markdown)):
        words.update(_WORD.findall(span))
    return words


def _flat_api(root: Path) -> Tuple[Set[str], Set[str]]:
    """(names ``_LAZY`` resolves to, the classes among them), from trtwidgets/__init__.py."""
    init = root / "trtwidgets" / "__init__.py"
    tree = ast.parse(init.read_text(encoding="utf-8")) if init.is_file() else ast.Module(body=[], type_ignores=[])
    for node in ast.walk(tree):
        if isinstance(node, ast.AnnAssign) and getattr(node.target, "id", "") == "_LAZY":
            attrs = {attr for _module, attr in ast.literal_eval(node.value).values()}
            return attrs, {a for a in attrs if a[:1].isupper()}
    return set(), set()


def _outside_and_documented(root: Path) -> Tuple[Set[str], Set[str]]:
    """(words of the notebooks' code cells, identifiers the docs write as code)."""
    outside: Set[str] = set()
    documented: Set[str] = set()
    for path in sorted((root / "notebooks").glob("*.ipynb")):
        for cell in json.loads(path.read_text(encoding="utf-8"))["cells"]:
            source = "".join(cell["source"])
            if cell["cell_type"] == "code":
                # Magics and shell lines make ast unusable here; every identifier-like word counts.
                outside.update(_WORD.findall(source))
            elif cell["cell_type"] == "markdown":
                documented |= _documented_words(source)
    for pattern in DOCS:
        for path in sorted(root.glob(pattern)):
            documented |= _documented_words(path.read_text(encoding="utf-8"))
    return outside, documented


@functools.lru_cache(maxsize=4)
def _house(root: Path):
    """Every package definition, the names read in each module's parts, and what the notebooks and docs name."""
    defs: Dict[str, Tuple[str, ast.AST]] = {}  # "module:qualified" -> (qualified, node)
    uses: Dict[Tuple[str, Optional[str]], Set[str]] = {}
    for folder in CALLER_DIRS:
        for path in sorted((root / folder).rglob("*.py")):
            module = ".".join(path.relative_to(root).with_suffix("").parts)
            with warnings.catch_warnings():  # a script's invalid escape is not this test's business
                warnings.simplefilter("ignore")
                module_defs, module_uses = _scan(ast.parse(path.read_text(encoding="utf-8"), str(path)))
            if folder == "trtwidgets":
                defs.update({f"{module}:{q}": (q, node) for q, node in module_defs})
            for owner, names in module_uses.items():
                uses[(module, owner)] = names
    return defs, uses, _outside_and_documented(root), _flat_api(root)


def find_unused(root: Path = ROOT, allowed: Iterable[str] = ALLOWED) -> List[str]:
    """``module:qualified.name`` of each package definition without a caller outside the tests."""
    defs, uses, (outside, documented), (api, api_classes) = _house(root)
    kept = set(CALLED_FROM_OUTSIDE) | documented | api
    allowed = set(allowed)

    def keeps_itself(qualified: str, node) -> bool:
        name = qualified.rsplit(".", 1)[-1]
        parts = qualified.split(".")
        return (qualified in allowed or name in kept or (name.startswith("__") and name.endswith("__"))
                or _is_traitlets_handler(node)
                or (len(parts) == 2 and parts[0] in api_classes and not name.startswith("_")))

    candidates = {key for key, (q, node) in defs.items() if not keeps_itself(q, node)}
    dead: Set[str] = set()
    while True:
        read = set(outside)
        for (module, owner), names in uses.items():
            if owner is not None:
                parts = owner.split(".")
                if any(f"{module}:{'.'.join(parts[:i])}" in dead for i in range(1, len(parts) + 1)):
                    continue
                names = names - {parts[-1]}  # a definition's reads of its own name (recursion) keep nothing
            read |= names
        now = {key for key in candidates if defs[key][0].rsplit(".", 1)[-1] not in read}
        if now == dead:
            return sorted(dead)
        dead = now  # grows each round: what only dead code read is dead too


def test_every_definition_has_a_caller_outside_the_tests():
    unused = find_unused()
    assert unused == [], ("functions and classes that no code outside the tests uses (remove them with their "
                          "tests, or document them as public API):\n" + "\n".join(f"  {u}" for u in unused))


def test_allowed_entries_are_still_needed():
    """An allowed definition that now has a caller, or is gone, leaves the list: it only shrinks."""
    without = {u.split(":", 1)[1] for u in find_unused(allowed=())}
    stale = sorted(set(ALLOWED) - without)
    assert stale == [], f"drop these from ALLOWED (used now, or gone): {stale}"


def test_the_finder_finds_dead_chains_and_keeps_what_is_used(tmp_path):
    pkg = tmp_path / "trtwidgets"
    pkg.mkdir()
    (pkg / "__init__.py").write_text('_LAZY: dict = {"Thing": ("trtwidgets.a", "Thing")}\n')
    (pkg / "a.py").write_text(
        "__all__ = ['only_offered']\n"
        "def used():\n    return helper_of_used()\n"
        "def helper_of_used():\n    return 1\n"
        "def only_offered():\n    return 2\n"
        "def dead_top():\n    return dead_inner()\n"
        "def dead_inner():\n    return 3\n"
        "def recursive(n):\n    return recursive(n - 1) if n else 0\n"
        "def by_string():\n    return 4\n"
        "TABLE = {'by_string': 1}\n"
        "def in_notebook():\n    return 5\n"
        "def in_readme():\n    return 6\n"
        "def over_a_line_break():\n    return 10\n"
        "class Thing:\n    def method(self):\n        return 7\n    def _private(self):\n        return 8\n"
        "class Other:\n    def __repr__(self):\n        return ''\n    def unused_method(self):\n        return 9\n"
        "    def writelines(self, lines):\n        pass\n"
        "print(used(), Other())\n")
    (tmp_path / "notebooks").mkdir()
    (tmp_path / "notebooks" / "n.ipynb").write_text(json.dumps({"cells": [
        {"cell_type": "code", "source": ["%time x = in_notebook()\n"]},
        {"cell_type": "markdown", "source": ["prose names dead_top, which is not code"]}]}))
    (tmp_path / "README.md").write_text("Call ``in_readme(`x`)``, or `x.\nover_a_line_break()`.\n")
    assert find_unused(tmp_path, allowed=()) == [
        "trtwidgets.a:Other.unused_method", "trtwidgets.a:Thing._private", "trtwidgets.a:dead_inner",
        "trtwidgets.a:dead_top", "trtwidgets.a:only_offered", "trtwidgets.a:recursive"]
    assert "trtwidgets.a:dead_top" not in find_unused(tmp_path, allowed=("dead_top",))


if __name__ == "__main__":
    for line in find_unused():
        print(line)
