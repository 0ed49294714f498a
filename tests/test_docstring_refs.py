"""Every ``:mod:``, ``:func:`` and ``:class:`` reference in the package's docstrings names something that exists.

Docstrings go stale when a module is renamed or a function moves; these references are checked statically
(the package is parsed, never imported): a relative target (``.export``, ``..accuracy.verdict.evaluate``) is
resolved from the module it is written in, as its imports are; ``~`` only shortens what Sphinx shows. A name
imported into a module is followed to where it is defined. Targets outside the package are looked up only
when their top-level package is installed (``tensorrt`` may not be).
"""

from __future__ import annotations

import ast
import builtins
import importlib
import importlib.util
import re
from typing import Dict, List, Optional, Tuple

from tests.conftest import ROOT

#: Packages the package may name in its docstrings without their being installed here.
OPTIONAL = ("tensorrt",)
ROLE = re.compile(r":(mod|func|class):`([^`<>]+)`")


class _Module:
    def __init__(self, name: str, tree: ast.Module, is_package: bool):
        self.name, self.tree, self.is_package = name, tree, is_package
        self.names: Dict[str, object] = {}  # top-level name -> ast node, or ("import", module, name)
        for node in tree.body:
            self._bind(node)
        for node in ast.walk(tree):  # names imported inside functions (lazy imports) count too
            if isinstance(node, (ast.Import, ast.ImportFrom)) and not any(
                    (a.asname or a.name.split(".")[0]) in self.names for a in node.names):
                self._bind(node)

    def _bind(self, node: ast.AST) -> None:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            self.names[node.name] = node
        elif isinstance(node, ast.Assign):
            for t in node.targets:
                for n in ast.walk(t):
                    if isinstance(n, ast.Name):
                        self.names[n.id] = node
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            self.names[node.target.id] = node
        elif isinstance(node, ast.ImportFrom):
            base = self.absolute(node.module or "", node.level)
            for a in node.names:
                self.names[a.asname or a.name] = ("import", base, a.name)
        elif isinstance(node, ast.Import):
            for a in node.names:
                self.names[a.asname or a.name.split(".")[0]] = ("module", a.name if a.asname else a.name.split(".")[0])
        elif isinstance(node, (ast.If, ast.Try)):  # TYPE_CHECKING blocks, optional imports
            for child in ast.iter_child_nodes(node):
                self._bind(child)

    def absolute(self, rest: str, level: int) -> str:
        if level == 0:
            return rest
        parts = self.name.split(".") if self.is_package else self.name.split(".")[:-1]
        parts = parts[: len(parts) - (level - 1)]
        return ".".join(parts + ([rest] if rest else []))


def _modules() -> Dict[str, _Module]:
    out = {}
    for path in sorted((ROOT / "trtwidgets").rglob("*.py")):
        rel = path.relative_to(ROOT).with_suffix("")
        is_package = rel.name == "__init__"
        name = ".".join(rel.parts[:-1] if is_package else rel.parts)
        out[name] = _Module(name, ast.parse(path.read_text(encoding="utf-8")), is_package)
    return out


MODULES = _modules()


def _member(node: object, parts: List[str], depth: int = 0) -> bool:
    """Whether ``parts`` name something inside ``node`` (a class's attributes and methods)."""
    if not parts:
        return True
    if isinstance(node, ast.ClassDef):
        for child in node.body:
            names = []
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                names = [child.name]
            elif isinstance(child, ast.AnnAssign) and isinstance(child.target, ast.Name):
                names = [child.target.id]
            elif isinstance(child, ast.Assign):
                names = [n.id for t in child.targets for n in ast.walk(t) if isinstance(n, ast.Name)]
            if parts[0] in names:
                return _member(child, parts[1:], depth)
        return any(_resolve_dotted(ast.unparse(b), [parts[0]], depth + 1) for b in node.bases if depth < 8)
    return False  # attributes of functions and values are not checked


def _resolve_in(module: _Module, parts: List[str], depth: int = 0) -> bool:
    if not parts:
        return True
    if depth > 12:
        return False
    bound = module.names.get(parts[0])
    if bound is None:
        sub = f"{module.name}.{parts[0]}"
        return sub in MODULES and _resolve_in(MODULES[sub], parts[1:], depth + 1)
    if isinstance(bound, tuple):
        kind, target, name = bound if len(bound) == 3 else (*bound, None)
        full = f"{target}.{name}" if kind == "import" else target
        return _resolve_dotted(full, parts[1:], depth + 1)
    return _member(bound, parts[1:], depth)


def _resolve_dotted(full: str, rest: List[str], depth: int = 0) -> bool:
    """``full`` (an absolute dotted name) then ``rest``: inside the package statically, outside by import."""
    parts = full.split(".") + rest
    if parts[0] == "trtwidgets":
        for i in range(len(parts), 0, -1):
            mod = ".".join(parts[:i])
            if mod in MODULES:
                return _resolve_in(MODULES[mod], parts[i:], depth)
        return False
    if importlib.util.find_spec(parts[0]) is None:
        return True  # not installed here (tensorrt): not checked
    for i in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:i]))
        except ImportError:
            continue
        try:
            for p in parts[i:]:
                obj = getattr(obj, p)
        except AttributeError:
            return False
        return True
    return False


def _resolves(target: str, module: _Module) -> bool:
    target = target.strip().lstrip("~").removesuffix("()")
    if target.startswith("."):
        level = len(target) - len(target.lstrip("."))
        return _resolve_dotted(module.absolute(target.lstrip("."), level), [])
    parts = target.split(".")
    if parts[0] in module.names or f"{module.name}.{parts[0]}" in MODULES:
        return _resolve_in(module, parts)
    if len(parts) == 1:  # a bare name this module does not define: a builtin, or a module (TensorRT may be absent)
        return hasattr(builtins, target) or target in OPTIONAL or importlib.util.find_spec(target) is not None
    return _resolve_dotted(target, [])


def _docstrings(module: _Module) -> List[Tuple[int, str]]:
    out = []
    for node in [module.tree, *ast.walk(module.tree)]:
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            doc = ast.get_docstring(node, clean=False)
            if doc:
                line = node.body[0].lineno if node.body else 1
                out.append((line, doc))
    return list(dict.fromkeys(out))


def stale_references(modules: Optional[Dict[str, _Module]] = None) -> List[str]:
    found = []
    for name, module in (modules or MODULES).items():
        for line, doc in _docstrings(module):
            for role, target in ROLE.findall(doc):
                if not _resolves(target, module):
                    found.append(f"{name} (docstring at line {line}): :{role}:`{target}`")
    return sorted(set(found))


def test_every_docstring_reference_names_something_that_exists():
    stale = stale_references()
    assert not stale, "docstring references to nothing:\n" + "\n".join(stale)


def test_a_stale_reference_is_found():
    tree = ast.parse('"""See :mod:`.qdq_placement`, :func:`.export.build_qdq`, :class:`~.export.Gone`, '
                     ':func:`gone` and :class:`dict`."""\n')
    fake = _Module("trtwidgets.core.qdq.fake", tree, False)
    stale = stale_references({fake.name: fake})
    assert [s.split(": ", 1)[1] for s in stale] == [":class:`~.export.Gone`", ":func:`gone`", ":mod:`.qdq_placement`"]
