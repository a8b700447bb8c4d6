"""The daemon's fleet, shared by every host session it serves (B9).

``SharedFleet`` holds the scopes (``daemon.scopes``): one **user scope** for the user-level
servers every session shares, run in the neutral folder; one **project scope** per project
root (real path) and approval mode, for that project's servers, run in the project; one
**session scope** per attached session for the servers it must have to itself. Which entry
goes where is ``daemon.sharing``'s decision, from two discoveries: the project's (what a
session there sees, its profile applied, with its precedence: a project entry wins over a
user entry of the same name) and the user's own (how a user-level entry runs when shared).

``attach(spec, ...)`` gives one session a ``FleetView`` (``daemon.view``) over its routes and
starts what it needs (lazily: nothing runs before a session needs it; a server is served
from the tool cache until it answers). A server no session uses is stopped after its idle
timeout (``idleTimeout`` of the entry, else the daemon's), unless it is ``keepWarm``.

Config files are watched (one watcher for the files of every discovery in use): an edit is
rediscovered, the views' routes recomputed, and every scope converges by difference
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
import anyio.to_thread

from mcpfleet import paths
from mcpfleet.config import load_all_mcp_configs
from mcpfleet.config.discovery import EntryFilter
from mcpfleet.config.model import DiscoveryResult, ServerConfig
from mcpfleet.config.profiles import DaemonSettings, Profile
from mcpfleet.daemon.memory import process_tree
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


@dataclass(frozen=True)
class SessionFilter:
    """What one session does not see: the servers its profile does not serve, and what the
    host's own discovery hook leaves out (the agent's Exa filter, for a CLI command or an agent
    session). Sessions with equal filters share one discovery of their project."""

    profile: Profile | None = None
    extra: EntryFilter | None = None

    def entry_filter(self) -> EntryFilter | None:
        """Discovery's hook for this filter (the first reason given is the entry's)."""
        hooks = [hook for hook in (self.profile and self.profile.entry_filter(), self.extra) if hook]
        if not hooks:
            return None

        def leave_out(config: ServerConfig) -> str | None:
            return next((reason for hook in hooks if (reason := hook(config)) is not None), None)

        return leave_out


NO_FILTER = SessionFilter()


@dataclass(eq=False)
class _Project:
    """One project in use: its discoveries and its scope."""

    key: ProjectKey
    scope: Scope
    discoveries: dict[SessionFilter, DiscoveryResult] = field(default_factory=dict)
    """The project's discovery (under ``NO_FILTER``), and one per filter its sessions use: what
    a session does not see is left out by discovery itself, as in-process, so an entry it does
    not serve never shadows a twin it does (same connection, another name)."""
    sessions: dict[str, SessionFilter] = field(default_factory=dict)
    """The attached sessions, and each one's filter."""

    @property
    def root(self) -> str:
        return self.key[0]


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
        self._projects: dict[ProjectKey, _Project] = {}
        self._user_scope: Scope | None = None
        self._user_discovery = DiscoveryResult()
        self._watcher = ConfigWatcher(watch_interval_s)
        self._config_changes = 0
        """How many config changes were taken: a discovery read across one is read again."""
        self._per_session: PerSessionServers | None = None
        self._wake_reaper: anyio.Event | None = None

    # -- lifetime --------------------------------------------------------------------------------------------

    @asynccontextmanager
    async def __asynccontextmanager__(self) -> AsyncIterator[Self]:
        self._cache = MCPToolCache.open_default() if self._cache_setting == "default" else self._cache_setting
        self._per_session = PerSessionServers(paths.user_state_dir() / PER_SESSION_FILE)
        self._user_scope = Scope("user", paths.neutral_working_dir(), None)
        self._wake_reaper = anyio.Event()
        self._take_user_discovery(await _discover_user())
        self._watch_discovered()
        try:
            async with anyio.create_task_group() as task_group:
                self._task_group = task_group
                try:
                    task_group.start_soon(self._watcher.run, self._config_changed, name="mcpfleet config")
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
            session_filter=SessionFilter(profile, entry_filter),
            relay=relay,
        )

    @asynccontextmanager
    async def _attached(
        self,
        spec: FleetSpec,
        *,
        session_id: str,
        host: str | None,
        session_filter: SessionFilter,
        relay: Relay | None,
    ) -> AsyncIterator[FleetView]:
        self._running()
        if session_id in self._views:
            raise ValueError(f"session {session_id!r} is attached already")
        project = await self._project_for(spec, session_filter)
        project.sessions[session_id] = session_filter
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

    async def _project_for(self, spec: FleetSpec, session_filter: SessionFilter) -> _Project:
        """The project ``spec`` names, with its own discovery and that of ``session_filter``."""
        key = _key_of(spec)
        filters = list(dict.fromkeys((NO_FILTER, session_filter)))
        while True:
            project = self._projects.get(key)
            missing = [each for each in filters if project is None or each not in project.discoveries]
            if project is not None and not missing:
                # No await since it was looked up: the reaper closes only a project without
                # sessions, and the caller adds its own at once.
                return project
            changes = self._config_changes
            found = {each: await _discover_project(key, each) for each in missing}
            if changes != self._config_changes:
                continue  # the files changed while they were read
            # Meanwhile another session may have opened it, or the reaper closed it.
            project = self._projects.get(key)
            if project is None:
                project = self._projects[key] = _Project(key, Scope("project", Path(key[0]), key[0]))
            for each, discovery in found.items():
                project.discoveries.setdefault(each, discovery)
            self._refresh_project_servers(project)
            self._watch_discovered()

    def _route(self, view: FleetView, project: _Project) -> None:
        """Compute ``view``'s routes from the current discoveries (its filter's)."""
        assert self._user_scope is not None and self._per_session is not None
        discovery = project.discoveries[view.session_filter]
        assignments = assign(discovery, self._user_discovery, self._per_session.known)
        scopes = {"user": self._user_scope, "project": project.scope, "session": view.session_scope}
        routes = {
            name: Route(scopes[assignment.share], assignment) for name, assignment in assignments.items()
        }
        view.session_scope.available = {
            name: Wanted(route.assignment.config, route.assignment.source)
            for name, route in routes.items()
            if route.scope is view.session_scope
        }
        view.set_routes(routes)
        view.discovery = discovery

    def _refresh_project_servers(self, project: _Project) -> None:
        # Without the per-session servers: those move the sessions away, and the backend they
        # leave may still finish the calls it runs. A name is the same entry in every
        # discovery that has it active (a filter only leaves entries out).
        available: dict[str, Wanted] = {}
        for discovery in project.discoveries.values():
            for name, assignment in assign(discovery, self._user_discovery).items():
                if assignment.share == "project":
                    available.setdefault(name, Wanted(assignment.config, assignment.source))
        project.scope.available = available

    def _take_user_discovery(self, discovery: DiscoveryResult) -> None:
        self._user_discovery = discovery
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

    def _watch_discovered(self) -> None:
        """Watch the files of every discovery in use (a project's include the user's)."""
        discoveries = [self._user_discovery]
        for project in self._projects.values():
            discoveries.extend(project.discoveries.values())
        self._watcher.watch(path for discovery in discoveries for path in discovery.config_paths)

    async def _config_changed(self) -> None:
        """A watched file changed. Every discovery is read again, the user's and each
        project's (each filter's in use), and taken all at once: a project's routes depend
        on both (a user-level entry is shared only if the project resolves it as the user
        scope does), and a half-updated pair would start a server in the wrong scope."""
        self._config_changes += 1
        user = await _discover_user()
        found = {
            (key, session_filter): await _discover_project(key, session_filter)
            for key, filters in self._filters_in_use().items()
            for session_filter in filters
        }
        self._take_user_discovery(user)
        in_use = self._filters_in_use()
        for key, project in self._projects.items():
            for session_filter in list(project.discoveries):
                if session_filter not in in_use[key]:
                    del project.discoveries[session_filter]  # its sessions are gone
                elif (key, session_filter) in found:
                    project.discoveries[session_filter] = found[key, session_filter]
                # else: a session brought it while these were read, read after this change
            self._refresh_project_servers(project)
        self._watch_discovered()
        await self._reroute()

    def _filters_in_use(self) -> dict[ProjectKey, set[SessionFilter]]:
        """Per project, the filters of its discoveries in use: ``NO_FILTER`` (its own) and
        those of its sessions."""
        return {key: {NO_FILTER, *project.sessions.values()} for key, project in self._projects.items()}

    async def _reroute(self) -> None:
        """Recompute every view's routes, then bring every scope to what it should run now."""
        for view in list(self._views.values()):
            project = self._projects.get(_key_of(view.spec))
            if project is not None:
                self._route(view, project)
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
        for key, project in list(self._projects.items()):
            if project.sessions or not project.scope.empty:
                continue
            del self._projects[key]
            self._watch_discovered()
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


