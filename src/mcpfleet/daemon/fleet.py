"""The daemon's fleet, shared by every host session it serves (B9).

``SharedFleet`` holds the scopes (``daemon.scopes``): one **user scope** for the user-level
servers every session shares, run in the neutral folder; one **project scope** per project
root (real path) and approval mode, for that project's servers, run in the project; one
**session scope** per attached session for the servers it must have to itself. Which entry
goes where is ``daemon.sharing``'s decision, from two discoveries: the project's (what a
session there sees, with its precedence: a project entry wins over a user entry of the same
name) and the user's own (how a user-level entry runs when shared).

``attach(spec, ...)`` gives one session a ``FleetView`` (``daemon.view``) over its routes and
starts what it needs (lazily: nothing runs before a session needs it; a server is served
from the tool cache until it answers). A server no session uses is stopped after its idle
timeout (``idleTimeout`` of the entry, else the daemon's), unless it is ``keepWarm``.

Config files are watched (one watcher per project in use, one for the user's files): an edit
is rediscovered, the views' routes recomputed, and every scope converges by difference
(removed servers stop, edited ones restart, new ones start if a session sees them); each
view tells its gateway, which announces ``list_changed`` to the clients that see the change.

Backends' questions (sampling, elicitation, roots) reach the session whose call caused them
(``daemon.routing``); a server whose question cannot be tied to one session gets one backend
per session from then on (remembered in the state folder, ``sharing.PerSessionServers``).
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Self

import anyio
import anyio.abc

from mcpfleet import paths
from mcpfleet.config import EntryFilter, load_all_mcp_configs
from mcpfleet.config.model import DiscoveryResult, ServerConfig
from mcpfleet.config.profiles import DaemonSettings, Profile
from mcpfleet.daemon.memory import process_tree_rss
from mcpfleet.daemon.routing import RequestRouter
from mcpfleet.daemon.scopes import Scope, Wanted
from mcpfleet.daemon.sharing import PER_SESSION_FILE, PerSessionServers, assign, user_servers
from mcpfleet.daemon.view import FleetView, Route
from mcpfleet.errors import Failure
from mcpfleet.fleet import settings as defaults
from mcpfleet.fleet.cache import MCPToolCache
from mcpfleet.fleet.reload import ConfigWatcher
from mcpfleet.fleet.server import Phase
from mcpfleet.fleet.startup import StartupReport

if TYPE_CHECKING:
    from mcpfleet.daemon.wire import FleetSpec
    from mcpfleet.gateway.relay import Relay

logger = logging.getLogger(__name__)

ProjectKey = tuple[str, bool, bool]
"""A project's real path, whether its servers are trusted without approval, and whether its
project files are read at all: sessions that agree on all three share its backends."""


@dataclass(eq=False)
class _Project:
    """One project in use: its discovery (watched) and its scope."""

    key: ProjectKey
    discovery: DiscoveryResult
    scope: Scope
    watcher: ConfigWatcher
    watching: anyio.CancelScope = field(default_factory=anyio.CancelScope)
    sessions: set[str] = field(default_factory=set)

    @property
    def root(self) -> str:
        return self.key[0]

    def rediscover(self) -> None:
        root, trust_project, enable_project_config = self.key
        self.discovery = load_all_mcp_configs(
            root, enable_project_config=enable_project_config, trust_project=trust_project
        )
        self.watcher.remember(self.discovery.config_paths)


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
        self.watch_interval_s = watch_interval_s
        self.shutdown_timeout_s = shutdown_timeout_s
        self._cache_setting = cache
        self._cache: MCPToolCache | None = None
        self._task_group: anyio.abc.TaskGroup | None = None
        self._views: dict[str, FleetView] = {}
        self._projects: dict[ProjectKey, _Project] = {}
        self._user_scope: Scope | None = None
        self._user_discovery = DiscoveryResult()
        self._user_watcher = ConfigWatcher(watch_interval_s)
        self._per_session: PerSessionServers | None = None
        self._wake_reaper: anyio.Event | None = None

    # -- lifetime --------------------------------------------------------------------------------------------

    @asynccontextmanager
    async def __asynccontextmanager__(self) -> AsyncIterator[Self]:
        self._cache = MCPToolCache.open_default() if self._cache_setting == "default" else self._cache_setting
        self._per_session = PerSessionServers(paths.user_state_dir() / PER_SESSION_FILE)
        self._user_scope = Scope("user", paths.neutral_working_dir(), None)
        self._wake_reaper = anyio.Event()
        self._rediscover_user()
        try:
            async with anyio.create_task_group() as task_group:
                self._task_group = task_group
                try:
                    task_group.start_soon(
                        self._user_watcher.run, self._config_changed, name="mcpfleet user config"
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
    ) -> AbstractAsyncContextManager[FleetView]:
        """The view of one session on the fleet ``spec`` describes, for as long as the block
        runs; its servers start now (those not running yet). ``profile`` is the one
        ``spec.profile`` names, read by the caller with the rest of the session's settings
        (the view sees its servers only). ``entry_filter`` leaves out more, as discovery's
        hook of the same name does in-process (the agent's Exa filter, for a CLI command or
        an agent session). ``relay`` must be the one its ``Gateway`` is given: the backends'
        questions caused by this session go there."""
        return self._attached(
            spec,
            session_id=session_id,
            host=host,
            leave_out=_session_filter(profile, entry_filter),
            relay=relay,
        )

    @asynccontextmanager
    async def _attached(
        self,
        spec: FleetSpec,
        *,
        session_id: str,
        host: str | None,
        leave_out: EntryFilter | None,
        relay: Relay | None,
    ) -> AsyncIterator[FleetView]:
        self._running()
        if session_id in self._views:
            raise ValueError(f"session {session_id!r} is attached already")
        project = self._project_for(spec)
        project.sessions.add(session_id)
        try:
            async with anyio.create_task_group() as view_tasks:
                view = FleetView(
                    self,
                    spec=spec,
                    session_id=session_id,
                    host=host,
                    project=project.root,
                    leave_out=leave_out,
                    relay=relay,
                    session_scope=Scope("session", Path(project.root), project.root),
                    task_group=view_tasks,
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
            project.sessions.discard(session_id)
            self._wake()

    async def _detach(self, view: FleetView) -> None:
        self._views.pop(view.session_id, None)
        view.unfollow_all()
        for scope in self._scopes():
            scope.forget(view.session_id)
        await view.session_scope.close()
        logger.info("session %s (%s) detached", view.session_id, view.host or "unknown host")

    async def start_servers(self, view: FleetView) -> StartupReport:
        """Bring up what ``view`` routes (a no-op for what runs already), wait for it as long as
        the session's start-up timeout says, and report as a manager's connect round does."""
        await self._converge_view(view)
        await view.wait_settled(view.spec.startup_timeout_ms)
        report = StartupReport()
        for name in view.get_all_server_names():
            state = view.get_server_state(name)
            if state.state in (Phase.FAILED, Phase.SUSPENDED):
                report.add_failure(Failure(name, "connect", state.last_error or str(state.state)))
            elif state.status == "connecting":
                manager = view.routes[name].scope.manager
                deferred = manager is not None and manager.is_deferred(name)
                (report.deferred_servers if deferred else report.late_servers).append(name)
        report.tools = view.get_tools()
        report.connected_servers = [
            name for name in view.get_all_server_names() if view.get_connection_status(name) == "connected"
        ]
        return report

    # -- who runs what ---------------------------------------------------------------------------------------

    def _project_for(self, spec: FleetSpec) -> _Project:
        root = os.path.realpath(spec.cwd)
        key: ProjectKey = (root, spec.trust_project, spec.enable_project_config)
        project = self._projects.get(key)
        if project is None:
            watcher = ConfigWatcher(self.watch_interval_s)
            project = _Project(key, DiscoveryResult(), Scope("project", Path(root), root), watcher)
            project.rediscover()
            self._refresh_project_servers(project)
            self._projects[key] = project
            self._running().start_soon(self._watch_project, project, name=f"mcpfleet config of {root}")
        return project

    def _route(self, view: FleetView, project: _Project) -> None:
        """Compute ``view``'s routes from the current discoveries (its filter applied)."""
        assert self._user_scope is not None and self._per_session is not None
        assignments = assign(project.discovery, self._user_discovery, self._per_session.known)
        scopes = {"user": self._user_scope, "project": project.scope, "session": view.session_scope}
        routes = {
            name: Route(scopes[assignment.share], assignment)
            for name, assignment in assignments.items()
            if view.leave_out is None or view.leave_out(assignment.config) is None
        }
        view.session_scope.available = {
            name: Wanted(route.assignment.config, route.assignment.source)
            for name, route in routes.items()
            if route.scope is view.session_scope
        }
        view.set_routes(routes)
        view.discovery = _filtered(project.discovery, view.leave_out)

    def _refresh_project_servers(self, project: _Project) -> None:
        # Without the per-session servers: those move the sessions away, and the backend they
        # leave may still finish the calls it runs.
        project.scope.available = {
            name: Wanted(assignment.config, assignment.source)
            for name, assignment in assign(project.discovery, self._user_discovery).items()
            if assignment.share == "project"
        }

    def _rediscover_user(self) -> None:
        self._user_discovery = load_all_mcp_configs(paths.neutral_working_dir(), enable_project_config=False)
        self._user_watcher.remember(self._user_discovery.config_paths)
        assert self._user_scope is not None
        self._user_scope.available = {
            name: Wanted(assignment.config, assignment.source)
            for name, assignment in user_servers(self._user_discovery).items()
        }

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
        scopes = {route.scope for route in view.routes.values()}
        for scope in scopes:
            if not scope.closed:
                await self._open(scope)
                view.follow(scope)
        await self._converge(scopes)

    async def _converge(self, scopes: set[Scope]) -> None:
        async with anyio.create_task_group() as converging:
            for scope in scopes:
                converging.start_soon(_converge_logged, scope)

    def _scopes(self) -> Iterator[Scope]:
        if self._user_scope is not None:
            yield self._user_scope
        for project in self._projects.values():
            yield project.scope
        for view in self._views.values():
            yield view.session_scope

    def _relays_of(self, scope: Scope, name: str) -> list[Relay]:
        sessions = scope.seen_by.get(name, set())
        views = [view for view in self._views.values() if view.session_id in sessions]
        return [view.relay for view in sorted(views, key=lambda view: view.since) if view.relay is not None]

    # -- changes ---------------------------------------------------------------------------------------------

    async def _watch_project(self, project: _Project) -> None:
        with project.watching:
            await project.watcher.run(self._config_changed)

    async def _config_changed(self) -> None:
        """A watched file changed. Every discovery is read again, the user's and each
        project's, whichever watcher saw it first: a project's routes depend on both (a
        user-level entry is shared only if the project resolves it as the user scope does),
        and a half-updated pair would start a server in the wrong scope. Reading them
        refreshes every watcher's stamps, so the others do not reload for the same edit."""
        self._rediscover_user()
        for project in list(self._projects.values()):
            project.rediscover()
            self._refresh_project_servers(project)
        await self._reroute()

    async def _reroute(self) -> None:
        """Recompute every view's routes, then bring every scope to what it should run now."""
        for view in list(self._views.values()):
            project = self._projects.get(_key_of(view.spec))
            if project is not None:
                self._route(view, project)
        touched = set(self._scopes())
        for view in list(self._views.values()):
            for route in view.routes.values():
                if not route.scope.closed:
                    await self._open(route.scope)
                    view.follow(route.scope)
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
        for key, project in list(self._projects.items()):
            if project.sessions or not project.scope.empty:
                continue
            del self._projects[key]
            project.watching.cancel()
            await project.scope.close()

    # -- status ----------------------------------------------------------------------------------------------

    def status(self) -> list[dict[str, Any]]:
        """The ``servers`` rows of ``daemon status --json``: one per backend the daemon holds."""
        now = time.monotonic()
        rows: list[dict[str, Any]] = []
        for scope in self._scopes():
            manager = scope.manager
            if manager is None:
                continue
            for name in manager.get_all_server_names():
                state = manager.get_server_state(name)
                since = scope.lingering.get(name)
                wanted = scope.available.get(name)
                rows.append(
                    {
                        "name": name,
                        "state": str(state.state),
                        "share": scope.kind,
                        "sessions": scope.sessions_of(name),
                        "pid": state.pid,
                        "rss_bytes": process_tree_rss(state.pid) if state.pid is not None else None,
                        "idle_s": round(now - since, 3) if since is not None else 0.0,
                        "project": scope.project,
                        "keep_warm": wanted is not None and wanted.config.keep_warm,
                    }
                )
        return rows


