"""Starting servers: one server's connect-and-list pipeline, and the connect round behind
the start-up gate.

Every server of a round starts at once, each in its own task of the manager's group. When
the gate's deadline passes (``startup_timeout_ms``), finished servers give live tools,
failed ones a ``Failure`` each, and servers still starting give *deferred* tools from the
tool cache; one with no cache entry is waited for or left to join later (``decide_gate``).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import anyio

from mcpfleet.client.opening import import_off_loop, open_connection
from mcpfleet.client.options import ConnectionOptions
from mcpfleet.errors import EraMismatchError, Failure, MCPFleetError
from mcpfleet.fleet.questions import FleetQuestions
from mcpfleet.fleet.registry import Attempt, ServerRegistry, ServerSlot
from mcpfleet.fleet.settings import FleetSettings, UncachedPolicy
from mcpfleet.fleet.tool_list import AnyTool, ToolSlice, filter_tools
from mcpfleet.redaction import redact_text

if TYPE_CHECKING:
    from mcpfleet.client.connection import NotificationCallback, ServerConnection
    from mcpfleet.client.definitions import EraVerdict, ToolDefinition
    from mcpfleet.config.model import DiscoveryResult, ServerConfig, SourceInfo
    from mcpfleet.fleet.cache import MCPToolCache

logger = logging.getLogger(__name__)


@dataclass
class StartupReport:
    """What a connect round (or a reload) hands back."""

    tools: list[AnyTool] = field(default_factory=list)
    failures: list[Failure] = field(default_factory=list)
    """One per server that could not start, in the order the round met them."""
    connected_servers: list[str] = field(default_factory=list)
    exa_api_keys: list[str] = field(default_factory=list)
    """Filled by the agent layer, which asks for the Exa filter (``mcpfleet.config.exa``)."""
    deferred_servers: list[str] = field(default_factory=list)
    """Servers still starting whose tools came from the cache."""
    late_servers: list[str] = field(default_factory=list)
    """Servers still starting without a cache entry, left to join later (``late-join``)."""
    waited_servers: list[str] = field(default_factory=list)
    """Servers without a cache entry that the gate waited for past its deadline (``wait``)."""
    disabled_servers: list[str] = field(default_factory=list)
    """Servers switched off in their config: skipped on purpose, so never among the failures."""

    @property
    def errors(self) -> dict[str, str]:
        """Each failure's message by subject (a server's name, or ``.mcp.json``)."""
        return {failure.subject: failure.message for failure in self.failures}

    def add_failure(self, failure: Failure) -> None:
        """Record a failure, unless its subject already has one (the first says what happened)."""
        if all(known.subject != failure.subject for known in self.failures):
            self.failures.append(failure)

    def complete_from(self, discovery: DiscoveryResult) -> None:
        """Add the disabled servers, and a failure for every entry that cannot start.

        A disabled server is the user's decision, not a failure: it is listed apart and never
        reported as an error (nor warned about, nor counted by ``--strict``).
        """
        for entry in discovery.entries:
            if entry.name in discovery.configs or entry.name in self.errors:
                continue
            if entry.state == "disabled":
                self.disabled_servers.append(entry.name)
            elif entry.state == "pending-approval":
                message = (
                    f'MCP server "{entry.name}" from {entry.source.path} is a project server awaiting '
                    f"approval: run `mcpfleet approve {entry.name}` (or pass --trust-project)"
                )
                self.add_failure(Failure(entry.name, "approval", message))
            elif entry.state == "invalid":
                self.add_failure(Failure(entry.name, "invalid", entry.reason))


@dataclass(frozen=True)
class GateDecision:
    """What the gate does with each server still starting when its deadline passed."""

    deferred: tuple[str, ...] = ()
    """Served from the cache now; their live tools replace the cached ones later."""
    waited: tuple[str, ...] = ()
    late: tuple[str, ...] = ()


def decide_gate(unfinished: Mapping[str, bool], on_uncached: UncachedPolicy) -> GateDecision:
    """``unfinished`` maps each server still starting to whether the cache holds tools for it.

    A cached server is deferred. One with nothing cached is waited for (``wait``: correctness
    before speed, the agent never starts without a server's tools) or left to join later.
    """
    deferred = tuple(name for name, cached in unfinished.items() if cached)
    uncached = tuple(name for name, cached in unfinished.items() if not cached)
    if on_uncached == "wait":
        return GateDecision(deferred=deferred, waited=uncached)
    return GateDecision(deferred=deferred, late=uncached)


def remember_tools(
    cache: MCPToolCache | None,
    slot: ServerSlot,
    connection: ServerConnection,
    definitions: Sequence[ToolDefinition],
    listed_at: float,
) -> None:
    """Write one server's fresh tool list (and how to reach it next time) to the tool cache."""
    if cache is None:
        return
    try:
        cache.put(
            slot.name,
            slot.config.fingerprint,
            definitions,
            server_info=connection.server_info,
            protocol_version=connection.protocol_version,
            era=connection.era_verdict,
            listed_at=listed_at,
        )
    except Exception:
        logger.warning("Could not write the tool cache for %s", slot.name, exc_info=True)


class Connector:
    """Runs attempts: connect one server, list its tools, register both, write the cache."""

    def __init__(
        self,
        registry: ServerRegistry,
        settings: FleetSettings,
        *,
        handler_for: Callable[[Attempt], NotificationCallback],
        on_ready: Callable[[Attempt, ServerConnection], None],
    ) -> None:
        self._registry = registry
        self._settings = settings
        self._handler_for = handler_for
        self._on_ready = on_ready
        self._connection = ConnectionOptions(
            cwd=settings.cwd,
            # One set of capabilities for every fleet (``questions.py``), whatever its host passed.
            server_requests=settings.server_requests
            or FleetQuestions(settings.elicitation_handler, settings.sampling_handler, settings.roots),
            probe_timeout_ms=settings.probe_timeout_ms,
            log_level=settings.log_level,
        )
        """How every server of the fleet is connected; each attempt adds its own three fields."""

    async def connect_round(
        self, configs: Mapping[str, ServerConfig], sources: Mapping[str, SourceInfo]
    ) -> StartupReport:
        """Start every server not already running, then apply the gate."""
        registry = self._registry
        task_group = registry.task_group
        registry.startup_over = False
        attempts: list[Attempt] = []
        report = StartupReport()
        for name, config in configs.items():
            known = registry.get(name)
            if known is not None and known.running:
                if name in sources:
                    known.source = sources[name]
                continue
            slot = registry.enlist(name, config, sources.get(name))
            attempt = slot.attempt = self.new_attempt(slot)
            registry.emit("connecting", name)
            task_group.start_soon(self.run, attempt)
            attempts.append(attempt)

        timeout_ms = self._settings.startup_timeout_ms
        with anyio.move_on_after(timeout_ms / 1000 if timeout_ms > 0 else None):
            await _wait_all(attempts)

        unfinished = [a for a in attempts if not a.done.is_set() and not a.slot.is_retired()]
        cached = {a.name: filter_tools(a.cached.tools, a.config) if a.cached else () for a in unfinished}
        decision = decide_gate(
            {name: bool(tools) for name, tools in cached.items()}, self._settings.on_uncached
        )
        for attempt in unfinished:
            if attempt.name in decision.deferred:
                attempt.slot.tools = ToolSlice(cached[attempt.name], deferred=True)
        registry.rebuild_tools()
        report.deferred_servers = list(decision.deferred)
        report.waited_servers = list(decision.waited)
        report.late_servers = list(decision.late)
        await _wait_all(a for a in unfinished if a.name in decision.waited)
        registry.startup_over = True

        for attempt in attempts:
            if attempt.error is not None:
                report.add_failure(Failure(attempt.name, "connect", attempt.error))
        report.tools = list(registry.tools)
        report.connected_servers = sorted(
            n for n, s in registry.items() if s.connection_status == "connected"
        )
        return report

    def new_attempt(self, slot: ServerSlot, *, reconnect: bool = False) -> Attempt:
        cache = self._registry.cache
        cached = cache.get(slot.name, slot.config.fingerprint) if cache is not None else None
        return Attempt(slot, slot.config, reconnect=reconnect, cached=cached)

    async def run(self, attempt: Attempt) -> None:
        """Connect, list tools, cache them: one server's pipeline, run in the manager's group."""
        slot = attempt.slot
        timings = slot.timings
        timings.clear()
        started = time.perf_counter()
        connection: ServerConnection | None = None
        era = attempt.cached.era if attempt.cached is not None else None
        try:
            with attempt.scope:
                while True:
                    try:
                        connection = await self._open(attempt, era)
                        if slot.is_retired():
                            return
                        timings.update(connection.timings_ms)
                        slot.connection = connection
                        attempt.listing = True
                        listed = time.perf_counter()
                        # Wall time of the request, so the cache can order answers across processes.
                        listed_at = time.time()
                        definitions = filter_tools(await connection.list_tools(), attempt.config)
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
                            if slot.connection is connection:
                                slot.connection = None
                            connection = None
                        if slot.is_retired():
                            return
                        attempt.listing = False
                timings["list"] = (time.perf_counter() - listed) * 1000
                timings["total"] = (time.perf_counter() - started) * 1000
                if slot.is_retired():
                    return
                if slot.attempt is attempt:
                    slot.attempt = None
                slot.tools = ToolSlice(definitions, deferred=False)
                remember_tools(self._registry.cache, slot, connection, definitions, listed_at)
                slot.error = None
                slot.stderr_tail = ()
                self._registry.rebuild_tools()
                self._registry.emit("connected", slot.name)
                self._registry.emit("tools_changed", slot.name)
                self._on_ready(attempt, connection)
                connection = None  # registered: the slot owns it now
        except Exception as error:
            message = str(error) if isinstance(error, MCPFleetError) else f"{type(error).__name__}: {error}"
            # Connect errors name the command line or URL, and quote the server's stderr.
            attempt.error = redact_text(message)
            # A failed reconnect attempt is the supervisor's business; the stale tools stay.
            if not slot.is_retired() and not attempt.reconnect:
                if slot.tools is not None and slot.tools.deferred:
                    # Cached tools of a server that failed to start would only ever return errors.
                    self._registry.set_tools(slot, None)
                self._registry.fail(slot, attempt.error)
        finally:
            if slot.is_retired() or attempt.error is not None:
                if connection is not None:
                    with anyio.CancelScope(shield=True):
                        await connection.close()
                if not slot.is_retired():
                    slot.connection = None
            if slot.attempt is attempt:
                slot.attempt = None
            attempt.done.set()

    async def _open(self, attempt: Attempt, era: EraVerdict | None) -> ServerConnection:
        return await open_connection(
            self._registry.task_group,
            attempt.name,
            attempt.config,
            self._connection,
            on_notification=self._handler_for(attempt),
            era=era,
            auth=await _auth_for(attempt.name, attempt.config),
        )


async def _auth_for(name: str, config: ServerConfig) -> object | None:
    """The OAuth provider for an HTTP server that carries no credentials of its own."""
    if config.transport not in ("http", "sse"):
        return None
    if any(key.lower() == "authorization" for key in config.headers):
        return None
    oauth = await import_off_loop("mcpfleet.auth.provider")
    provider: object = oauth.oauth_auth_for(name, config, interactive=False)
    return provider


async def _wait_all(attempts: Iterable[Attempt]) -> None:
    for attempt in attempts:
        await attempt.done.wait()
