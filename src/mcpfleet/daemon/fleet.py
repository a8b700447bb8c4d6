"""The daemon's fleet, shared by every host session it serves (B9).

``SharedFleet`` holds the scopes (``daemon.scopes``): **user scopes** for the user-level
servers every session shares, run in the neutral folder; **project scopes** per project
root (real path) and approval mode, for that project's servers, run in the project; one
**session scope** per attached session for the servers it must have to itself. Which entry
goes where is ``daemon.sharing``'s decision, from two discoveries: the project's (what a
session there sees, its profile applied, with its precedence: a project entry wins over a
user entry of the same name) and the user's own (how a user-level entry runs when shared).

A server's identity is its resolved entry. Each session's discoveries substitute its own
values (``environment``: what its shim sent, never the daemon's environment), and within a
share a backend is used by the sessions whose resolved entries for it are equal
(``scopes.place``): two sessions with another ``${TOKEN}`` get two backends of one name, each
in a scope of its own; a third with the first one's value shares the first one's.

``attach(spec, ...)`` gives one session a ``FleetView`` (``daemon.view``) over its routes and
starts what it needs (lazily: nothing runs before a session needs it; a server is served
from the tool cache until it answers). A server no session uses is stopped after its idle
timeout (``idleTimeout`` of the entry, else the daemon's), unless it is ``keepWarm``.

Config files are watched (``daemon.discoveries`` holds the projects in use and every
discovery, with one watcher for all their files): an edit is rediscovered, the views' routes
recomputed, and every scope converges by difference (removed servers stop, edited ones
restart, new ones start if a session sees them); each view tells its gateway, which
announces ``list_changed`` to the clients that see the change.

Backends' questions (sampling, elicitation, roots) reach the session whose call caused them
(``daemon.routing``); a server whose question cannot be tied to one session gets one backend
per session from then on (remembered in the state folder, ``sharing.PerSessionServers``).
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import AsyncIterator, Iterable, Iterator, Mapping
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Self

import anyio
import anyio.abc

from mcpfleet import paths
from mcpfleet.config.discovery import EntryFilter
from mcpfleet.config.profiles import DaemonSettings, Profile
from mcpfleet.daemon.discoveries import (
    Discoveries,
    EnvKey,
    Project,
    SessionFilter,
    environment_key,
    key_of,
)
from mcpfleet.daemon.routing import RequestRouter
from mcpfleet.daemon.scopes import Scope, Wanted, place
from mcpfleet.daemon.sharing import PER_SESSION_FILE, PerSessionServers, assign
from mcpfleet.daemon.view import FleetView, Route
from mcpfleet.errors import Failure
from mcpfleet.fleet import settings as defaults
from mcpfleet.fleet.cache import MCPToolCache
from mcpfleet.fleet.memory import process_tree
from mcpfleet.fleet.registry import Phase
from mcpfleet.fleet.startup import StartupReport

if TYPE_CHECKING:
    from mcpfleet.contract.wire import FleetSpec
    from mcpfleet.gateway.relay import Relay

logger = logging.getLogger(__name__)


class SharedFleet(anyio.AsyncContextManagerMixin):
    """The daemon's servers, shared by the views of the sessions it serves:
    ``async with SharedFleet(settings) as fleet``, then ``fleet.attach(...)`` per session."""

    def __init__(
        self,
        settings: DaemonSettings,
        *,
        cache: MCPToolCache | Literal["default"] | None = "default",
        watch_interval_s: float = defaults.WATCH_INTERVAL_S,
        shutdown_timeout_s: float = defaults.SHUTDOWN_TIMEOUT_S,
    ) -> None:
        self.settings = settings
        self.shutdown_timeout_s = shutdown_timeout_s
        self._cache_setting = cache
        self._cache: MCPToolCache | None = None
        self._task_group: anyio.abc.TaskGroup | None = None
        self._views: dict[str, FleetView] = {}
        self._discoveries = Discoveries(watch_interval_s)
        self._user_scopes: list[Scope] = []
        self._per_session: PerSessionServers | None = None
        self._wake_reaper: anyio.Event | None = None

    # -- lifetime --------------------------------------------------------------------------------------------

    @asynccontextmanager
    async def __asynccontextmanager__(self) -> AsyncIterator[Self]:
        self._cache = MCPToolCache.open_default() if self._cache_setting == "default" else self._cache_setting
        self._per_session = PerSessionServers(paths.user_state_dir() / PER_SESSION_FILE)
        self._wake_reaper = anyio.Event()
        await self._discoveries.open()
        try:
            async with anyio.create_task_group() as task_group:
                self._task_group = task_group
                try:
                    task_group.start_soon(
                        self._discoveries.follow, self._config_changed, name="mcpfleet config"
                    )
                    task_group.start_soon(self._reap, name="mcpfleet idle servers")
                    yield self
                finally:
                    # Shielded: a cancelled daemon still closes its servers (each close is bounded).
                    with anyio.CancelScope(shield=True):
                        await self._close_all()
                    self._task_group = None
                    task_group.cancel_scope.cancel()
        finally:
            if self._cache_setting == "default" and self._cache is not None:
                self._cache.close()
            self._cache = None

    async def _close_all(self) -> None:
        async with anyio.create_task_group() as closing:
            for scope in self._scopes():
                closing.start_soon(scope.close)

    @property
    def cache(self) -> MCPToolCache | None:
        return self._cache

    @property
    def idle(self) -> bool:
        """No view is attached."""
        return not self._views

    def apply_settings(self, settings: DaemonSettings) -> None:
        """Take the daemon's settings as edited while it runs: idle stops follow them at once
        (a server lingering past its new timeout stops now)."""
        self.settings = settings
        self._wake()

    def _running(self) -> anyio.abc.TaskGroup:
        if self._task_group is None:
            raise RuntimeError("the shared fleet is not running: use it inside `async with SharedFleet(...)`")
        return self._task_group

    # -- sessions --------------------------------------------------------------------------------------------

    def attach(
        self,
        spec: FleetSpec,
        *,
        session_id: str,
        host: str | None,
        profile: Profile | None,
        entry_filter: EntryFilter | None = None,
        relay: Relay | None = None,
        environment: Mapping[str, str] | None = None,
    ) -> AbstractAsyncContextManager[FleetView]:
        """The view of one session on the fleet ``spec`` describes, for as long as the block
        runs; its servers start now (those not running yet). ``profile`` is the one
        ``spec.profile`` names, read by the caller with the rest of the session's settings
        (the view sees its servers only). ``entry_filter`` leaves out more, as discovery's
        hook of the same name does in-process (the agent's Exa filter, for a CLI command or
        an agent session). ``relay`` must be the one its ``Gateway`` is given: the backends'
        questions caused by this session go there. ``environment`` is what the session's
        entries are resolved with (the values its client sent; this process's environment
        by default)."""
        return self._attached(
            spec,
            session_id=session_id,
            host=host,
            session_filter=SessionFilter(profile, entry_filter),
            relay=relay,
            environment=environment_key(os.environ if environment is None else environment),
        )

    async def variables_of(self, spec: FleetSpec | None) -> frozenset[str]:
        """The variables whose values a connection's client is asked for (``Discoveries.variables_of``)."""
        return await self._discoveries.variables_of(spec)

    @asynccontextmanager
    async def _attached(
        self,
        spec: FleetSpec,
        *,
        session_id: str,
        host: str | None,
        session_filter: SessionFilter,
        relay: Relay | None,
        environment: EnvKey,
    ) -> AsyncIterator[FleetView]:
        self._running()
        if session_id in self._views:
            raise ValueError(f"session {session_id!r} is attached already")
        project = await self._discoveries.project_for(spec, session_filter, environment)
        project.sessions[session_id] = (session_filter, environment)
        try:
            async with anyio.create_task_group() as view_tasks:
                view = FleetView(
                    self,
                    spec=spec,
                    session_id=session_id,
                    host=host,
                    project=project.root,
                    session_filter=session_filter,
                    relay=relay,
                    session_scope=Scope("session", Path(project.root), project.root),
                    task_group=view_tasks,
                    environment=environment,
                )
                self._views[session_id] = view
                try:
                    self._route(view, project)
                    await self._converge_view(view)
                    yield view
                finally:
                    with anyio.CancelScope(shield=True):
                        await self._detach(view)
                    view_tasks.cancel_scope.cancel()
        finally:
            # Its discoveries are kept (until the next config change, or the project closes):
            # a host that opens its session again gets it without reading the files again.
            project.sessions.pop(session_id, None)
            self._wake()

    async def _detach(self, view: FleetView) -> None:
        self._views.pop(view.session_id, None)
        view.unfollow_all()
        for scope in self._scopes():
            scope.forget(view.session_id)
        await view.session_scope.close()
        logger.info("session %s (%s) detached", view.session_id, view.host or "unknown host")

    async def startup_report(self, view: FleetView) -> StartupReport:
        """Wait for the servers ``view`` routes (its attachment started them) as long as the
        session's start-up timeout says, and report as a manager's connect round does."""
        await view.wait_settled(view.spec.startup_timeout_ms)
        report = StartupReport()
        for name in view.get_all_server_names():
            state = view.get_server_state(name)
            if state.state in (Phase.FAILED, Phase.SUSPENDED):
                report.add_failure(Failure(name, "connect", state.last_error or str(state.state)))
            elif state.status == "connecting":
                (report.deferred_servers if view.is_deferred(name) else report.late_servers).append(name)
        report.tools = view.get_tools()
        report.connected_servers = [
            name for name in view.get_all_server_names() if view.get_connection_status(name) == "connected"
        ]
        return report

    # -- who runs what ---------------------------------------------------------------------------------------

    def _route(self, view: FleetView, project: Project) -> None:
        """Compute ``view``'s routes from the current discoveries (its filter's and
        environment's): each server to the scope of its share that runs it as this session
        resolves it."""
        assert self._per_session is not None
        discovery = project.discoveries[view.session_filter, view.environment]
        assignments = assign(discovery, self._discoveries.user[view.environment], self._per_session.known)
        routes: dict[str, Route] = {}
        for name, assignment in assignments.items():
            current = view.routes.get(name)
            if assignment.share == "session":
                scope = view.session_scope
            else:
                family, new_scope = (
                    (self._user_scopes, self._new_user_scope)
                    if assignment.share == "user"
                    else (project.scopes, project.new_scope)
                )
                scope = place(
                    family,
                    name,
                    Wanted(assignment.config, assignment.source),
                    session=view.session_id,
                    current=current.scope if current is not None else None,
                    new_scope=new_scope,
                )
            routes[name] = Route(scope, assignment)
        view.session_scope.available = {
            name: Wanted(route.assignment.config, route.assignment.source)
            for name, route in routes.items()
            if route.scope is view.session_scope
        }
        view.set_routes(routes)
        view.discovery = discovery

    def _new_user_scope(self) -> Scope:
        return Scope("user", paths.neutral_working_dir(), None)

    async def _open(self, scope: Scope) -> None:
        await scope.open(
            self._running(),
            cache=self._cache,
            server_requests=RequestRouter(
                scope,
                relays_of=lambda name: self._relays_of(scope, name),
                on_ambiguous=lambda name: self._needs_backend_per_session(scope, name),
            ),
            shutdown_timeout_s=self.shutdown_timeout_s,
        )

    async def _converge_view(self, view: FleetView) -> None:
        await self._converge(await self._open_routed(view))

    async def _open_routed(self, view: FleetView) -> set[Scope]:
        """Open the scopes ``view`` routes to (unless closed) and have it hear them; return them."""
        scopes = {route.scope for route in view.routes.values()}
        for scope in scopes:
            if not scope.closed:
                await self._open(scope)
                view.follow(scope)
        return scopes

    async def _converge(self, scopes: set[Scope]) -> None:
        async with anyio.create_task_group() as converging:
            for scope in scopes:
                converging.start_soon(_converge_logged, scope)

    def _scopes(self) -> Iterator[Scope]:
        yield from self._user_scopes
        for project in self._discoveries.projects.values():
            yield from project.scopes
        for view in self._views.values():
            yield view.session_scope

    def _relays_of(self, scope: Scope, name: str) -> list[Relay]:
        sessions = scope.seen_by.get(name, set())
        views = [view for view in self._views.values() if view.session_id in sessions]
        return [view.relay for view in sorted(views, key=lambda view: view.since) if view.relay is not None]

    # -- changes ---------------------------------------------------------------------------------------------

    async def _config_changed(self) -> None:
        """The config files changed and every discovery was read again: reroute by them."""
        await self._reroute(config_changed=True)

    def config_errors(self) -> list[dict[str, str]]:
        """The ``errors`` rows of ``daemon status --json``: what the config files in use say wrong."""
        return self._discoveries.config_errors()

    def _refresh_idle_servers(self) -> None:
        """After a config change, the servers no session uses: one whose entry was edited or
        removed stops (its sessions' values are gone, so it cannot be resolved again; the next
        session that needs it starts it as edited); the others take the entry's new daemon
        keys (``keepWarm``, ``idleTimeout``), which change how long they run, not what runs."""
        current = self._discoveries.current_entries()
        for scope in self._scopes():
            if scope.kind == "session":
                continue
            for name in list(scope.lingering):
                wanted = scope.available.get(name)
                edited = None if wanted is None else current.get((name, wanted.config.fingerprint))
                if wanted is None or edited is None:
                    del scope.lingering[name]
                    scope.available.pop(name, None)
                    continue
                scope.available[name] = Wanted(
                    replace(wanted.config, keep_warm=edited.keep_warm, idle_timeout_s=edited.idle_timeout_s),
                    wanted.source,
                )

    async def _reroute(self, *, config_changed: bool = False) -> None:
        """Recompute every view's routes, then bring every scope to what it should run now
        (``config_changed``: after a config change, see ``_refresh_idle_servers``)."""
        for view in list(self._views.values()):
            project = self._discoveries.projects.get(key_of(view.spec))
            if project is not None:
                self._route(view, project)
        if config_changed:
            self._refresh_idle_servers()
        touched = set(self._scopes())
        for view in list(self._views.values()):
            await self._open_routed(view)
        await self._converge({scope for scope in touched if scope.manager is not None})
        self._wake()

    def _needs_backend_per_session(self, scope: Scope, name: str) -> None:
        """A question of ``scope``'s server could not be tied to one session: from now on each
        session gets a backend of its own (this one lingers until its idle time runs out)."""
        assert self._per_session is not None
        wanted = scope.available.get(name)
        if wanted is None or scope.kind == "session":
            return
        if self._per_session.add(name, wanted.config.fingerprint):
            logger.warning(
                "MCP server %s asked a question while two sessions had calls in flight on it: "
                "one backend per session from now on",
                name,
            )
            scope.unshared.add(name)
            self._running().start_soon(self._reroute, name=f"mcpfleet {name} per session")

    # -- idle servers ----------------------------------------------------------------------------------------

    async def _reap(self) -> None:
        """Stop servers no session has used for their idle time, and close projects nobody uses."""
        while True:
            now = time.monotonic()
            next_deadline: float | None = None
            expiring: set[Scope] = set()
            for scope in list(self._scopes()):
                expired, deadline = scope.expire(
                    now, self.settings.idle_timeout_s, partial(self._busy, scope)
                )
                if expired:
                    logger.info("idle for their timeout, stopping: %s", ", ".join(sorted(expired)))
                    expiring.add(scope)
                if deadline is not None and (next_deadline is None or deadline < next_deadline):
                    next_deadline = deadline
            if expiring:
                await self._converge({scope for scope in expiring if scope.manager is not None})
            await self._close_unused_projects()
            wake = self._wake_reaper
            assert wake is not None
            with anyio.move_on_after(
                None if next_deadline is None else max(0.0, next_deadline - time.monotonic())
            ):
                await wake.wait()
            self._wake_reaper = anyio.Event()

    def _busy(self, scope: Scope, name: str) -> bool:
        """Whether a call of a session that used ``scope``'s server still runs on that name."""
        return any(relay.flights_on(name) for relay in self._relays_of(scope, name))

    def _wake(self) -> None:
        """Have the reaper look again (a server may have started lingering)."""
        if self._wake_reaper is not None:
            self._wake_reaper.set()

    async def _close_unused_projects(self) -> None:
        for key, project in list(self._discoveries.projects.items()):
            if project.sessions or not all(scope.empty for scope in project.scopes):
                await _close_empty(project.scopes)
                continue
            for scope in self._discoveries.close_project(key).scopes:
                await scope.close()
        await _close_empty(self._user_scopes)

    # -- status ----------------------------------------------------------------------------------------------

    def status(self) -> list[dict[str, Any]]:
        """The ``servers`` rows of ``daemon status --json``: one per backend the daemon holds."""
        return backend_rows(self._scopes())

    def scopes(self) -> list[Scope]:
        """Every scope running or about to (the dashboard's rows, ``daemon.dashboard``)."""
        return list(self._scopes())

    def projects_in_use(self) -> list[Project]:
        return list(self._discoveries.projects.values())


