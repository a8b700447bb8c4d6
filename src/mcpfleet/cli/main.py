"""Entry point of the ``mcpfleet`` command: global options, then one sub-command.

Each group of sub-commands lives in its own module with a ``register(subparsers)``
function; handlers take the parsed ``argparse.Namespace`` and return an exit code.
Nothing heavy is imported here, so ``mcpfleet --help`` stays fast.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from mcpfleet.cli.output import EXIT_USAGE, error_line
from mcpfleet.errors import ConfigError

COMMAND_MODULES: tuple[str, ...] = (
    "mcpfleet.cli.config_commands",
    "mcpfleet.cli.fleet_commands",
    "mcpfleet.cli.auth_commands",
)

Handler = Callable[[argparse.Namespace], int]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="mcpfleet",
        description="Find, connect, test and serve every MCP server your coding tools know about.",
    )
    parser.add_argument("--cwd", type=Path, default=None, help="project root (default: current directory)")
    parser.add_argument(
        "--config",
        dest="extra_configs",
        action="append",
        type=Path,
        default=[],
        metavar="FILE",
        help="extra config file (repeatable); overrides discovered servers of the same name",
    )
    parser.add_argument("--no-project-config", action="store_true", help="ignore project-level config files")
    parser.add_argument(
        "--trust-project", action="store_true", help="approve this project's servers for this run only"
    )
    parser.add_argument(
        "--startup-timeout",
        type=int,
        default=250,
        metavar="MS",
        help="start-up gate in ms (default 250; 0 waits for every server)",
    )
    parser.add_argument("--no-cache", action="store_true", help="do not read or write the tool cache")
    parser.add_argument("--json", action="store_true", help="machine-readable output on stdout")
    parser.add_argument("-v", "--verbose", action="count", default=0, help="more logging on stderr")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for module_name in COMMAND_MODULES:
        module = importlib.import_module(module_name)
        module.register(subparsers)
    return parser


def project_root(args: argparse.Namespace) -> Path:
    """The project root the command works on, absolute."""
    root: Path = args.cwd if args.cwd is not None else Path.cwd()
    return root.expanduser().resolve()


def trust_project(args: argparse.Namespace) -> bool:
    """``--trust-project`` or ``MCPFLEET_TRUST_PROJECT=1``."""
    return bool(args.trust_project) or os.environ.get("MCPFLEET_TRUST_PROJECT", "") in ("1", "true", "yes")


def _configure_logging(verbosity: int) -> None:
    from mcpfleet.redaction import RedactingLogFilter

    level = logging.WARNING if verbosity == 0 else logging.INFO if verbosity == 1 else logging.DEBUG
    logging.basicConfig(level=level, format="%(levelname)s %(name)s: %(message)s", stream=sys.stderr)
    # The HTTP client and the SDK log URLs as they are, substituted secrets included.
    for handler in logging.getLogger().handlers:
        handler.addFilter(RedactingLogFilter())


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help(sys.stderr)
        return EXIT_USAGE
    _configure_logging(args.verbose)
    handler: Handler = args.handler
    try:
        return handler(args)
    except ConfigError as error:
        error_line(str(error))
        return EXIT_USAGE
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
