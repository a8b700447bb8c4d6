"""Reload by difference: what to stop, start and keep (``plan_reload``, no I/O), and the
watcher that reloads when a discovered config file changes.

Added servers start, removed ones stop, changed ones (another config fingerprint)
restart; unchanged ones stay as they are (same process, same connection) unless they
are not running at all (failed, suspended), in which case they are started again.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Awaitable, Callable, Coroutine, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import anyio
import anyio.to_thread

from mcpfleet.config.model import DiscoveryResult, ServerConfig, SourceInfo
from mcpfleet.errors import Failure
from mcpfleet.fleet.registry import ServerRegistry
from mcpfleet.fleet.startup import StartupReport

logger = logging.getLogger(__name__)

FileStamp = tuple[int, int, int]


@dataclass(frozen=True)
class KnownServer:
    """What a reload needs to know of a server the fleet holds."""

    fingerprint: str
    running: bool
    """Connected, connecting or being reconnected (not failed, suspended or stopped)."""


@dataclass(frozen=True)
class ReloadPlan:
    stop: tuple[str, ...]
    """Removed from the config, or changed: stopped before anything starts."""
    start: Mapping[str, ServerConfig]
    """Added, changed, or known but not running."""
    removed: tuple[str, ...]
    changed: tuple[str, ...]
    kept: int
    """Wanted servers left exactly as they are."""

    def summary(self) -> str:
        return (
            f"{len(self.start)} added or restarted, {len(self.changed)} changed, "
            f"{len(self.removed)} removed, {self.kept} kept"
        )


def plan_reload(known: Mapping[str, KnownServer], wanted: Mapping[str, ServerConfig]) -> ReloadPlan:
    """The difference between the fleet as it is (``known``) and a fresh discovery (``wanted``)."""
    removed = tuple(name for name in known if name not in wanted)
    changed = tuple(
        name
        for name, server in known.items()
        if name in wanted and server.fingerprint != wanted[name].fingerprint
    )
    start = {
        name: config
        for name, config in wanted.items()
        if name in changed or name not in known or not known[name].running
    }
    return ReloadPlan(
        stop=removed + changed,
        start=start,
        removed=removed,
        changed=changed,
        kept=len(wanted) - len(start),
    )


async def apply_reload(
    registry: ServerRegistry,
    discovery: DiscoveryResult,
    stop: Callable[[str], Coroutine[Any, Any, None]],
    connect: Callable[[Mapping[str, ServerConfig], Mapping[str, SourceInfo]], Awaitable[StartupReport]],
) -> StartupReport:
    """Stop what the plan stops (all at once), refresh the sources of the servers kept, then
    connect what it starts behind the start-up gate."""
    known = {name: KnownServer(slot.config.fingerprint, slot.running) for name, slot in registry.items()}
    plan = plan_reload(known, discovery.configs)
    async with anyio.create_task_group() as stoppers:
        for name in plan.stop:
            stoppers.start_soon(stop, name)
    for name, slot in registry.items():
        if name in discovery.configs and name in discovery.sources:
            slot.source = discovery.sources[name]
    logger.info("MCP reload: %s", plan.summary())
    report = await connect(plan.start, discovery.sources)
    report.complete_from(discovery)
    return report


def log_new_config_errors(before: Iterable[Failure], after: Iterable[Failure]) -> None:
    """Warn of each config error of a re-read that the read before it did not have: a file
    left broken is said once, not at every re-read (the error stays in ``status``)."""
    known = {failure.message for failure in before}
    for failure in after:
        if failure.message not in known:
            logger.warning("MCP config: %s", failure.message)


def stamp_files(paths: Iterable[str]) -> dict[str, FileStamp | None]:
    """What identifies each file's current content cheaply: mtime, size, inode (None: absent)."""
    stamps: dict[str, FileStamp | None] = {}
    for path in paths:
        try:
            info = os.stat(path)
        except OSError:
            stamps[path] = None
        else:
            stamps[path] = (info.st_mtime_ns, info.st_size, info.st_ino)
    return stamps


class ConfigWatcher:
    """Reloads by difference when a discovered config file is created, edited, replaced or deleted."""

    def __init__(self, interval_s: float) -> None:
        self.interval_s = interval_s
        self._stamps: dict[str, FileStamp | None] | None = None

    def remember(self, paths: Iterable[str]) -> None:
        """Stamp the files a discovery just read, so an edit made right after is not missed."""
        self._stamps = stamp_files(paths)

    def watch(self, paths: Iterable[str]) -> None:
        """Watch exactly ``paths`` from now on. A file watched already keeps its stamp, so a
        change not reloaded yet still is; a new one is stamped now (a discovery just read it)."""
        known = self._stamps or {}
        wanted = list(dict.fromkeys(paths))
        fresh = stamp_files(path for path in wanted if path not in known)
        self._stamps = {path: known[path] if path in known else fresh[path] for path in wanted}

    async def run(self, reload: Callable[[], Awaitable[object]]) -> None:
        """Check the files every ``interval_s`` and call ``reload`` once each change settles."""
        while True:
            await anyio.sleep(self.interval_s)
            stamps = self._stamps
            if stamps is None:
                continue
            current = await anyio.to_thread.run_sync(stamp_files, list(stamps))
            if current == stamps:
                continue
            # Editors write in several steps (truncate, write, rename): act once the files hold still.
            while True:
                await anyio.sleep(self.interval_s)
                settled = await anyio.to_thread.run_sync(stamp_files, list(stamps))
                if settled == current:
                    break
                current = settled
            # A reload that fails must not be retried in a hot loop. The files ``watch`` added or
            # dropped while this one settled stay as it left them.
            latest = self._stamps if self._stamps is not None else stamps
            self._stamps = {path: current.get(path, stamp) for path, stamp in latest.items()}
            changed = sorted(path for path in current if current[path] != stamps.get(path))
            logger.info("MCP config changed (%s): reloading", ", ".join(changed))
            try:
                await reload()
            except Exception:
                logger.warning("MCP reload after a config change failed", exc_info=True)
