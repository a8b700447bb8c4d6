"""``mcpfleet serve``: the whole fleet as one MCP server, on stdio.

stdout carries the protocol and nothing else: every log line goes to stderr.
"""

from __future__ import annotations

import argparse
import logging

from mcpfleet.cli.options import FleetOptions
from mcpfleet.cli.output import EXIT_OK
from mcpfleet.errors import ConfigError

logger = logging.getLogger(__name__)


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    serve = subparsers.add_parser("serve", help="serve every configured MCP server as one MCP server (stdio)")
    serve.add_argument(
        "--prefix",
        choices=("always", "none"),
        default="always",
        help="always: serve <server>_<tool> (default); none: names and URIs as the servers give them "
        "(a name two servers share refuses to start)",
    )
    serve.add_argument(
        "--max-name-length",
        type=_name_length,
        default=64,
        metavar="N",
        help="longest served tool name (default 64); lower it to leave room for a host's own prefix",
    )
    serve.set_defaults(handler=serve_command)


def _name_length(text: str) -> int:
    from mcpfleet.fleet.tools import MIN_TOOL_NAME_LENGTH

    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number of characters, got {text!r}") from None
    if value < MIN_TOOL_NAME_LENGTH:
        raise argparse.ArgumentTypeError(f"must be at least {MIN_TOOL_NAME_LENGTH}, got {value}")
    return value


def serve_command(args: argparse.Namespace) -> int:
    import anyio

    try:
        anyio.run(_serve, args)
    except BaseExceptionGroup as group:
        # The fleet's task groups wrap what the gateway raised on its way up: a config error
        # (two servers offering one name under --prefix none) is still a usage error.
        config_errors, _ = group.split(ConfigError)
        if config_errors is not None:
            raise _first_leaf(config_errors) from None
        raise
    return EXIT_OK


def _first_leaf(group: BaseExceptionGroup[ConfigError]) -> ConfigError:
    first = group.exceptions[0]
    return _first_leaf(first) if isinstance(first, BaseExceptionGroup) else first


async def _serve(args: argparse.Namespace) -> None:
    """Serve until stdin ends or a SIGTERM/SIGINT arrives; either way every backend is closed
    within the fleet's shutdown deadline before this returns."""
    import signal

    import anyio

    from mcpfleet.fleet.manager import MCPManager
    from mcpfleet.gateway.core import Gateway
    from mcpfleet.gateway.naming import NamingPolicy
    from mcpfleet.gateway.stdio import serve_stdio

    options = FleetOptions.from_args(args)
    # No Exa filter here (unlike an agent session): a host has no native Exa to fall back on.
    manager = MCPManager(options.project_root, **options.session_settings(), on_uncached="late-join")
    naming = NamingPolicy(prefix=args.prefix, max_name_length=args.max_name_length)

    async def stop_on_signal(scope: anyio.CancelScope) -> None:
        with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
            async for received in signals:
                logger.info(
                    "mcpfleet serve: %s received; closing every server", signal.Signals(received).name
                )
                scope.cancel()
                return

    async with anyio.create_task_group() as task_group:
        task_group.start_soon(stop_on_signal, task_group.cancel_scope)
        async with Gateway(manager, naming=naming) as gateway:
            await serve_stdio(gateway)
        task_group.cancel_scope.cancel()
