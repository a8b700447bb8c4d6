"""fastmcp 4: ``Client`` over an ``MCPConfig`` (servers composed behind an in-process router) and
``ClientGroup`` (one independent client per server, connected in parallel)."""

from __future__ import annotations

import time
from typing import Any

from common import main
from fastmcp import Client
from fastmcp.client.group import ClientGroup

IMPORTED = time.perf_counter()


def mcp_config(servers: list[list[str]]) -> dict[str, Any]:
    entries = {f"s{index}": {"command": argv[0], "args": argv[1:]} for index, argv in enumerate(servers)}
    return {"mcpServers": entries}


def first_text(result: Any) -> str:
    return str(result.content[0].text)


class ConfigClient:
    def __init__(self, params: dict[str, Any]) -> None:
        self._client: Client[Any] | None = None
        self._single = False

    async def start(self, servers: list[list[str]]) -> int:
        # With one server the config transport connects straight to it, without a router or prefixes.
        self._single = len(servers) == 1
        self._client = Client(mcp_config(servers))
        await self._client.__aenter__()
        return len(await self._client.list_tools())

    async def call(self, server: int, tool: str, message: str) -> str:
        assert self._client is not None
        name = tool if self._single else f"s{server}_{tool}"
        return first_text(await self._client.call_tool(name, {"message": message}))

    async def close(self) -> None:
        if self._client is not None:
            await self._client.__aexit__(None, None, None)


class Group:
    def __init__(self, params: dict[str, Any]) -> None:
        self._group: ClientGroup | None = None

    async def start(self, servers: list[list[str]]) -> int:
        self._group = ClientGroup.from_config(mcp_config(servers))
        await self._group.__aenter__()
        return len(await self._group.list_tools())

    async def call(self, server: int, tool: str, message: str) -> str:
        assert self._group is not None
        return first_text(await self._group.call_tool(f"s{server}_{tool}", {"message": message}))

    async def close(self) -> None:
        if self._group is not None:
            await self._group.__aexit__(None, None, None)


if __name__ == "__main__":
    main({"config-client": ConfigClient, "client-group": Group}, library_imported=IMPORTED)
