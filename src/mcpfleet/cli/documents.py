"""The reports of ``status``, ``tools`` and ``call``, built in one place for both ways of running.

``mcpfleet status/tools/call`` build them on a fleet of their own process; the daemon
builds the very same documents on a session's view of the fleet it shares (its
``fleet_status``, ``tools`` and ``call`` control operations), so that a command answered by
a running daemon prints, byte for byte, what it would print in-process. Every function here
takes the fleet as a ``ReportedFleet``: ``MCPManager`` and the daemon's ``FleetView`` both
are one.

Nothing heavy is imported at module level: the command line loads this module.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from mcpfleet.cli.output import counted

if TYPE_CHECKING:
    from mcpfleet.cli.render import ErrorRow, ServerRow, ToolRow
    from mcpfleet.client.connection import ServerConnection
    from mcpfleet.config.model import DiscoveryResult
    from mcpfleet.errors import Failure
    from mcpfleet.fleet.catalog import AnyTool
    from mcpfleet.fleet.pinning import WithheldTool
    from mcpfleet.fleet.server import ConnectionStatus, ServerState
    from mcpfleet.fleet.startup import StartupReport
    from mcpfleet.fleet.tools import ToolResult


class ReportedFleet(Protocol):
    """What a report reads of a fleet: ``MCPManager``, or a daemon session's view."""

    def get_tools(self) -> list[AnyTool]: ...

    def get_server_state(self, name: str) -> ServerState: ...

    def get_connection_status(self, name: str) -> ConnectionStatus: ...

    def get_connection(self, name: str) -> ServerConnection | None: ...

    def is_deferred(self, name: str) -> bool: ...

    def get_timings(self, name: str) -> dict[str, float]: ...

    async def wait_for_connection(self, name: str) -> None: ...


async def settle(fleet: ReportedFleet, result: StartupReport, *, late_only: bool = False) -> None:
    """Wait, in parallel, for each server still starting after the gate, each within its own bound.

    A server that does not come up in time gets that as its error in ``result``. ``late_only``
    waits only for those the gate let join later for want of cached tools (a gateway's
    policy), which an agent's gate would have waited for: the daemon's views report like an
    agent's fleet.
    """
    import anyio

    from mcpfleet.errors import Failure, MCPFleetError

    async def settle_one(name: str) -> None:
        try:
            await fleet.wait_for_connection(name)
        except MCPFleetError as error:
            result.add_failure(Failure(name, "connect", str(error)))

    async with anyio.create_task_group() as waiters:
        for name in [*([] if late_only else result.deferred_servers), *result.late_servers]:
            waiters.start_soon(settle_one, name)


def server_rows(discovery: DiscoveryResult, fleet: ReportedFleet, result: StartupReport) -> list[ServerRow]:
    """One row per server an agent would try to run, with its state after the gate."""
    from mcpfleet.cli.render import ServerRow
    from mcpfleet.redaction import redact_text

    rows: list[ServerRow] = []
    tool_counts: dict[str, int] = {}
    for tool in fleet.get_tools():
        tool_counts[tool.server_name] = tool_counts.get(tool.server_name, 0) + 1
    for entry in discovery.entries:
        if entry.state in ("shadowed", "filtered"):
            continue
        error: str | None = None
        status: str
        state: str
        stderr_tail: tuple[str, ...] = ()
        at_gate: str | None = None
        if entry.state == "active":
            at_gate = _at_gate(entry.name, result)
            health = fleet.get_server_state(entry.name)
            error = result.errors.get(entry.name) or health.last_error
            status = "failed" if error else fleet.get_connection_status(entry.name)
            # ``status`` keeps the documented set; ``state`` adds reconnecting and suspended.
            state = health.state if health.state in ("reconnecting", "suspended") else status
            if state != "connected":
                stderr_tail = tuple(health.stderr_tail)
        elif entry.state == "invalid":
            status, error = "failed", entry.reason
            state = status
        elif entry.state == "disabled":
            # Switched off on purpose: the status says so, and there is no error to report.
            status = state = "disabled"
        else:
            status, error = entry.state, entry.reason
            state = status
        era, protocol_version = _protocol_of(fleet, entry.name)
        rows.append(
            ServerRow(
                name=entry.name,
                status=status,
                state=state,
                tools=tool_counts.get(entry.name, 0),
                deferred=fleet.is_deferred(entry.name),
                at_gate=at_gate,
                # Every path into a row is masked here: the daemon's rows are made by this too.
                error=redact_text(error) if error is not None else None,
                stderr_tail=tuple(map(redact_text, stderr_tail)),
                source=entry.source,
                timings_ms={k: round(v, 1) for k, v in fleet.get_timings(entry.name).items()},
                era=era,
                protocol_version=protocol_version,
            )
        )
    return rows


