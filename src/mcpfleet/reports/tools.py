"""The ``tools`` and ``call`` reports, built in one place for both ways of running.

``mcpfleet tools`` and ``mcpfleet call`` build them in their own process; the daemon builds
the very same documents for its ``tools`` and ``call`` control operations, so that a command
answered by a running daemon prints what it would print in-process.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from mcpfleet.reports.rows import ErrorRow, ToolRow

if TYPE_CHECKING:
    from mcpfleet.fleet.tool_list import AnyTool
    from mcpfleet.fleet.tools import ToolResult


def tool_rows(tools: Iterable[AnyTool], *, server: str | None = None) -> list[ToolRow]:
    """The tools an agent would see (of ``server`` only, when given)."""
    return [
        ToolRow(
            name=tool.name,
            server=tool.server_name,
            mcp_name=tool.mcp_tool_name,
            description=tool.description,
            deferred=tool.deferred,
            input_schema=tool.parameters,
        )
        for tool in tools
        if server is None or tool.server_name == server
    ]


def tools_document(tools: Sequence[ToolRow], errors: Sequence[ErrorRow]) -> dict[str, Any]:
    """``tools --json``."""
    return {"tools": [tool.to_json() for tool in tools], "errors": [error.to_json() for error in errors]}


def call_document(result: ToolResult) -> dict[str, Any]:
    """``call --json``."""
    return {
        "is_error": result.is_error,
        "text": result.text,
        "content": result.content,
        "structured": result.structured,
    }
