"""The team gateway's fleet: the team file's ``servers``, and nothing discovered on this machine.

``TeamFleet`` is an ``MCPManager`` whose discovery is the team file it holds: no user, project
or host config is read (a replica serves what the team file says, whoever runs it). A reload
(``LiveTeamFile``) hands it the new file and calls ``reload()``, which applies the difference
as for any fleet: servers added start, removed ones stop, changed ones restart, the others keep
their connection.

``LiveTeamFile`` watches the file: its content is read again every ``interval_s``, and a file
that changed and loads is handed to every follower (the fleet, the guard's policies, the
limits); one that no longer loads is reported once on the log and the last good one kept — a
typo while editing never takes the gateway down. What the replica is built on at start
(``RESTART_ONLY``: its address, identity, state, audit, ``/metrics``, drain and ``/ui`` settings) is not
re-applied: a change there is logged, naming the keys, once per reload that makes it.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio

from mcpfleet.config.model import DiscoveryResult, SourceInfo
from mcpfleet.errors import ConfigError
from mcpfleet.fleet.manager import MCPManager
from mcpfleet.team.loading import load_team_file, server_configs

if TYPE_CHECKING:
    from mcpfleet.team.model import TeamFile

logger = logging.getLogger(__name__)

WATCH_INTERVAL_S = 1.0
"""How often the team file is read again for changes (a reload costs one read when nothing changed)."""
TEAM_PROVIDER = "mcpfleet-team"

TeamFollower = Callable[["TeamFile", "TeamFile"], Awaitable[None]]
"""Told ``(new, old)`` after each reload that loaded."""
RESTART_ONLY = {
    "public_url": "public_url",
    "identity": "identity",
    "state": "state",
    "audit": "audit",
    "metrics": "metrics",
    "drain_timeout_s": "drain_timeout",
    "ui": "ui",
}
"""``TeamFile`` fields read once, when the replica starts, and the team file's key of each."""


class TeamFleet(MCPManager):
    """An ``MCPManager`` over the team file's servers (see the module)."""

    def __init__(self, team: TeamFile, **settings: Any) -> None:
        super().__init__(team.path.parent, enable_project_config=False, **settings)
        self.team = team

    def discover(self) -> DiscoveryResult:
        """The team file's servers, as discovery would have found them in one config file."""
        team = self.team
        configs = server_configs(team)
        path = str(team.path)
        sources = {
            name: SourceInfo(TEAM_PROVIDER, "mcpfleet team file", path, "user", f"/servers/{name}")
            for name in configs
        }
        result = DiscoveryResult(configs=configs, sources=sources, config_paths=[str(team.path)])
        self.last_discovery = result
        return result


class LiveTeamFile:
    """The team file as it is now, read again when it changes (see the module)."""

    def __init__(self, team: TeamFile, *, interval_s: float = WATCH_INTERVAL_S) -> None:
        self.current = team
        self.interval_s = interval_s
        self._followers: list[TeamFollower] = []
        self._digest = _digest(team.path)
        self._reported: str | None = None
        self.reloads = 0
        """Reloads that loaded and were applied (tests wait on ``reloaded``)."""
        self.reloaded = anyio.Event()
        self._checking = anyio.Lock()

    def follow(self, follower: TeamFollower) -> None:
        self._followers.append(follower)

    async def watch(self) -> None:
        """Read the file every ``interval_s`` until cancelled; apply each change that loads."""
        while True:
            await anyio.sleep(self.interval_s)
            await self.check()

    async def check(self) -> bool:
        """Read the file once; ``True`` when it changed, loaded and was applied. One check at a
        time: the poll and another replica's word (``team.replicas``) may ask together."""
        async with self._checking:
            return await self._check()

    async def _check(self) -> bool:
        path = self.current.path
        digest = await anyio.to_thread.run_sync(_digest, path)
        if digest == self._digest:
            return False
        self._digest = digest
        try:
            team = await anyio.to_thread.run_sync(load_team_file, path)
        except ConfigError as error:
            message = str(error)
            if message != self._reported:
                logger.error("mcpfleet serve --team: %s; still serving the last good team file", message)
                self._reported = message
            return False
        self._reported = None
        old, self.current = self.current, team
        kept = restart_only_changes(team, old)
        if kept:
            logger.warning(
                "mcpfleet serve --team: %s changed %s, which apply when this replica restarts "
                "(a rolling restart of every replica: docs/team.md); the rest of the change applies now",
                path,
                ", ".join(kept),
            )
        for follower in list(self._followers):
            try:
                await follower(team, old)
            except Exception:
                logger.exception("mcpfleet serve --team: applying the reloaded team file failed")
        logger.info("mcpfleet serve --team: %s reloaded", path)
        self.reloads += 1
        self.reloaded.set()
        self.reloaded = anyio.Event()
        return True


def restart_only_changes(new: TeamFile, old: TeamFile) -> list[str]:
    """The team file's keys among ``RESTART_ONLY`` whose settings differ between the two."""
    return [key for field, key in RESTART_ONLY.items() if getattr(new, field) != getattr(old, field)]


def _digest(path: Path) -> bytes | None:
    """The file's content digest (``None`` when it cannot be read now)."""
    try:
        return hashlib.sha256(path.read_bytes()).digest()
    except OSError:
        return None
