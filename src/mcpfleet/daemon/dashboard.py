"""The daemon's fleet as its dashboard sees it (``dashboard.FleetSource``), and the ``ui`` op.

The dashboard starts on the first ``ui`` request (``login_link``), in the daemon's task group,
and serves until the daemon stops; a daemon nobody asked for a dashboard opens no port. Every
backend the daemon holds is a row (``fleet.backend_rows``, what ``daemon status`` shows, with
its tools and last error); the pending project servers are those of the projects in use; an
action is done by what the command line does for it: ``approve_project_servers`` (``mcpfleet
approve``), the pin store's ``approve`` (``tools approve``), ``set_server_enabled``
(``mcpfleet disable``), the manager's ``reconnect_server`` (``/mcp reconnect``). The daemon's
config watcher sees each write and converges, as it does after the command.
"""

from __future__ import annotations

import hashlib
import logging
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
import anyio.abc
import anyio.to_thread

from mcpfleet import paths
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
from mcpfleet.errors import DaemonError

if TYPE_CHECKING:
    from mcpfleet.daemon.scopes import Scope
    from mcpfleet.daemon.service import DaemonService
    from mcpfleet.dashboard.server import Dashboard
    from mcpfleet.fleet.manager import MCPManager
    from mcpfleet.gateway.forward import InFlight

logger = logging.getLogger(__name__)

RESTART_WAIT_S = 10.0
"""How long a restart's answer waits for the backend to be back (it goes on after that)."""


class DashboardActionError(DaemonError):
    """An action of the dashboard that cannot be done; the page shows the message."""


def backend_key(scope: Scope, name: str) -> str:
    """The backend's name and a digest of where it runs and as what (two backends of one name
    run for sessions whose entries resolve differently)."""
    wanted = scope.available.get(name)
    identity = f"{scope.kind}\0{scope.project}\0{wanted.config.fingerprint if wanted else ''}"
    return f"{name}~{hashlib.sha256(identity.encode('utf-8', 'surrogatepass')).hexdigest()[:10]}"