def backend_rows(scopes: Iterable[Scope]) -> list[dict[str, Any]]:
    """One status row per backend the ``scopes`` run: its state, share, sessions, memory, idle time."""
    now = time.monotonic()
    rows: list[dict[str, Any]] = []
    for scope in scopes:
        manager = scope.manager
        if manager is None:
            continue
        for name in manager.get_all_server_names():
            state = manager.get_server_state(name)
            since = scope.lingering.get(name)
            wanted = scope.available.get(name)
            tree = process_tree(state.pid) if state.pid is not None else None
            rows.append(
                {
                    "name": name,
                    "state": str(state.state),
                    "share": scope.kind,
                    "sessions": scope.sessions_of(name),
                    "pid": state.pid,
                    "rss_bytes": tree.rss_bytes if tree is not None else None,
                    "processes": tree.processes if tree is not None else 0,
                    "idle_s": round(now - since, 3) if since is not None else 0.0,
                    "project": scope.project,
                    "keep_warm": wanted is not None and wanted.config.keep_warm,
                }
            )
    return rows


async def _close_empty(scopes: list[Scope]) -> None:
    """Close the scopes of ``scopes`` that run and hold nothing (one of a name's other
    resolutions, whose sessions are gone); a session that needs one again opens a new one."""
    for scope in [scope for scope in scopes if scope.empty]:
        scopes.remove(scope)  # no await before it closes: nothing is placed in it meanwhile
        await scope.close()


async def _converge_logged(scope: Scope) -> None:
    try:
        await scope.converge()
    except Exception:
        logger.exception("the %s could not start or stop its servers", scope)
