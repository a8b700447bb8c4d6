"""The fleet: every server's connection, its tools, and the fast start-up gate.

One ``MCPManager`` owns a task group for its whole life. Each server's connection runs
in an owner task inside that group, so callers in any task may connect, call and
disconnect in any order. The registries follow the seed (S4):

* ``_connections``       servers whose handshake finished (tools may still be loading);
* ``_pending_connections`` servers whose connection attempt is in flight;
* ``_pending_tool_loads``  servers connected whose ``tools/list`` is still running;
* ``_catalog``             each server's slice of tools (live or deferred from the cache);
* ``_sources``             where each server came from, known before it connects.

A server's tools are owned by the server's name, never found by a name prefix, so
replacing or removing one server's slice never touches another's (S16).
"""

from __future__ import annotations

import fnmatch
import logging
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import anyio
import anyio.abc

from mcpfleet.bridge import DeferredMCPTool, MCPTool, assign_tool_names
from mcpfleet.cache import MCPToolCache
from mcpfleet.client.definitions import ToolDefinition
from mcpfleet.config import load_all_mcp_configs
from mcpfleet.config.model import DiscoveryResult, ServerConfig, SourceInfo
from mcpfleet.errors import ConnectError, MCPFleetError, ServerNotConnectedError

if TYPE_CHECKING:
    from types import TracebackType

    from mcpfleet.client.connection import ServerConnection

logger = logging.getLogger(__name__)

STARTUP_TIMEOUT_MS = 250
"""How long ``connect_servers`` waits before handing out what is ready (S8)."""

SHUTDOWN_TIMEOUT_S = 6.0
"""One deadline for closing every server together (B4)."""

ConnectionStatus = Literal["connected", "connecting", "disconnected"]
UncachedPolicy = Literal["wait", "late-join"]
EventKind = Literal["connecting", "connected", "failed", "disconnected", "tools_changed"]
AnyTool = MCPTool | DeferredMCPTool


@dataclass(frozen=True)
class ManagerEvent:
    """A state change of one server, delivered to every subscriber."""

    kind: EventKind
    server: str
    error: str | None = None
    timings_ms: Mapping[str, float] = field(default_factory=dict)


EventListener = Callable[[ManagerEvent], Awaitable[None] | None]


