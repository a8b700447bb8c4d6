"""One record per server, and the registry that holds them.

Everything the fleet knows about one server lives in its ``ServerSlot``: config, source,
the registered connection, the attempt in flight, the reconnection, its tools, its last
error, timings, stderr tail, crash breaker and re-list rhythm. The registry is the only
writer of what is announced: it emits the events, and ``retire`` is the one place that
ends a server. A retired slot is never reused: work started for it (an attempt, a watch,
a re-list) holds the slot and sees it ``is_retired()``, so a server removed and added again is a
new slot that the old work can never touch.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING, Literal

import anyio
import anyio.abc

from mcpfleet.config.model import ServerConfig, SourceInfo
from mcpfleet.fleet.events import EventHub, EventKind, ManagerEvent
from mcpfleet.fleet.supervision import Breaker, Supervisor
from mcpfleet.fleet.tool_list import AnyTool, ToolSlice
from mcpfleet.redaction import redact_text

if TYPE_CHECKING:
    from mcpfleet.client.connection import ServerConnection
    from mcpfleet.fleet.cache import CachedServer, MCPToolCache

logger = logging.getLogger(__name__)

STDERR_TAIL_LINES = 10
"""Lines of a server's stderr kept for ``status`` and ``/mcp list``."""

ConnectionStatus = Literal["connected", "connecting", "disconnected"]
"""The short view of a server (``get_connection_status``), derived from its phase."""


class Phase(StrEnum):
    """Where one server is in its life; compares equal to its lowercase name."""

    CONNECTING = "connecting"
    CONNECTED = "connected"
    RECONNECTING = "reconnecting"
    """Its connection was lost and it is being brought back (its tools stay registered)."""
    SUSPENDED = "suspended"
    """It crashed too often: no automatic reconnect until someone asks."""
    FAILED = "failed"
    DISCONNECTED = "disconnected"


@dataclass(frozen=True)
class ServerState:
    """A snapshot of one server, for ``status``, ``/mcp list`` and ``manager.servers``."""

    name: str
    state: Phase
    last_error: str | None = None
    stderr_tail: tuple[str, ...] = ()
    """The last lines the server wrote on stderr (stdio; kept from the lost process)."""
    pid: int | None = None
    recent_crashes: int = 0
    """Losses within the breaker's window."""
    status: ConnectionStatus = "disconnected"
    source: SourceInfo | None = None
    deferred: bool = False
    """Its tools came from the cache and it is still starting."""
    timings_ms: Mapping[str, float] = field(default_factory=dict)
    capabilities: frozenset[str] = frozenset()
    """What the connected server declared it offers (``tools``, ``resources``, ``prompts``…)."""


@dataclass(eq=False)
class Attempt:
    """One in-flight connect-and-list of one server."""

    slot: ServerSlot
    config: ServerConfig
    reconnect: bool = False
    """Part of a reconnection: failures go to the supervisor, stale tools stay registered."""
    cached: CachedServer | None = None
    """The tool-cache entry read when the attempt began: deferred tools at the gate, and the
    era verdict to connect with instead of probing. Read once per attempt."""
    listing: bool = False
    """Connected, its first ``tools/list`` still running."""
    error: str | None = None
    done: anyio.Event = field(default_factory=anyio.Event)
    scope: anyio.CancelScope = field(default_factory=anyio.CancelScope)

    @property
    def name(self) -> str:
        return self.slot.name


@dataclass(eq=False)
class Reconnection:
    """A lost server being brought back by its supervising task."""

    scope: anyio.CancelScope = field(default_factory=anyio.CancelScope)


@dataclass(eq=False)
class ToolRefresh:
    """A coalesced re-list of one server's tools: at most one in flight, and ``dirty`` asks
    for one trailing pass, however many notifications arrive meanwhile."""

    dirty: bool = True
    folded: int = 1
    """Notifications answered by the next pass."""


@dataclass
class RelistPacing:
    """One server's re-list rhythm, kept across refreshes while the server stays in the fleet."""

    last_start: float | None = None
    """When the last re-list after ``list_changed`` started (monotonic seconds)."""
    flood_reported: bool = False


