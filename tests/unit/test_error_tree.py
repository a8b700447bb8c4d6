"""One error tree: every exception class under src/mcpfleet derives from ``MCPFleetError``, and
the tree drawn in ``errors.py``'s docstring is the real one (each class under its real parent,
with its builtin bases and the module it lives in).

Modules are imported and their classes inspected; the integrations, which import their agent
framework at module level (seconds each), and classes defined inside a function are read from
their source instead, by base names.
"""

from __future__ import annotations

import ast
import builtins
import functools
import importlib
import re
from dataclasses import dataclass
from pathlib import Path

import mcpfleet
from mcpfleet import errors
from mcpfleet.errors import MCPFleetError

PACKAGE = Path(mcpfleet.__file__).parent
SLOW_TO_IMPORT = ("mcpfleet.integrations",)
"""Modules read from source only: importing them imports an agent framework."""

SIGNALS = {"_Stopped"}
"""``BaseException`` subclasses that are stops, not errors (the docstring says why)."""

STANDALONE = {"ConfinementError"}
"""Errors of a program that runs outside the package (the Landlock launcher, started with
``python -I -S``, which cannot import mcpfleet): they end that program, never reach a caller
(the docstring says why)."""

NOT_IN_THE_TREE = SIGNALS | STANDALONE

BUILTIN_EXCEPTIONS = {
    name
    for name, value in vars(builtins).items()
    if isinstance(value, type) and issubclass(value, BaseException)
}


@dataclass(frozen=True)
class ExceptionClass:
    name: str
    module: str
    parent: str
    """The base that is in mcpfleet's tree (``""`` for ``MCPFleetError`` and for signals)."""
    builtin_bases: tuple[str, ...]
    """The other bases, builtins kept for callers (``Exception`` itself left out)."""
    in_tree: bool


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _sources() -> dict[str, ast.Module]:
    return {
        _module_name(path): ast.parse(path.read_text(), str(path)) for path in sorted(PACKAGE.rglob("*.py"))
    }


def _base_name(node: ast.expr) -> str:
    if isinstance(node, ast.Attribute):
        return node.attr
    return node.id if isinstance(node, ast.Name) else ""


def _from_import(cls: type[BaseException]) -> ExceptionClass:
    tree_bases = [base for base in cls.__bases__ if issubclass(base, MCPFleetError)]
    others = tuple(
        base.__name__ for base in cls.__bases__ if base not in tree_bases and base is not Exception
    )
    return ExceptionClass(
        name=cls.__name__,
        module=cls.__module__,
        parent=tree_bases[0].__name__ if tree_bases else "",
        builtin_bases=others,
        in_tree=issubclass(cls, MCPFleetError),
    )


def _from_source(sources: dict[str, ast.Module], known: dict[str, ExceptionClass]) -> list[ExceptionClass]:
    """The exception classes of the slow modules and those defined inside functions, found by
    base names until no new one turns up."""
    candidates: list[tuple[str, ast.ClassDef]] = []
    for module, tree in sources.items():
        slow = module.startswith(SLOW_TO_IMPORT)
        top_level = {id(node) for node in tree.body}
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef) and (slow or id(node) not in top_level):
                candidates.append((module, node))
    found: list[ExceptionClass] = []
    names = dict(known)
    grew = True
    while grew:
        grew = False
        for module, node in candidates:
            bases = [_base_name(base) for base in node.bases]
            if node.name in names and names[node.name].module == module:
                continue
            if not any(base in names or base in BUILTIN_EXCEPTIONS for base in bases):
                continue
            tree_bases = [base for base in bases if base in names and names[base].in_tree]
            entry = ExceptionClass(
                name=node.name,
                module=module,
                parent=tree_bases[0] if tree_bases else "",
                builtin_bases=tuple(base for base in bases if base not in tree_bases and base != "Exception"),
                in_tree=bool(tree_bases),
            )
            names[node.name] = entry
            found.append(entry)
            grew = True
    return found


