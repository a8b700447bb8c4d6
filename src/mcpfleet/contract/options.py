"""The command line's options, declared once: ``mcpfleet``'s global options and ``serve``'s.

Two parsers are built from this table: the CLI's (``cli/main.py``, with every command) and
the console script's (``cli/entry.py``), which reads a ``serve`` command line to route it
through the daemon before anything of the CLI is loaded. Both take each option from here, with
its flags, value type, choices and default, so a command line means the same thing to both.
Discovery reads the table too (``config.gateway_entry``: which words of a host's ``mcpfleet``
entry are options).

Global options are accepted before the command and after it (``mcpfleet daemon status
--json``). After a command they are kept under a ``dest`` of their own and folded into the
top-level ones by ``merge_global_options``: argparse gives each sub-command a namespace of its
own, which would otherwise overwrite the values given before the command (``--config a status
--config b`` keeps both).

Standard library only, and ``argparse`` is loaded only to build a parser: discovery reads
the table without it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from mcpfleet.contract.defaults import (
    DEFAULT_PREFIX,
    DEFAULT_TOOL_MODE,
    MAX_TOOL_NAME_LENGTH,
    MIN_TOOL_NAME_LENGTH,
    PREFIX_MODES,
    STARTUP_TIMEOUT_MS,
    TOOL_MODES,
)
from mcpfleet.contract.environment import GATEWAY_TOKEN_VARIABLE

if TYPE_CHECKING:
    import argparse

SERVE = "serve"
SERVE_HELP = "serve every configured MCP server as one MCP server (stdio, or HTTP with --http)"
HELP_FLAGS = ("-h", "--help")
VERSION_FLAG = "--version"
"""Every parser has these besides the table's options; each parser decides what they do."""

GLOBAL_AFTER_COMMAND = "global{depth}_"
"""The prefix of a global option's ``dest`` when given after a command (``depth`` 1), after a
sub-command's action (2), or after an action's own action (3: ``team key add``)."""
COMMAND_DEPTHS = (1, 2, 3)

Action = Literal["store", "store_true", "append", "count"]


def _argument_type_error(message: str) -> Exception:
    import argparse

    return argparse.ArgumentTypeError(message)


def milliseconds(text: str) -> int:
    """``--startup-timeout``'s value: a whole number of milliseconds, 0 or more."""
    try:
        value = int(text)
    except ValueError:
        raise _argument_type_error(f"expected a whole number of milliseconds, got {text!r}") from None
    if value < 0:
        raise _argument_type_error(f"must be 0 (wait for every server) or more, got {value}")
    return value


def name_length(text: str) -> int:
    """``--max-name-length``'s value: a whole number of characters, ``MIN_TOOL_NAME_LENGTH`` or more."""
    try:
        value = int(text)
    except ValueError:
        raise _argument_type_error(f"expected a whole number of characters, got {text!r}") from None
    if value < MIN_TOOL_NAME_LENGTH:
        raise _argument_type_error(f"must be at least {MIN_TOOL_NAME_LENGTH}, got {value}")
    return value


def tool_count(text: str) -> int:
    """``--max-tools``'s value: a whole number of tools, 1 or more."""
    try:
        value = int(text)
    except ValueError:
        raise _argument_type_error(f"expected a whole number of tools, got {text!r}") from None
    if value < 1:
        raise _argument_type_error(f"must be 1 or more, got {value}")
    return value


@dataclass(frozen=True)
class Option:
    """One option of the command line, as argparse is told it."""

    flags: tuple[str, ...]
    dest: str
    help: str | None
    """``None``: accepted, but not shown in ``--help``."""
    action: Action = "store"
    default: Any = None
    metavar: str | None = None
    type: Callable[[str], Any] | None = None
    choices: tuple[str, ...] | None = None

    @property
    def takes_value(self) -> bool:
        return self.action in ("store", "append")

    def add_to(
        self,
        parser: argparse.ArgumentParser | argparse._ArgumentGroup,
        *,
        dest: str | None = None,
        default: Any = None,
    ) -> None:
        """On ``parser``, under ``dest`` and with ``default`` when given, else the option's own."""
        import argparse

        keywords: dict[str, Any] = {
            "dest": self.dest if dest is None else dest,
            "action": self.action,
            "default": self.default if default is None else default,
            "help": argparse.SUPPRESS if self.help is None else self.help,
        }
        for name in ("metavar", "type", "choices"):
            if getattr(self, name) is not None:
                keywords[name] = getattr(self, name)
        parser.add_argument(*self.flags, **keywords)