@dataclass(eq=False)
class ServerSlot:
    """Everything the fleet holds for one server."""

    name: str
    config: ServerConfig
    breaker: Breaker
    source: SourceInfo | None = None
    connection: ServerConnection | None = None
    """The registered connection (its tools may still be loading; it may have ended)."""
    attempt: Attempt | None = None
    reconnection: Reconnection | None = None
    tools: ToolSlice | None = None
    error: str | None = None
    timings: dict[str, float] = field(default_factory=dict)
    stderr_tail: tuple[str, ...] = ()
    """Kept from the last lost process, shown until a new connection writes its own."""
    refresh: ToolRefresh | None = None
    pacing: RelistPacing = field(default_factory=RelistPacing)
    _retired: bool = False

    def is_retired(self) -> bool:
        """True once ``retire`` ended this server (a method: it changes under any ``await``)."""
        return self._retired

    @property
    def live(self) -> bool:
        return self.connection is not None and not self.connection.ended

    @property
    def running(self) -> bool:
        """Connected, connecting or being brought back: anything but stopped."""
        return self.connection is not None or self.attempt is not None or self.reconnection is not None

    @property
    def recovering(self) -> bool:
        """Lost and not given up on: being reconnected, or closed and not yet noticed by its watcher."""
        return self.reconnection is not None or (self.connection is not None and self.connection.ended)

    @property
    def connection_status(self) -> ConnectionStatus:
        """A server waiting between reconnect attempts is ``disconnected`` here (nothing is in
        flight); ``phase`` tells ``reconnecting`` and ``suspended`` apart."""
        if self.attempt is not None and self.attempt.listing:
            return "connecting"
        if self.live:
            return "connected"
        if self.attempt is not None:
            return "connecting"
        return "disconnected"

    @property
    def phase(self) -> Phase:
        if self.reconnection is not None:
            return Phase.RECONNECTING
        status = self.connection_status
        if status != "disconnected":
            return Phase(status)
        if self.breaker.suspension is not None:
            return Phase.SUSPENDED
        if self.error is not None:
            return Phase.FAILED
        return Phase.DISCONNECTED

    def snapshot(self) -> ServerState:
        connection = self.connection if self.live else None
        live_tail = connection.stderr_tail(STDERR_TAIL_LINES) if connection is not None else ()
        # A server's stderr may echo its arguments or its environment: secrets are masked.
        tail = tuple(redact_text(line) for line in live_tail or self.stderr_tail)
        return ServerState(
            name=self.name,
            state=self.phase,
            last_error=self.error,
            stderr_tail=tail,
            pid=connection.pid if connection is not None else None,
            recent_crashes=self.breaker.recent_crashes(),
            status=self.connection_status,
            source=self.source,
            deferred=self.tools is not None and self.tools.deferred,
            timings_ms=dict(self.timings),
            capabilities=frozenset(connection.capabilities) if connection is not None else frozenset(),
        )


@dataclass(frozen=True)
class Retired:
    """What a retired server leaves to be awaited: its connection and the attempt cut short."""

    name: str
    connection: ServerConnection | None
    attempt: Attempt | None
    had_tools: bool
    was_running: bool


ToolBuilder = Callable[[Mapping[str, ToolSlice], Callable[[str], str | None]], list[AnyTool]]


