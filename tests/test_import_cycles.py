"""No import circles among trtwidgets' modules (docs/architecture.md: "No import circles").

Every ``import`` counts as an arrow, wherever it stands: at module level, inside
a function (the lazy imports that keep tensorrt, pandas and plotly out of
``import trtwidgets``) or under ``if TYPE_CHECKING`` (as in tests/test_layering.py's
stage rules). A function-level or type-only import does not fail at import time,
but two modules that reach into each other are one room split in two, and the
next module-level import between them breaks. The fix is to move the shared part
(often a value type) to where both can import it, or to the side that owns it.

Relative imports are resolved; ``from pkg import name`` points at the submodule
``pkg.name`` when there is one, else at ``pkg`` itself. Importing a submodule
does not add an arrow to its package's ``__init__`` (Python runs it first, but
counting it would make every package that re-exports its own submodules a circle).

Run as a script to list the circles: ``python3 tests/test_import_cycles.py``.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path
from typing import Dict, Iterator, List, Set, Tuple

ROOT = Path(__file__).resolve().parents[1]

Arrow = Tuple[str, str, int]  # (target module, source file, line)


def module_names(package_dir: Path) -> Dict[str, Path]:
    """Dotted module name -> file, for every ``.py`` file of the package at ``package_dir``."""
    root = package_dir.parent
    names = {}
    for path in sorted(package_dir.rglob("*.py")):
        parts = list(path.relative_to(root).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        names[".".join(parts)] = path
    return names


def _package_of(module: str, path: Path) -> str:
    # A package's __init__ is the package itself; a plain module lives in its parent.
    return module if path.name == "__init__.py" else module.rpartition(".")[0]


def _known(name: str, modules: Dict[str, Path]) -> str:
    """The longest prefix of ``name`` that is one of ``modules`` ('' for outside imports)."""
    parts = name.split(".")
    while parts:
        candidate = ".".join(parts)
        if candidate in modules:
            return candidate
        parts.pop()
    return ""


def imports_of(module: str, modules: Dict[str, Path]) -> Iterator[Arrow]:
    """The arrows from ``module`` to other modules of ``modules``, one per imported name."""
    path = modules[module]
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                target = _known(alias.name, modules)
                if target:
                    yield target, str(path), node.lineno
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = _package_of(module, path).split(".")
                base = base[: len(base) - (node.level - 1)]
                source = ".".join(base + ([node.module] if node.module else []))
            else:
                source = node.module or ""
            for alias in node.names:
                target = _known(f"{source}.{alias.name}", modules) if f"{source}.{alias.name}" in modules \
                    else _known(source, modules)
                if target:
                    yield target, str(path), node.lineno


def import_graph(package_dir: Path) -> Dict[str, Dict[str, Arrow]]:
    """Module -> {imported module: the first arrow to it}; imports of a module by itself are left out."""
    modules = module_names(package_dir)
    graph: Dict[str, Dict[str, Arrow]] = {}
    for module in modules:
        edges: Dict[str, Arrow] = {}
        for arrow in imports_of(module, modules):
            if arrow[0] != module:
                edges.setdefault(arrow[0], arrow)
        graph[module] = edges
    return graph


def strongly_connected(graph: Dict[str, Dict[str, Arrow]]) -> List[List[str]]:
    """Groups of modules that reach each other (Tarjan's algorithm), only those of two or more, sorted."""
    index: Dict[str, int] = {}
    low: Dict[str, int] = {}
    stack: List[str] = []
    on_stack: Set[str] = set()
    groups: List[List[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, {}):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                groups.append(sorted(group))

    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, 10 * len(graph) + 100))
    try:
        for v in sorted(graph):
            if v not in index:
                visit(v)
    finally:
        sys.setrecursionlimit(limit)
    return sorted(groups)


