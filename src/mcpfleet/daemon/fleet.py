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
from collections.abc import AsyncIterator, Iterator, Mapping
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Self

import anyio
import anyio.abc
import anyio.to_thread

from mcpfleet import paths
from mcpfleet.config import LastGoodFiles, load_all_mcp_configs
from mcpfleet.config.discovery import EntryFilter
from mcpfleet.config.model import DiscoveryResult, ServerConfig
from mcpfleet.config.profiles import DaemonSettings, Profile
from mcpfleet.daemon.memory import process_tree
from mcpfleet.daemon.routing import RequestRouter
from mcpfleet.daemon.scopes import Scope, Wanted, place
from mcpfleet.daemon.sharing import (
    PER_SESSION_FILE,
    PerSessionServers,
    assign,
    bind_session_values,
    referenced_names,
)
from mcpfleet.daemon.view import FleetView, Route
from mcpfleet.errors import Failure
from mcpfleet.fleet import settings as defaults
from mcpfleet.fleet.cache import MCPToolCache
from mcpfleet.fleet.registry import Phase
from mcpfleet.fleet.reload import ConfigWatcher, log_new_config_errors
from mcpfleet.fleet.startup import StartupReport

if TYPE_CHECKING:
    from mcpfleet.daemon.wire import FleetSpec
    from mcpfleet.gateway.relay import Relay

logger = logging.getLogger(__name__)

ProjectKey = tuple[str, bool, bool]
"""A project's real path, whether its servers are trusted without approval, and whether its
project files are read at all: sessions that agree on all three share its backends."""
EnvKey = frozenset[tuple[str, str]]
"""A session's environment values (what its shim sent): sessions with equal ones resolve
every entry alike, so they share their discoveries."""


NO_ENVIRONMENT: EnvKey = frozenset()


def environment_key(environ: Mapping[str, str]) -> EnvKey:
    return frozenset(environ.items())


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


DiscoveryKey = tuple[SessionFilter, EnvKey]


