"""The fleet: every server's connection, its tools, and the fast start-up gate.

One ``MCPManager`` owns a task group for its whole life. Each server's connection runs
in an owner task inside that group, so callers in any task may connect, call and
disconnect in any order. The registries follow the seed (S4):

* ``_connections``       servers whose handshake finished (tools may still be loading);
* ``_pending_connections`` servers whose connection attempt is in flight;
* ``_pending_tool_loads``  servers connected whose ``tools/list`` is still running;
* ``_catalog``             each server's slice of tools (live or deferred from the cache);
* ``_sources``             where each server came from, known before it connects;
* ``_reconnections``       servers whose transport was lost and that are being brought back.

A server's tools are owned by the server's name, never found by a name prefix, so
replacing or removing one server's slice never touches another's (S16).

Beyond the seed (B1–B4): a lost transport is reconnected on the supervisor's ladder while
the server's last tools stay registered (a call waits, bounded, for the new connection);
``tools/list_changed`` re-lists and swaps one server's slice; ``reload()`` applies the
difference between the running fleet and a fresh discovery; ``watch=True`` reloads when
a discovered config file changes.
"""

from __future__ import annotations

import fnmatch
import logging
import os
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import anyio
import anyio.abc
import anyio.to_thread

from mcpfleet.agent.bridge import DeferredMCPTool, MCPTool, assign_tool_names
from mcpfleet.client.definitions import EraVerdict, ToolDefinition
from mcpfleet.client.opening import import_off_loop, open_connection
from mcpfleet.config import EntryFilter, load_all_mcp_configs
from mcpfleet.config.model import DiscoveryResult, ServerConfig, SourceInfo
from mcpfleet.errors import (
    ConnectError,
    ConnectionClosedError,
    EraMismatchError,
    MCPFleetError,
    ServerNotConnectedError,
    ServerReconnectingError,
    ToolCallError,
)
from mcpfleet.fleet.cache import CachedServer, MCPToolCache
from mcpfleet.fleet.supervision import ReconnectPolicy, ServerState, ServerStateName, Supervisor, is_remote
from mcpfleet.redaction import redact_text

if TYPE_CHECKING:
    from types import TracebackType

    from mcpfleet.client.connection import ElicitationHandler, SamplingHandler, ServerConnection

logger = logging.getLogger(__name__)

STARTUP_TIMEOUT_MS = 250
"""How long ``connect_servers`` waits before handing out what is ready (S8)."""

SHUTDOWN_TIMEOUT_S = 6.0
"""One deadline for closing every server together (B4)."""

LIST_CHANGED_DEBOUNCE_MS = 150
"""``tools/list_changed`` notifications arriving within this delay cause one re-list (B2)."""

LIST_CHANGED_MIN_INTERVAL_S = 1.0
"""At least this long between the starts of two re-lists of one server, however often it
announces a change: a server that floods ``list_changed`` costs one re-list a second."""

LIST_CHANGED_FLOOD_WARNING = 100
"""Notifications folded into one re-list beyond which the server is reported as flooding."""

WATCH_INTERVAL_S = 0.25
"""How often watched config files are checked for a change (B3)."""

STDERR_TAIL_LINES = 10
"""Lines of a server's stderr kept for ``status`` and ``/mcp list``."""

ConnectionStatus = Literal["connected", "connecting", "disconnected"]
UncachedPolicy = Literal["wait", "late-join"]
EventKind = Literal[
    "connecting",
    "connected",
    "failed",
    "reconnecting",
    "disconnected",
    "tools_changed",
    "resources_changed",
    "prompts_changed",
]
AnyTool = MCPTool | DeferredMCPTool


@dataclass(frozen=True)
class ManagerEvent:
    """A state change of one server, delivered to every subscriber."""

    kind: EventKind
    server: str
    error: str | None = None
    timings_ms: Mapping[str, float] = field(default_factory=dict)


EventListener = Callable[[ManagerEvent], Awaitable[None] | None]
ResourceListener = Callable[[str, str], Awaitable[None] | None]
"""Called with ``(server, uri)`` when a subscribed resource changes."""
FileStamp = tuple[int, int, int]


@dataclass
class MCPLoadResult:
    """What a connect round hands back (the seed's ``{tools, errors, connectedServers}``)."""

    tools: list[AnyTool] = field(default_factory=list)
    errors: dict[str, str] = field(default_factory=dict)
    connected_servers: list[str] = field(default_factory=list)
    exa_api_keys: list[str] = field(default_factory=list)
    """Filled by the agent layer, which supplies the Exa filter (``mcpfleet.agent.exa``)."""
    deferred_servers: list[str] = field(default_factory=list)
    """Servers still starting whose tools came from the cache."""
    late_servers: list[str] = field(default_factory=list)
    """Servers still starting without a cache entry, left to join later (``late-join``)."""
    waited_servers: list[str] = field(default_factory=list)
    """Servers without a cache entry that the gate waited for past its deadline (``wait``)."""
    disabled_servers: list[str] = field(default_factory=list)
    """Servers switched off in their config: skipped on purpose, so never among ``errors``."""


@dataclass
class _ServerCatalog:
    """One server's slice of the tool list."""

    definitions: tuple[ToolDefinition, ...]
    deferred: bool


@dataclass
class _Attempt:
    """One in-flight connect-and-list for one server."""

    name: str
    epoch: int
    config: ServerConfig
    done: anyio.Event = field(default_factory=anyio.Event)
    error: str | None = None
    scope: anyio.CancelScope = field(default_factory=anyio.CancelScope)
    reconnect: bool = False
    """Part of a reconnection: failures go to the supervisor, stale tools stay registered."""
    cached: CachedServer | None = None
    """The tool-cache entry read when the attempt began: deferred tools at the gate, and the
    era verdict to connect with instead of probing (B8, B11). Read once per attempt."""


