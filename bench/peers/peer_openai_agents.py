"""openai-agents: ``MCPServerStdio`` servers under ``MCPServerManager`` with ``connect_in_parallel=True``
(its best configuration; the default is sequential)."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from agents.mcp import MCPServerManager, MCPServerStdio
from common import main

IMPORTED = time.perf_counter()

REQUEST_TIMEOUT_S = 30.0
"""Raised from the default 5 s, which would fail the 5 s slow server's handshake."""


class ParallelManager:
    def __init__(self, params: dict[str, Any]) -> None:
        self._servers: list[MCPServerStdio] = []
        self._manager: MCPServerManager | None = None

    async def start(self, servers: list[list[str]]) -> int:
        self._servers = [
            MCPServerStdio(
                {"command": argv[0], "args": argv[1:]},
                name=f"s{index}",
                client_session_timeout_seconds=REQUEST_TIMEOUT_S,
            )
            for index, argv in enumerate(servers)
        ]
        self._manager = MCPServerManager(self._servers, connect_in_parallel=True, strict=True)
        await self._manager.__aenter__()
        listed = await asyncio.gather(*(server.list_tools() for server in self._manager.active_servers))
        return sum(len(tools) for tools in listed)

    async def call(self, server: int, tool: str, message: str) -> str:
        result = await self._servers[server].call_tool(tool, {"message": message})
        return str(result.content[0].text)

    async def close(self) -> None:
        if self._manager is not None:
            await self._manager.__aexit__(None, None, None)


if __name__ == "__main__":
    main({"server-manager": ParallelManager}, library_imported=IMPORTED)