class DaemonFleet:
    """``FleetSource`` over one daemon: its shared fleet, its clients, its record of calls."""

    def __init__(self, service: DaemonService) -> None:
        self.service = service
        self.calls = CallLog()

    # -- reading ------------------------------------------------------------------------------------

    def _held(self) -> Iterator[tuple[str, Scope, MCPManager, str]]:
        for scope in self.service.fleet.scopes():
            manager = scope.manager
            if manager is None:
                continue
            for name in manager.get_all_server_names():
                yield backend_key(scope, name), scope, manager, name

    def _find(self, key: str) -> tuple[Scope, MCPManager, str]:
        for held_key, scope, manager, name in self._held():
            if held_key == key:
                return scope, manager, name
        raise DashboardActionError(f"no backend {key.partition('~')[0]!r} runs now (it may have stopped)")

    def _row(self, key: str, scope: Scope, manager: MCPManager, name: str) -> BackendRow:
        from mcpfleet.daemon.fleet import backend_rows

        [status] = [row for row in backend_rows([scope]) if row["name"] == name]
        state = manager.get_server_state(name)
        return BackendRow(
            key=key,
            name=name,
            state=status["state"],
            share=status["share"],
            project=status["project"],
            sessions=status["sessions"],
            pid=status["pid"],
            rss_bytes=status["rss_bytes"],
            tools=sum(1 for tool in manager.get_tools() if tool.server_name == name),
            last_error=state.last_error,
        )

    def backends(self) -> list[BackendRow]:
        return [self._row(*held) for held in self._held()]

    def sessions(self) -> list[SessionRow]:
        """The host sessions, as ``daemon status`` lists them."""
        return [
            SessionRow(row["id"], row["host"], row["project"], row["since"])
            for row in (client.to_json() for client in self.service.sessions)
        ]

    def server(self, key: str) -> ServerDetail | None:
        try:
            scope, manager, name = self._find(key)
        except DashboardActionError:
            return None
        tools = [
            ToolInfo(tool.mcp_tool_name, tool.description, dict(tool.parameters or {}))
            for tool in manager.get_tools()
            if tool.server_name == name
        ]
        state = manager.get_server_state(name)
        return ServerDetail(self._row(key, scope, manager, name), list(state.stderr_tail), tools)

    def pending(self) -> list[PendingServer]:
        from mcpfleet.redaction import redact_command_line, redact_url

        found: list[PendingServer] = []
        for project in self.service.fleet.projects_in_use():
            for entry in project.reference.entries:
                config = entry.config
                if entry.state != "pending-approval" or config is None:
                    continue
                runs = (
                    redact_url(config.url)
                    if config.url is not None
                    else redact_command_line(config.command or "", config.args)
                )
                found.append(
                    PendingServer(project.root, entry.source.path, entry.name, runs, sorted(config.env))
                )
        return found

    def withheld(self) -> list[WithheldChange]:
        from mcpfleet.dashboard.withheld import withheld_changes

        return withheld_changes((key, manager, name) for key, _, manager, name in self._held())

    @asynccontextmanager
    async def hold(self) -> AsyncIterator[None]:
        async with self.service.held_by("dashboard"):
            yield

    # -- acting -------------------------------------------------------------------------------------

    async def approve_server(self, project: str, path: str, name: str) -> str:
        from mcpfleet.config.approval import approve_project_servers

        known = next((each for each in self.service.fleet.projects_in_use() if each.root == project), None)
        if known is None:
            raise DashboardActionError(
                f"project {project} is not in use any more: approve with `mcpfleet approve`"
            )
        entries = known.reference.entries
        made, unknown = await anyio.to_thread.run_sync(
            lambda: approve_project_servers(entries, [name], source=path)
        )
        if unknown:
            raise DashboardActionError(f'no project server "{name}" to approve in {path}')
        return f"approved {name} ({made[0].path}): the sessions of {project} start it"

    async def approve_tools(self, key: str) -> str:
        from mcpfleet.config.pins import PinStore, pin_key

        _, manager, name = self._find(key)
        config = manager.get_server_config(name)
        if config is None:
            raise DashboardActionError(f"server {name!r} has no entry any more")
        pin = pin_key(config, manager.get_source(name))
        store = PinStore()
        approved = await anyio.to_thread.run_sync(lambda: store.approve(pin, None))
        await anyio.to_thread.run_sync(lambda: store.approve_catalog(pin))
        return f"approved {', '.join(approved) or 'nothing'} of {name}: served from now on"

    async def restart(self, key: str) -> str:
        """Reconnect the backend (``/mcp reconnect``: its crash breaker is cleared too), in the
        daemon's task group; answered once it is back, or after ``RESTART_WAIT_S``."""
        _, manager, name = self._find(key)
        back = anyio.Event()

        async def reconnect() -> None:
            try:
                await manager.reconnect_server(name)
            except Exception as error:
                logger.warning("the dashboard's restart of %s failed: %s", name, error)
            finally:
                back.set()

        self.service.spawn(reconnect)
        with anyio.move_on_after(RESTART_WAIT_S):
            await back.wait()
        state = manager.get_server_state(name) if name in manager.get_all_server_names() else None
        if state is None or state.state == "connecting":
            return f"restarting {name}: it is still connecting"
        return f"restarted {name}: {state.state}"

    async def disable(self, key: str) -> str:
        from mcpfleet.config.writer import set_server_enabled

        scope, _, name = self._find(key)
        root = Path(scope.project) if scope.project is not None else paths.neutral_working_dir()
        written = await anyio.to_thread.run_sync(lambda: set_server_enabled(name, False, project_root=root))
        return f"disabled {name} (recorded in {written}); `mcpfleet enable {name}` undoes it"

    async def call(self, key: str, tool: str, arguments: dict[str, Any], session: object) -> dict[str, Any]:
        from mcpfleet.reports.tools import call_document

        _, manager, name = self._find(key)
        found = next(
            (each for each in manager.get_tools() if each.server_name == name and each.mcp_tool_name == tool),
            None,
        )
        if found is None:
            raise DashboardActionError(f"server {name!r} has no tool {tool!r} now")
        started = time.monotonic()
        failed = True
        try:
            result = await found.execute(arguments)
            failed = result.is_error
        finally:
            self.calls.add(CallRecord(name, tool, time.time(), time.monotonic() - started, failed))
        return call_document(result)

    def record_flight(self, flight: InFlight) -> None:
        """A host session's request left its gateway: a tool call is recorded for the plots."""
        forward = flight.forward
        if forward.kind != "tools" or forward.server is None:
            return
        duration = time.monotonic() - flight.started
        self.calls.add(CallRecord(forward.server, forward.backend_name, time.time(), duration, flight.failed))


class DaemonDashboard:
    """The daemon's dashboard, started on the first ``ui`` request."""

    def __init__(self, service: DaemonService) -> None:
        self.source = DaemonFleet(service)
        self._service = service
        self._dashboard: Dashboard | None = None
        self._starting = anyio.Lock()

    async def login_link(self) -> str:
        return (await self._listening()).login_link()

    async def metrics_scrape(self) -> tuple[str, str]:
        """The address of the dashboard's ``/metrics`` and the bearer token that reads it."""
        dashboard = await self._listening()
        return dashboard.metrics_url, dashboard.access.metrics_token

    async def _listening(self) -> Dashboard:
        from mcpfleet.dashboard.server import serve_dashboard

        async with self._starting:
            if self._dashboard is None:
                self._dashboard = await self._service.start_task(serve_dashboard, self.source)
        return self._dashboard