@dataclass
class _Reconnection:
    """A lost server being brought back by its supervising task."""

    epoch: int
    scope: anyio.CancelScope = field(default_factory=anyio.CancelScope)


@dataclass
class _ToolRefresh:
    """A coalesced re-list of one server's tools: at most one in flight, and ``dirty`` asks
    for one trailing pass, however many notifications arrive meanwhile."""

    dirty: bool = True
    folded: int = 1
    """Notifications answered by the next pass."""


@dataclass
class _RelistPacing:
    """One server's re-list rhythm, kept across refreshes while the server stays in the fleet."""

    last_start: float | None = None
    """When the last re-list after ``list_changed`` started (monotonic seconds)."""
    flood_reported: bool = False


class MCPManager:
    """Discovers, connects and holds a fleet of MCP servers.

    Use it as an async context manager: leaving the block closes every server within
    one deadline, whatever state each one is in.
    """

    def __init__(
        self,
        cwd: str | Path,
        *,
        cache: MCPToolCache | Literal["default"] | None = "default",
        auth_storage: Path | None = None,
        startup_timeout_ms: int = STARTUP_TIMEOUT_MS,
        on_uncached: UncachedPolicy = "wait",
        enable_project_config: bool = True,
        trust_project: bool = False,
        entry_filter: EntryFilter | None = None,
        extra_config_paths: Sequence[str | Path] = (),
        shutdown_timeout_s: float = SHUTDOWN_TIMEOUT_S,
        reconnect_policy: ReconnectPolicy | None = None,
        watch: bool = False,
        watch_interval_s: float = WATCH_INTERVAL_S,
        list_changed_debounce_ms: int = LIST_CHANGED_DEBOUNCE_MS,
        list_changed_min_interval_s: float = LIST_CHANGED_MIN_INTERVAL_S,
        elicitation_handler: ElicitationHandler | None = None,
        sampling_handler: SamplingHandler | None = None,
        probe_timeout_ms: int | None = None,
    ) -> None:
        """``elicitation_handler`` and ``sampling_handler`` are the host's answers to a server's
        ``elicitation/create`` and ``sampling/createMessage`` (see ``mcpfleet.client.connection``),
        for every server; without one, the capability is not advertised. ``probe_timeout_ms``
        bounds the ``server/discover`` probe of a server whose era is not in the cache.
        ``entry_filter`` is the host's discovery hook (``mcpfleet.config.EntryFilter``): the
        agent layer passes its Exa filter there."""
        self.cwd = Path(cwd).resolve()
        self._cache_setting = cache
        self._cache: MCPToolCache | None = None
        self.auth_storage = auth_storage
        self.startup_timeout_ms = startup_timeout_ms
        self.on_uncached: UncachedPolicy = on_uncached
        self.enable_project_config = enable_project_config
        self.trust_project = trust_project
        self.entry_filter = entry_filter
        self.extra_config_paths = tuple(Path(p) for p in extra_config_paths)
        self.shutdown_timeout_s = shutdown_timeout_s
        self.watch = watch
        self.watch_interval_s = watch_interval_s
        self.list_changed_debounce_ms = list_changed_debounce_ms
        self.list_changed_min_interval_s = list_changed_min_interval_s
        self.elicitation_handler = elicitation_handler
        self.sampling_handler = sampling_handler
        self.probe_timeout_ms = probe_timeout_ms
        self._supervisor = Supervisor(reconnect_policy or ReconnectPolicy())

        self._task_group: anyio.abc.TaskGroup | None = None
        self._connections: dict[str, ServerConnection] = {}
        self._pending_connections: dict[str, _Attempt] = {}
        self._pending_tool_loads: dict[str, _Attempt] = {}
        self._catalog: dict[str, _ServerCatalog] = {}
        self._sources: dict[str, SourceInfo] = {}
        self._configs: dict[str, ServerConfig] = {}
        self._errors: dict[str, str] = {}
        self._timings: dict[str, dict[str, float]] = {}
        self._epochs: dict[str, int] = {}
        self._listeners: list[EventListener] = []
        self._tools: list[AnyTool] = []
        self._startup_over = False
        self._reconnections: dict[str, _Reconnection] = {}
        self._stderr_tails: dict[str, tuple[str, ...]] = {}
        self._tool_refreshes: dict[str, _ToolRefresh] = {}
        self._relist_pacing: dict[str, _RelistPacing] = {}
        self._resource_listeners: dict[tuple[str, str], list[ResourceListener]] = {}
        self._state_changed: anyio.Event | None = None
        self._reload_lock: anyio.Lock | None = None
        self._config_stamps: dict[str, FileStamp | None] | None = None
        self.last_discovery: DiscoveryResult | None = None

    # -- lifetime -------------------------------------------------------------------

    async def __aenter__(self) -> MCPManager:
        if self._cache_setting == "default":
            self._cache = MCPToolCache.open_default()
        else:
            self._cache = self._cache_setting
        self._state_changed = anyio.Event()
        self._reload_lock = anyio.Lock()
        self._task_group = anyio.create_task_group()
        await self._task_group.__aenter__()
        if self.watch:
            self._task_group.start_soon(self._watch_config_files, name="mcpfleet config watcher")
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> bool | None:
        task_group = self._task_group
        assert task_group is not None, "MCPManager was not entered"
        try:
            with anyio.CancelScope(shield=True):
                await self.disconnect_all()
        finally:
            task_group.cancel_scope.cancel()
            self._task_group = None
            result = await task_group.__aexit__(exc_type, exc, traceback)
            if self._cache is not None and self._cache_setting == "default":
                self._cache.close()
        return result

    async def aclose(self) -> None:
        """Close every server; the same as leaving the ``async with`` block (same task)."""
        await self.__aexit__(None, None, None)

    @property
    def task_group(self) -> anyio.abc.TaskGroup:
        if self._task_group is None:
            raise RuntimeError("MCPManager is not running: use `async with MCPManager(...) as manager`")
        return self._task_group

    @property
    def cache(self) -> MCPToolCache | None:
        return self._cache

    @property
    def reconnect_policy(self) -> ReconnectPolicy:
        return self._supervisor.policy

    # -- events ---------------------------------------------------------------------

    def subscribe(self, listener: EventListener) -> Callable[[], None]:
        """Call ``listener`` on every state change; returns the function that unsubscribes."""
        self._listeners.append(listener)

        def unsubscribe() -> None:
            if listener in self._listeners:
                self._listeners.remove(listener)

        return unsubscribe

    def _emit(self, kind: EventKind, server: str, error: str | None = None) -> None:
        event = ManagerEvent(kind, server, error, dict(self._timings.get(server, {})))
        for listener in list(self._listeners):
            try:
                outcome = listener(event)
            except Exception:
                logger.exception("MCP event listener failed on %s %s", kind, server)
                continue
            if outcome is not None and self._task_group is not None:
                self._task_group.start_soon(self._await_listener, outcome, f"{kind} {server}")
        self._notify_state_change()

    def _notify_state_change(self) -> None:
        """Wake every task waiting for some server's state to move (``_wait_for_recovery``)."""
        if self._state_changed is not None:
            self._state_changed.set()
            self._state_changed = anyio.Event()

    @staticmethod
    async def _await_listener(outcome: Awaitable[None], what: str) -> None:
        try:
            await outcome
        except Exception:
            logger.exception("MCP listener failed on %s", what)

    # -- queries (S4, S5) -------------------------------------------------------------

    def get_connection_status(self, name: str) -> ConnectionStatus:
        """The seed's three states (S5), derived from the registries alone.

        A server waiting between reconnect attempts is ``disconnected`` here (nothing is in
        flight); ``get_server_state`` tells ``reconnecting`` and ``suspended`` apart.
        """
        if self._is_live(name) and name not in self._pending_tool_loads:
            return "connected"
        if name in self._pending_connections or name in self._pending_tool_loads:
            return "connecting"
        return "disconnected"

    def get_server_state(self, name: str) -> ServerState:
        """The supervisor's view of one server: state, last error, stderr tail, pid, recent crashes."""
        status = self.get_connection_status(name)
        connection = self._connections.get(name)
        live = connection is not None and not connection.ended
        live_tail = connection.stderr_tail(STDERR_TAIL_LINES) if live and connection else ()
        # A server's stderr may echo its arguments or its environment: secrets are masked.
        tail = tuple(redact_text(line) for line in live_tail or self._stderr_tails.get(name, ()))
        if name in self._reconnections:
            state: ServerStateName = "reconnecting"
        elif status != "disconnected":
            state = status
        elif self._supervisor.suspension(name) is not None:
            state = "suspended"
        elif name in self._errors:
            state = "failed"
        else:
            state = "disconnected"
        return ServerState(
            name=name,
            state=state,
            last_error=self._errors.get(name),
            stderr_tail=tail,
            pid=connection.pid if live and connection else None,
            recent_crashes=self._supervisor.recent_crashes(name),
        )

    def _is_live(self, name: str) -> bool:
        connection = self._connections.get(name)
        return connection is not None and not connection.ended

    def _is_recovering(self, name: str) -> bool:
        """Lost and not given up on: being reconnected, or closed and not yet noticed by its watcher."""
        connection = self._connections.get(name)
        return name in self._reconnections or (connection is not None and connection.ended)

    def get_tools(self) -> list[AnyTool]:
        """Every MCP tool, sorted by name, identical whatever the connection order."""
        return list(self._tools)

    def get_source(self, name: str) -> SourceInfo | None:
        return self._sources.get(name)

    def get_provider_name(self, server_name: str) -> str | None:
        source = self._sources.get(server_name)
        return source.provider_name if source is not None else None

    def get_server_config(self, name: str) -> ServerConfig | None:
        return self._configs.get(name)

    def get_connection(self, name: str) -> ServerConnection | None:
        return self._connections.get(name)

    def get_connected_servers(self) -> list[str]:
        return sorted(
            name for name in self._connections if self._is_live(name) and name not in self._pending_tool_loads
        )

    def get_all_server_names(self) -> list[str]:
        return sorted(set(self._configs) | set(self._sources))

    def get_errors(self) -> dict[str, str]:
        return dict(self._errors)

    def get_timings(self, name: str) -> dict[str, float]:
        return dict(self._timings.get(name, {}))

    def is_deferred(self, name: str) -> bool:
        catalog = self._catalog.get(name)
        return catalog is not None and catalog.deferred

    # -- discovery + connect ----------------------------------------------------------

    def discover(self) -> DiscoveryResult:
        """Read every config source with this manager's settings."""
        result = load_all_mcp_configs(
            self.cwd,
            enable_project_config=self.enable_project_config,
            entry_filter=self.entry_filter,
            extra_config_paths=self.extra_config_paths,
            trust_project=self.trust_project,
        )
        self.last_discovery = result
        # Stamped now, not at the watcher's next tick, so an edit made right after is not missed.
        self._config_stamps = _stamp_files(result.config_paths)
        return result

    async def discover_and_connect(self) -> MCPLoadResult:
        """Discovery then ``connect_servers`` (S2, S6); servers that cannot start are errors."""
        discovery = self.discover()
        result = await self.connect_servers(discovery.configs, discovery.sources)
        _complete_from_discovery(discovery, result)
        return result

    async def reload(self, *, full: bool = False) -> MCPLoadResult:
        """Rediscover and apply the difference (B3); ``full=True`` is the seed's cycle (S13).

        Added servers start, removed ones stop, changed ones (another config fingerprint)
        restart; unchanged ones stay as they are (same process, same connection) unless they
        are not running at all (failed, suspended), in which case they are started again.
        Reloads never overlap: a second one waits for the first.
        """
        lock = self._reload_lock
        if lock is None:
            raise RuntimeError("MCPManager is not running: use `async with MCPManager(...) as manager`")
        async with lock:
            if full:
                await self.disconnect_all()
                return await self.discover_and_connect()
            discovery = self.discover()
            wanted = discovery.configs
            running = (
                set(self._connections)
                | set(self._pending_connections)
                | set(self._pending_tool_loads)
                | set(self._reconnections)
            )
            removed = [name for name in self._configs if name not in wanted]
            changed = [
                name
                for name, config in self._configs.items()
                if name in wanted and config.fingerprint != wanted[name].fingerprint
            ]
            async with anyio.create_task_group() as stoppers:
                for name in [*removed, *changed]:
                    stoppers.start_soon(self.disconnect_server, name)
            for name, source in discovery.sources.items():
                if name in wanted:
                    self._sources[name] = source
            to_start = {
                name: config for name, config in wanted.items() if name in changed or name not in running
            }
            for name in to_start:
                self._supervisor.forget(name)
            logger.info(
                "MCP reload: %d added or restarted, %d changed, %d removed, %d kept",
                len(to_start),
                len(changed),
                len(removed),
                len(wanted) - len(to_start),
            )
            result = await self.connect_servers(to_start, discovery.sources)
            _complete_from_discovery(discovery, result)
            return result

    async def _watch_config_files(self) -> None:
        """Reload by diff when a discovered config file is created, edited, replaced or deleted."""
        while True:
            await anyio.sleep(self.watch_interval_s)
            stamps = self._config_stamps
            if stamps is None:
                continue
            current = await anyio.to_thread.run_sync(_stamp_files, list(stamps))
            if current == stamps:
                continue
            # Editors write in several steps (truncate, write, rename): act once the files hold still.
            while True:
                await anyio.sleep(self.watch_interval_s)
                settled = await anyio.to_thread.run_sync(_stamp_files, list(stamps))
                if settled == current:
                    break
                current = settled
            self._config_stamps = current  # a reload that fails must not be retried in a hot loop
            changed = sorted(path for path in current if current[path] != stamps.get(path))
            logger.info("MCP config changed (%s): reloading", ", ".join(changed))
            try:
                await self.reload()
            except Exception:
                logger.warning("MCP reload after a config change failed", exc_info=True)

    async def connect_servers(
        self, configs: Mapping[str, ServerConfig], sources: Mapping[str, SourceInfo]
    ) -> MCPLoadResult:
        """Connect every server in parallel behind the start-up gate (S6, S8, S9)."""
        task_group = self.task_group
        self._startup_over = False
        attempts: list[_Attempt] = []
        result = MCPLoadResult()
        for name, config in configs.items():
            if name in sources:
                self._sources[name] = sources[name]
            if name in self._connections or name in self._pending_connections or name in self._reconnections:
                continue
            self._configs[name] = config
            self._errors.pop(name, None)
            # Connecting again by hand is what lifts a suspension (S17: reconnection is explicit).
            self._supervisor.forget(name)
            attempt = self._new_attempt(name, self._epochs.get(name, 0), config)
            self._pending_connections[name] = attempt
            self._emit("connecting", name)
            task_group.start_soon(self._run_attempt, attempt)
            attempts.append(attempt)

        if self.startup_timeout_ms > 0:
            with anyio.move_on_after(self.startup_timeout_ms / 1000):
                await _wait_all(attempts)
        else:
            await _wait_all(attempts)

        must_wait: list[_Attempt] = []
        for attempt in attempts:
            if attempt.done.is_set() or self._is_stale(attempt):
                continue
            cached = _filter_tools(attempt.cached.tools, attempt.config) if attempt.cached else ()
            if cached:
                self._catalog[attempt.name] = _ServerCatalog(cached, deferred=True)
                result.deferred_servers.append(attempt.name)
            elif self.on_uncached == "wait":
                must_wait.append(attempt)
            else:
                result.late_servers.append(attempt.name)
        self._rebuild_tools()
        # Correctness before speed: a server with no cached tools is waited for (S8).
        result.waited_servers = [attempt.name for attempt in must_wait]
        await _wait_all(must_wait)
        self._startup_over = True

        for attempt in attempts:
            if attempt.error is not None:
                result.errors[attempt.name] = attempt.error
        result.tools = self.get_tools()
        result.connected_servers = self.get_connected_servers()
        return result

    def _new_attempt(
        self, name: str, epoch: int, config: ServerConfig, *, reconnect: bool = False
    ) -> _Attempt:
        cached = self._cache.get(name, config.fingerprint) if self._cache is not None else None
        return _Attempt(name, epoch, config, reconnect=reconnect, cached=cached)

    def _is_stale(self, attempt: _Attempt) -> bool:
        """True when the server was disconnected or restarted after this attempt began."""
        return self._epochs.get(attempt.name, 0) != attempt.epoch

    async def _run_attempt(self, attempt: _Attempt) -> None:
        """Connect, list tools, cache them: one server's pipeline (S6), run in the group."""
        name = attempt.name
        timings = self._timings.setdefault(name, {})
        timings.clear()
        started = time.perf_counter()
        connection: ServerConnection | None = None
        era = attempt.cached.era if attempt.cached is not None else None
        try:
            with attempt.scope:
                while True:
                    try:
                        connection = await self._open(attempt, era)
                        if self._is_stale(attempt):
                            return
                        timings.update(connection.timings_ms)
                        self._pending_connections.pop(name, None)
                        self._connections[name] = connection
                        self._pending_tool_loads[name] = attempt
                        listed = time.perf_counter()
                        # Wall time of the request, so the cache can order answers across processes.
                        listed_at = time.time()
                        definitions = _filter_tools(await connection.list_tools(), attempt.config)
                        break
                    except EraMismatchError as mismatch:
                        # The remembered era is stale (the server was upgraded or downgraded):
                        # once, connect again with a probe; its verdict replaces the old one.
                        if era is None:
                            raise
                        logger.info("%s", mismatch)
                        era = None
                        if connection is not None:
                            with anyio.CancelScope(shield=True):
                                await connection.close()
                            if self._connections.get(name) is connection:
                                del self._connections[name]
                            connection = None
                        if self._is_stale(attempt):
                            return
                        if self._pending_tool_loads.get(name) is attempt:
                            del self._pending_tool_loads[name]
                        self._pending_connections[name] = attempt
                timings["list"] = (time.perf_counter() - listed) * 1000
                timings["total"] = (time.perf_counter() - started) * 1000
                if self._is_stale(attempt):
                    return
                self._pending_tool_loads.pop(name, None)
                self._catalog[name] = _ServerCatalog(definitions, deferred=False)
                self._write_cache(name, attempt.config, connection, definitions, listed_at)
                self._errors.pop(name, None)
                self._stderr_tails.pop(name, None)
                self._rebuild_tools()
                self._emit("connected", name)
                self._emit("tools_changed", name)
                self._watch_connection(attempt, connection)
                self._resubscribe_resources(name, connection)
                connection = None  # registered: the manager owns it now
        except Exception as error:
            message = str(error) if isinstance(error, MCPFleetError) else f"{type(error).__name__}: {error}"
            # Connect errors name the command line or URL, and quote the server's stderr.
            message = redact_text(message)
            attempt.error = message
            # A failed reconnect attempt is the supervisor's business; the stale tools stay.
            if not self._is_stale(attempt) and not attempt.reconnect:
                self._drop_deferred_tools(name)
                self._record_failure(name, message)
        finally:
            if self._is_stale(attempt) or attempt.error is not None:
                if connection is not None:
                    with anyio.CancelScope(shield=True):
                        await connection.close()
                if not self._is_stale(attempt):
                    self._connections.pop(name, None)
            if self._pending_connections.get(name) is attempt:
                del self._pending_connections[name]
            if self._pending_tool_loads.get(name) is attempt:
                del self._pending_tool_loads[name]
            attempt.done.set()

    async def _open(self, attempt: _Attempt, era: EraVerdict | None) -> ServerConnection:
        config = attempt.config
        return await open_connection(
            self.task_group,
            attempt.name,
            config,
            cwd=self.cwd,
            on_notification=self._notification_handler(attempt),
            era=era,
            auth=await self._auth_for(attempt.name, config),
            elicitation_handler=self.elicitation_handler,
            sampling_handler=self.sampling_handler,
            probe_timeout_ms=self.probe_timeout_ms,
        )

    async def _auth_for(self, name: str, config: ServerConfig) -> object | None:
        """The OAuth provider for an HTTP server that carries no credentials of its own."""
        if config.transport not in ("http", "sse"):
            return None
        if any(key.lower() == "authorization" for key in config.headers):
            return None
        oauth = await import_off_loop("mcpfleet.auth.oauth")
        provider: object = oauth.oauth_auth_for(name, config, interactive=False)
        return provider

    # -- notifications (B2, B7) ----------------------------------------------------------

    def _notification_handler(self, attempt: _Attempt) -> Callable[[str, dict[str, Any] | None], None]:
        name = attempt.name

        def handle(method: str, params: dict[str, Any] | None) -> None:
            # A connection that was replaced or disconnected no longer speaks for the server.
            if self._is_stale(attempt) or self._task_group is None:
                return
            if method == "notifications/tools/list_changed":
                self._schedule_tools_refresh(name)
            elif method == "notifications/resources/list_changed":
                self._emit("resources_changed", name)
            elif method == "notifications/prompts/list_changed":
                self._emit("prompts_changed", name)
            elif method == "notifications/resources/updated":
                uri = (params or {}).get("uri")
                if isinstance(uri, str):
                    self._deliver_resource_update(name, uri)
            else:
                logger.debug("notification %s from %s", method, name)

        return handle

    def _schedule_tools_refresh(self, name: str) -> None:
        refresh = self._tool_refreshes.get(name)
        if refresh is not None:
            refresh.dirty = True  # the running refresh lists once more after its current pass
            refresh.folded += 1
            return
        refresh = self._tool_refreshes[name] = _ToolRefresh()
        self.task_group.start_soon(self._refresh_tools, name, refresh, name=f"mcpfleet re-list {name}")

    async def _refresh_tools(self, name: str, refresh: _ToolRefresh) -> None:
        """Re-list one server's tools after ``list_changed`` and swap its slice in one step."""
        try:
            while refresh.dirty:
                await anyio.sleep(self.list_changed_debounce_ms / 1000)
                # Paced, not debounced until quiet: a server that never stops announcing changes
                # is still re-listed (never starved), once per interval (never in a hot loop).
                pacing = self._relist_pacing.setdefault(name, _RelistPacing())
                if pacing.last_start is not None:
                    await anyio.sleep(
                        max(0.0, pacing.last_start + self.list_changed_min_interval_s - time.monotonic())
                    )
                self._report_flood(name, refresh.folded, pacing)
                refresh.dirty = False
                refresh.folded = 0
                # A notification sent during the first tools/list: that answer must land first.
                loading = self._pending_tool_loads.get(name)
                if loading is not None:
                    await loading.done.wait()
                connection = self._connections.get(name)
                config = self._configs.get(name)
                if connection is None or connection.ended or config is None:
                    return  # a reconnection lists the tools anyway
                epoch = self._epochs.get(name, 0)
                listed_at = time.time()
                pacing.last_start = time.monotonic()
                try:
                    definitions = _filter_tools(await connection.list_tools(), config)
                except MCPFleetError as error:
                    logger.warning("Re-listing the tools of MCP server %s failed: %s", name, error)
                    return
                if self._connections.get(name) is not connection or self._epochs.get(name, 0) != epoch:
                    return  # replaced or disconnected meanwhile: this answer is about another server
                previous = self._catalog.get(name)
                self._catalog[name] = _ServerCatalog(definitions, deferred=False)
                self._write_cache(name, config, connection, definitions, listed_at)
                if previous is None or previous.deferred or previous.definitions != definitions:
                    self._rebuild_tools()
                    self._emit("tools_changed", name)
        finally:
            if self._tool_refreshes.get(name) is refresh:
                del self._tool_refreshes[name]

    def _report_flood(self, name: str, folded: int, pacing: _RelistPacing) -> None:
        """Say once that a server announces changes far faster than it can usefully be re-listed."""
        if pacing.flood_reported or folded < LIST_CHANGED_FLOOD_WARNING:
            return
        pacing.flood_reported = True
        logger.warning(
            "MCP server %s sent %d tools/list_changed notifications between two re-lists; "
            "its tools are re-listed at most once every %g s",
            name,
            folded,
            self.list_changed_min_interval_s,
        )

    async def subscribe_resource(
        self, server: str, uri: str, listener: ResourceListener
    ) -> Callable[[], None]:
        """Call ``listener(server, uri)`` on each ``notifications/resources/updated`` for ``uri``.

        Sends ``resources/subscribe`` when the server supports it (and again after every
        reconnection). Returns the function that unsubscribes.
        """
        key = (server, uri)
        listeners = self._resource_listeners.setdefault(key, [])
        listeners.append(listener)
        connection = self._connections.get(server)
        if len(listeners) == 1 and connection is not None and not connection.ended:
            await self._send_subscription(connection, uri, subscribe=True)

        def unsubscribe() -> None:
            current = self._resource_listeners.get(key)
            if current is None or listener not in current:
                return
            current.remove(listener)
            if current:
                return
            del self._resource_listeners[key]
            live = self._connections.get(server)
            if live is not None and not live.ended and self._task_group is not None:
                self._task_group.start_soon(self._send_subscription, live, uri, False)

        return unsubscribe

    async def _send_subscription(self, connection: ServerConnection, uri: str, subscribe: bool) -> None:
        resources = connection.capabilities.get("resources")
        if not (isinstance(resources, dict) and resources.get("subscribe")):
            return
        try:
            if subscribe:
                await connection.subscribe_resource(uri)
            else:
                await connection.unsubscribe_resource(uri)
        except MCPFleetError as error:
            logger.warning(
                "MCP server %s: resource subscription for %s failed: %s", connection.name, uri, error
            )

    def _resubscribe_resources(self, name: str, connection: ServerConnection) -> None:
        for server, uri in list(self._resource_listeners):
            if server == name:
                self.task_group.start_soon(self._send_subscription, connection, uri, True)

    def _deliver_resource_update(self, name: str, uri: str) -> None:
        for listener in list(self._resource_listeners.get((name, uri), ())):
            try:
                outcome = listener(name, uri)
            except Exception:
                logger.exception("MCP resource listener failed on %s %s", name, uri)
                continue
            if outcome is not None:
                self.task_group.start_soon(self._await_listener, outcome, f"resource update {name} {uri}")

    # -- supervision (B1) ----------------------------------------------------------------

    def _watch_connection(self, attempt: _Attempt, connection: ServerConnection) -> None:
        """Notice a transport that ends on its own, so status and tools tell the truth."""

        async def watch() -> None:
            await connection.wait_closed()
            if self._connections.get(attempt.name) is not connection or self._is_stale(attempt):
                return
            await self._recover(attempt.name, attempt.epoch, connection)

        self.task_group.start_soon(watch, name=f"mcpfleet watch {attempt.name}")

    async def _recover(self, name: str, epoch: int, lost: ServerConnection) -> None:
        """A registered connection ended by itself: report it, then bring the server back.

        ``failed`` says what happened (with the reason), ``reconnecting`` what is being done.
        The server's tools stay registered throughout; only a stdio server that trips the
        crash breaker or exhausts its ladder is left down (its tools then answer with the
        reason).
        """
        reason = lost.close_reason or "connection closed"
        message = f'MCP server "{name}" disconnected: {reason}'
        self._stderr_tails[name] = tuple(lost.stderr_tail(STDERR_TAIL_LINES))
        del self._connections[name]
        config = self._configs.get(name)
        if config is None or not self._supervisor.policy.auto_reconnect:
            self._record_failure(name, message)
            return
        tripped = self._supervisor.record_crash(name)
        remote = is_remote(config.transport)
        if tripped and not remote:
            suspension = self._supervisor.suspension_message(name)
            self._supervisor.suspend(name, suspension)
            self._record_failure(name, f"{suspension} (last: {reason})")
            return
        reconnection = _Reconnection(epoch)
        self._reconnections[name] = reconnection
        self._record_failure(name, message)
        self._emit("reconnecting", name, message)
        try:
            with reconnection.scope:
                await self._reconnect(name, epoch, config, quiet=tripped)
        finally:
            if self._reconnections.get(name) is reconnection:
                del self._reconnections[name]
            self._notify_state_change()

    async def _reconnect(self, name: str, epoch: int, config: ServerConfig, *, quiet: bool) -> None:
        attempts = 0
        last_error = "connection lost"
        ladder_length = len(self._supervisor.policy.ladder_s)
        for delay in self._supervisor.retry_delays(config.transport, quiet=quiet):
            await anyio.sleep(delay)
            if self._epochs.get(name, 0) != epoch:
                return
            attempts += 1
            attempt = self._new_attempt(name, epoch, config, reconnect=True)
            self._pending_connections[name] = attempt
            await self._run_attempt(attempt)
            if self._epochs.get(name, 0) != epoch:
                return
            if attempt.error is None:
                logger.info("MCP server %s reconnected (attempt %d)", name, attempts)
                return
            last_error = attempt.error
            self._errors[name] = (
                f'MCP server "{name}" is reconnecting; attempt {attempts} failed: {last_error}'
            )
            if attempts == ladder_length and (quiet or is_remote(config.transport)):
                logger.info("MCP server %s is still unreachable; retrying quietly", name)
        # Only a stdio server's delays run out: respawning it forever could fork-storm the machine.
        self._record_failure(
            name,
            f'MCP server "{name}" could not be restarted after {attempts} attempts: {last_error}; '
            f"fix it, then run /mcp reconnect {name}",
        )

    async def _wait_for_recovery(self, name: str) -> None:
        """Wait, bounded by the policy's ``call_wait_s``, for a lost server to be back."""
        bound = self._supervisor.policy.call_wait_s
        with anyio.move_on_after(bound):
            while self._is_recovering(name) and self.get_connection_status(name) != "connected":
                assert self._state_changed is not None
                await self._state_changed.wait()
        if self.get_connection_status(name) == "connected":
            return
        if self._is_recovering(name):
            raise ServerReconnectingError(
                f'MCP server "{name}" is reconnecting ({self._errors.get(name) or "connection lost"}); '
                f"it was not back within {bound:g} s, try again shortly",
                server=name,
            )
        raise ConnectError(self._errors.get(name) or f"MCP server not connected: {name}", server=name)

    def _write_cache(
        self,
        name: str,
        config: ServerConfig,
        connection: ServerConnection,
        definitions: Sequence[ToolDefinition],
        listed_at: float,
    ) -> None:
        if self._cache is None:
            return
        try:
            self._cache.put(
                name,
                config.fingerprint,
                definitions,
                server_info=connection.server_info,
                protocol_version=connection.protocol_version,
                era=connection.era_verdict,
                listed_at=listed_at,
            )
        except Exception:
            logger.warning("Could not write the tool cache for %s", name, exc_info=True)

    def _drop_deferred_tools(self, name: str) -> None:
        """Cached tools of a server that failed to start would only ever return errors."""
        catalog = self._catalog.get(name)
        if catalog is not None and catalog.deferred:
            del self._catalog[name]
            self._rebuild_tools()
            self._emit("tools_changed", name)

    def _record_failure(self, name: str, message: str) -> None:
        message = redact_text(message)
        self._errors[name] = message
        if self._startup_over:
            logger.warning("MCP server %s failed after start-up: %s", name, message)
        self._emit("failed", name, message)

    def _rebuild_tools(self) -> None:
        pairs = [(server, d.name) for server, catalog in self._catalog.items() for d in catalog.definitions]
        names = assign_tool_names(pairs)
        tools: list[AnyTool] = []
        for server, catalog in self._catalog.items():
            tool_class = DeferredMCPTool if catalog.deferred else MCPTool
            provider = self.get_provider_name(server)
            for definition in catalog.definitions:
                tools.append(
                    tool_class(
                        self,
                        server,
                        definition,
                        name=names[(server, definition.name)],
                        provider_name=provider,
                    )
                )
        tools.sort(key=lambda tool: tool.name)
        self._tools = tools

    # -- calls --------------------------------------------------------------------------

    async def wait_for_connection(self, name: str) -> None:
        """Return once ``name`` is connected; raise if it cannot be (bounded by its timeout).

        A server being reconnected is waited for up to the reconnect policy's ``call_wait_s``.
        """
        if self.get_connection_status(name) == "connected":
            return
        if self._is_recovering(name):
            await self._wait_for_recovery(name)
            return
        attempt = self._pending_connections.get(name) or self._pending_tool_loads.get(name)
        if attempt is None:
            if name in self._errors:
                raise ConnectError(self._errors[name], server=name)
            raise ServerNotConnectedError(name)
        timeout_ms = attempt.config.effective_timeout_ms
        # The attempt is itself bounded by the handshake timeout; this bound only guards
        # against a tools/list that never answers.
        with anyio.move_on_after(2 * timeout_ms / 1000 if timeout_ms else None) as scope:
            await attempt.done.wait()
        if scope.cancelled_caught:
            raise ConnectError(
                f'MCP server "{name}" did not become ready within {2 * timeout_ms}ms', server=name
            )
        if self.get_connection_status(name) != "connected":
            raise ConnectError(attempt.error or f"MCP server not connected: {name}", server=name)

    async def call_tool(
        self,
        server_name: str,
        tool_name: str,
        arguments: dict[str, Any],
        *,
        timeout_ms: int | None = None,
    ) -> Any:
        """Call one tool on one server through its connection.

        The decision to resend is taken *before* the request is handed to a connection, never
        by guessing afterwards: when the server's connection has already ended (its transport
        was seen ending, or it is being reconnected), the request has not left this process,
        so it waits (bounded) for the new connection and is sent there, once. When the
        connection drops after the request was handed to it, the server may have received and
        run it: the outcome is unknown, the call is *not* replayed, and the error says so.
        """
        connection = self._connections.get(server_name)
        if connection is None or connection.ended:
            await self.wait_for_connection(server_name)
            connection = self._connections[server_name]
        config = self._configs.get(server_name)
        bound = timeout_ms if timeout_ms is not None else config.tool_timeout_ms if config else None
        try:
            return await connection.call_tool(tool_name, arguments, timeout_ms=bound)
        except ConnectionClosedError:
            reason = connection.close_reason or "connection lost"
            raise ToolCallError(
                f'MCP server "{server_name}" lost the connection during the call to {tool_name} ({reason}); '
                "the call may have run, so it was not repeated",
                server=server_name,
                tool=tool_name,
            ) from None

    async def reconnect_server(self, name: str) -> None:
        """Close one server and connect it again with the same config (explicit, S17).

        This also clears its crash breaker and any reconnection in progress.
        """
        config = self._configs.get(name)
        if config is None:
            raise ServerNotConnectedError(name)
        source = self._sources.get(name)
        await self.disconnect_server(name)
        await self.connect_servers({name: config}, {name: source} if source is not None else {})
        await self.wait_for_connection(name)

    # -- shutdown (S18, S19) ----------------------------------------------------------

    async def disconnect_server(self, name: str) -> None:
        """Forget one server: pending work, source, connection and tools (S18)."""
        self._epochs[name] = self._epochs.get(name, 0) + 1
        cancelled: list[_Attempt] = []
        for registry in (self._pending_connections, self._pending_tool_loads):
            attempt = registry.pop(name, None)
            if attempt is not None:
                attempt.scope.cancel()
                cancelled.append(attempt)
        reconnection = self._reconnections.pop(name, None)
        if reconnection is not None:
            reconnection.scope.cancel()
        self._supervisor.forget(name)
        self._stderr_tails.pop(name, None)
        self._relist_pacing.pop(name, None)
        self._sources.pop(name, None)
        self._configs.pop(name, None)
        self._errors.pop(name, None)
        connection = self._connections.pop(name, None)
        had_tools = self._catalog.pop(name, None) is not None
        # An attempt cut short still reaps its process: wait for that too, so "stopped" means gone.
        await self._close_all([connection] if connection is not None else [], cancelled)
        if had_tools:
            self._rebuild_tools()
            self._emit("tools_changed", name)
        self._emit("disconnected", name)

    async def disconnect_all(self) -> None:
        """Close every transport concurrently under one deadline, then empty the registries (S19)."""
        names = (
            set(self._connections)
            | set(self._pending_connections)
            | set(self._pending_tool_loads)
            | set(self._reconnections)
        )
        for name in set(self._epochs) | names:
            self._epochs[name] = self._epochs.get(name, 0) + 1
        cancelled = [*self._pending_connections.values(), *self._pending_tool_loads.values()]
        for attempt in cancelled:
            attempt.scope.cancel()
        for reconnection in self._reconnections.values():
            reconnection.scope.cancel()
        for name in set(self._configs) | names:
            self._supervisor.forget(name)
        self._reconnections.clear()
        self._stderr_tails.clear()
        self._relist_pacing.clear()
        connections = list(self._connections.values())
        self._connections.clear()
        self._pending_connections.clear()
        self._pending_tool_loads.clear()
        self._sources.clear()
        self._configs.clear()
        self._errors.clear()
        with_tools = sorted(self._catalog)
        self._catalog.clear()
        self._rebuild_tools()
        # Before the (slow) closing, so no subscriber lists or calls a tool that is going away.
        for name in with_tools:
            self._emit("tools_changed", name)
        await self._close_all(connections, cancelled)
        for name in sorted(names):
            self._emit("disconnected", name)

    async def _close_all(
        self, connections: Iterable[ServerConnection], cancelled: Iterable[_Attempt] = ()
    ) -> None:
        """Close connections and let cancelled attempts finish reaping, all under one deadline (B4)."""

        async def close_one(connection: ServerConnection) -> None:
            try:
                await connection.close()
            except Exception:
                logger.warning("Closing MCP server %s failed", connection.name, exc_info=True)

        with anyio.move_on_after(self.shutdown_timeout_s):
            async with anyio.create_task_group() as closers:
                for connection in connections:
                    closers.start_soon(close_one, connection)
                for attempt in cancelled:
                    closers.start_soon(attempt.done.wait)


