"""A scope: one ``MCPManager`` holding the backends one group of sessions shares.

The user scope holds the user-level servers every session shares, a project scope those of
one project root (and approval), a session scope those one session has to itself. A scope
starts nothing on its own: it runs the servers that some attached view uses (``users``),
those that no view uses any more but whose idle time has not run out (``lingering``; a
``keepWarm`` one lingers for ever). ``converge`` brings the manager to that set by the
fleet's own reload by difference: a server no longer wanted stops, an edited one restarts,
a newly wanted one starts (its tools from the cache until it answers).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Literal

import anyio
import anyio.abc

from mcpfleet.config.model import DiscoveryResult, ServerConfig, SourceInfo
from mcpfleet.fleet.manager import MCPManager

if TYPE_CHECKING:
    from mcpfleet.client.inbound import ServerRequestHandler
    from mcpfleet.fleet.cache import MCPToolCache

logger = logging.getLogger(__name__)

ScopeKind = Literal["user", "project", "session"]

BUSY_RECHECK_S = 1.0
"""How soon an idle server that still had a call running is looked at again."""
SCOPE_STARTUP_TIMEOUT_MS = 1
"""A scope's start-up gate hands out at once what is ready or cached: each view then waits for
its own servers as long as its session asked (its ``startup_timeout_ms``)."""


@dataclass(frozen=True)
class Wanted:
    """A server a scope may run, as the latest discovery gives it."""

    config: ServerConfig
    source: SourceInfo


@dataclass(eq=False)
class Scope:
    """One group of backends and who uses each."""

    kind: ScopeKind
    cwd: Path
    project: str | None
    """The project root of a project or session scope; ``None`` for the user scope."""
    available: dict[str, Wanted] = field(default_factory=dict)
    """What the scope may run now, by name: the last discovery's entries of this scope."""
    users: dict[str, set[str]] = field(default_factory=dict)
    """Per server, the sessions whose view routes it here now."""
    seen_by: dict[str, set[str]] = field(default_factory=dict)
    """Per server, every attached session that routed it here (a view keeps its place after
    its route moved: a call it started here may still ask its client something)."""
    lingering: dict[str, float] = field(default_factory=dict)
    """Servers no session uses, and since when (``time.monotonic()``)."""
    unshared: set[str] = field(default_factory=set)
    """Servers whose sessions moved to backends of their own: this one stops as soon as no
    call runs on it any more."""
    manager: MCPManager | None = None
    closed: bool = False
    _close: anyio.Event = field(default_factory=anyio.Event)
    _done: anyio.Event = field(default_factory=anyio.Event)
    _converging: anyio.Lock = field(default_factory=anyio.Lock)
    _opening: anyio.Lock = field(default_factory=anyio.Lock)

    def __str__(self) -> str:
        return f"{self.kind} scope of {self.project}" if self.project is not None else "user scope"

    # -- who uses what ---------------------------------------------------------------------------------------

    def use(self, session: str, name: str) -> None:
        self.users.setdefault(name, set()).add(session)
        self.seen_by.setdefault(name, set()).add(session)
        self.lingering.pop(name, None)
        self.unshared.discard(name)

    def release(self, session: str, name: str) -> None:
        """``session`` no longer routes ``name`` here; the last one starts its idle time."""
        users = self.users.get(name)
        if users is None or session not in users:
            return
        users.discard(session)
        if not users:
            del self.users[name]
            self.lingering[name] = time.monotonic()

    def forget(self, session: str) -> None:
        """``session`` detached: it no longer uses anything here."""
        for name in list(self.users):
            self.release(session, name)
        for name in list(self.seen_by):
            self.seen_by[name].discard(session)
            if not self.seen_by[name]:
                del self.seen_by[name]

    def sessions_of(self, name: str) -> int:
        return len(self.users.get(name, ()))

    def expire(
        self, now: float, idle_timeout_s: float, busy: Callable[[str], bool]
    ) -> tuple[list[str], float | None]:
        """Drop the lingering servers whose idle time ran out (``keepWarm`` ones never do, and
        none while ``busy`` says a call still runs on it); return them and the next moment one
        will, if any."""
        expired: list[str] = []
        next_deadline: float | None = None
        for name, since in list(self.lingering.items()):
            wanted = self.available.get(name)
            if wanted is None:
                expired.append(name)
                continue
            if wanted.config.keep_warm and name not in self.unshared:
                continue
            timeout = 0.0 if name in self.unshared else wanted.config.idle_timeout_s
            deadline = since + (idle_timeout_s if timeout is None else timeout)
            if deadline <= now and busy(name):
                deadline = now + BUSY_RECHECK_S
            if deadline <= now:
                expired.append(name)
            elif next_deadline is None or deadline < next_deadline:
                next_deadline = deadline
        for name in expired:
            del self.lingering[name]
            self.unshared.discard(name)
        return expired, next_deadline

    def desired(self) -> dict[str, Wanted]:
        """What should run now: used, or lingering (in its idle time, or kept warm), and still
        in the config."""
        names = set(self.users) | set(self.lingering)
        return {name: wanted for name, wanted in self.available.items() if name in names}

    @property
    def empty(self) -> bool:
        """Nothing used, nothing lingering, nothing held: the scope can close."""
        held = self.manager.get_all_server_names() if self.manager is not None else []
        return not (self.users or self.lingering or self.seen_by or held)

    # -- the manager -----------------------------------------------------------------------------------------

    async def open(
        self,
        task_group: anyio.abc.TaskGroup,
        *,
        cache: MCPToolCache | None,
        server_requests: ServerRequestHandler,
        shutdown_timeout_s: float,
    ) -> MCPManager:
        """The scope's manager, entered in ``task_group`` on first need."""
        async with self._opening:
            if self.manager is None:
                manager = ScopeManager(
                    self,
                    cache=cache,
                    server_requests=server_requests,
                    shutdown_timeout_s=shutdown_timeout_s,
                )
                await task_group.start(self._run, manager, name=f"mcpfleet {self}")
                self.manager = manager
            return self.manager

    async def _run(self, manager: MCPManager, *, task_status: anyio.abc.TaskStatus[None]) -> None:
        try:
            async with manager:
                task_status.started()
                await self._close.wait()
        finally:
            self._done.set()

    async def close(self) -> None:
        """Close every server of the scope (within the fleet's shutdown deadline)."""
        self.closed = True
        async with self._converging:  # a reload under way finishes first: it needs the manager
            self._close.set()
        if self.manager is not None:
            await self._done.wait()

    async def converge(self) -> None:
        """Start, stop and restart servers until the manager runs ``desired()`` (nothing when
        the scope is closed or was never opened): each view waits for its own servers."""
        async with self._converging:
            if self.manager is not None and not self.closed:
                await self.manager.reload()