GLOBAL_OPTIONS: tuple[Option, ...] = (
    Option(("--cwd",), "cwd", "project root (default: current directory)", metavar="DIR", type=Path),
    Option(
        ("--config",),
        "extra_configs",
        "extra config file (repeatable); overrides discovered servers of the same name",
        action="append",
        default=[],
        metavar="FILE",
        type=Path,
    ),
    Option(
        ("--no-project-config",),
        "no_project_config",
        "ignore project-level config files",
        action="store_true",
        default=False,
    ),
    Option(
        ("--trust-project",),
        "trust_project",
        "approve this project's servers for this run only",
        action="store_true",
        default=False,
    ),
    Option(
        ("--startup-timeout",),
        "startup_timeout",
        f"start-up gate in ms (default {STARTUP_TIMEOUT_MS}; 0 waits for every server)",
        default=STARTUP_TIMEOUT_MS,
        metavar="MS",
        type=milliseconds,
    ),
    Option(
        ("--no-cache",), "no_cache", "do not read or write the tool cache", action="store_true", default=False
    ),
    Option(
        ("--json",),
        "json",
        "machine-readable output on stdout, errors included",
        action="store_true",
        default=False,
    ),
    Option(
        ("--strict",),
        "strict",
        "config, status, tools: exit 1 when any server or file failed",
        action="store_true",
        default=False,
    ),
    Option(
        ("-v", "--verbose"),
        "verbose",
        "more logging on stderr, and what caused an error",
        action="count",
        default=0,
    ),
)
"""The global options, in the order ``--help`` shows them."""

SERVE_OPTIONS: tuple[Option, ...] = (
    Option(
        ("--prefix",),
        "prefix",
        "always: serve <server>_<tool> (default); none: names and URIs as the servers give them "
        "(a name two servers share refuses to start)",
        default=DEFAULT_PREFIX,
        choices=PREFIX_MODES,
    ),
    Option(
        ("--max-name-length",),
        "max_name_length",
        f"longest served tool name (default {MAX_TOOL_NAME_LENGTH}); lower it to leave room for a "
        "host's own prefix",
        default=MAX_TOOL_NAME_LENGTH,
        metavar="N",
        type=name_length,
    ),
    Option(
        ("--http",),
        "http",
        "serve streamable HTTP at http://HOST:PORT/mcp instead of stdio "
        "(host 127.0.0.1 unless given; port 0 picks a free one)",
        metavar="[HOST:]PORT",
    ),
    Option(
        ("--auth-token-file",),
        "auth_token_file",
        "with --http: the file holding the bearer token every request must carry "
        f"(else {GATEWAY_TOKEN_VARIABLE}, else one generated once into the state folder's "
        "gateway-token.json); stderr says where it is",
        metavar="FILE",
        type=Path,
    ),
    Option(
        ("--insecure-no-auth",),
        "insecure_no_auth",
        "with --http on loopback: serve without a bearer token, so every user of this "
        "machine can call every tool (throw-away fleets only)",
        action="store_true",
        default=False,
    ),
    Option(
        ("--team",),
        "team",
        "with --http: serve as a team gateway: the servers, sign-in, policies and audit of this "
        "team file (docs/team.md), instead of this machine's configs",
        metavar="FILE",
        type=Path,
    ),
    # Refused (``cli.serve_commands``): a token on the command line is readable by every user in ps.
    Option(("--auth-token",), "auth_token", None, metavar="T"),
    Option(
        ("--tools",),
        "tool_mode",
        "all: every tool; search: find_tools and call_tool instead (plus pinned tools); "
        "auto (default): every tool up to the client's budget, the pair above it",
        default=DEFAULT_TOOL_MODE,
        choices=TOOL_MODES,
    ),
    Option(
        ("--max-tools",),
        "max_tools",
        "the budget of every client in --tools auto (default: known from the client's name, else no limit)",
        metavar="N",
        type=tool_count,
    ),
    Option(
        ("--profile",),
        "profile",
        'serve the servers and tools of this profile ("profiles" in mcpfleet\'s user config)',
        metavar="NAME",
    ),
    Option(
        ("--no-daemon",),
        "no_daemon",
        "serve from this process instead of through the user's daemon (also MCPFLEET_NO_DAEMON=1)",
        action="store_true",
        default=False,
    ),
)
"""``serve``'s own options, in the order ``mcpfleet serve --help`` shows them."""


def add_global_options(parser: argparse.ArgumentParser, *, depth: int = 0) -> None:
    """The global options on ``parser``: the top-level parser (``depth`` 0) or a command's
    (1), an action's (2) or an action's action (3), where each one the command does not define
    itself is accepted too, in a group of its own in the command's ``--help``, under a dest of its own and no
    default, so that an absent option leaves the earlier value alone."""
    import argparse

    if depth == 0:
        for option in GLOBAL_OPTIONS:
            option.add_to(parser)
        return
    group = parser.add_argument_group("global options (also accepted before the command)")
    prefix = GLOBAL_AFTER_COMMAND.format(depth=depth)
    for option in GLOBAL_OPTIONS:
        if not any(flag in parser._option_string_actions for flag in option.flags):
            option.add_to(group, dest=prefix + option.dest, default=argparse.SUPPRESS)


def merge_global_options(args: argparse.Namespace) -> argparse.Namespace:
    """Fold the global options given after the command into the top-level ones: a repeatable
    one gathers every value, ``-v`` counts every time, any other takes the last value given."""
    for depth in COMMAND_DEPTHS:
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


def add_serve_options(parser: argparse.ArgumentParser) -> None:
    """``serve``'s own options on ``parser`` (its global ones come with every command's)."""
    for option in SERVE_OPTIONS:
        option.add_to(parser)


def long_flags(options: Iterable[Option], *, taking_a_value: bool) -> frozenset[str]:
    """The ``--long`` flags of those of ``options`` that take a value, or of those that take none."""
    return frozenset(
        flag
        for option in options
        if option.takes_value == taking_a_value
        for flag in option.flags
        if flag.startswith("--")
    )
