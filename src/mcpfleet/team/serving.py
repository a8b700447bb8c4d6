"""``mcpfleet serve --http HOST:PORT --team FILE``: the gateway of a team, assembled.

``open_team_gateway(team, options, …)`` opens, in order:

1. the team state (``team.stores``: SQLite beside the team file, or PostgreSQL), and the audit
   log on it (``team.audit``);
2. the per-user credentials (``team.per_user``) when a server says ``"credentials": "per-user"``,
   sealed with ``MCPFLEET_TEAM_KEY`` (taken out of the environment here, before any backend
   inherits it);
3. the guard, identity → policy → audit → credentials: ``AuditedGuard`` (every tool call
   recorded before it answers) around ``TeamGuard`` (the policies; a request for a per-user
   server goes to the caller's own connection, or is answered with the ``/connect`` link);
4. the fleet (``TeamFleet``: the team file's servers) and the gateway over it with that guard;
5. the watcher of the team file (``LiveTeamFile``), whose reloads reach the fleet (servers
   added, removed, changed), the guard (policies: each session whose view changed hears
   ``list_changed``) and the limits; and the fetch of the issuer's keys, until they are held
   (``/readyz``).

Before the guard, the shared ephemeral state (``team.shared``): Redis when ``state.redis`` is
set (``team.redis_shared``; a replica that cannot reach it at start does not start), else this
process's memory. It counts the calls ``limits:`` bound (``team.limits``, the first of the
guard's hooks), carries backend ``list_changed`` and reloads to the other replicas
(``team.replicas``), and keeps 2025-era sessions and their streams' events for every replica
(``TeamGateway.shared_sessions`` and ``event_store``, for ``serve_http``).

``TeamGateway.admission`` decides, from each request's headers and before any body is read,
whether it is served (``serve_http``'s ``admission``): the identity check (``team.identity``),
which puts each request's ``Principal`` in its scope. ``TeamGateway.around(drain)`` stands in
front of the SDK's MCP application (``serve_http``'s ``around``): ``/healthz`` and ``/readyz``
(``team.health``: ready when not draining, the state and the issuer answer and the servers have
settled), then, when a server is per-user, the pages where users connect their own accounts
(``connect_pages``), and in front of all of them the dashboard at ``/ui`` (``team.ui_layer``),
which signs its admins in through the identity provider itself. The guard refuses any request
that reaches the MCP endpoint without a principal.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
from collections.abc import AsyncIterator, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

import anyio

from mcpfleet.dashboard.source import CallLog
from mcpfleet.gateway.assembly import GatewayOptions, open_gateway
from mcpfleet.gateway.guard import ALLOWED, GuardedRequest, Permit, RequestGuard
from mcpfleet.team.audit import AuditLog
from mcpfleet.team.audited_guard import AuditedGuard
from mcpfleet.team.fleet import LiveTeamFile, TeamFleet
from mcpfleet.team.guard import CallHooks, PassingHooks, TeamGuard
from mcpfleet.team.limits import LimitHooks
from mcpfleet.team.loading import server_configs
from mcpfleet.team.metrics import record_for_metrics
from mcpfleet.team.principal import principal_of_scope
from mcpfleet.team.replicas import ReplicaLink
from mcpfleet.team.sealing import Sealer
from mcpfleet.team.shared import LocalShared, TeamShared
from mcpfleet.team.stores import open_team_state
from mcpfleet.team.ui_fleet import PlotHooks

if TYPE_CHECKING:
    from starlette.types import ASGIApp, Scope

    from mcpfleet.config.model import ServerConfig
    from mcpfleet.gateway.core import Gateway
    from mcpfleet.gateway.draining import Drain
    from mcpfleet.gateway.http import Admission
    from mcpfleet.gateway.relay import Relay
    from mcpfleet.gateway.resumption import StreamEventStore
    from mcpfleet.gateway.shared_sessions import OwnerOf, SessionRecords
    from mcpfleet.team.health import Readiness
    from mcpfleet.team.identity import IdentityCheck
    from mcpfleet.team.model import TeamFile
    from mcpfleet.team.per_user import PerUserCredentials
    from mcpfleet.team.principal import Principal
    from mcpfleet.team.state import TeamState

logger = logging.getLogger(__name__)


@dataclass
class TeamGateway:
    """A team gateway, running: what the command line serves and what tests look into."""

    gateway: Gateway
    guard: TeamGuard
    live: LiveTeamFile
    fleet: TeamFleet
    state: TeamState
    credentials: PerUserCredentials | None
    shared: TeamShared
    request_guard: RequestGuard
    """The guard the gateway asks (audit around ``guard``): the dashboard's playground calls through it."""
    calls: CallLog
    """The calls this replica served, for the dashboard's plots (``team.ui_fleet.PlotHooks``)."""
    sealer: Sealer | None
    """The team key's sealer, when per-user credentials or the dashboard need one."""

    @property
    def event_store(self) -> StreamEventStore:
        """Where the resumable streams' events are kept (Redis, with ``state.redis``)."""
        return self.shared.event_store

    @property
    def shared_sessions(self) -> tuple[SessionRecords, OwnerOf] | None:
        """The 2025-era sessions every replica serves (``serve_http(sessions=…)``), with Redis."""
        records = self.shared.sessions
        return (records, session_owner) if records is not None else None

    @functools.cached_property
    def identity(self) -> IdentityCheck:
        """The identity check, made once: its issuer's keys are the ones ``/readyz`` checks."""
        from mcpfleet.team.identity import identity_check

        return identity_check(self.live.current)

    @property
    def admission(self) -> Admission:
        """The identity check every request passes before it is served (see the module)."""
        from mcpfleet.team.ui_layer import ui_admission

        admit: Admission = self.identity.admit
        # A browser opening a connect link carries its pass (or then its cookie), not a token.
        if self.credentials is not None:
            admit = self.credentials.passes.admission(admit)
        return ui_admission(admit)  # the dashboard signs its admins in itself

    @property
    def connect_pages(self) -> Callable[[ASGIApp], ASGIApp] | None:
        """The connect pages in front of the MCP application, when a server is per-user."""
        credentials = self.credentials
        if credentials is None:
            return None

        def around(app: ASGIApp) -> ASGIApp:
            from mcpfleet.team.connect_pages import ConnectLayer

            return ConnectLayer(app, credentials)

        return around

    def readiness(self, drain: Drain | None = None) -> Readiness:
        """What ``/readyz`` asks (``team.health``): not draining, the team state answering, the
        issuer's keys held (fetched in the background from the start), the servers settled."""
        from mcpfleet.team.health import Readiness

        keys = self.identity.tokens.keys

        async def issuer() -> None:
            keys.require_held()  # fetched in the background from the start (open_team_gateway)

        return Readiness(self.fleet, {"state": self.state.check, "issuer": issuer}, drain)

    def around(self, drain: Drain | None = None) -> Callable[[ASGIApp], ASGIApp]:
        """Everything in front of the SDK's MCP application (``serve_http``'s ``around``):
        ``/healthz`` and ``/readyz``, ``/metrics`` (``team.metrics``), then the connect pages
        when a server is per-user."""
        from mcpfleet.team.health import HealthRoutes
        from mcpfleet.team.metrics import with_metrics
        from mcpfleet.team.ui_fleet import TeamFleetSource
        from mcpfleet.team.ui_layer import UiLayer
        from mcpfleet.team.ui_signin import UiSignIn

        readiness = self.readiness(drain)
        pages = with_metrics(self.connect_pages)
        live = self.live
        source = TeamFleetSource(self.fleet, self.request_guard, self.gateway.sessions, self.calls)
        keys = self.identity.tokens.keys
        sign_in = UiSignIn(lambda: live.current, keys, self.sealer) if self.sealer is not None else None

        def wrap(app: ASGIApp) -> ASGIApp:
            ui = UiLayer(pages(app), lambda: live.current, source, self.state, sign_in)
            return HealthRoutes(ui, readiness)

        return wrap


