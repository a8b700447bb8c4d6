"""``mcpfleet serve --http HOST:PORT --team FILE``: the gateway of a team, assembled.

``open_team_gateway(team, options, …)`` builds, in order: the guard (``TeamGuard``: the team
file's policies, then the call hooks: audit, per-user credentials), the fleet (``TeamFleet``:
the team file's servers), the gateway over it with that guard, and the watcher of the team file
(``LiveTeamFile``), whose reloads reach the fleet (servers added, removed, changed), the guard
(policies: each session whose view changed hears ``list_changed``) and every other follower.

``team_admission(team)`` is what decides, from each request's headers, whether it is served
(``serve_http``'s ``admission``, before any body is read): the identity check that puts each
request's ``Principal`` in its scope. The guard refuses any request that reaches the MCP
endpoint without one.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

import anyio

from mcpfleet.gateway.assembly import GatewayOptions, open_gateway
from mcpfleet.team.fleet import LiveTeamFile, TeamFleet
from mcpfleet.team.guard import CallHooks, TeamGuard

if TYPE_CHECKING:
    from mcpfleet.gateway.core import Gateway
    from mcpfleet.gateway.http import Admission
    from mcpfleet.gateway.relay import Relay
    from mcpfleet.team.model import TeamFile

logger = logging.getLogger(__name__)


@dataclass
class TeamGateway:
    """A team gateway, running: what the command line serves and what tests look into."""

    gateway: Gateway
    guard: TeamGuard
    live: LiveTeamFile
    fleet: TeamFleet


@asynccontextmanager
async def open_team_gateway(
    team: TeamFile,
    options: GatewayOptions,
    *,
    startup_timeout_ms: int,
    use_cache: bool = True,
    hooks: Sequence[CallHooks] = (),
    watch_interval_s: float | None = None,
) -> AsyncIterator[TeamGateway]:
    """The team gateway of ``team``, connected and watching its file (see the module)."""
    guard = TeamGuard(team.policies, hooks)
    live = LiveTeamFile(team) if watch_interval_s is None else LiveTeamFile(team, interval_s=watch_interval_s)
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

    async with open_gateway(open_fleet, replace(options, guard=guard)) as gateway:
        fleet = fleets[0]

        async def apply(new: TeamFile, old: TeamFile) -> None:
            # Servers first: a policy that names a new server finds its tools listed.
            if new.servers != old.servers:
                fleet.team = new
                await fleet.reload()
            guard.update(new.policies)

        live.follow(apply)
        async with anyio.create_task_group() as task_group:
            task_group.start_soon(live.watch, name="mcpfleet team file watcher")
            yield TeamGateway(gateway, guard, live, fleet)
            task_group.cancel_scope.cancel()


def team_admission(team: LiveTeamFile) -> Admission:
    """The admission of a team gateway's requests (``team.identity``: the protected resource's
    metadata, the 401 challenge, tokens and service-account keys), which puts each admitted
    request's principal in its scope."""
    from mcpfleet.team.identity import identity_check

    return identity_check(team.current).admit
