"""langchain-mcp-adapters: ``MultiServerMCPClient`` (on ``mcp`` 1.x). It is stateless by design:
``get_tools()`` opens a session per server, lists, and closes; every tool call opens a new
session (for stdio, a new server process)."""

from __future__ import annotations

import time
from typing import Any

from common import main
from langchain_mcp_adapters.client import MultiServerMCPClient

IMPORTED = time.perf_counter()


class StatelessClient:
    def __init__(self, params: dict[str, Any]) -> None:
        self._tools: dict[str, Any] = {}

    async def start(self, servers: list[list[str]]) -> int:
        connections: dict[str, Any] = {
            f"s{index}": {"transport": "stdio", "command": argv[0], "args": argv[1:]}
            for index, argv in enumerate(servers)
        }
        client = MultiServerMCPClient(connections, tool_name_prefix=True)
        tools = await client.get_tools()
        self._tools = {tool.name: tool for tool in tools}
        return len(tools)

    async def call(self, server: int, tool: str, message: str) -> str:
        content = await self._tools[f"s{server}_{tool}"].ainvoke({"message": message})
        if isinstance(content, list):
            return "".join(
                block.get("text", "") if isinstance(block, dict) else str(block) for block in content
            )
        return str(content)

    async def close(self) -> None:
        """Nothing stays connected between calls."""


if __name__ == "__main__":
    main({"multi-server-client": StatelessClient}, library_imported=IMPORTED)