def session_owner(scope: Scope) -> str | None:
    """Who a request comes from, as the owner of a session it opens is recorded: the subject."""
    principal = principal_of_scope(scope)
    return principal.subject if principal is not None else None


class PerUserHooks(PassingHooks):
    """The per-user servers' part of the guard (``CallHooks``): their requests go to the caller's
    own connection (``team.user_backend``), never to the shared fleet."""

    def __init__(self, credentials: PerUserCredentials) -> None:
        self.credentials = credentials

    async def permit(self, principal: Principal, request: GuardedRequest) -> Permit:
        from mcpfleet.team.user_backend import per_user_permit

        permit = await per_user_permit(self.credentials, request)
        return permit if permit is not None else ALLOWED


@asynccontextmanager
async def open_team_gateway(
    team: TeamFile,
    options: GatewayOptions,
    *,
    startup_timeout_ms: int,
    use_cache: bool = True,
    watch_interval_s: float | None = None,
) -> AsyncIterator[TeamGateway]:
    """The team gateway of ``team``, connected and watching its file (see the module)."""
    live = LiveTeamFile(team) if watch_interval_s is None else LiveTeamFile(team, interval_s=watch_interval_s)
    record_for_metrics()
    async with AsyncExitStack() as stack:
        state = await open_team_state(team.state, sync_each_write=team.audit.sync == "each")
        stack.push_async_callback(state.aclose)
        shared = await _shared_state(stack, team)
        sealer = _team_sealer(team)
        credentials = await _per_user_credentials(stack, team, state, sealer, shared)
        limits = LimitHooks(team.limits, shared)
        calls = CallLog()
        hooks: list[CallHooks] = [limits, PlotHooks(calls)]
        if credentials is not None:
            hooks.append(PerUserHooks(credentials))
        guard = TeamGuard(team.policies, hooks)
        audited: RequestGuard = AuditedGuard(guard, AuditLog(team.audit, state if team.audit.store else None))
        fleets: list[TeamFleet] = []

        def open_fleet(relay: Relay) -> contextlib.nullcontext[TeamFleet]:
            fleet = TeamFleet(
                team,
                cache="default" if use_cache else None,
                startup_timeout_ms=startup_timeout_ms,
                on_uncached="late-join",
                server_requests=relay,
                log_level="debug",
            )
            fleets.append(fleet)
            return contextlib.nullcontext(fleet)

        gateway = await stack.enter_async_context(open_gateway(open_fleet, replace(options, guard=audited)))
        fleet = fleets[0]

        async def apply(new: TeamFile, old: TeamFile) -> None:
            # Servers first: a policy that names a new server finds its tools listed.
            if new.servers != old.servers:
                fleet.team = new
                await fleet.reload()
            guard.update(new.policies)
            limits.update(new.limits)

        live.follow(apply)
        ReplicaLink(shared, fleet, live).start()
        served = TeamGateway(gateway, guard, live, fleet, state, credentials, shared, audited, calls, sealer)
        task_group = await stack.enter_async_context(anyio.create_task_group())
        task_group.start_soon(live.watch, name="mcpfleet team file watcher")
        task_group.start_soon(served.identity.tokens.keys.keep_fetching, name="mcpfleet issuer keys")
        run = getattr(shared, "run", None)
        if run is not None:
            await task_group.start(run, name="mcpfleet team replicas' messages")
        yield served
        task_group.cancel_scope.cancel()