def place(
    scopes: list[Scope],
    name: str,
    wanted: Wanted,
    *,
    session: str,
    current: Scope | None,
    new_scope: Callable[[], Scope],
) -> Scope:
    """The scope of ``scopes`` (one share's, each holding at most one backend per name) that
    runs ``name`` for ``session`` as ``wanted`` resolves it, which may run it now.

    A server's identity is its resolved entry: the scope that has ``name`` with the very same
    entry is shared (``current``, where the session runs it now, first); else the first scope
    where no other session uses ``name`` nor does it linger there takes it (a session whose
    entry changed restarts its own backend in place); else a new scope is added. Two sessions
    whose entries differ (another ``${TOKEN}``) get two backends of the same name.
    """
    from mcpfleet.daemon.sharing import same_backend

    open_scopes = [scope for scope in scopes if not scope.closed]
    if current in open_scopes:
        open_scopes.remove(current)
        open_scopes.insert(0, current)
    for scope in open_scopes:
        held = scope.available.get(name)
        if held is not None and same_backend(held.config, wanted.config) and name not in scope.unshared:
            return scope
    for scope in open_scopes:
        if not (scope.users.get(name, set()) - {session}) and name not in scope.lingering:
            scope.available[name] = wanted
            return scope
    scope = new_scope()
    scopes.append(scope)
    scope.available[name] = wanted
    return scope


class ScopeManager(MCPManager):
    """The manager of one scope: its "discovery" is what the scope wants running, so the
    manager's reload by difference converges on it."""

    def __init__(
        self,
        scope: Scope,
        *,
        cache: MCPToolCache | None,
        server_requests: ServerRequestHandler,
        shutdown_timeout_s: float,
    ) -> None:
        super().__init__(
            scope.cwd,
            cache=cache,
            startup_timeout_ms=SCOPE_STARTUP_TIMEOUT_MS,
            on_uncached="late-join",
            server_requests=server_requests,
            shutdown_timeout_s=shutdown_timeout_s,
            # Every log a 2026-07-28 backend writes: each client's own level filters them.
            log_level="debug",
        )
        self.scope = scope

    def discover(self) -> DiscoveryResult:
        desired = self.scope.desired()
        result = DiscoveryResult(
            configs={name: wanted.config for name, wanted in desired.items()},
            sources={name: wanted.source for name, wanted in desired.items()},
        )
        self.last_discovery = result
        return result
