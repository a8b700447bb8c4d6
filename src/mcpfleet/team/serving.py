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
   added, removed, changed) and the guard (policies: each session whose view changed hears
   ``list_changed``), and the fetch of the issuer's keys, until they are held (``/readyz``).

``TeamGateway.admission`` decides, from each request's headers and before any body is read,
whether it is served (``serve_http``'s ``admission``): the identity check (``team.identity``),
which puts each request's ``Principal`` in its scope. ``TeamGateway.around(drain)`` stands in
front of the SDK's MCP application (``serve_http``'s ``around``): ``/healthz`` and ``/readyz``
(``team.health``: ready when not draining, the state and the issuer answer and the servers have
settled), then, when a server is per-user, the pages where users connect their own accounts
(``connect_pages``). The guard refuses any request that reaches the MCP endpoint without a
principal.
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

from mcpfleet.gateway.assembly import GatewayOptions, open_gateway
from mcpfleet.gateway.guard import ALLOWED, CallOutcome, GuardedRequest, Permit, RequestGuard
from mcpfleet.team.audit import AuditLog
from mcpfleet.team.audited_guard import AuditedGuard
from mcpfleet.team.fleet import LiveTeamFile, TeamFleet
from mcpfleet.team.guard import CallHooks, TeamGuard
from mcpfleet.team.loading import server_configs
from mcpfleet.team.metrics import record_for_metrics
from mcpfleet.team.stores import open_team_state

if TYPE_CHECKING:
    from starlette.types import ASGIApp

    from mcpfleet.gateway.core import Gateway
    from mcpfleet.gateway.draining import Drain
    from mcpfleet.gateway.http import Admission
    from mcpfleet.gateway.relay import Relay
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

    @functools.cached_property
    def identity(self) -> IdentityCheck:
        """The identity check, made once: its issuer's keys are the ones ``/readyz`` checks."""
        from mcpfleet.team.identity import identity_check

        return identity_check(self.live.current)

    @property
    def admission(self) -> Admission:
        """The identity check every request passes before it is served (see the module)."""
        admit = self.identity.admit
        # A browser opening a connect link carries its pass (or then its cookie), not a token.
        return self.credentials.passes.admission(admit) if self.credentials is not None else admit

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

        readiness = self.readiness(drain)
        pages = with_metrics(self.connect_pages)

        def wrap(app: ASGIApp) -> ASGIApp:
            return HealthRoutes(pages(app), readiness)

        return wrap


class PerUserHooks:
    """The per-user servers' part of the guard (``CallHooks``): their requests go to the caller's
    own connection (``team.user_backend``), never to the shared fleet."""

    def __init__(self, credentials: PerUserCredentials) -> None:
        self.credentials = credentials

    async def denied(self, principal: Principal, request: GuardedRequest, refusal: str) -> None:
        return None

    async def permit(self, principal: Principal, request: GuardedRequest) -> Permit:
        from mcpfleet.team.user_backend import per_user_permit

        permit = await per_user_permit(self.credentials, request)
        return permit if permit is not None else ALLOWED

    async def finished(
        self, principal: Principal, request: GuardedRequest, outcome: CallOutcome, duration_ms: float
    ) -> None:
        return None


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
        credentials = await _per_user_credentials(stack, team, state)
        hooks: list[CallHooks] = [PerUserHooks(credentials)] if credentials is not None else []
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

        live.follow(apply)
        served = TeamGateway(gateway, guard, live, fleet, state, credentials)
        task_group = await stack.enter_async_context(anyio.create_task_group())
        task_group.start_soon(live.watch, name="mcpfleet team file watcher")
        task_group.start_soon(served.identity.tokens.keys.keep_fetching, name="mcpfleet issuer keys")
        yield served
        task_group.cancel_scope.cancel()


async def _per_user_credentials(
    stack: AsyncExitStack, team: TeamFile, state: TeamState
) -> PerUserCredentials | None:
    """The per-user credentials of ``team``'s per-user servers, if it has any."""
    from mcpfleet.team.sealing import TEAM_KEY_VARIABLE, Sealer

    per_user = team.per_user_servers()
    if not per_user:
        os.environ.pop(TEAM_KEY_VARIABLE, None)  # no backend's business either way
        return None
    from mcpfleet.team.per_user import PerUserCredentials

    sealer = Sealer.from_environment()
    os.environ.pop(TEAM_KEY_VARIABLE, None)
    configs = {name: config for name, config in server_configs(team).items() if name in per_user}
    return await stack.enter_async_context(
        PerUserCredentials.running(state, sealer, configs, public_url=team.public_url, cwd=team.path.parent)
    )
