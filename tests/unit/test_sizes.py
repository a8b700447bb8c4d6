"""The size bar of the redesign (issue "One contract, one direction"): no class in src/ over 400
lines and no function over 100. A class that grows past it has a second concern to give to a
collaborator of its own; the bar keeps that decision from being put off."""

from __future__ import annotations

import ast
from pathlib import Path

import mcpfleet

SOURCE = Path(mcpfleet.__file__).parent
MAX_CLASS_LINES = 400
MAX_FUNCTION_LINES = 100


def _definitions() -> list[tuple[str, str, int]]:
    """Every class and function of src/mcpfleet: its kind, ``file:name`` and length in lines."""
    found: list[tuple[str, str, int]] = []
    for path in sorted(SOURCE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
                kind = "class" if isinstance(node, ast.ClassDef) else "function"
                length = (node.end_lineno or node.lineno) - node.lineno + 1
                found.append((kind, f"{path.relative_to(SOURCE)}:{node.name}", length))
    return found


def test_no_class_is_over_400_lines() -> None:
    classes = [(name, length) for kind, name, length in _definitions() if kind == "class"]
    assert len(classes) > 100, "the scan must see the package's classes"
    assert [(name, length) for name, length in classes if length > MAX_CLASS_LINES] == []


def test_no_function_is_over_100_lines() -> None:
    functions = [(name, length) for kind, name, length in _definitions() if kind == "function"]
    assert any(length > 50 for _, length in functions), "the scan must see long functions too"
    assert [(name, length) for name, length in functions if length > MAX_FUNCTION_LINES] == []