async def _wait_all(attempts: Iterable[_Attempt]) -> None:
    for attempt in attempts:
        await attempt.done.wait()


def _filter_tools(tools: Iterable[ToolDefinition], config: ServerConfig) -> tuple[ToolDefinition, ...]:
    """One definition per name, then the server's allow-list and deny-list (globs; deny wins).

    A server may list a name twice; the agent calls tools by name, so only one definition
    can ever be reached. The first is kept, as the server listed it first.
    """

    def allowed(name: str) -> bool:
        if any(fnmatch.fnmatchcase(name, pattern) for pattern in config.exclude_tools):
            return False
        if config.include_tools is None:
            return True
        return any(fnmatch.fnmatchcase(name, pattern) for pattern in config.include_tools)

    kept: dict[str, ToolDefinition] = {}
    for tool in tools:
        if tool.name in kept:
            logger.warning(
                "MCP server %s lists the tool %r more than once; only its first definition is used",
                config.name,
                tool.name,
            )
        elif allowed(tool.name):
            kept[tool.name] = tool
    return tuple(kept.values())


def _complete_from_discovery(discovery: DiscoveryResult, result: MCPLoadResult) -> None:
    """Add the disabled servers, and an error for every entry that cannot start.

    A disabled server is the user's decision, not a failure: it is listed apart and never
    reported as an error (nor warned about, nor counted by ``--strict``).
    """
    for entry in discovery.entries:
        if entry.name in discovery.configs or entry.name in result.errors:
            continue
        if entry.state == "disabled":
            result.disabled_servers.append(entry.name)
        elif entry.state == "pending-approval":
            result.errors[entry.name] = (
                f'MCP server "{entry.name}" from {entry.source.path} is a project server awaiting '
                f"approval: run `mcpfleet approve {entry.name}` (or pass --trust-project)"
            )
        elif entry.state == "invalid":
            result.errors[entry.name] = entry.reason


def _stamp_files(paths: Iterable[str]) -> dict[str, FileStamp | None]:
    """What identifies each file's current content cheaply: mtime, size, inode (None: absent)."""
    stamps: dict[str, FileStamp | None] = {}
    for path in paths:
        try:
            info = os.stat(path)
        except OSError:
            stamps[path] = None
        else:
            stamps[path] = (info.st_mtime_ns, info.st_size, info.st_ino)
    return stamps
