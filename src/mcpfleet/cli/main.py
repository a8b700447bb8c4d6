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
from collections.abc import Callable, Iterator, Sequence
from typing import NoReturn

from mcpfleet.cli.help_texts import describe_command
from mcpfleet.cli.output import (
    EXIT_FAILED,
    EXIT_INTERRUPTED,
    EXIT_USAGE,
    emit_json,
    finish_json_output,
    json_output_requested,
    report_error,
    request_json_output,
    start_output,
)
from mcpfleet.contract.options import VERSION_FLAG, add_global_options, merge_global_options
from mcpfleet.contract.text import safe_text
from mcpfleet.errors import ConfigError

COMMAND_MODULES: tuple[str, ...] = (
    "mcpfleet.cli.config_commands",
    "mcpfleet.cli.fleet_commands",
    "mcpfleet.cli.auth_commands",
    "mcpfleet.cli.serve_commands",
    "mcpfleet.cli.hosts_commands",
    "mcpfleet.cli.daemon_commands",
    "mcpfleet.cli.ui_commands",
    "mcpfleet.cli.team_commands",
    "mcpfleet.cli.audit_commands",
)

Handler = Callable[[argparse.Namespace], int]


class CommandLineParser(argparse.ArgumentParser):
    """The parser of ``mcpfleet`` and of each of its commands: under ``--json`` a usage error
    is a JSON document on stdout too (``{"error": …}``), still exit 2."""

    def error(self, message: str) -> NoReturn:
        if json_output_requested():
            emit_json({"error": f"{self.prog}: error: {message}"})
        super().error(message)


def build_parser() -> argparse.ArgumentParser:
    from mcpfleet import __version__

    parser = CommandLineParser(
        prog="mcpfleet",
        description="Find, connect, test and serve every MCP server your coding tools know about.",
        epilog="Global options are accepted after the command too (`mcpfleet daemon status --json`). "
        "`mcpfleet COMMAND --help` describes one command, with examples.",
    )
    parser.add_argument(VERSION_FLAG, action="version", version=f"mcpfleet {__version__}")
    add_global_options(parser)
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for module_name in COMMAND_MODULES:
        module = importlib.import_module(module_name)
        module.register(subparsers)
    for path, command in command_parsers(parser):
        add_global_options(command, depth=len(path))
        describe_command(command, path)
    return parser


def command_parsers(
    parser: argparse.ArgumentParser, path: tuple[str, ...] = ()
) -> Iterator[tuple[tuple[str, ...], argparse.ArgumentParser]]:
    """Every command and action parser under ``parser``, with its words (``("daemon", "status")``)."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, command in action.choices.items():
                yield (*path, name), command
                yield from command_parsers(command, (*path, name))


def strict_option(parser: argparse.ArgumentParser, help_text: str) -> None:
    """``--strict`` after a sub-command too; absent there, it leaves the global value alone."""
    parser.add_argument("--strict", action="store_true", default=argparse.SUPPRESS, help=help_text)


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
    arguments = list(sys.argv[1:] if argv is None else argv)
    # Before parsing, from the words themselves: a usage error under --json is JSON too.
    options = arguments[: arguments.index("--")] if "--" in arguments else arguments
    start_output(json_requested="--json" in options)
    parser = build_parser()
    args = merge_global_options(parser.parse_args(arguments))
    request_json_output(args.json)
    if args.command is None:
        parser.print_help(sys.stderr)
        return finish_json_output(EXIT_USAGE, "no command given: `mcpfleet --help` lists them")
    _configure_logging(args.verbose)
    handler: Handler = args.handler
    try:
        return finish_json_output(handler(args))
    except ConfigError as error:
        report_error(error)
        return finish_json_output(EXIT_USAGE)
    except KeyboardInterrupt:
        return finish_json_output(EXIT_INTERRUPTED, "interrupted")
    except BrokenPipeError:
        # The same exit as rich's own when a table meets a closed pipe.
        _silence_stdout()
        return EXIT_FAILED


if __name__ == "__main__":
    sys.exit(main())
