"""Serving the gateway on this process's stdin and stdout."""

from __future__ import annotations

from mcpfleet.gateway.core import Gateway


async def serve_stdio(gateway: Gateway) -> None:
    """Serve ``gateway`` on stdin/stdout until stdin ends."""
    from mcp.server.stdio import stdio_server

    from mcpfleet.gateway.server import build_server, initialization_options

    server = build_server(gateway)
    async with stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, initialization_options(server))