@dataclass
class MCPLoadResult:
    """What a connect round hands back (the seed's ``{tools, errors, connectedServers}``)."""

    tools: list[AnyTool] = field(default_factory=list)
    errors: dict[str, str] = field(default_factory=dict)
    connected_servers: list[str] = field(default_factory=list)
    exa_api_keys: list[str] = field(default_factory=list)
    deferred_servers: list[str] = field(default_factory=list)
    """Servers still starting whose tools came from the cache."""
    late_servers: list[str] = field(default_factory=list)
    """Servers still starting without a cache entry, left to join later (``late-join``)."""


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
        filter_exa: bool = True,
        extra_config_paths: Sequence[str | Path] = (),
        shutdown_timeout_s: float = SHUTDOWN_TIMEOUT_S,
    ) -> None:
        self.cwd = Path(cwd).resolve()
        self._cache_setting = cache
        self._cache: MCPToolCache | None = None
        self.auth_storage = auth_storage
        self.startup_timeout_ms = startup_timeout_ms
        self.on_uncached: UncachedPolicy = on_uncached
        self.enable_project_config = enable_project_config
        self.trust_project = trust_project
        self.filter_exa = filter_exa
        self.extra_config_paths = tuple(Path(p) for p in extra_config_paths)
        self.shutdown_timeout_s = shutdown_timeout_s

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
        self.last_discovery: DiscoveryResult | None = None

    # -- lifetime -------------------------------------------------------------------

    async def __aenter__(self) -> MCPManager:
        if self._cache_setting == "default":
            self._cache = MCPToolCache.open_default()
        else:
            self._cache = self._cache_setting
        self._task_group = anyio.create_task_group()
        await self._task_group.__aenter__()
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
                self._task_group.start_soon(self._await_listener, outcome, event)

    @staticmethod
    async def _await_listener(outcome: Awaitable[None], event: ManagerEvent) -> None:
        try:
            await outcome
        except Exception:
            logger.exception("MCP event listener failed on %s %s", event.kind, event.server)

    # -- queries (S4, S5) -------------------------------------------------------------

    def get_connection_status(self, name: str) -> ConnectionStatus:
        if name in self._connections and name not in self._pending_tool_loads:
            return "connected"
        if name in self._pending_connections or name in self._pending_tool_loads:
            return "connecting"
        return "disconnected"

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
        return sorted(name for name in self._connections if name not in self._pending_tool_loads)

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
            filter_exa=self.filter_exa,
            extra_config_paths=self.extra_config_paths,
            trust_project=self.trust_project,
        )
        self.last_discovery = result
        return result

    async def discover_and_connect(self) -> MCPLoadResult:
        """Discovery then ``connect_servers`` (S2, S6); servers that cannot start are errors."""
        discovery = self.discover()
        result = await self.connect_servers(discovery.configs, discovery.sources)
        result.exa_api_keys = list(discovery.exa_api_keys)
        for entry in discovery.entries:
            if entry.name in discovery.configs or entry.name in result.errors:
                continue
            if entry.state == "pending-approval":
                result.errors[entry.name] = (
                    f'MCP server "{entry.name}" from {entry.source.path} is a project server awaiting '
                    f"approval: run `mcpfleet approve {entry.name}` (or pass --trust-project)"
                )
            elif entry.state == "invalid":
                result.errors[entry.name] = entry.reason
            elif entry.state == "disabled":
                result.errors[entry.name] = (
                    f'MCP server "{entry.name}" is disabled in {entry.source.path}: '
                    f"run `mcpfleet enable {entry.name}` to start it"
                )
        return result

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
            if name in self._connections or name in self._pending_connections:
                continue
            self._configs[name] = config
            self._errors.pop(name, None)
            attempt = _Attempt(name, self._epochs.get(name, 0), config)
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
            cached = self._read_cache(attempt.name, attempt.config)
            if cached:
                self._catalog[attempt.name] = _ServerCatalog(cached, deferred=True)
                result.deferred_servers.append(attempt.name)
            elif self.on_uncached == "wait":
                must_wait.append(attempt)
            else:
                result.late_servers.append(attempt.name)
        self._rebuild_tools()
        # Correctness before speed: a server with no cached tools is waited for (S8).
        await _wait_all(must_wait)
        self._startup_over = True

        for attempt in attempts:
            if attempt.error is not None:
                result.errors[attempt.name] = attempt.error
        result.tools = self.get_tools()
        result.connected_servers = self.get_connected_servers()
        return result

    def _read_cache(self, name: str, config: ServerConfig) -> tuple[ToolDefinition, ...]:
        if self._cache is None:
            return ()
        entry = self._cache.get(name, config.fingerprint)
        return _filter_tools(entry.tools, config) if entry is not None else ()

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
        try:
            with attempt.scope:
                connection = await self._open(attempt)
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
                timings["list"] = (time.perf_counter() - listed) * 1000
                timings["total"] = (time.perf_counter() - started) * 1000
                if self._is_stale(attempt):
                    return
                self._pending_tool_loads.pop(name, None)
                self._catalog[name] = _ServerCatalog(definitions, deferred=False)
                self._write_cache(name, attempt.config, connection, definitions, listed_at)
                self._rebuild_tools()
                self._emit("connected", name)
                self._emit("tools_changed", name)
                self._watch_connection(attempt, connection)
                connection = None  # registered: the manager owns it now
        except Exception as error:
            message = str(error) if isinstance(error, MCPFleetError) else f"{type(error).__name__}: {error}"
            attempt.error = message
            if not self._is_stale(attempt):
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

    async def _open(self, attempt: _Attempt) -> ServerConnection:
        from mcpfleet.client.connection import open_connection

        config = attempt.config
        cached = self._cache.get(attempt.name, config.fingerprint) if self._cache is not None else None
        return await open_connection(
            self.task_group,
            attempt.name,
            config,
            cwd=self.cwd,
            on_notification=self._notification_handler(attempt.name),
            protocol_version=cached.protocol_version if cached is not None else None,
            auth=self._auth_for(attempt.name, config),
        )

    def _auth_for(self, name: str, config: ServerConfig) -> object | None:
        """The OAuth provider for an HTTP server that carries no credentials of its own."""
        if config.transport == "stdio":
            return None
        if any(key.lower() == "authorization" for key in config.headers):
            return None
        from mcpfleet.client.oauth import oauth_auth_for

        return oauth_auth_for(name, config, interactive=False)

    def _notification_handler(self, name: str) -> Callable[[str, dict[str, Any] | None], None]:
        def handle(method: str, params: dict[str, Any] | None) -> None:
            logger.debug("notification %s from %s", method, name)

        return handle

    def _watch_connection(self, attempt: _Attempt, connection: ServerConnection) -> None:
        """Notice a transport that ends on its own, so status and tools tell the truth."""

        async def watch() -> None:
            await connection.wait_closed()
            if self._connections.get(attempt.name) is not connection or self._is_stale(attempt):
                return
            reason = connection.close_reason or "connection closed"
            del self._connections[attempt.name]
            self._record_failure(attempt.name, f'MCP server "{attempt.name}" disconnected: {reason}')

        self.task_group.start_soon(watch)

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
        """Return once ``name`` is connected; raise if it cannot be (bounded by its timeout)."""
        if self.get_connection_status(name) == "connected":
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
        """Call one tool on one server through its connection."""
        connection = self._connections.get(server_name)
        if connection is None:
            await self.wait_for_connection(server_name)
            connection = self._connections[server_name]
        config = self._configs.get(server_name)
        bound = timeout_ms if timeout_ms is not None else config.tool_timeout_ms if config else None
        return await connection.call_tool(tool_name, arguments, timeout_ms=bound)

    async def reconnect_server(self, name: str) -> None:
        """Close one server and connect it again with the same config (explicit, S17)."""
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
        for registry in (self._pending_connections, self._pending_tool_loads):
            attempt = registry.pop(name, None)
            if attempt is not None:
                attempt.scope.cancel()
        self._sources.pop(name, None)
        self._configs.pop(name, None)
        self._errors.pop(name, None)
        connection = self._connections.pop(name, None)
        had_tools = self._catalog.pop(name, None) is not None
        if connection is not None:
            await self._close_all([connection])
        if had_tools:
            self._rebuild_tools()
            self._emit("tools_changed", name)
        self._emit("disconnected", name)

    async def disconnect_all(self) -> None:
        """Close every transport concurrently under one deadline, then empty the registries (S19)."""
        names = set(self._connections) | set(self._pending_connections) | set(self._pending_tool_loads)
        for name in set(self._epochs) | names:
            self._epochs[name] = self._epochs.get(name, 0) + 1
        for attempt in [*self._pending_connections.values(), *self._pending_tool_loads.values()]:
            attempt.scope.cancel()
        connections = list(self._connections.values())
        self._connections.clear()
        self._pending_connections.clear()
        self._pending_tool_loads.clear()
        self._sources.clear()
        self._configs.clear()
        self._errors.clear()
        self._catalog.clear()
        self._rebuild_tools()
        await self._close_all(connections)
        for name in sorted(names):
            self._emit("disconnected", name)

    async def _close_all(self, connections: Iterable[ServerConnection]) -> None:
        async def close_one(connection: ServerConnection) -> None:
            try:
                await connection.close()
            except Exception:
                logger.warning("Closing MCP server %s failed", connection.name, exc_info=True)

        with anyio.move_on_after(self.shutdown_timeout_s):
            async with anyio.create_task_group() as closers:
                for connection in connections:
                    closers.start_soon(close_one, connection)


async def _wait_all(attempts: Iterable[_Attempt]) -> None:
    for attempt in attempts:
        await attempt.done.wait()


def _filter_tools(tools: Iterable[ToolDefinition], config: ServerConfig) -> tuple[ToolDefinition, ...]:
    """Apply a server's allow-list and deny-list (globs; the deny-list always wins)."""

    def allowed(name: str) -> bool:
        if any(fnmatch.fnmatchcase(name, pattern) for pattern in config.exclude_tools):
            return False
        if config.include_tools is None:
            return True
        return any(fnmatch.fnmatchcase(name, pattern) for pattern in config.include_tools)

    return tuple(tool for tool in tools if allowed(tool.name))