@dataclass(eq=False)
class _Project:
    """One project in use: its discoveries and its scopes."""

    key: ProjectKey
    reference: DiscoveryResult
    """Its discovery with no values: which variables its entries name, which files to watch,
    each entry's fingerprint."""
    scopes: list[Scope] = field(default_factory=list)
    """Each holds at most one backend per name: a name whose sessions resolve it differently
    runs in as many scopes (``scopes.place``)."""
    discoveries: dict[DiscoveryKey, DiscoveryResult] = field(default_factory=dict)
    """One per filter and environment its sessions use: what a session does not see is left
    out by discovery itself, as in-process, so an entry it does not serve never shadows a twin
    it does (same connection, another name); its placeholders are its own values."""
    sessions: dict[str, DiscoveryKey] = field(default_factory=dict)
    """The attached sessions, and each one's filter and environment."""

    @property
    def root(self) -> str:
        return self.key[0]

    def new_scope(self) -> Scope:
        return Scope("project", Path(self.root), self.root)


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
        self._user_scopes: list[Scope] = []
        self._user_discoveries: dict[EnvKey, DiscoveryResult] = {}
        """The user's own discovery (the neutral folder, no project files), per environment."""
        self._user_reference = DiscoveryResult()
        """The user's discovery with no values: which files to watch, which variables its
        entries name, and each entry's fingerprint (which names the unresolved entry)."""
        self._watcher = ConfigWatcher(watch_interval_s)
        self._config_changes = 0
        """How many config changes were taken: a discovery read across one is read again."""
        self._per_session: PerSessionServers | None = None
        self._wake_reaper: anyio.Event | None = None
        self._last_good = LastGoodFiles()
        """Every config file as it last parsed, for all discoveries: a file that stops parsing
        keeps its servers running."""
        self._config_errors: list[Failure] = []
        """The config errors of the discoveries in use, each logged once when it appeared."""

    # -- lifetime --------------------------------------------------------------------------------------------

    @asynccontextmanager
    async def __asynccontextmanager__(self) -> AsyncIterator[Self]:
        self._cache = MCPToolCache.open_default() if self._cache_setting == "default" else self._cache_setting
        self._per_session = PerSessionServers(paths.user_state_dir() / PER_SESSION_FILE)
        self._wake_reaper = anyio.Event()
        self._user_reference = await _discover_user(NO_ENVIRONMENT, self._last_good)
        self._watch_discovered()
        self._note_config_errors()
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
        """The variables whose values a connection's client is asked for: those the configs
        of ``spec``'s fleet reference, or with no fleet (a control connection) those of every
        fleet in use (which variables an entry names does not depend on their values)."""
        if spec is None:
            references = [self._user_reference, *(project.reference for project in self._projects.values())]
            return frozenset(name for reference in references for name in reference.referenced_variables)
        project = await self._project(_key_of(spec))
        return frozenset(project.reference.referenced_variables)

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
        project = await self._project_for(spec, session_filter, environment)
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

    async def _project_for(
        self, spec: FleetSpec, session_filter: SessionFilter, environment: EnvKey
    ) -> _Project:
        """The project ``spec`` names, with its discovery for ``session_filter`` and
        ``environment``, and the user's own discovery for ``environment``."""
        key = _key_of(spec)
        wanted: DiscoveryKey = (session_filter, environment)
        while True:
            project = await self._project(key)
            if wanted in project.discoveries and environment in self._user_discoveries:
                # No await since it was looked up: the reaper closes only a project without
                # sessions, and the caller adds its own at once.
                return project
            changes = self._config_changes
            found = await _discover_project(key, session_filter, environment, self._last_good)
            user = self._user_discoveries.get(environment) or await _discover_user(
                environment, self._last_good
            )
            if changes != self._config_changes or self._projects.get(key) is not project:
                continue  # the files changed while they were read, or the reaper closed it
            project.discoveries.setdefault(wanted, found)
            self._user_discoveries.setdefault(environment, user)
            self._watch_discovered()
            self._note_config_errors()

    async def _project(self, key: ProjectKey) -> _Project:
        """The project in use at ``key``, opened with its reference discovery if it is not."""
        while (project := self._projects.get(key)) is None:
            changes = self._config_changes
            reference = await _discover_project(key, NO_FILTER, NO_ENVIRONMENT, self._last_good)
            if changes == self._config_changes and key not in self._projects:
                self._projects[key] = _Project(key, reference)
                self._watch_discovered()
        return project

    def _route(self, view: FleetView, project: _Project) -> None:
        """Compute ``view``'s routes from the current discoveries (its filter's and
        environment's): each server to the scope of its share that runs it as this session
        resolves it."""
        assert self._per_session is not None
        discovery = project.discoveries[view.session_filter, view.environment]
        assignments = assign(discovery, self._user_discoveries[view.environment], self._per_session.known)
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
        for project in self._projects.values():
            yield from project.scopes
        for view in self._views.values():
            yield view.session_scope

    def _relays_of(self, scope: Scope, name: str) -> list[Relay]:
        sessions = scope.seen_by.get(name, set())
        views = [view for view in self._views.values() if view.session_id in sessions]
        return [view.relay for view in sorted(views, key=lambda view: view.since) if view.relay is not None]

    # -- changes ---------------------------------------------------------------------------------------------

    def _watch_discovered(self) -> None:
        """Watch the files of every discovery in use (a project's include the user's)."""
        self._watcher.watch(path for discovery in self._all_discoveries() for path in discovery.config_paths)

    async def _config_changed(self) -> None:
        """A watched file changed. Every discovery is read again, the user's and each
        project's (each filter's in use), and taken all at once: a project's routes depend
        on both (a user-level entry is shared only if the project resolves it as the user
        scope does), and a half-updated pair would start a server in the wrong scope."""
        self._config_changes += 1
        user_reference = await _discover_user(NO_ENVIRONMENT, self._last_good)
        references = {
            key: await _discover_project(key, NO_FILTER, NO_ENVIRONMENT, self._last_good)
            for key in list(self._projects)
        }
        user = {
            environment: await _discover_user(environment, self._last_good)
            for environment in self._environments_in_use()
        }
        found = {
            (key, discovery_key): await _discover_project(key, *discovery_key, self._last_good)
            for key, discovery_keys in self._discoveries_in_use().items()
            for discovery_key in discovery_keys
        }
        # A session that attached while these were read brought its own, read after this change.
        self._user_discoveries.update(user)
        self._user_reference = user_reference
        for key, project in self._projects.items():
            if key in references:
                project.reference = references[key]
            for discovery_key in project.discoveries:
                if (key, discovery_key) in found:
                    project.discoveries[discovery_key] = found[key, discovery_key]
        self._forget_unused_discoveries()
        self._watch_discovered()
        self._note_config_errors()
        await self._reroute(config_changed=True)

    def _note_config_errors(self) -> None:
        """Log each config error of the discoveries in use once, when it first appears: the
        daemon has no terminal, its log and ``daemon status`` are where a typo shows."""
        current = {
            failure.message: failure for discovery in self._all_discoveries() for failure in discovery.errors
        }
        log_new_config_errors(self._config_errors, current.values())
        self._config_errors = list(current.values())

    def config_errors(self) -> list[dict[str, str]]:
        """The ``errors`` rows of ``daemon status --json``: what the config files in use say wrong."""
        return [failure.to_dict() for failure in self._config_errors]

    def _discoveries_in_use(self) -> dict[ProjectKey, set[DiscoveryKey]]:
        """Per project, the filters and environments of its attached sessions."""
        return {key: set(project.sessions.values()) for key, project in self._projects.items()}

    def _environments_in_use(self) -> set[EnvKey]:
        return {
            environment for project in self._projects.values() for _, environment in project.sessions.values()
        }

    def _forget_unused_discoveries(self) -> None:
        """Drop the discoveries no attached session uses (after a config change: read again,
        they would be read for nobody)."""
        in_use = self._discoveries_in_use()
        for key, project in self._projects.items():
            for discovery_key in list(project.discoveries):
                if discovery_key not in in_use[key]:
                    del project.discoveries[discovery_key]
        environments = self._environments_in_use()
        for environment in list(self._user_discoveries):
            if environment not in environments:
                del self._user_discoveries[environment]

    def _refresh_idle_servers(self) -> None:
        """After a config change, the servers no session uses: one whose entry was edited or
        removed stops (its sessions' values are gone, so it cannot be resolved again; the next
        session that needs it starts it as edited); the others take the entry's new daemon
        keys (``keepWarm``, ``idleTimeout``), which change how long they run, not what runs."""
        current = {
            (name, config.fingerprint): config
            for discovery in self._all_discoveries()
            for name, config in discovery.configs.items()
        }
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

    def _all_discoveries(self) -> list[DiscoveryResult]:
        """Every discovery held: the references and those of the sessions' environments."""
        discoveries = [self._user_reference, *self._user_discoveries.values()]
        for project in self._projects.values():
            discoveries.append(project.reference)
            discoveries.extend(project.discoveries.values())
        return discoveries

    async def _reroute(self, *, config_changed: bool = False) -> None:
        """Recompute every view's routes, then bring every scope to what it should run now
        (``config_changed``: after a config change, see ``_refresh_idle_servers``)."""
        for view in list(self._views.values()):
            project = self._projects.get(_key_of(view.spec))
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
        for key, project in list(self._projects.items()):
            if project.sessions or not all(scope.empty for scope in project.scopes):
                await _close_empty(project.scopes)
                continue
            del self._projects[key]
            # The user's discoveries of environments no project holds any more go with it.
            held = {environment for each in self._projects.values() for _, environment in each.discoveries}
            for environment in [each for each in self._user_discoveries if each not in held]:
                del self._user_discoveries[environment]
            self._watch_discovered()
            for scope in project.scopes:
                await scope.close()
        await _close_empty(self._user_scopes)

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


