"""The ``status`` report, built in one place for both ways of running.

``mcpfleet status`` builds it on a fleet of its own process; the daemon builds the very same
document on a session's view of the fleet it shares (its ``fleet_status`` control
operation), so that a command answered by a running daemon prints, byte for byte, what it
would print in-process. Every function here takes the fleet as a ``ReportedFleet``:
``MCPManager`` and the daemon's ``FleetView`` both are one.

Nothing heavy is imported at module level: the command line loads this module.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from mcpfleet.reports.rows import ErrorRow, ServerRow

if TYPE_CHECKING:
    from mcpfleet.client.connection import ServerConnection
    from mcpfleet.config.model import DiscoveryResult
    from mcpfleet.errors import Failure
    from mcpfleet.fleet.registry import ConnectionStatus, ServerState
    from mcpfleet.fleet.startup import StartupReport
    from mcpfleet.fleet.tool_list import AnyTool


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
    from mcpfleet.redaction import redact_text
    from mcpfleet.transport.sandbox import sandbox_kind

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
                sandbox=sandbox_kind(entry.config) if entry.config is not None else "off",
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
    from mcpfleet.redaction import redact_text

    return [ErrorRow(failure.path, redact_text(failure.message)) for failure in failures]


def status_document(rows: Sequence[ServerRow], errors: Sequence[ErrorRow]) -> dict[str, Any]:
    """``status --json``."""
    return {"servers": [row.to_json() for row in rows], "errors": [error.to_json() for error in errors]}
