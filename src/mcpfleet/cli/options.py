"""The global options that say which fleet a command works on, read once.

``--cwd``, ``--config``, ``--no-project-config``, ``--trust-project``,
``--startup-timeout`` and ``--no-cache`` become one ``FleetOptions``, and every command
builds its discovery, its manager or its agent session from that one object, so a flag
means the same thing to every command. The agent's own discovery hook (Exa servers left
to the native integration) is applied here too, as an agent session applies it.

Nothing heavy is imported at module level: ``mcpfleet --help`` loads this module.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, TypedDict

# Standard library only, as this module: the shim's route (``cli.entry``) builds its spec here.
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


GLOBAL_AFTER_COMMAND = "global{depth}_"
"""The prefix of a global option's ``dest`` when given after a command (``depth`` 1) or after
a sub-command's action (2): kept apart there, then merged by ``merge_global_options``, since
argparse gives each sub-command a namespace of its own that would otherwise overwrite the
values given before the command (``--config a status --config b`` keeps both)."""


def milliseconds(text: str) -> int:
    """``--startup-timeout``'s value: a whole number of milliseconds, 0 or more."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number of milliseconds, got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be 0 (wait for every server) or more, got {value}")
    return value


@dataclass(frozen=True)
class GlobalOption:
    """One option of ``mcpfleet [global options] COMMAND``, accepted after the command too."""

    flags: tuple[str, ...]
    dest: str
    action: Literal["store", "store_true", "append", "count"]
    default: Any
    help: str
    metavar: str | None = None
    type: Callable[[str], Any] | None = None

    def add_to(self, parser: argparse.ArgumentParser | argparse._ArgumentGroup, *, depth: int) -> None:
        """Before the command (``depth`` 0) with its default; after it, under a dest of its
        own and no default, so that an absent option leaves the earlier value alone."""
        dest = self.dest if depth == 0 else GLOBAL_AFTER_COMMAND.format(depth=depth) + self.dest
        keywords: dict[str, Any] = {
            "dest": dest,
            "action": self.action,
            "default": self.default if depth == 0 else argparse.SUPPRESS,
            "help": self.help,
        }
        if self.metavar is not None:
            keywords["metavar"] = self.metavar
        if self.type is not None:
            keywords["type"] = self.type
        parser.add_argument(*self.flags, **keywords)


GLOBAL_OPTIONS: tuple[GlobalOption, ...] = (
    GlobalOption(
        ("--cwd",),
        "cwd",
        "store",
        None,
        "project root (default: current directory)",
        metavar="DIR",
        type=Path,
    ),
    GlobalOption(
        ("--config",),
        "extra_configs",
        "append",
        [],
        "extra config file (repeatable); overrides discovered servers of the same name",
        metavar="FILE",
        type=Path,
    ),
    GlobalOption(
        ("--no-project-config",),
        "no_project_config",
        "store_true",
        False,
        "ignore project-level config files",
    ),
    GlobalOption(
        ("--trust-project",),
        "trust_project",
        "store_true",
        False,
        "approve this project's servers for this run only",
    ),
    GlobalOption(
        ("--startup-timeout",),
        "startup_timeout",
        "store",
        250,
        "start-up gate in ms (default 250; 0 waits for every server)",
        metavar="MS",
        type=milliseconds,
    ),
    GlobalOption(("--no-cache",), "no_cache", "store_true", False, "do not read or write the tool cache"),
    GlobalOption(
        ("--json",), "json", "store_true", False, "machine-readable output on stdout, errors included"
    ),
    GlobalOption(
        ("--strict",),
        "strict",
        "store_true",
        False,
        "config, status, tools: exit 1 when any server or file failed",
    ),
    GlobalOption(
        ("-v", "--verbose"),
        "verbose",
        "count",
        0,
        "more logging on stderr, and what caused an error",
    ),
)
"""The global options, in the order ``--help`` shows them (``cli.main`` and ``cli.entry``
both add them from here, so the two parsers cannot drift apart)."""


def add_global_options(parser: argparse.ArgumentParser, *, depth: int = 0) -> None:
    """The global options on ``parser``: the top-level parser (``depth`` 0) or a command's
    (1) or an action's (2), where each one the command does not define itself is accepted
    too, in a group of its own in the command's ``--help``."""
    if depth == 0:
        for option in GLOBAL_OPTIONS:
            option.add_to(parser, depth=0)
        return
    group = parser.add_argument_group("global options (also accepted before the command)")
    for option in GLOBAL_OPTIONS:
        if not any(flag in parser._option_string_actions for flag in option.flags):
            option.add_to(group, depth=depth)


def merge_global_options(args: argparse.Namespace) -> argparse.Namespace:
    """Fold the global options given after the command into the top-level ones: a repeatable
    one gathers every value, ``-v`` counts every time, any other takes the last value given."""
    for depth in (1, 2):
        prefix = GLOBAL_AFTER_COMMAND.format(depth=depth)
        for option in GLOBAL_OPTIONS:
            late = prefix + option.dest
            if not hasattr(args, late):
                continue
            value = getattr(args, late)
            delattr(args, late)
            if option.action == "append":
                value = [*getattr(args, option.dest), *value]
            elif option.action == "count":
                value = getattr(args, option.dest) + value
            setattr(args, option.dest, value)
    return args


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
    startup_timeout_ms: int = 250
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
