"""The projects the daemon's sessions use, and every discovery they need, kept current.

A project in use (``Project``: a real path, an approval mode, whether project files are read)
holds a reference discovery (no values: which files to watch, which variables its entries name,
each entry's fingerprint) and one discovery per filter and environment of its sessions; the
user's own discovery (the neutral folder, no project files) is held per environment too.
``Discoveries`` reads them off the event loop, watches their files, and on a change reads them
all again and takes them at once; it logs each config error once, when it first appears.

Which scope runs what is ``daemon.fleet``'s business; this module only knows what was found.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

import anyio
import anyio.to_thread

from mcpfleet import paths
from mcpfleet.config import LastGoodFiles, load_all_mcp_configs
from mcpfleet.config.discovery import EntryFilter
from mcpfleet.config.model import DiscoveryResult, ServerConfig
from mcpfleet.config.profiles import Profile
from mcpfleet.daemon.scopes import Scope
from mcpfleet.daemon.sharing import bind_session_values, referenced_names
from mcpfleet.errors import Failure
from mcpfleet.fleet.reload import ConfigWatcher, log_new_config_errors

if TYPE_CHECKING:
    from mcpfleet.contract.wire import FleetSpec

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
class Project:
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


class Discoveries:
    """The projects in use and their discoveries, and the user's, with their files watched."""

    def __init__(self, watch_interval_s: float) -> None:
        self.projects: dict[ProjectKey, Project] = {}
        self.user: dict[EnvKey, DiscoveryResult] = {}
        """The user's own discovery (the neutral folder, no project files), per environment."""
        self._user_reference = DiscoveryResult()
        """The user's discovery with no values: which files to watch, which variables its
        entries name, and each entry's fingerprint (which names the unresolved entry)."""
        self._watcher = ConfigWatcher(watch_interval_s)
        self._changes = 0
        """How many config changes were taken: a discovery read across one is read again."""
        self._last_good = LastGoodFiles()
        """Every config file as it last parsed, for all discoveries: a file that stops parsing
        keeps its servers running."""
        self._errors: list[Failure] = []
        """The config errors of the discoveries in use, each logged once when it appeared."""

    async def open(self) -> None:
        """Read the user's reference discovery and watch its files."""
        self._user_reference = await _discover_user(NO_ENVIRONMENT, self._last_good)
        self._watch()
        self._note_errors()

    async def follow(self, on_change: Callable[[], Awaitable[None]]) -> None:
        """Watch the files in use until cancelled: on a change, read every discovery again,
        then ``on_change()``."""

        async def changed() -> None:
            await self._read_again()
            await on_change()

        await self._watcher.run(changed)

    async def project_for(
        self, spec: FleetSpec, session_filter: SessionFilter, environment: EnvKey
    ) -> Project:
        """The project ``spec`` names, with its discovery for ``session_filter`` and
        ``environment``, and the user's own discovery for ``environment``."""
        key = key_of(spec)
        wanted: DiscoveryKey = (session_filter, environment)
        while True:
            project = await self.project(key)
            if wanted in project.discoveries and environment in self.user:
                # No await since it was looked up: the reaper closes only a project without
                # sessions, and the caller adds its own at once.
                return project
            changes = self._changes
            found = await _discover_project(key, session_filter, environment, self._last_good)
            user = self.user.get(environment) or await _discover_user(environment, self._last_good)
            if changes != self._changes or self.projects.get(key) is not project:
                continue  # the files changed while they were read, or the reaper closed it
            project.discoveries.setdefault(wanted, found)
            self.user.setdefault(environment, user)
            self._watch()
            self._note_errors()

    async def project(self, key: ProjectKey) -> Project:
        """The project in use at ``key``, opened with its reference discovery if it is not."""
        while (project := self.projects.get(key)) is None:
            changes = self._changes
            reference = await _discover_project(key, NO_FILTER, NO_ENVIRONMENT, self._last_good)
            if changes == self._changes and key not in self.projects:
                self.projects[key] = Project(key, reference)
                self._watch()
        return project

    def close_project(self, key: ProjectKey) -> Project:
        """Stop holding the project at ``key`` (no session uses it), and the user's discoveries
        of environments no project holds any more; the caller closes its scopes."""
        project = self.projects.pop(key)
        held = {environment for each in self.projects.values() for _, environment in each.discoveries}
        for environment in [each for each in self.user if each not in held]:
            del self.user[environment]
        self._watch()
        return project

    async def variables_of(self, spec: FleetSpec | None) -> frozenset[str]:
        """The variables whose values a connection's client is asked for: those the configs
        of ``spec``'s fleet reference, or with no fleet (a control connection) those of every
        fleet in use (which variables an entry names does not depend on their values)."""
        if spec is None:
            references = [self._user_reference, *(project.reference for project in self.projects.values())]
            return frozenset(name for reference in references for name in reference.referenced_variables)
        project = await self.project(key_of(spec))
        return frozenset(project.reference.referenced_variables)

    def config_errors(self) -> list[dict[str, str]]:
        """The ``errors`` rows of ``daemon status --json``: what the config files in use say wrong."""
        return [failure.to_dict() for failure in self._errors]

    def current_entries(self) -> dict[tuple[str, str], ServerConfig]:
        """Every entry of the discoveries held, by name and fingerprint."""
        return {
            (name, config.fingerprint): config
            for discovery in self._all()
            for name, config in discovery.configs.items()
        }

    async def _read_again(self) -> None:
        """A watched file changed. Every discovery is read again, the user's and each
        project's (each filter's in use), and taken all at once: a project's routes depend
        on both (a user-level entry is shared only if the project resolves it as the user
        scope does), and a half-updated pair would start a server in the wrong scope."""
        self._changes += 1
        user_reference = await _discover_user(NO_ENVIRONMENT, self._last_good)
        references = {
            key: await _discover_project(key, NO_FILTER, NO_ENVIRONMENT, self._last_good)
            for key in list(self.projects)
        }
        user = {
            environment: await _discover_user(environment, self._last_good)
            for environment in self._environments_in_use()
        }
        found = {
            (key, discovery_key): await _discover_project(key, *discovery_key, self._last_good)
            for key, discovery_keys in self._in_use().items()
            for discovery_key in discovery_keys
        }
        # A session that attached while these were read brought its own, read after this change.
        self.user.update(user)
        self._user_reference = user_reference
        for key, project in self.projects.items():
            if key in references:
                project.reference = references[key]
            for discovery_key in project.discoveries:
                if (key, discovery_key) in found:
                    project.discoveries[discovery_key] = found[key, discovery_key]
        self._forget_unused()
        self._watch()
        self._note_errors()

    def _watch(self) -> None:
        """Watch the files of every discovery in use (a project's include the user's)."""
        self._watcher.watch(path for discovery in self._all() for path in discovery.config_paths)

    def _note_errors(self) -> None:
        """Log each config error of the discoveries in use once, when it first appears: the
        daemon has no terminal, its log and ``daemon status`` are where a typo shows."""
        current = {failure.message: failure for discovery in self._all() for failure in discovery.errors}
        log_new_config_errors(self._errors, current.values())
        self._errors = list(current.values())

    def _in_use(self) -> dict[ProjectKey, set[DiscoveryKey]]:
        """Per project, the filters and environments of its attached sessions."""
        return {key: set(project.sessions.values()) for key, project in self.projects.items()}

    def _environments_in_use(self) -> set[EnvKey]:
        return {
            environment for project in self.projects.values() for _, environment in project.sessions.values()
        }

    def _forget_unused(self) -> None:
        """Drop the discoveries no attached session uses (after a config change: read again,
        they would be read for nobody)."""
        in_use = self._in_use()
        for key, project in self.projects.items():
            for discovery_key in list(project.discoveries):
                if discovery_key not in in_use[key]:
                    del project.discoveries[discovery_key]
        environments = self._environments_in_use()
        for environment in list(self.user):
            if environment not in environments:
                del self.user[environment]

    def _all(self) -> list[DiscoveryResult]:
        """Every discovery held: the references and those of the sessions' environments."""
        discoveries = [self._user_reference, *self.user.values()]
        for project in self.projects.values():
            discoveries.append(project.reference)
            discoveries.extend(project.discoveries.values())
        return discoveries


def key_of(spec: FleetSpec) -> ProjectKey:
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


__all__ = [
    "NO_ENVIRONMENT",
    "NO_FILTER",
    "Discoveries",
    "DiscoveryKey",
    "EnvKey",
    "Project",
    "ProjectKey",
    "SessionFilter",
    "environment_key",
    "key_of",
]
