"""``FleetView``: one host session's window on the daemon's shared fleet.

A view is what ``Gateway(view)`` serves for one session. It holds a route per server the
session sees (``Route``: the scope that runs its backend, and the entry as discovered) and
implements the gateway's ``ServedFleet`` surface by routing on the server name: states, tools,
calls and reads go to the owning scope's manager; events, logs and resource updates come
back from the scopes filtered to the view's own routes, so a session hears only of the
servers it sees (``list_changed`` included). When its routes change (a config edit, a server
that became per-session), the view tells its gateway what appeared, moved or went away.
"""

from __future__ import annotations

import inspect
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Concatenate, ParamSpec, Self, TypeVar

import anyio
import anyio.abc

from mcpfleet.errors import ServerNotConnectedError
from mcpfleet.fleet.events import EventKind, ManagerEvent
from mcpfleet.fleet.manager import MCPManager
from mcpfleet.fleet.registry import Phase, ServerState

if TYPE_CHECKING:
    from mcpfleet.config.model import DiscoveryResult, ServerConfig, SourceInfo
    from mcpfleet.contract.wire import FleetSpec
    from mcpfleet.daemon.discoveries import EnvKey, SessionFilter
    from mcpfleet.daemon.fleet import SharedFleet
    from mcpfleet.daemon.scopes import Scope
    from mcpfleet.daemon.sharing import Assignment
    from mcpfleet.fleet.cache import MCPToolCache
    from mcpfleet.fleet.events import EventListener
    from mcpfleet.fleet.notifications import LogListener
    from mcpfleet.fleet.pinning import WithheldTool
    from mcpfleet.fleet.registry import ConnectionStatus
    from mcpfleet.fleet.startup import StartupReport
    from mcpfleet.fleet.tool_list import AnyTool
    from mcpfleet.gateway.relay import Relay

logger = logging.getLogger(__name__)


_P = ParamSpec("_P")
_T = TypeVar("_T")

_DISCONNECTED: ConnectionStatus = "disconnected"


def _on_route(
    method: Callable[Concatenate[MCPManager, _P], Coroutine[Any, Any, _T]],
) -> Callable[Concatenate[FleetView, _P], Coroutine[Any, Any, _T]]:
    """``method`` of ``MCPManager`` as a view's: run on the manager of the scope that runs the
    server its first argument names (``ServerNotConnectedError`` when none runs it yet). The
    manager's own method of that name is called, so a scope's manager may override it."""
    server_parameter = _server_parameter(method)

    async def routed(view: FleetView, /, *args: _P.args, **kwargs: _P.kwargs) -> _T:
        manager = view._running_manager(_server_of(args, kwargs, server_parameter))
        own: Callable[_P, Coroutine[Any, Any, _T]] = getattr(manager, method.__name__)
        return await own(*args, **kwargs)

    return routed


def _on_route_or(
    method: Callable[Concatenate[MCPManager, _P], _T], absent: Callable[[str], _T]
) -> Callable[Concatenate[FleetView, _P], _T]:
    """A lookup of ``MCPManager``'s as a view's: asked of the manager of the scope that runs the
    server its first argument names, ``absent(name)`` when no scope runs it yet."""
    server_parameter = _server_parameter(method)

    def routed(view: FleetView, /, *args: _P.args, **kwargs: _P.kwargs) -> _T:
        name = _server_of(args, kwargs, server_parameter)
        manager = view._manager(name)
        if manager is None:
            return absent(name)
        own: Callable[_P, _T] = getattr(manager, method.__name__)
        return own(*args, **kwargs)

    return routed


def _server_parameter(method: Callable[..., object]) -> str:
    """The name of the parameter naming the server (the first after ``self``)."""
    return list(inspect.signature(method).parameters)[1]


def _server_of(args: tuple[object, ...], kwargs: Mapping[str, object], parameter: str) -> str:
    server = args[0] if args else kwargs[parameter]
    if not isinstance(server, str):
        raise TypeError(f"a server's name is a string, not {type(server).__name__}")
    return server


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

    # -- the gateway's ServedFleet surface -------------------------------------------------------------------

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

    def _running_manager(self, name: str) -> MCPManager:
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

    def _routed_to(self, server: str, manager: MCPManager) -> bool:
        route = self.routes.get(server)
        return route is not None and route.scope.manager is manager

    def subscribe(self, listener: EventListener) -> Callable[[], None]:
        self._listeners.append(listener)
        return lambda: self._listeners.remove(listener) if listener in self._listeners else None

    def subscribe_logs(self, listener: LogListener) -> Callable[[], None]:
        self._log_listeners.append(listener)
        return lambda: self._log_listeners.remove(listener) if listener in self._log_listeners else None

    # Per server, the view answers with the manager of the scope the server's route names; a
    # lookup of a server no scope runs yet gets the answer of a disconnected one, a request
    # raises ``ServerNotConnectedError``. A status report reads these too
    # (``reports.status.ReportedFleet``).
    get_server_state = _on_route_or(
        MCPManager.get_server_state, lambda name: ServerState(name, Phase.DISCONNECTED)
    )
    get_connection_status = _on_route_or(MCPManager.get_connection_status, lambda _: _DISCONNECTED)
    get_connection = _on_route_or(MCPManager.get_connection, lambda _: None)
    is_deferred = _on_route_or(MCPManager.is_deferred, lambda _: False)
    get_timings = _on_route_or(MCPManager.get_timings, lambda _: {})
    wait_for_connection = _on_route(MCPManager.wait_for_connection)
    subscribe_resource = _on_route(MCPManager.subscribe_resource)
    call_tool = _on_route(MCPManager.call_tool)
    list_resources = _on_route(MCPManager.list_resources)
    list_resource_templates = _on_route(MCPManager.list_resource_templates)
    read_resource = _on_route(MCPManager.read_resource)
    list_prompts = _on_route(MCPManager.list_prompts)
    get_prompt = _on_route(MCPManager.get_prompt)
    complete = _on_route(MCPManager.complete)

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