@functools.cache
def exception_classes() -> list[ExceptionClass]:
    sources = _sources()
    found: dict[str, ExceptionClass] = {}
    for module_name in sources:
        if module_name.startswith(SLOW_TO_IMPORT):
            continue
        module = importlib.import_module(module_name)
        for value in vars(module).values():
            if (
                isinstance(value, type)
                and issubclass(value, BaseException)
                and value.__module__ == module_name
            ):
                entry = _from_import(value)
                assert entry.name not in found, f"two exception classes named {entry.name}: rename one"
                found[entry.name] = entry
    return [*found.values(), *_from_source(sources, found)]


@dataclass(frozen=True)
class TreeLine:
    name: str
    parent: str
    builtin_bases: tuple[str, ...]
    path: str


_TREE_LINE = re.compile(r"^(?P<indent>(?:[│ ]   )*)(?P<branch>[├└]── )?(?P<rest>\S.*)$")


def drawn_tree() -> dict[str, TreeLine]:
    """The classes drawn in errors.py's docstring, each with its parent in the drawing."""
    doc = errors.__doc__ or ""
    block = doc.split("::\n\n", 1)[1].split("\n\n", 1)[0]
    lines: dict[str, TreeLine] = {}
    parents: list[str] = []
    for raw in block.splitlines():
        match = _TREE_LINE.match(raw.removeprefix("    "))
        assert match is not None, f"not a line of the tree: {raw!r}"
        prefix = match.group("indent")
        depth = len(prefix) // 4 + (1 if match.group("branch") else 0)
        words = match.group("rest").split()
        name, rest = words[0], words[1:]
        builtin_bases: list[str] = []
        while rest[:1] == ["+"]:
            builtin_bases.append(rest[1])
            rest = rest[2:]
        del parents[depth:]
        lines[name] = TreeLine(name, parents[-1] if parents else "", tuple(builtin_bases), " ".join(rest))
        parents.append(name)
    return lines


def test_every_exception_class_derives_from_mcpfleet_error() -> None:
    classes = exception_classes()
    outside = [
        f"{entry.module}.{entry.name}"
        for entry in classes
        if not entry.in_tree and entry.name not in NOT_IN_THE_TREE
    ]
    assert outside == [], "derive these from MCPFleetError (or a subclass of it), in errors.py's tree"
    # The scan sees what it must: the classes of errors.py, module-local ones and the signal.
    names = {entry.name for entry in classes}
    assert {"ConnectError", "WireError", "EntryError", "_Stopped"} <= names


def test_errors_docstring_draws_the_real_tree() -> None:
    drawn = drawn_tree()
    for entry in exception_classes():
        if entry.name in NOT_IN_THE_TREE:
            assert f"``{entry.name}``" in (errors.__doc__ or ""), (
                f"say in errors.py why {entry.name} is not an error"
            )
            continue
        assert entry.name in drawn, f"{entry.module}.{entry.name} is missing from errors.py's tree"
        line = drawn[entry.name]
        assert line.parent == entry.parent, (
            f"{entry.name} is drawn under {line.parent!r}, derives from {entry.parent!r}"
        )
        assert line.builtin_bases == entry.builtin_bases, (
            f"{entry.name}'s builtin bases are {entry.builtin_bases}"
        )
        expected_path = "" if entry.module == "mcpfleet.errors" else entry.module.removeprefix("mcpfleet.")
        assert line.path.removesuffix(".py").replace("/", ".") == expected_path, (
            f"{entry.name} lives in {entry.module}"
        )
    names = {entry.name for entry in exception_classes()}
    assert set(drawn) <= names, f"drawn but not defined: {sorted(set(drawn) - names)}"


def test_reading_the_source_agrees_with_importing() -> None:
    """The fallback for the slow modules, tried on the daemon's modules, finds what importing them finds."""
    classes = exception_classes()
    imported = {entry.name: entry for entry in classes if entry.module.startswith("mcpfleet.daemon.")}
    roots = {entry.name: entry for entry in classes if entry.module == "mcpfleet.errors"}
    as_if_slow = {
        f"{SLOW_TO_IMPORT[0]}.{name}": tree
        for name, tree in _sources().items()
        if name.startswith("mcpfleet.daemon.")
    }
    read = {entry.name: entry for entry in _from_source(as_if_slow, roots)}
    assert {name: (entry.parent, entry.builtin_bases) for name, entry in read.items()} == {
        name: (entry.parent, entry.builtin_bases) for name, entry in imported.items()
    }
