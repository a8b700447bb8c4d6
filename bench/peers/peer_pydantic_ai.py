"""pydantic-ai: one ``MCPToolset`` per server (FastMCP stdio transport), prefixed by server name and
combined, as ``load_mcp_toolsets`` builds them; entered together as an agent enters its toolsets."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from common import main
from fastmcp.client.transports import StdioTransport
from pydantic_ai.mcp import MCPToolset
from pydantic_ai.toolsets import CombinedToolset

IMPORTED = time.perf_counter()

INIT_TIMEOUT_S = 30.0
"""Raised from the default 5 s, which would fail the 5 s slow server's handshake."""


class CombinedToolsets:
    def __init__(self, params: dict[str, Any]) -> None:
        self._toolsets: list[MCPToolset[Any]] = []
        self._combined: CombinedToolset[Any] | None = None

    async def start(self, servers: list[list[str]]) -> int:
        self._toolsets = [
            MCPToolset(
                StdioTransport(command=argv[0], args=argv[1:]), id=f"s{index}", init_timeout=INIT_TIMEOUT_S
            )
            for index, argv in enumerate(servers)
        ]
        self._combined = CombinedToolset(
            [toolset.prefixed(f"s{index}") for index, toolset in enumerate(self._toolsets)]
        )
        await self._combined.__aenter__()
        listed = await asyncio.gather(*(toolset.list_tools() for toolset in self._toolsets))
        return sum(len(tools) for tools in listed)

    async def call(self, server: int, tool: str, message: str) -> str:
        result = await self._toolsets[server].direct_call_tool(tool, {"message": message})
        if isinstance(result, str):
            return result
        if isinstance(result, dict) and "result" in result:
            return str(result["result"])
        return str(result)

    async def close(self) -> None:
        if self._combined is not None:
            await self._combined.__aexit__(None, None, None)


if __name__ == "__main__":
    main({"combined-toolsets": CombinedToolsets}, library_imported=IMPORTED)
