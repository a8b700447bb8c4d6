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
    from mcpfleet.fleet.pinning import WithheldTool
    from mcpfleet.fleet.tool_list import AnyTool
    from mcpfleet.fleet.tools import ToolResult


def tool_rows(
    tools: Iterable[AnyTool], *, server: str | None = None, withheld: Iterable[WithheldTool] = ()
) -> list[ToolRow]:
    """The tools an agent would see (of ``server`` only, when given), then those pinning
    withholds (``withheld``: true), which the agent does not see until they are approved;
    each with the poisoning warnings of its definition, read against the whole fleet."""
    from mcpfleet.fleet.pinning import definition_json, fleet_warnings
    from mcpfleet.fleet.tools import mcp_tool_name

    tools, withheld = list(tools), list(withheld)
    definitions: dict[str, list[dict[str, Any]]] = {}
    for tool in tools:
        definitions.setdefault(tool.server_name, []).append(definition_json(tool.definition))
    for held in withheld:
        definitions.setdefault(held.server, []).append(held.current)
    warnings = fleet_warnings(definitions)

    def warned(server_name: str, tool_name: str) -> tuple[dict[str, str], ...]:
        return tuple(warning.to_json() for warning in warnings.get((server_name, tool_name), []))

    served = [
        ToolRow(
            name=tool.name,
            server=tool.server_name,
            mcp_name=tool.mcp_tool_name,
            description=tool.description,
            deferred=tool.deferred,
            input_schema=tool.parameters,
            warnings=warned(tool.server_name, tool.mcp_tool_name),
        )
        for tool in tools
        if server is None or tool.server_name == server
    ]
    held_rows = [
        ToolRow(
            name=mcp_tool_name(held.server, held.tool),
            server=held.server,
            mcp_name=held.tool,
            description=str(held.current.get("description") or ""),
            deferred=False,
            input_schema=held.current.get("inputSchema") or {},
            withheld=True,
            warnings=warned(held.server, held.tool),
        )
        for held in withheld
        if server is None or held.server == server
    ]
    return [*served, *held_rows]


def tools_document(tools: Sequence[ToolRow], errors: Sequence[ErrorRow]) -> dict[str, Any]:
    """``tools --json``."""
    return {"tools": [tool.to_json() for tool in tools], "errors": [error.to_json() for error in errors]}


def withheld_call_document(tool: WithheldTool) -> dict[str, Any]:
    """``call --json`` of a call to a tool pinning withholds: the error the model would get."""
    from mcpfleet.fleet.pinning import withheld_message

    text = f"MCP error: {withheld_message(tool)}"
    return {"is_error": True, "text": text, "content": [{"type": "text", "text": text}], "structured": None}


def call_document(result: ToolResult) -> dict[str, Any]:
    """``call --json``."""
    return {
        "is_error": result.is_error,
        "text": result.text,
        "content": result.content,
        "structured": result.structured,
    }
