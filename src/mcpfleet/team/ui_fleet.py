"""A team gateway's fleet as its dashboard sees it (``dashboard.FleetSource``), on this replica.

Every server of the team file is a row (key: its name, unique in the file), shared by every
user (``share: team``); the sessions are the clients that hold one open on this replica. What
an admin does is done here, on this replica, and said so: a restart reconnects this replica's
backend. What the team file decides stays the team file's: a server is added, removed or
disabled by editing it (every replica follows), and a team server needs no approval, so the
approvals page has nothing pending; tools a backend changed since they were pinned are shown
withheld, approved where the replica runs (``mcpfleet tools approve``).

A playground call is made *as the signed-in admin*: through the gateway's guard with the
admin's principal, so the policies decide it and the audit log records it (client
``mcpfleet ui``), as any call of theirs from an MCP client. The plots show the calls this
replica served, from every client: ``PlotHooks`` is one of the guard's hooks.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

from mcpfleet.dashboard.source import (
    BackendRow,
    CallLog,
    CallRecord,
    PendingServer,
    ServerDetail,
    SessionRow,
    ToolInfo,
    WithheldChange,
)
from mcpfleet.errors import MCPFleetError
from mcpfleet.gateway.guard import Asker, CallOutcome, GuardedRequest, RequestGuard
from mcpfleet.team.guard import PassingHooks
from mcpfleet.team.principal import PRINCIPAL_SCOPE_KEY, Principal

if TYPE_CHECKING:
    from mcpfleet.gateway.sessions import ClientSessions
    from mcpfleet.team.fleet import TeamFleet

UI_CLIENT_NAME = "mcpfleet ui"
"""The client a playground call is recorded as in the audit log."""


class TeamUiActionError(MCPFleetError):
    """An action of the team dashboard that cannot be done; the page shows the message."""


class PlotHooks(PassingHooks):
    """The guard hook that feeds the plots: each call that reached a backend, when it ended."""

    def __init__(self, calls: CallLog) -> None:
        self.calls = calls

    async def finished(
        self, principal: Principal, request: GuardedRequest, outcome: CallOutcome, duration_ms: float
    ) -> None:
        if request.kind == "tools":
            record = CallRecord(
                request.server, request.name, time.time(), duration_ms / 1000, outcome == "error"
            )
            self.calls.add(record)


class TeamFleetSource:
    """``FleetSource`` over one replica's team fleet (see the module)."""

    def __init__(
        self, fleet: TeamFleet, guard: RequestGuard, sessions: ClientSessions, calls: CallLog
    ) -> None:
        self.fleet = fleet
        self.guard = guard
        self.client_sessions = sessions
        self.calls = calls

    def _names(self) -> list[str]:
        return sorted(self.fleet.get_all_server_names())

    def _row(self, name: str) -> BackendRow:
        from mcpfleet.fleet.memory import process_tree

        state = self.fleet.get_server_state(name)
        tree = process_tree(state.pid) if state.pid is not None else None
        return BackendRow(
            key=name,
            name=name,
            state=str(state.state),
            share="team",
            project=None,
            sessions=len(self.client_sessions),
            pid=state.pid,
            rss_bytes=tree.rss_bytes if tree is not None else None,
            tools=sum(1 for tool in self.fleet.get_tools() if tool.server_name == name),
            last_error=state.last_error,
        )

    def backends(self) -> list[BackendRow]:
        return [self._row(name) for name in self._names()]

    def sessions(self) -> list[SessionRow]:
        return [
            SessionRow(str(index), session.client_name, None, session.protocol_version)
            for index, session in enumerate(self.client_sessions, start=1)
        ]

    def server(self, key: str) -> ServerDetail | None:
        if key not in self._names():
            return None
        tools = [
            ToolInfo(tool.mcp_tool_name, tool.description, dict(tool.parameters or {}))
            for tool in self.fleet.get_tools()
            if tool.server_name == key
        ]
        state = self.fleet.get_server_state(key)
        return ServerDetail(self._row(key), list(state.stderr_tail), tools)

    def pending(self) -> list[PendingServer]:
        return []

    def withheld(self) -> list[WithheldChange]:
        from mcpfleet.dashboard.withheld import withheld_changes

        return withheld_changes((name, self.fleet, name) for name in self._names())

    @asynccontextmanager
    async def hold(self) -> AsyncIterator[None]:
        yield  # a team gateway runs whether anyone watches or not

    async def approve_server(self, project: str, path: str, name: str) -> str:
        raise TeamUiActionError(
            "a team gateway serves what its team file lists: edit the file to add a server"
        )

    async def approve_tools(self, key: str) -> str:
        raise TeamUiActionError(
            f"approve {key}'s withheld tools where each replica runs: `mcpfleet tools approve {key}` "
            "(the pins are each replica's own)"
        )

    async def restart(self, key: str) -> str:
        if key not in self._names():
            raise TeamUiActionError(f"no server {key!r} in the team file now")
        await self.fleet.reconnect_server(key)
        return f"restarted {key} on this replica: {self.fleet.get_server_state(key).state}"

    async def disable(self, key: str) -> str:
        raise TeamUiActionError(
            f"a team server is disabled by removing {key} from the team file's servers: every replica follows"
        )

    async def call(self, key: str, tool: str, arguments: dict[str, Any], session: object) -> dict[str, Any]:
        """One call as the session's admin: the guard's ``before`` (policy), the backend it
        permits, the guard's ``after`` (audit), as for a call from their MCP client."""
        from mcpfleet.fleet.tools import convert_call_result
        from mcpfleet.reports.tools import call_document
        from mcpfleet.team.ui_signin import UiSession

        if not isinstance(session, UiSession):
            raise TeamUiActionError("sign in to call a tool")
        scope = {PRINCIPAL_SCOPE_KEY: session.principal}
        request = GuardedRequest(
            asker=Asker(self.guard.viewer(scope), scope),
            client_name=UI_CLIENT_NAME,
            kind="tools",
            server=key,
            name=tool,
            served_name=tool,
            arguments=arguments,
        )
        permit = await self.guard.before(request)
        if permit.refusal is not None:
            raise TeamUiActionError(permit.refusal)
        backend = permit.backend if permit.backend is not None else self.fleet
        started = time.perf_counter()
        try:
            raw = await backend.call_tool(key, tool, arguments)
        except Exception:
            await self.guard.after(request, "error", (time.perf_counter() - started) * 1000)
            raise
        result = convert_call_result(raw, server=key, tool=tool, provider=None)
        await self.guard.after(
            request, "error" if result.is_error else "ok", (time.perf_counter() - started) * 1000
        )
        return call_document(result)