async def _converge_logged(scope: Scope) -> None:
    try:
        await scope.converge()
    except Exception:
        logger.exception("the %s could not start or stop its servers", scope)


def _key_of(spec: FleetSpec) -> ProjectKey:
    return (os.path.realpath(spec.cwd), spec.trust_project, spec.enable_project_config)


def _session_filter(profile: Profile | None, entry_filter: EntryFilter | None) -> EntryFilter | None:
    """What a session's view leaves out: the servers its profile does not serve, then what
    ``entry_filter`` leaves out (the first reason given is the entry's)."""
    filters = [] if profile is None else [profile.entry_filter()]
    if entry_filter is not None:
        filters.append(entry_filter)
    if not filters:
        return None

    def leave_out(config: ServerConfig) -> str | None:
        return next((reason for hook in filters if (reason := hook(config)) is not None), None)

    return leave_out


def _filtered(discovery: DiscoveryResult, leave_out: EntryFilter | None) -> DiscoveryResult:
    """The project's discovery as the session sees it: what ``leave_out`` names is ``filtered``."""
    if leave_out is None:
        return discovery
    from dataclasses import replace

    reasons = {
        name: reason
        for name, config in discovery.configs.items()
        if (reason := leave_out(config)) is not None
    }
    return DiscoveryResult(
        configs={name: config for name, config in discovery.configs.items() if name not in reasons},
        sources={name: source for name, source in discovery.sources.items() if name not in reasons},
        errors=list(discovery.errors),
        entries=[
            replace(entry, state="filtered", reason=reasons[entry.name])
            if entry.name in reasons and entry.state == "active"
            else entry
            for entry in discovery.entries
        ],
        config_paths=list(discovery.config_paths),
    )
