"""The global options that say which fleet a command works on, read once.

``--cwd``, ``--config``, ``--no-project-config``, ``--trust-project``,
``--startup-timeout`` and ``--no-cache`` (declared in ``mcpfleet.contract.options``) become
one ``FleetOptions``, and every command builds its discovery, its manager or its agent
session from that one object, so a flag means the same thing to every command. The agent's
own discovery hook (Exa servers left to the native integration) is applied here too, as an
agent session applies it.

Nothing heavy is imported at module level: ``mcpfleet --help`` loads this module.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal, TypedDict

# Standard library only, as this module: the shim's route (``cli.entry``) builds its spec here.
from mcpfleet.contract.defaults import STARTUP_TIMEOUT_MS
from mcpfleet.contract.wire import FleetSpec

if TYPE_CHECKING:
    from contextlib import AbstractAsyncContextManager

    from mcpfleet.agent.loader import AgentDiscoveryResult
    from mcpfleet.agent.session import AgentSession
    from mcpfleet.config import EntryFilter
    from mcpfleet.fleet.manager import MCPManager

TRUST_PROJECT_VARIABLE = "MCPFLEET_TRUST_PROJECT"
"""Set to ``1`` (``true``, ``yes``): the same as ``--trust-project`` on every command."""
FLEET_CHANGING_OPTIONS = {
    "no_cache": "serve --no-cache runs in this process, not through the daemon (its fleet shares the "
    "tool cache)",
    "extra_configs": "serve --config runs in this process, not through the daemon (its fleet reads the "
    "discovered config files only)",
}
"""Options (their ``dest``) that give a command a fleet of its own, which the shared daemon
cannot serve, and the line on stderr with which ``serve`` says so."""


class DiscoverySettings(TypedDict):
    """What discovery needs from the global options."""

    enable_project_config: bool
    extra_config_paths: tuple[Path, ...]
    trust_project: bool


class SessionSettings(DiscoverySettings):
    """The keywords of ``open_agent_session`` that the global options decide."""

    cache: Literal["default"] | None
    startup_timeout_ms: int


class ManagerSettings(SessionSettings):
    """The keywords of ``MCPManager`` that the global options decide."""

    entry_filter: EntryFilter | None


@dataclass(frozen=True)
class FleetOptions:
    """The fleet a command works on, as the global options describe it."""

    project_root: Path
    """Absolute: ``--cwd``, or the current directory."""
    extra_config_paths: tuple[Path, ...] = ()
    enable_project_config: bool = True
    trust_project: bool = False
    startup_timeout_ms: int = STARTUP_TIMEOUT_MS
    use_cache: bool = True
    roots: tuple[Path, ...] | None = None
    """The folders servers are offered as roots (``--roots``, absolute); ``None``: none (an
    empty ``roots/list``), so a server keeps the folders its own config names."""

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> FleetOptions:
        root: Path = args.cwd if args.cwd is not None else Path.cwd()
        return cls(
            project_root=root.expanduser().resolve(),
            extra_config_paths=tuple(args.extra_configs),
            enable_project_config=not args.no_project_config,
            trust_project=bool(args.trust_project) or trusted_by_environment(),
            startup_timeout_ms=args.startup_timeout,
            use_cache=not args.no_cache,
            roots=_offered_roots(getattr(args, "roots", None), root),
        )

    def fleet_spec(self) -> FleetSpec:
        """This fleet as the daemon is told it, ``serve``'s own options at their defaults."""
        return FleetSpec(
            cwd=str(self.project_root),
            trust_project=self.trust_project,
            enable_project_config=self.enable_project_config,
            startup_timeout_ms=self.startup_timeout_ms,
        )

    def discovery_settings(self, *, all_project_entries: bool = False) -> DiscoverySettings:
        """``all_project_entries`` reads the project's files whatever the flags say, and
        approves nothing: what ``approve``, ``add`` and ``remove`` look through."""
        return DiscoverySettings(
            enable_project_config=all_project_entries or self.enable_project_config,
            extra_config_paths=self.extra_config_paths,
            trust_project=self.trust_project and not all_project_entries,
        )

    def session_settings(self) -> SessionSettings:
        return SessionSettings(
            **self.discovery_settings(),
            cache="default" if self.use_cache else None,
            startup_timeout_ms=self.startup_timeout_ms,
        )

    def manager_settings(self) -> ManagerSettings:
        from mcpfleet.agent.loader import agent_entry_filter

        return ManagerSettings(**self.session_settings(), entry_filter=agent_entry_filter(filter_exa=True))

    def discover(self, *, all_project_entries: bool = False) -> AgentDiscoveryResult:
        """Discovery as an agent session would run it (``mcpfleet.load_all_mcp_configs``)."""
        from mcpfleet.agent.loader import load_all_mcp_configs

        return load_all_mcp_configs(
            self.project_root, **self.discovery_settings(all_project_entries=all_project_entries)
        )

    def manager(self) -> MCPManager:
        """A manager for the fleet, not started yet."""
        from mcpfleet.fleet.manager import MCPManager

        return MCPManager(self.project_root, **self.manager_settings(), roots=self.roots)

    def open_session(self, *, watch: bool = False) -> AbstractAsyncContextManager[AgentSession]:
        """An agent session for the fleet; ``watch`` follows config edits (``shell``)."""
        from mcpfleet.agent.session import open_agent_session

        return open_agent_session(self.project_root, **self.session_settings(), watch=watch, roots=self.roots)


def roots_option(parser: argparse.ArgumentParser) -> None:
    """``--roots DIR`` (repeatable) on a command that connects servers in this process."""
    parser.add_argument(
        "--roots",
        action="append",
        type=Path,
        metavar="DIR",
        help="offer DIR to every server as a root (repeatable; relative to --cwd). Without it no "
        "roots are offered, so a server that follows roots keeps the folders its config names",
    )


def _offered_roots(given: list[Path] | None, project_root: Path) -> tuple[Path, ...] | None:
    if not given:
        return None
    base = project_root.expanduser().resolve()
    return tuple((base / folder.expanduser()).resolve() for folder in given)


def serve_fleet_spec(args: argparse.Namespace) -> FleetSpec:
    """The fleet a ``serve`` command line asks the daemon for: the global options and serve's own."""
    return dataclasses.replace(
        FleetOptions.from_args(args).fleet_spec(),
        profile=args.profile,
        prefix=args.prefix,
        max_name_length=args.max_name_length,
        tools=args.tool_mode,
        max_tools=args.max_tools,
    )


def trusted_by_environment() -> bool:
    """Whether ``MCPFLEET_TRUST_PROJECT`` says what ``--trust-project`` does."""
    return os.environ.get(TRUST_PROJECT_VARIABLE, "") in ("1", "true", "yes")
