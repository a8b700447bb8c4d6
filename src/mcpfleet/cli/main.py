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

from mcpfleet.cli.display import safe_text
from mcpfleet.cli.output import EXIT_FAILED, EXIT_INTERRUPTED, EXIT_USAGE, report_error
from mcpfleet.errors import ConfigError

COMMAND_MODULES: tuple[str, ...] = (
    "mcpfleet.cli.config_commands",
    "mcpfleet.cli.fleet_commands",
    "mcpfleet.cli.auth_commands",
    "mcpfleet.cli.serve_commands",
    "mcpfleet.cli.hosts_commands",
    "mcpfleet.cli.daemon_commands",
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
        type=_milliseconds,
        default=250,
        metavar="MS",
        help="start-up gate in ms (default 250; 0 waits for every server)",
    )
    parser.add_argument("--no-cache", action="store_true", help="do not read or write the tool cache")
    parser.add_argument("--json", action="store_true", help="machine-readable output on stdout")
    parser.add_argument(
        "--strict", action="store_true", help="config, status, tools: exit 1 when any server or file failed"
    )
    parser.add_argument(
        "-v", "--verbose", action="count", default=0, help="more logging on stderr, and what caused an error"
    )
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for module_name in COMMAND_MODULES:
        module = importlib.import_module(module_name)
        module.register(subparsers)
    return parser


def strict_option(parser: argparse.ArgumentParser, help_text: str) -> None:
    """``--strict`` after a sub-command too; absent there, it leaves the global value alone."""
    parser.add_argument("--strict", action="store_true", default=argparse.SUPPRESS, help=help_text)


def _milliseconds(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number of milliseconds, got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be 0 (wait for every server) or more, got {value}")
    return value


class _SafeFormatter(logging.Formatter):
    """Log records quote server output and file contents: show them as text on the terminal."""

    def format(self, record: logging.LogRecord) -> str:
        return safe_text(super().format(record), multiline=True)


def _configure_logging(verbosity: int) -> None:
    from mcpfleet.redaction import RedactingLogFilter

    level = logging.WARNING if verbosity == 0 else logging.INFO if verbosity == 1 else logging.DEBUG
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(_SafeFormatter("%(levelname)s %(name)s: %(message)s"))
    # The HTTP client and the SDK log URLs as they are, substituted secrets included.
    handler.addFilter(RedactingLogFilter())
    logging.basicConfig(level=level, handlers=[handler])


def _silence_stdout() -> None:
    """The reader of stdout went away (``mcpfleet --json config | head``): drop the rest of
    the output, including what the interpreter would flush at exit."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)


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
        report_error(error)
        return EXIT_USAGE
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        # The same exit as rich's own when a table meets a closed pipe.
        _silence_stdout()
        return EXIT_FAILED


if __name__ == "__main__":
    sys.exit(main())