def _at_gate(name: str, result: StartupReport) -> str:
    """How the start-up gate served one started server: ready in time, from the cache, or waited for."""
    if name in result.deferred_servers or name in result.late_servers:
        return "deferred"
    if name in result.waited_servers:
        return "waited"
    return "live"


def _protocol_of(fleet: ReportedFleet, name: str) -> tuple[str | None, str | None]:
    """The era (``legacy`` / ``modern``) and protocol version a connected server speaks."""
    connection = fleet.get_connection(name)
    if connection is None or not connection.protocol_version:
        return None, None
    return connection.era, connection.protocol_version


def error_rows(failures: Iterable[Failure]) -> list[ErrorRow]:
    from mcpfleet.cli.render import ErrorRow
    from mcpfleet.redaction import redact_text

    return [ErrorRow(failure.path, redact_text(failure.message)) for failure in failures]


def status_document(rows: Sequence[ServerRow], errors: Sequence[ErrorRow]) -> dict[str, Any]:
    """``status --json``."""
    return {"servers": [row.to_json() for row in rows], "errors": [error.to_json() for error in errors]}


def tool_rows(
    tools: Iterable[AnyTool], *, server: str | None = None, withheld: Iterable[WithheldTool] = ()
) -> list[ToolRow]:
    """The tools an agent would see (of ``server`` only, when given), then those pinning
    withholds (``withheld``: true), which the agent does not see until they are approved;
    each with the poisoning warnings of its definition, read against the whole fleet."""
    from mcpfleet.cli.render import ToolRow
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


CLOSE_NAMES_SHOWN = 3
"""At most this many names follow a "did you mean": a fleet has hundreds of tools."""


def close_names(name: str, known: Iterable[str]) -> list[str]:
    """The few names of ``known`` closest to ``name``, best first (none when none is close)."""
    import difflib

    return difflib.get_close_matches(name, list(dict.fromkeys(known)), n=CLOSE_NAMES_SHOWN, cutoff=0.6)


def _did_you_mean(name: str, known: Iterable[str]) -> str:
    close = close_names(name, known)
    return f"; did you mean {' or '.join(repr(candidate) for candidate in close)}?" if close else ""


def unknown_server_message(name: str, server_names: Iterable[str]) -> str:
    """The error line for a server name that no discovered config declares."""
    return (
        f"no server named {name!r}{_did_you_mean(name, server_names)} (`mcpfleet config` lists the servers)"
    )


def unknown_tool_message(name: str, known: Iterable[str]) -> str:
    """``call``'s error line for a name no tool answers to (``known``: the tools' names)."""
    return f"no tool named {name!r}{_did_you_mean(name, known)} (`mcpfleet tools` lists them)"


def no_such_tool_message(query: str, tools: Iterable[AnyTool], server_names: Iterable[str]) -> str:
    """``call``'s error line for ``query`` that no tool answers to, with the right noun: no
    such server, or no such tool on a server that exists (``server_names``: every server
    the config files declare, whatever its state)."""
    from mcpfleet.fleet.tools import servers_named_by

    names = list(server_names)
    named = servers_named_by(query, names)
    if named.written is None:
        return unknown_tool_message(query, [tool.name for tool in tools])
    if not named.servers:
        return unknown_server_message(named.written, names)
    theirs = [tool for tool in tools if tool.server_name in named.servers]
    # Close by the tool part alone (every name shares the server's), shown in the user's spelling.
    shown = {tool.mcp_tool_name: tool.label if "/" in query else tool.name for tool in theirs}
    close = [shown[name] for name in close_names(named.tool, shown)]
    hint = f"; did you mean {' or '.join(repr(name) for name in close)}?" if close else ""
    where = " or ".join(repr(server) for server in named.servers)
    listing = f"`mcpfleet tools --server {named.servers[0]}` lists its {counted(len(theirs), 'tool')}"
    return f"no tool named {query!r} on server {where}{hint} ({listing})"


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