def _key_of(spec: FleetSpec) -> ProjectKey:
    return (os.path.realpath(spec.cwd), spec.trust_project, spec.enable_project_config)


async def _discover_user(environment: EnvKey, last_good: LastGoodFiles | None = None) -> DiscoveryResult:
    """The discovery the user scopes run, with a session's values: no project files, in the
    neutral folder."""
    return await _discover(
        paths.neutral_working_dir(), environment, enable_project_config=False, last_good=last_good
    )


async def _discover_project(
    key: ProjectKey,
    session_filter: SessionFilter,
    environment: EnvKey,
    last_good: LastGoodFiles | None = None,
) -> DiscoveryResult:
    """The project's discovery as the sessions with ``session_filter`` and ``environment`` see it."""
    root, trust_project, enable_project_config = key
    return await _discover(
        root,
        environment,
        enable_project_config=enable_project_config,
        trust_project=trust_project,
        entry_filter=session_filter.entry_filter(),
        last_good=last_good,
    )


async def _discover(
    cwd: str | Path,
    environment: EnvKey,
    *,
    enable_project_config: bool,
    trust_project: bool = False,
    entry_filter: EntryFilter | None = None,
    last_good: LastGoodFiles | None = None,
) -> DiscoveryResult:
    """A discovery whose entries are resolved with ``environment`` alone (placeholders and the
    connect-time variable lookups, ``sharing.bind_session_values``); its
    ``referenced_variables`` are every variable its entries name either way."""
    values = dict(environment)
    # Off the event loop: a large ~/.claude.json takes a good part of a second to read,
    # and every session's calls wait meanwhile.
    found = await anyio.to_thread.run_sync(
        partial(
            load_all_mcp_configs,
            cwd,
            enable_project_config=enable_project_config,
            trust_project=trust_project,
            entry_filter=entry_filter,
            environ=values,
            last_good=last_good,
        )
    )
    bound = bind_session_values(found, values)
    bound.referenced_variables = referenced_names(found)
    return bound
