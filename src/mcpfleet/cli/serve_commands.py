"""``mcpfleet serve``: the whole fleet as one MCP server, on stdio.

stdout carries the protocol and nothing else: every log line goes to stderr.
"""

from __future__ import annotations

import argparse

from mcpfleet.cli.options import FleetOptions
from mcpfleet.cli.output import EXIT_OK


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

    anyio.run(_serve, args)
    return EXIT_OK


async def _serve(args: argparse.Namespace) -> None:
    from mcpfleet.fleet.manager import MCPManager
    from mcpfleet.gateway.core import Gateway
    from mcpfleet.gateway.naming import NamingPolicy
    from mcpfleet.gateway.stdio import serve_stdio

    options = FleetOptions.from_args(args)
    manager = MCPManager(options.project_root, **options.session_settings(), on_uncached="late-join")
    naming = NamingPolicy(prefix=args.prefix, max_name_length=args.max_name_length)
    async with Gateway(manager, naming=naming) as gateway:
        await serve_stdio(gateway)