async def _converge_logged(scope: Scope) -> None:
    try:
        await scope.converge()
    except Exception:
        logger.exception("the %s could not start or stop its servers", scope)


def _key_of(spec: FleetSpec) -> ProjectKey:
    return (os.path.realpath(spec.cwd), spec.trust_project, spec.enable_project_config)


async def _discover_user() -> DiscoveryResult:
    """The discovery the user scope runs: no project files, in the neutral folder."""
    return await _discover(paths.neutral_working_dir(), enable_project_config=False)


async def _discover_project(key: ProjectKey, session_filter: SessionFilter) -> DiscoveryResult:
    """The project's discovery as the sessions with ``session_filter`` see it."""
    root, trust_project, enable_project_config = key
    return await _discover(
        root,
        enable_project_config=enable_project_config,
        trust_project=trust_project,
        entry_filter=session_filter.entry_filter(),
    )


async def _discover(
    cwd: str | Path,
    *,
    enable_project_config: bool,
    trust_project: bool = False,
    entry_filter: EntryFilter | None = None,
) -> DiscoveryResult:
    # Off the event loop: a large ~/.claude.json takes a good part of a second to read,
    # and every session's calls wait meanwhile.
    return await anyio.to_thread.run_sync(
        partial(
            load_all_mcp_configs,
            cwd,
            enable_project_config=enable_project_config,
            trust_project=trust_project,
            entry_filter=entry_filter,
        )
    )
