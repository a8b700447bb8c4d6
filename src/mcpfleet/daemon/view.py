"""``FleetView``: one host session's window on the daemon's shared fleet.

A view is what ``Gateway(view)`` serves for one session. It holds a route per server the
session sees (``Route``: the scope that runs its backend, and the entry as discovered) and
implements the gateway's ``Fleet`` surface by routing on the server name: states, tools,
calls and reads go to the owning scope's manager; events, logs and resource updates come
back from the scopes filtered to the view's own routes, so a session hears only of the
servers it sees (``list_changed`` included). When its routes change (a config edit, a server
that became per-session), the view tells its gateway what appeared, moved or went away.
"""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Self

import anyio
import anyio.abc

from mcpfleet.errors import ServerNotConnectedError
from mcpfleet.fleet.events import EventKind, ManagerEvent
from mcpfleet.fleet.server import Phase, ServerState

if TYPE_CHECKING:
    from mcpfleet.client.connection import ProgressCallback, ServerConnection
    from mcpfleet.config.model import DiscoveryResult, ServerConfig, SourceInfo
    from mcpfleet.daemon.fleet import EnvKey, SessionFilter, SharedFleet
    from mcpfleet.daemon.scopes import Scope
    from mcpfleet.daemon.sharing import Assignment
    from mcpfleet.daemon.wire import FleetSpec
    from mcpfleet.fleet.cache import MCPToolCache
    from mcpfleet.fleet.catalog import AnyTool
    from mcpfleet.fleet.events import EventListener
    from mcpfleet.fleet.manager import MCPManager
    from mcpfleet.fleet.notifications import LogListener, ResourceListener
    from mcpfleet.fleet.pinning import WithheldTool
    from mcpfleet.fleet.server import ConnectionStatus
    from mcpfleet.fleet.startup import StartupReport
    from mcpfleet.gateway.relay import Relay

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Route:
    """Where one server a session sees runs, and the entry it runs."""

    scope: Scope
    assignment: Assignment