class ServerRegistry(Mapping[str, ServerSlot]):
    """Every server's slot, the merged tool list, and the announcements of their changes."""

    def __init__(self, events: EventHub, supervisor: Supervisor, build_tools: ToolBuilder) -> None:
        self.events = events
        self.supervisor = supervisor
        self._build_tools = build_tools
        self._slots: dict[str, ServerSlot] = {}
        self.tools: list[AnyTool] = []
        self.startup_over = False
        """False during a connect round: a failure then is reported by the round, not logged."""
        self._task_group: anyio.abc.TaskGroup | None = None
        self.cache: MCPToolCache | None = None
        """The tool cache, open while the manager runs (None: no cache)."""

    def __getitem__(self, name: str) -> ServerSlot:
        return self._slots[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._slots)

    def __len__(self) -> int:
        return len(self._slots)

    # -- the manager's task group ------------------------------------------------------

    @property
    def task_group(self) -> anyio.abc.TaskGroup:
        self.ensure_running()
        assert self._task_group is not None
        return self._task_group

    def ensure_running(self) -> None:
        if self._task_group is None:
            raise RuntimeError("MCPManager is not running: use `async with MCPManager(...) as manager`")

    @property
    def open(self) -> bool:
        return self._task_group is not None

    def attach(self, task_group: anyio.abc.TaskGroup | None) -> None:
        self._task_group = task_group
        self.events.attach(task_group)

    # -- slots -------------------------------------------------------------------------

    def enlist(self, name: str, config: ServerConfig, source: SourceInfo | None) -> ServerSlot:
        """The slot to (re)start ``name`` with ``config``: a known stopped one is reused, its
        last error cleared and its breaker reset (asking again lifts a suspension)."""
        slot = self._slots.get(name)
        if slot is None:
            slot = self._slots[name] = ServerSlot(name, config, self.supervisor.breaker(), source)
            return slot
        slot.config = config
        if source is not None:
            slot.source = source
        slot.error = None
        slot.breaker.reset()
        return slot

    def retire(self, name: str) -> Retired | None:
        """End one server: cancel its work, forget it, and hand back what still has to close."""
        slot = self._slots.pop(name, None)
        if slot is None:
            return None
        slot._retired = True
        if slot.attempt is not None:
            slot.attempt.scope.cancel()
        if slot.reconnection is not None:
            slot.reconnection.scope.cancel()
        return Retired(name, slot.connection, slot.attempt, slot.tools is not None, slot.running)

    def retire_all(self) -> list[Retired]:
        return [retired for name in list(self._slots) if (retired := self.retire(name)) is not None]

    async def close(self, *retired: Retired | None, within_s: float) -> None:
        """Withdraw the tools of retired servers first (so no subscriber lists or calls a tool
        that is going away), then close what they leave, all under one deadline."""
        gone = sorted((r for r in retired if r is not None), key=lambda r: r.name)
        self.rebuild_tools()
        for server in gone:
            if server.had_tools:
                self.emit("tools_changed", server.name)
        with anyio.move_on_after(within_s):
            async with anyio.create_task_group() as closers:
                for server in gone:
                    if server.connection is not None:
                        closers.start_soon(_close_quietly, server.connection)
                    # An attempt cut short still reaps its process: "stopped" means gone.
                    if server.attempt is not None:
                        closers.start_soon(server.attempt.done.wait)

    # -- announcements -----------------------------------------------------------------

    def emit(self, kind: EventKind, name: str, error: str | None = None, *, announced: bool = False) -> None:
        slot = self._slots.get(name)
        timings = dict(slot.timings) if slot is not None else {}
        self.events.emit(ManagerEvent(kind, name, error, timings, announced))

    def fail(self, slot: ServerSlot, message: str) -> None:
        """Record why a server is down and announce it."""
        message = redact_text(message)
        slot.error = message
        if self.startup_over:
            logger.warning("MCP server %s failed after start-up: %s", slot.name, message)
        self.emit("failed", slot.name, message)

    def set_tools(self, slot: ServerSlot, tools: ToolSlice | None) -> None:
        """Replace one server's slice and announce it."""
        slot.tools = tools
        self.rebuild_tools()
        self.emit("tools_changed", slot.name)

    def rebuild_tools(self) -> None:
        slices = {name: slot.tools for name, slot in self._slots.items() if slot.tools is not None}
        self.tools = self._build_tools(slices, self.provider_name)

    def provider_name(self, name: str) -> str | None:
        slot = self._slots.get(name)
        source = slot.source if slot is not None else None
        return source.provider_name if source is not None else None

    def entry(self, name: str) -> tuple[ServerConfig, SourceInfo | None] | None:
        """The config ``name`` runs with and where it came from (what its pins are keyed by)."""
        slot = self._slots.get(name)
        return (slot.config, slot.source) if slot is not None else None


async def _close_quietly(connection: ServerConnection) -> None:
    try:
        await connection.close()
    except Exception:
        logger.warning("Closing MCP server %s failed", connection.name, exc_info=True)
