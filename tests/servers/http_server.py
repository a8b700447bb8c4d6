"""An MCP server over HTTP for tests, built on the SDK's ``MCPServer`` and run by uvicorn.

Usage: ``python http_server.py [--transport streamable-http|sse] [--port N] [--name NAME]
[--require-bearer TOKEN]``.

It binds 127.0.0.1 (``--port 0``, the default, picks a free port) and prints ``READY <port>``
on stdout once it listens. The MCP endpoint is ``/mcp`` (streamable HTTP) or ``/sse``
(legacy SSE). With ``--require-bearer`` every request without ``Authorization: Bearer
TOKEN`` gets 401. Tools: ``echo {message}`` (text + structured), ``add {a, b}``,
``sleep {seconds}`` (reports progress every 0.1 s). ``tests/servers/fixtures.py`` starts it.
"""

from __future__ import annotations

import argparse
import socket
from typing import Any

import anyio
import uvicorn
from mcp.server.mcpserver import Context, MCPServer
from starlette.types import ASGIApp, Receive, Scope, Send


def build_server(name: str) -> MCPServer:
    server = MCPServer(name, instructions=f"http test server {name}")

    @server.tool()
    def echo(message: str) -> dict[str, Any]:
        """Echo a message back."""
        return {"message": message}

    @server.tool()
    def add(a: float, b: float) -> float:
        """Add two numbers."""
        return a + b

    @server.tool()
    async def sleep(seconds: float, ctx: Context) -> str:
        """Sleep, reporting progress."""
        steps = max(1, int(seconds / 0.1))
        for step in range(steps):
            await anyio.sleep(seconds / steps)
            await ctx.report_progress(step + 1, steps)
        return f"slept {seconds}"

    return server


class RequireBearer:
    """Answer 401 to any HTTP request that lacks the expected bearer token."""

    def __init__(self, app: ASGIApp, token: str) -> None:
        self.app = app
        self.expected = f"Bearer {token}".encode()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and dict(scope["headers"]).get(b"authorization") != self.expected:
            await send(
                {
                    "type": "http.response.start",
                    "status": 401,
                    "headers": [(b"content-type", b"application/json"), (b"www-authenticate", b"Bearer")],
                }
            )
            await send({"type": "http.response.body", "body": b'{"error": "invalid_token"}'})
            return
        await self.app(scope, receive, send)


async def serve(options: argparse.Namespace) -> None:
    server = build_server(options.name)
    app: ASGIApp = server.sse_app() if options.transport == "sse" else server.streamable_http_app()
    if options.require_bearer:
        app = RequireBearer(app, options.require_bearer)
    listening = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listening.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listening.bind(("127.0.0.1", options.port))
    listening.listen(64)
    port = listening.getsockname()[1]
    config = uvicorn.Config(app, log_level="warning", lifespan="on")
    print(f"READY {port}", flush=True)
    await uvicorn.Server(config).serve(sockets=[listening])


def main() -> None:
    parser = argparse.ArgumentParser(description="MCP test server over HTTP")
    parser.add_argument("--transport", choices=["streamable-http", "sse"], default="streamable-http")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--name", default="http-test")
    parser.add_argument("--require-bearer")
    anyio.run(serve, parser.parse_args())


if __name__ == "__main__":
    main()