class FleetView(anyio.AsyncContextManagerMixin):
    """The servers one session sees, each run by the scope its route names."""

    def __init__(
        self,
        fleet: SharedFleet,
        *,
        spec: FleetSpec,
        session_id: str,
        host: str | None,
        project: str,
        session_filter: SessionFilter,
        relay: Relay | None,
        session_scope: Scope,
        task_group: anyio.abc.TaskGroup,
        environment: EnvKey = frozenset(),
    ) -> None:
        self.spec = spec
        self.session_id = session_id
        self.host = host
        self.project = project
        """The project root (its real path)."""
        self.session_filter = session_filter
        """What this session does not see (its profile's servers, the agent's Exa filter)."""
        self.relay = relay
        """The relay of this session's gateway: where its backends' questions go."""
        self.session_scope = session_scope
        self.environment = environment
        """The values the session's entries are resolved with (what its client sent)."""
        self.since = time.time()
        self.routes: dict[str, Route] = {}
        self.discovery: DiscoveryResult | None = None
        self._fleet = fleet
        self._task_group = task_group
        self._listeners: list[EventListener] = []
        self._log_listeners: list[LogListener] = []
        self._followed: dict[Scope, Callable[[], None]] = {}
        self._changed = anyio.Event()

    @asynccontextmanager
    async def __asynccontextmanager__(self) -> AsyncIterator[Self]:
        # The attachment (``SharedFleet.attach``) owns the view's servers: the gateway's hold
        # on the view ends without closing any of them.
        yield self

    # -- routes ----------------------------------------------------------------------------------------------

    def set_routes(self, routes: Mapping[str, Route]) -> None:
        """Take new routes: mark what the session uses in each scope, and tell the gateway
        what appeared, moved or went away."""
        previous, self.routes = self.routes, dict(routes)
        for name, route in self.routes.items():
            route.scope.use(self.session_id, name)
        for name, old in previous.items():
            current = self.routes.get(name)
            if current is None or current.scope is not old.scope:
                old.scope.release(self.session_id, name)
        if self.discovery is None:
            return  # the first routes: the gateway starts from them
        for name in sorted(previous.keys() - self.routes.keys()):
            self._emit("disconnected", name)
        for name, route in sorted(self.routes.items()):
            before = previous.get(name)
            if (
                before is not None
                and before.scope is route.scope
                and before.assignment.config == route.assignment.config
            ):
                continue
            manager = route.scope.manager
            connected = manager is not None and manager.get_connection_status(name) == "connected"
            # A server running already for other sessions sends no "connected" of its own.
            self._emit("connected" if connected else "tools_changed", name)

    def follow(self, scope: Scope) -> None:
        """Hear ``scope``'s events and logs (those of this view's routes to it)."""
        manager = scope.manager
        if manager is None or scope in self._followed:
            return
        stop_events = manager.subscribe(lambda event: self._on_scope_event(scope, event))
        stop_logs = manager.subscribe_logs(lambda server, params: self._on_scope_log(scope, server, params))

        def stop() -> None:
            stop_events()
            stop_logs()

        self._followed[scope] = stop

    def unfollow_all(self) -> None:
        for stop in self._followed.values():
            stop()
        self._followed.clear()

    def _routed_here(self, scope: Scope, server: str) -> bool:
        route = self.routes.get(server)
        return route is not None and route.scope is scope

    def _on_scope_event(self, scope: Scope, event: ManagerEvent) -> Awaitable[None] | None:
        if not self._routed_here(scope, event.server):
            return None
        return self._deliver(event)

    def _on_scope_log(self, scope: Scope, server: str, params: dict[str, Any]) -> Awaitable[None] | None:
        if not self._routed_here(scope, server):
            return None
        return _gathered([listener(server, params) for listener in list(self._log_listeners)])

    def _emit(self, kind: EventKind, server: str) -> None:
        pending = self._deliver(ManagerEvent(kind, server))
        if pending is not None:
            self._task_group.start_soon(_await, pending)

    def _deliver(self, event: ManagerEvent) -> Awaitable[None] | None:
        self._changed.set()
        self._changed = anyio.Event()
        return _gathered([listener(event) for listener in list(self._listeners)])

    async def wait_settled(self, timeout_ms: int) -> None:
        """Until none of the view's servers is still connecting, at most ``timeout_ms`` (0:
        no bound but the servers' own handshake timeouts)."""
        with anyio.move_on_after(timeout_ms / 1000 if timeout_ms > 0 else None):
            while any(self.get_connection_status(name) == "connecting" for name in self.routes):
                await self._changed.wait()

    # -- the gateway's Fleet surface -------------------------------------------------------------------------

    @property
    def cache(self) -> MCPToolCache | None:
        return self._fleet.cache

    @property
    def task_group(self) -> anyio.abc.TaskGroup:
        return self._task_group

    def discover(self) -> DiscoveryResult:
        """What the session's own discovery found (its filter applied); nothing is read again."""
        assert self.discovery is not None, "a view is discovered when it is attached"
        return self.discovery

    async def connect_servers(
        self, configs: Mapping[str, ServerConfig], sources: Mapping[str, SourceInfo]
    ) -> StartupReport:
        """Wait for the view's servers, started when it was attached (its routes decide which;
        ``configs`` is the view's own discovery), as long as the session's start-up timeout
        says."""
        return await self._fleet.startup_report(self)

    def get_all_server_names(self) -> list[str]:
        return sorted(self.routes)

    def _manager(self, name: str) -> MCPManager | None:
        route = self.routes.get(name)
        return route.scope.manager if route is not None else None

    def _ready_manager(self, name: str) -> MCPManager:
        manager = self._manager(name)
        if manager is None:
            raise ServerNotConnectedError(name)
        return manager

    def get_server_config(self, name: str) -> ServerConfig | None:
        route = self.routes.get(name)
        if route is None:
            return None
        held = route.scope.manager.get_server_config(name) if route.scope.manager is not None else None
        return held if held is not None else route.assignment.config

    def get_server_state(self, name: str) -> ServerState:
        manager = self._manager(name)
        if manager is None:
            return ServerState(name, Phase.DISCONNECTED)
        return manager.get_server_state(name)

    def get_connection_status(self, name: str) -> ConnectionStatus:
        manager = self._manager(name)
        return manager.get_connection_status(name) if manager is not None else "disconnected"

    def get_connection(self, name: str) -> ServerConnection | None:
        manager = self._manager(name)
        return manager.get_connection(name) if manager is not None else None

    def get_tools(self) -> list[AnyTool]:
        tools: list[AnyTool] = []
        managers = {route.scope.manager for route in self.routes.values() if route.scope.manager is not None}
        for manager in managers:
            tools.extend(tool for tool in manager.get_tools() if self._routed_to(tool.server_name, manager))
        return sorted(tools, key=lambda tool: tool.name)

    def withheld_tools(self) -> list[WithheldTool]:
        managers = {route.scope.manager for route in self.routes.values() if route.scope.manager is not None}
        withheld = [
            tool
            for manager in managers
            for tool in manager.withheld_tools()
            if self._routed_to(tool.server, manager)
        ]
        return sorted(withheld, key=lambda tool: (tool.server, tool.tool))

    # What a status report reads too (``cli.documents.ReportedFleet``).

    def is_deferred(self, name: str) -> bool:
        manager = self._manager(name)
        return manager is not None and manager.is_deferred(name)

    def get_timings(self, name: str) -> dict[str, float]:
        manager = self._manager(name)
        return manager.get_timings(name) if manager is not None else {}

    async def wait_for_connection(self, name: str) -> None:
        await self._ready_manager(name).wait_for_connection(name)

    def _routed_to(self, server: str, manager: MCPManager) -> bool:
        route = self.routes.get(server)
        return route is not None and route.scope.manager is manager

    def subscribe(self, listener: EventListener) -> Callable[[], None]:
        self._listeners.append(listener)
        return lambda: self._listeners.remove(listener) if listener in self._listeners else None

    def subscribe_logs(self, listener: LogListener) -> Callable[[], None]:
        self._log_listeners.append(listener)
        return lambda: self._log_listeners.remove(listener) if listener in self._log_listeners else None

    async def subscribe_resource(
        self, server: str, uri: str, listener: ResourceListener
    ) -> Callable[[], None]:
        return await self._ready_manager(server).subscribe_resource(server, uri, listener)

    async def call_tool(
        self,
        server_name: str,
        tool_name: str,
        arguments: dict[str, Any],
        *,
        timeout_ms: int | None = None,
        on_progress: ProgressCallback | None = None,
    ) -> Any:
        manager = self._ready_manager(server_name)
        return await manager.call_tool(
            server_name, tool_name, arguments, timeout_ms=timeout_ms, on_progress=on_progress
        )

    async def list_resources(self, server: str) -> list[dict[str, Any]]:
        return await self._ready_manager(server).list_resources(server)

    async def list_resource_templates(self, server: str) -> list[dict[str, Any]]:
        return await self._ready_manager(server).list_resource_templates(server)

    async def read_resource(self, server: str, uri: str) -> dict[str, Any]:
        return await self._ready_manager(server).read_resource(server, uri)

    async def list_prompts(self, server: str) -> list[dict[str, Any]]:
        return await self._ready_manager(server).list_prompts(server)

    async def get_prompt(
        self, server: str, name: str, arguments: dict[str, str] | None = None
    ) -> dict[str, Any]:
        return await self._ready_manager(server).get_prompt(server, name, arguments)

    async def complete(
        self,
        server: str,
        ref: dict[str, Any],
        argument: dict[str, str],
        context_arguments: dict[str, str] | None = None,
    ) -> dict[str, Any]:
        return await self._ready_manager(server).complete(server, ref, argument, context_arguments)

    async def notify_roots_changed(self) -> None:
        """Tell the view's connected servers that the roots changed, each scope's manager its
        own at once: each asks again, and the question reaches this session's client when it
        is the one that can answer."""
        names_of: dict[MCPManager, list[str]] = {}
        for name, route in self.routes.items():
            if route.scope.manager is not None:
                names_of.setdefault(route.scope.manager, []).append(name)
        async with anyio.create_task_group() as notices:
            for manager, names in names_of.items():
                notices.start_soon(manager.notify_roots_changed, names)


def _gathered(results: list[Awaitable[None] | None]) -> Awaitable[None] | None:
    """One awaitable for the listeners' awaitables (run in order), or ``None`` if none returned one."""
    pending = [result for result in results if result is not None]
    if not pending:
        return None

    async def run_all() -> None:
        for awaitable in pending:
            try:
                await awaitable
            except Exception:
                logger.exception("a listener of a fleet view failed")

    return run_all()


async def _await(awaitable: Awaitable[None]) -> None:
    await awaitable
