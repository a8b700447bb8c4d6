"""The ``mcpfleet`` console script: ``serve`` through the user's daemon when it can, else the CLI.

Hosts launch ``mcpfleet serve`` for every session, so that command must start at once: it
becomes the shim (``mcpfleet.daemon_client.shim``), which loads neither the SDK nor the CLI's
modules. Everything else, and ``serve`` whenever the daemon cannot serve it, goes to
``mcpfleet.cli.main``. ``serve`` stays in this process when

* ``--no-daemon`` is given, or ``MCPFLEET_NO_DAEMON=1`` is set;
* ``--http`` is given: the daemon serves stdio hosts, the HTTP gateway is its own process;
* ``--no-cache`` or ``--config FILE`` is given: they change the fleet itself, which the
  daemon shares; one line on stderr says so;
* the command line is one that ``mcpfleet.cli.main`` would refuse or answer itself (a usage
  error, ``--help``), or a gateway's mark says this serve was started by a gateway's backend
  (``mcpfleet.cli.main`` refuses it);
* the platform has no Unix sockets with peer credentials.

The options are read by a parser built from the same table as ``mcpfleet.cli.main``'s
(``mcpfleet.contract.options``), so that a command line means the same thing either way.
"""

from __future__ import annotations

import argparse
import os
import socket
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, NoReturn

from mcpfleet.contract.environment import GATEWAY_PID_VARIABLE
from mcpfleet.contract.options import (
    HELP_FLAGS,
    SERVE,
    VERSION_FLAG,
    add_global_options,
    add_serve_options,
    merge_global_options,
)
from mcpfleet.errors import MCPFleetError

if TYPE_CHECKING:
    from mcpfleet.daemon_client.shim import ShimSettings


class _CommandLineError(MCPFleetError):
    """Not a command line the shim takes; ``mcpfleet.cli.main`` says what is wrong with it."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise _CommandLineError(message)


@dataclass(frozen=True)
class ServeRoute:
    """How ``serve`` runs: through the daemon with ``settings``, else in this process
    (``notice``: the line on stderr that says why, when the user should know)."""

    settings: ShimSettings | None = None
    notice: str | None = None


def main(argv: Sequence[str] | None = None) -> int:
    arguments = list(sys.argv[1:] if argv is None else argv)
    if SERVE in arguments:
        route = serve_route(arguments)
        if route.settings is not None:
            from mcpfleet.daemon_client.shim import run_shim

            return run_shim(route.settings, in_process=lambda: _cli_main([*arguments, "--no-daemon"]))
        if route.notice is not None:
            sys.stderr.write(f"mcpfleet: {route.notice}\n")
    return _cli_main(arguments)


def _cli_main(arguments: list[str]) -> int:
    from mcpfleet.cli.main import main as cli_main

    return cli_main(arguments)


def serve_route(arguments: Sequence[str]) -> ServeRoute:
    """Whether ``mcpfleet <arguments>`` is a ``serve`` the daemon can take (see the module)."""
    from mcpfleet.cli.options import FLEET_CHANGING_OPTIONS
    from mcpfleet.daemon_client.launch import daemon_disabled

    try:
        args = merge_global_options(build_parser().parse_args(arguments))
    except _CommandLineError:
        return ServeRoute()
    if args.command != SERVE or args.help or args.serve_help or hasattr(args, "version"):
        return ServeRoute()
    # The HTTP gateway's own options need --http, which serves in this process: without it,
    # mcpfleet.cli.main says what is wrong (and refuses --auth-token in every case).
    http_options = (args.auth_token, args.auth_token_file, args.insecure_no_auth or None, args.team)
    if (
        args.no_daemon
        or args.http is not None
        or any(o is not None for o in http_options)
        or daemon_disabled()
    ):
        return ServeRoute()
    if os.environ.get(GATEWAY_PID_VARIABLE) or not hasattr(socket, "SO_PEERCRED"):
        return ServeRoute()
    for name, notice in FLEET_CHANGING_OPTIONS.items():
        if getattr(args, name):
            return ServeRoute(notice=notice)
    return ServeRoute(settings=_shim_settings(args))


def _shim_settings(args: argparse.Namespace) -> ShimSettings:
    from mcpfleet.cli.options import serve_fleet_spec
    from mcpfleet.daemon_client.shim import ShimSettings

    return ShimSettings(fleet=serve_fleet_spec(args), verbose=args.verbose > 0)


def build_parser() -> argparse.ArgumentParser:
    """The options of ``mcpfleet [global options] serve [serve options]``, from the table
    ``cli/main.py`` builds its parser from, checked alike: a command line the CLI would refuse
    goes to it, and it says what is wrong."""
    parser = _Parser(prog="mcpfleet", add_help=False)
    parser.add_argument(*HELP_FLAGS, action="store_true")
    # The CLI prints the version and exits: read here only to leave that command line to it.
    parser.add_argument(VERSION_FLAG, action="store_true", default=argparse.SUPPRESS)
    add_global_options(parser)
    subparsers = parser.add_subparsers(dest="command")
    serve = subparsers.add_parser(SERVE, add_help=False)
    serve.add_argument(*HELP_FLAGS, dest="serve_help", action="store_true")
    add_serve_options(serve)
    add_global_options(serve, depth=1)
    return parser
