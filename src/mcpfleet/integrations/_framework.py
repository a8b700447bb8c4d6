"""What every integration shares: the framework check and the reading of a tool result."""

from __future__ import annotations

import base64
import importlib.util
from typing import Any

from mcpfleet.fleet.tools import ToolResult


def require_framework(module: str, framework: str, extra: str) -> None:
    """Fail with the install line when the framework an integration adapts to is missing.

    Called before the framework is imported, so the user reads which extra to install rather
    than a bare ``ModuleNotFoundError`` for a package name they never typed.
    """
    if not installed(module):
        # mcpfleet is installed from its checkout (it is not on PyPI), so the extra is named on it.
        raise ImportError(
            f"mcpfleet.integrations needs {framework} for this module: install mcpfleet's extra "
            f"{extra!r} from its checkout, e.g. pip install -e '.[{extra}]' there"
        )


def installed(module: str) -> bool:
    """True when ``module`` can be imported (``google.adk`` without ``google`` too is "no")."""
    try:
        return importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:
        return False


def unwrapped_structured(result: ToolResult) -> Any:
    """The structured value of a result, without the SDK's ``{"result": value}`` wrapping.

    Servers built on the SDK wrap a return value that is not an object under ``result``;
    the model is better served by the value itself, as the frameworks' own MCP clients do.
    """
    structured = result.structured
    if isinstance(structured, dict) and set(structured) == {"result"}:
        return structured["result"]
    return structured


def only_text(result: ToolResult) -> bool:
    """True when every block of the result is text (so structured content can stand for it)."""
    return all(block.get("type") == "text" for block in result.content)


def decoded(data: object) -> bytes:
    """The bytes of a base64 payload; an unreadable payload becomes empty rather than a crash."""
    try:
        return base64.b64decode(str(data), validate=False)
    except ValueError:
        return b""