def describe_cycle(group: List[str], graph: Dict[str, Dict[str, Arrow]]) -> str:
    """One circle through ``group``'s first module, each arrow with the file and line that makes it."""
    members = set(group)
    start = group[0]
    # Breadth-first from start back to start inside the group: the shortest circle.
    paths = {w: [start, w] for w in graph[start] if w in members}
    seen = set(paths)
    frontier = list(paths)
    while start not in paths:
        nxt = []
        for v in frontier:
            for w in graph[v]:
                if w in members and w not in seen:
                    seen.add(w)
                    paths[w] = paths[v] + [w]
                    nxt.append(w)
                if w == start and start not in paths:
                    paths[start] = paths[v] + [start]
        frontier = nxt
    cycle = paths[start]
    return "\n".join(f"{a} -> {b}  ({_shown(graph[a][b][1])}:{graph[a][b][2]})" for a, b in zip(cycle, cycle[1:]))


def _shown(path: str) -> str:
    try:
        return str(Path(path).relative_to(ROOT))
    except ValueError:  # outside the repository (the tests' own small packages)
        return path


def cycles(package_dir: Path) -> List[str]:
    """One description per group of modules that import each other, directly or around a circle."""
    graph = import_graph(package_dir)
    return [describe_cycle(group, graph) for group in strongly_connected(graph)]


# -- tests ---------------------------------------------------------------------------------------


def test_trtwidgets_has_no_import_cycles():
    found = cycles(ROOT / "trtwidgets")
    assert found == [], "import circles (module-level or inside functions):\n\n" + "\n\n".join(found)


def _write(root: Path, files: Dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return root / "pkg"


def test_finds_a_circle_made_by_a_function_level_relative_import(tmp_path):
    # The shape of the old trt/build.py <-> trt/inspect.py circle.
    pkg = _write(tmp_path, {
        "pkg/__init__.py": "",
        "pkg/sub/__init__.py": "",
        "pkg/sub/build.py": "from .inspect import layers\n",
        "pkg/sub/inspect.py": "def run():\n    from .build import nptype\n",
    })
    found = cycles(pkg)
    assert len(found) == 1
    assert "pkg.sub.build -> pkg.sub.inspect" in found[0] and "pkg.sub.inspect -> pkg.sub.build" in found[0]
    assert "inspect.py:2" in found[0]


def test_resolves_parent_relative_imports_and_submodules_named_in_from_imports(tmp_path):
    pkg = _write(tmp_path, {
        "pkg/__init__.py": "",
        "pkg/core/__init__.py": "",
        "pkg/core/a.py": "from ..trt import b\n",
        "pkg/trt/__init__.py": "def tensorrt():\n    pass\n",
        "pkg/trt/b.py": "from . import tensorrt\nimport pkg.core.a\n",
    })
    graph = import_graph(pkg)
    assert set(graph["pkg.core.a"]) == {"pkg.trt.b"}
    assert set(graph["pkg.trt.b"]) == {"pkg.trt", "pkg.core.a"}
    assert strongly_connected(graph) == [["pkg.core.a", "pkg.trt.b"]]


def test_a_package_importing_its_own_submodules_is_not_a_circle(tmp_path):
    pkg = _write(tmp_path, {
        "pkg/__init__.py": "from .steps import run\n",
        "pkg/steps.py": "from .values import Result\n\ndef run():\n    return Result()\n",
        "pkg/values.py": "class Result:\n    pass\n",
    })
    assert cycles(pkg) == []


def test_a_three_module_circle_is_reported_once_with_every_arrow(tmp_path):
    pkg = _write(tmp_path, {
        "pkg/__init__.py": "",
        "pkg/a.py": "import pkg.b\n",
        "pkg/b.py": "from pkg import c\n",
        "pkg/c.py": "def f():\n    from .a import g\n",
    })
    found = cycles(pkg)
    assert len(found) == 1
    assert found[0].splitlines() == [f"pkg.a -> pkg.b  ({pkg / 'a.py'}:1)", f"pkg.b -> pkg.c  ({pkg / 'b.py'}:1)",
                                     f"pkg.c -> pkg.a  ({pkg / 'c.py'}:2)"]


if __name__ == "__main__":
    report = cycles(ROOT / "trtwidgets")
    print("\n\n".join(report) if report else "no import cycles")
    sys.exit(1 if report else 0)