async def _shared_state(stack: AsyncExitStack, team: TeamFile) -> TeamShared:
    """Redis (``state.redis``), or this process's memory; closed with ``stack``."""
    url = team.state.redis
    if url is None:
        return LocalShared()
    from mcpfleet.team.redis_shared import RedisShared, default_namespace

    shared = await RedisShared.open(url, default_namespace(team.public_url))
    stack.push_async_callback(shared.aclose)
    return shared


def _team_sealer(team: TeamFile) -> Sealer | None:
    """The sealer of ``MCPFLEET_TEAM_KEY`` when per-user servers or the dashboard (``ui:``) need
    one (``TeamKeyError`` when it is missing then); the variable is taken out of the environment
    either way, before any backend inherits it."""
    from mcpfleet.team.sealing import TEAM_KEY_VARIABLE, TeamKeyError

    try:
        if team.per_user_servers():
            return Sealer.from_environment()
        if team.ui is not None:
            try:
                return Sealer.from_environment()
            except TeamKeyError as error:
                raise TeamKeyError(
                    f"the team file's ui: seals the dashboard's sessions with it: {error}"
                ) from None
        return None
    finally:
        os.environ.pop(TEAM_KEY_VARIABLE, None)  # no backend's business either way


async def _per_user_credentials(
    stack: AsyncExitStack, team: TeamFile, state: TeamState, sealer: Sealer | None, shared: TeamShared
) -> PerUserCredentials | None:
    """The per-user credentials of ``team``'s per-user servers, if it has any."""
    per_user = team.per_user_servers()
    if not per_user:
        return None
    assert sealer is not None  # made for them (``_team_sealer``)
    from mcpfleet.team.per_user import PerUserCredentials

    configs = {
        name: _without_authorization(config)
        for name, config in server_configs(team).items()
        if name in per_user
    }
    return await stack.enter_async_context(
        PerUserCredentials.running(
            state, sealer, configs, public_url=team.public_url, cwd=team.path.parent, shared=shared
        )
    )


def _without_authorization(config: ServerConfig) -> ServerConfig:
    """A per-user server's entry as its users' own connections see it: an ``Authorization`` it
    carries is the shared fleet's, for listing; sent on a user's connection, it would stand in for
    the user's own token (and the upstream would never ask for one)."""
    headers = {name: value for name, value in config.headers.items() if name.lower() != "authorization"}
    return replace(config, headers=headers, literal_header_keys=frozenset(headers))
