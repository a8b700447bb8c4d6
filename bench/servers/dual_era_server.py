"""A dual-era MCP server over streamable HTTP, on the SDK's own server API, for the protocol-era figures.

It speaks the ``initialize`` handshake and the 2026-07-28 revision (the SDK's default), binds
127.0.0.1 on a free port and prints ``READY <port>`` once it listens; the endpoint is ``/mcp``.
Tools: ``tool_0`` … ``tool_4``, each echoing ``message``.
"""

from __future__ import annotations

import socket

import anyio
import uvicorn
from mcp.server.mcpserver import MCPServer

TOOLS = 5


def build_server() -> MCPServer:
    server = MCPServer("dual-era")
    for index in range(TOOLS):

        def echo(message: str) -> str:
            return message

        server.tool(name=f"tool_{index}", description=f"Echo a message ({index})")(echo)
    return server


async def serve() -> None:
    app = build_server().streamable_http_app()
    listening = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listening.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listening.bind(("127.0.0.1", 0))
    listening.listen(64)
    print(f"READY {listening.getsockname()[1]}", flush=True)
    await uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on")).serve(sockets=[listening])


if __name__ == "__main__":
    anyio.run(serve)
