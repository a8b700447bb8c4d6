"""The fleet's facade: ``MCPManager`` discovers, connects and holds many MCP servers.

The manager's life is one ``async with``: its task group hosts every connection's owner
task, so callers in any task may connect, call and disconnect in any order, and leaving
the block closes every server within one deadline, whatever state each one is in. The
work itself lives in the rooms next door:

* ``registry``: one ``ServerSlot`` per server and the registry (``retire`` ends a server);
* ``startup``: the connect-and-list pipeline and the start-up gate;
* ``recovery`` / ``supervision``: reconnecting lost servers, the ladder and the breaker;
* ``notifications``: re-lists after ``list_changed``, resource subscriptions;
* ``reload``: the reload plan and the config watcher; ``events``: what subscribers see;
* ``tool_list``: the merged, named tool list.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable, Collection, Mapping, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Literal, Self

import anyio
import anyio.abc

from mcpfleet.config import EntryFilter, LastGoodFiles, load_all_mcp_configs
from mcpfleet.config.model import DiscoveryResult, ServerConfig, SourceInfo
from mcpfleet.errors import ConnectionClosedError, RequestError, ServerNotConnectedError, ToolCallError
from mcpfleet.fleet import settings as defaults
from mcpfleet.fleet.cache import MCPToolCache
from mcpfleet.fleet.events import DEFAULT_STREAM_BUFFER, EventHub, EventListener, EventStream, ManagerEvent
from mcpfleet.fleet.notifications import LogListener, Notifications, ResourceListener
from mcpfleet.fleet.pinning import (
    ToolPinning,
    WithheldTool,
    withheld_message,
    withheld_prompt_message,
)
from mcpfleet.fleet.recovery import Recovery
from mcpfleet.fleet.registry import Attempt, ConnectionStatus, Phase, ServerRegistry, ServerState
from mcpfleet.fleet.reload import ConfigWatcher, apply_reload, log_new_config_errors
from mcpfleet.fleet.settings import FleetSettings, UncachedPolicy
from mcpfleet.fleet.startup import Connector, StartupReport
from mcpfleet.fleet.supervision import ReconnectPolicy, Supervisor
from mcpfleet.fleet.tool_list import AnyTool, build_tools

if TYPE_CHECKING:
    from mcpfleet.client.connection import (
        ElicitationHandler,
        ProgressCallback,
        SamplingHandler,
        ServerConnection,
        ServerRequestHandler,
    )
    from mcpfleet.client.definitions import LogLevel
    from mcpfleet.client.inbound import RootsOffer

__all__ = [
    "AnyTool",
    "ConnectionStatus",
    "MCPLoadResult",
    "MCPManager",
    "ManagerEvent",
    "StartupReport",
    "UncachedPolicy",
]

logger = logging.getLogger(__name__)

MCPLoadResult = StartupReport
"""The name the start-up report had before it was shared by the loader and the session."""


class MCPManager(anyio.AsyncContextManagerMixin):
    """Discovers, connects and holds a fleet of MCP servers: ``async with MCPManager(cwd) as m``."""

    def __init__(
        self,
        cwd: str | Path,
        *,
        cache: MCPToolCache | Literal["default"] | None = "default",
        startup_timeout_ms: int = defaults.STARTUP_TIMEOUT_MS,
        on_uncached: UncachedPolicy = "wait",
        enable_project_config: bool = True,
        trust_project: bool = False,
        entry_filter: EntryFilter | None = None,
        extra_config_paths: Sequence[str | Path] = (),
        shutdown_timeout_s: float = defaults.SHUTDOWN_TIMEOUT_S,
        reconnect_policy: ReconnectPolicy | None = None,
        watch: bool = False,
        watch_interval_s: float = defaults.WATCH_INTERVAL_S,
        list_changed_debounce_ms: int = defaults.LIST_CHANGED_DEBOUNCE_MS,
        list_changed_min_interval_s: float = defaults.LIST_CHANGED_MIN_INTERVAL_S,
        elicitation_handler: ElicitationHandler | None = None,
        sampling_handler: SamplingHandler | None = None,
        server_requests: ServerRequestHandler | None = None,
        probe_timeout_ms: int | None = None,
        log_level: LogLevel | None = None,
        roots: RootsOffer = "working-folder",
    ) -> None:
        """``elicitation_handler`` and ``sampling_handler`` are the host's answers to a server's
        ``elicitation/create`` and ``sampling/createMessage`` (see ``mcpfleet.client.connection``),
        for every server; without one, that question is refused (the capability is declared
        all the same, so that servers list the same tools to every fleet: ``fleet.questions``).
        ``server_requests`` (instead of those two) answers them and ``roots/list``, told which
        server asks (see ``mcpfleet.client.inbound.ServerRequestHandler``; the gateway's relay
        is one).
        ``probe_timeout_ms`` bounds the ``server/discover`` probe of a server whose era is not in
        the cache. ``log_level`` opts every request to a 2026-07-28 server in to its log
        messages at that level and above (that era sends logs only to requests that ask; the
        default, ``None``, asks for none); handshake-era servers are not affected. ``roots`` are
        the roots every server is offered when ``server_requests`` is not given: the working
        folder (the default), these folders, or ``None`` for none: ``roots/list`` is answered
        with an empty list (a server that follows roots, such as the reference filesystem
        server, then keeps the folders its own config names; the capability stays declared, so
        the tools listed do not change)."""
        self.settings = FleetSettings(
            cwd=Path(cwd).resolve(),
            startup_timeout_ms=startup_timeout_ms,
            on_uncached=on_uncached,
            enable_project_config=enable_project_config,
            trust_project=trust_project,
            entry_filter=entry_filter,
            extra_config_paths=tuple(Path(p) for p in extra_config_paths),
            shutdown_timeout_s=shutdown_timeout_s,
            reconnect_policy=reconnect_policy or ReconnectPolicy(),
            watch=watch,
            watch_interval_s=watch_interval_s,
            list_changed_debounce_ms=list_changed_debounce_ms,
            list_changed_min_interval_s=list_changed_min_interval_s,
            elicitation_handler=elicitation_handler,
            sampling_handler=sampling_handler,
            server_requests=server_requests,
            probe_timeout_ms=probe_timeout_ms,
            log_level=log_level,
            roots=roots,
        )
        self._cache_setting = cache
        self._events = EventHub()
        supervisor = Supervisor(self.settings.reconnect_policy)
        self._pinning = ToolPinning()
        self._registry = ServerRegistry(
            self._events,
            supervisor,
            lambda slices, provider_of: build_tools(
                self._pinning.screen(slices, self._registry.entry), self, provider_of
            ),
        )
        self._notifications = Notifications(self._registry, self.settings)
        self._connector = Connector(
            self._registry,
            self.settings,
            handler_for=self._notifications.handler_for,
            on_ready=self._on_ready,
        )
        self._recovery = Recovery(self._registry, self._connector, supervisor)
        self._watcher = ConfigWatcher(self.settings.watch_interval_s)
        self._reload_lock = anyio.Lock()
        self.last_discovery: DiscoveryResult | None = None
        self._last_good = LastGoodFiles()
        """Every file as it last parsed: one that stops parsing keeps its servers running."""

    # -- lifetime -------------------------------------------------------------------

    @asynccontextmanager
    async def __asynccontextmanager__(self) -> AsyncIterator[Self]:
        owns_cache = self._cache_setting == "default"
        cache = MCPToolCache.open_default() if self._cache_setting == "default" else self._cache_setting
        self._registry.cache = cache
        try:
            async with anyio.create_task_group() as task_group:
                self._registry.attach(task_group)
                try:
                    if self.settings.watch:
                        task_group.start_soon(self._watcher.run, self.reload, name="mcpfleet config watcher")
                    task_group.start_soon(self._pinning.follow, self._registry, name="mcpfleet pin watcher")
                    yield self
                finally:
                    # Shielded: a cancelled host still closes its servers (each close is bounded).
                    with anyio.CancelScope(shield=True):
                        await self.disconnect_all()
                        await self._pinning.baselines_written()
                    self._registry.attach(None)
                    self._events.close()
                    task_group.cancel_scope.cancel()
        finally:
            if owns_cache and cache is not None:
                cache.close()

    async def aclose(self) -> None:
        """Close every server: the same as leaving the ``async with`` block (from the same task)."""
        await self.__aexit__(None, None, None)

    @property
    def cwd(self) -> Path:
        return self.settings.cwd

    @property
    def task_group(self) -> anyio.abc.TaskGroup:
        return self._registry.task_group

    @property
    def cache(self) -> MCPToolCache | None:
        return self._registry.cache

    @property
    def reconnect_policy(self) -> ReconnectPolicy:
        return self.settings.reconnect_policy

    # -- events ---------------------------------------------------------------------

    def subscribe(self, listener: EventListener) -> Callable[[], None]:
        """Call ``listener`` on every state change, in place; returns the function that unsubscribes."""
        return self._events.subscribe(listener)

    def subscribe_logs(self, listener: LogListener) -> Callable[[], None]:
        """Call ``listener(server, params)`` on each ``notifications/message`` of any server;
        returns the function that unsubscribes."""
        return self._notifications.subscribe_logs(listener)

    def events(self, buffer: int = DEFAULT_STREAM_BUFFER) -> AbstractAsyncContextManager[EventStream]:
        """``async with manager.events() as stream: async for event in stream`` (see ``fleet.events``)."""
        return self._events.stream(buffer)

    # -- queries --------------------------------------------------------------------

    @property
    def servers(self) -> Mapping[str, ServerState]:
        """A read-only snapshot of every server the fleet holds, by name."""
        return MappingProxyType({name: slot.snapshot() for name, slot in self._registry.items()})

    def get_connection_status(self, name: str) -> ConnectionStatus:
        """``connected | connecting | disconnected``: the short view of ``get_server_state``."""
        slot = self._registry.get(name)
        return slot.connection_status if slot is not None else "disconnected"

    def get_server_state(self, name: str) -> ServerState:
        """One server's phase, last error, stderr tail, pid and recent crashes."""
        slot = self._registry.get(name)
        return slot.snapshot() if slot is not None else ServerState(name, Phase.DISCONNECTED)

    def get_tools(self) -> list[AnyTool]:
        """Every MCP tool, sorted by name, identical whatever the connection order."""
        return list(self._registry.tools)

    def withheld_tools(self) -> list[WithheldTool]:
        """The tools withheld from ``get_tools`` because they changed or were added since their
        server's tools were approved (``fleet.pinning``), by server then name."""
        return self._pinning.withheld()

    def get_source(self, name: str) -> SourceInfo | None:
        slot = self._registry.get(name)
        return slot.source if slot is not None else None

    def get_provider_name(self, server_name: str) -> str | None:
        return self._registry.provider_name(server_name)

    def get_server_config(self, name: str) -> ServerConfig | None:
        slot = self._registry.get(name)
        return slot.config if slot is not None else None

    def get_connection(self, name: str) -> ServerConnection | None:
        slot = self._registry.get(name)
        return slot.connection if slot is not None else None

    def get_connected_servers(self) -> list[str]:
        return sorted(name for name, slot in self._registry.items() if slot.connection_status == "connected")

    def get_all_server_names(self) -> list[str]:
        return sorted(self._registry)

    def get_errors(self) -> dict[str, str]:
        return {name: slot.error for name, slot in self._registry.items() if slot.error is not None}

    def get_timings(self, name: str) -> dict[str, float]:
        slot = self._registry.get(name)
        return dict(slot.timings) if slot is not None else {}

    def is_deferred(self, name: str) -> bool:
        slot = self._registry.get(name)
        return slot is not None and slot.tools is not None and slot.tools.deferred

    # -- discovery, connect, reload ---------------------------------------------------

    def discover(self) -> DiscoveryResult:
        """Read every config source with this manager's settings."""
        settings = self.settings
        result = load_all_mcp_configs(
            settings.cwd,
            enable_project_config=settings.enable_project_config,
            entry_filter=settings.entry_filter,
            extra_config_paths=settings.extra_config_paths,
            trust_project=settings.trust_project,
            last_good=self._last_good,
        )
        self.last_discovery = result
        self._watcher.remember(result.config_paths)
        return result

    async def discover_and_connect(self) -> StartupReport:
        """Discovery then ``connect_servers``; servers that cannot start are failures."""
        discovery = self.discover()
        report = await self.connect_servers(discovery.configs, discovery.sources)
        report.complete_from(discovery)
        return report

    async def connect_servers(
        self, configs: Mapping[str, ServerConfig], sources: Mapping[str, SourceInfo]
    ) -> StartupReport:
        """Connect every server in parallel behind the start-up gate (see ``fleet.startup``)."""
        return await self._connector.connect_round(configs, sources)

    async def reload(self, *, full: bool = False) -> StartupReport:
        """Rediscover and apply the difference (``fleet.reload``); ``full=True`` disconnects
        everything and connects again. Reloads never overlap: a second one waits for the first."""
        self._registry.ensure_running()
        async with self._reload_lock:
            if full:
                await self.disconnect_all()
                return await self.discover_and_connect()
            previous = self.last_discovery
            discovery = self.discover()
            log_new_config_errors(previous.errors if previous is not None else (), discovery.errors)
            return await apply_reload(self._registry, discovery, self.disconnect_server, self.connect_servers)

    # -- calls and reads ------------------------------------------------------------------

    async def wait_for_connection(self, name: str) -> None:
        """Return once ``name`` is connected; raise if it cannot be (bounded by its timeout).

        A server being reconnected is waited for up to the reconnect policy's ``call_wait_s``.
        """
        await self._recovery.wait_for_connection(name)

    async def call_tool(
        self,
        server_name: str,
        tool_name: str,
        arguments: dict[str, Any],
        *,
        timeout_ms: int | None = None,
        on_progress: ProgressCallback | None = None,
    ) -> Any:
        """Call one tool on one server through its connection.

        The decision to resend is taken *before* the request is handed to a connection, never
        by guessing afterwards: when the server's connection has already ended (its transport
        was seen ending, or it is being reconnected), the request has not left this process,
        so it waits (bounded) for the new connection and is sent there, once. When the
        connection drops after the request was handed to it, the server may have received and
        run it: the outcome is unknown, the call is *not* replayed, and the error says so.
        ``on_progress(progress, total, message)`` receives the server's progress for this call.
        """
        withheld = self._pinning.withheld_tool(server_name, tool_name)
        if withheld is not None:
            raise ToolCallError(withheld_message(withheld), server=server_name, tool=tool_name)
        connection = await self._ready_connection(server_name)
        config = self.get_server_config(server_name)
        bound = timeout_ms if timeout_ms is not None else config.tool_timeout_ms if config else None
        try:
            return await connection.call_tool(tool_name, arguments, timeout_ms=bound, on_progress=on_progress)
        except ConnectionClosedError as error:
            raise lost_during_call(connection, tool_name) from error

    async def list_resources(self, server: str) -> list[dict[str, Any]]:
        """Every resource ``server`` lists (all pages), once it is connected (as ``call_tool``);
        one whose description changed since it was pinned is withheld (``fleet.pinning``)."""
        listed = await (await self._ready_connection(server)).list_resources()
        return self._pinning.screen_listing("resources", server, listed, self._registry.entry(server))

    async def list_resource_templates(self, server: str) -> list[dict[str, Any]]:
        listed = await (await self._ready_connection(server)).list_resource_templates()
        return self._pinning.screen_listing("resourceTemplates", server, listed, self._registry.entry(server))

    async def read_resource(self, server: str, uri: str) -> dict[str, Any]:
        return await (await self._ready_connection(server)).read_resource(uri)

    async def list_prompts(self, server: str) -> list[dict[str, Any]]:
        """Every prompt ``server`` lists; one changed or added since they were pinned is withheld."""
        listed = await (await self._ready_connection(server)).list_prompts()
        return self._pinning.screen_listing("prompts", server, listed, self._registry.entry(server))

    async def get_prompt(
        self, server: str, name: str, arguments: dict[str, str] | None = None
    ) -> dict[str, Any]:
        if self._pinning.is_prompt_withheld(server, name):
            raise RequestError(withheld_prompt_message(server, name), server=server, method="prompts/get")
        return await (await self._ready_connection(server)).get_prompt(name, arguments)

    async def complete(
        self,
        server: str,
        ref: dict[str, Any],
        argument: dict[str, str],
        context_arguments: dict[str, str] | None = None,
    ) -> dict[str, Any]:
        """``completion/complete`` on ``server`` (see ``ServerConnection.complete``)."""
        return await (await self._ready_connection(server)).complete(ref, argument, context_arguments)

    async def subscribe_resource(
        self, server: str, uri: str, listener: ResourceListener
    ) -> Callable[[], None]:
        """Call ``listener(server, uri)`` on each ``resources/updated`` for ``uri``; returns the
        function that unsubscribes (see ``fleet.notifications``)."""
        return await self._notifications.subscribe_resource(server, uri, listener)

    def heard_list_changed_elsewhere(self, name: str, method: str) -> bool:
        """Act on a ``*/list_changed`` another copy of server ``name`` sent (a team gateway's
        other replica): its lists are read again here, and announced as the server's own.
        ``False`` when no such server is connected here."""
        return self._notifications.heard_elsewhere(name, method)

    async def notify_roots_changed(self, names: Collection[str] | None = None) -> None:
        """Tell every connected server (of ``names``, when given) that the roots changed, so
        each asks for them again (``notifications/roots/list_changed``; a 2026-07-28 server
        asks within each request anyway). Best effort and bounded: a server that cannot be
        told is skipped, and one that connects later asks when it starts."""
        with anyio.move_on_after(defaults.ROOTS_NOTICE_BOUND_S):
            async with anyio.create_task_group() as notices:
                for name, slot in list(self._registry.items()):
                    if (names is None or name in names) and slot.connection is not None and slot.live:
                        notices.start_soon(_notify_roots_changed, slot.connection)

    async def _ready_connection(self, name: str) -> ServerConnection:
        """The server's connection; one that is starting or being brought back is waited for."""
        connection = self.get_connection(name)
        if connection is None or connection.ended:
            await self.wait_for_connection(name)
            connection = self.get_connection(name)
            if connection is None:
                raise ServerNotConnectedError(name)
        return connection

    def _on_ready(self, attempt: Attempt, connection: ServerConnection) -> None:
        """A connection was registered: watch it, and send it the server's subscriptions."""
        self._recovery.watch(attempt, connection)
        self._notifications.resubscribe(attempt.slot, connection)

    # -- stopping ---------------------------------------------------------------------

    async def reconnect_server(self, name: str) -> None:
        """Close one server and connect it again with the same config. This also clears its
        crash breaker and any reconnection in progress."""
        config = self.get_server_config(name)
        if config is None:
            raise ServerNotConnectedError(name)
        source = self.get_source(name)
        await self.disconnect_server(name)
        await self.connect_servers({name: config}, {name: source} if source is not None else {})
        await self.wait_for_connection(name)

    async def disconnect_server(self, name: str) -> None:
        """Forget one server: pending work, source, connection and tools."""
        retired = self._registry.retire(name)
        await self._registry.close(retired, within_s=self.settings.shutdown_timeout_s)
        self._registry.emit("disconnected", name)

    async def disconnect_all(self) -> None:
        """Close every server concurrently under one deadline."""
        retired = self._registry.retire_all()
        await self._registry.close(*retired, within_s=self.settings.shutdown_timeout_s)
        for name in sorted(r.name for r in retired if r.was_running):
            self._registry.emit("disconnected", name)


async def _notify_roots_changed(connection: ServerConnection) -> None:
    try:
        await connection.notify_roots_changed()
    except Exception as error:
        logger.debug("%s: could not tell it the roots changed: %r", connection.name, error)


def lost_during_call(connection: ServerConnection, tool: str) -> ToolCallError:
    """The error of a call whose connection dropped after the call was handed to it: the
    server may have run it, so it is not sent again (``MCPManager.call_tool``; the gateway's
    fast path, which sends calls below the SDK, says the same)."""
    server = connection.name
    reason = connection.close_reason or "connection lost"
    return ToolCallError(
        f'MCP server "{server}" lost the connection during the call to {tool} ({reason}); '
        "the call may have run, so it was not repeated",
        server=server,
        tool=tool,
    )
