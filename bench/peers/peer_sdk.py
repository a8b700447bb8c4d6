"""The official SDK (``mcp`` 2.3.0): one ``Client`` per server (the raw floor), and ``ClientSessionGroup``."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from common import main
from mcp import Client, ClientSessionGroup, StdioServerParameters

IMPORTED = time.perf_counter()


def parameters(argv: list[str]) -> StdioServerParameters:
    return StdioServerParameters(command=argv[0], args=argv[1:])


def first_text(result: Any) -> str:
    return str(result.content[0].text)


class OneClientPerServer:
    """Each ``Client`` is entered and exited in its own task (the SDK forbids cross-task exits),
    in ``mode="legacy"`` so no ``server/discover`` probe is sent."""

    def __init__(self, params: dict[str, Any]) -> None:
        self._clients: list[Client] = []
        self._owners: list[asyncio.Task[None]] = []
        self._stop = asyncio.Event()

    async def start(self, servers: list[list[str]]) -> int:
        ready: list[asyncio.Future[tuple[Client, int]]] = []
        for argv in servers:
            future: asyncio.Future[tuple[Client, int]] = asyncio.get_running_loop().create_future()
            ready.append(future)
            self._owners.append(asyncio.create_task(self._own(argv, future)))
        connected = await asyncio.gather(*ready)
        self._clients = [client for client, _ in connected]
        return sum(count for _, count in connected)

    async def _own(self, argv: list[str], ready: asyncio.Future[tuple[Client, int]]) -> None:
        try:
            async with Client(parameters(argv), mode="legacy") as client:
                listed = await client.list_tools()
                ready.set_result((client, len(listed.tools)))
                await self._stop.wait()
        except BaseException as error:
            if not ready.done():
                ready.set_exception(error)
            raise

    async def call(self, server: int, tool: str, message: str) -> str:
        return first_text(await self._clients[server].call_tool(tool, {"message": message}))

    async def close(self) -> None:
        self._stop.set()
        await asyncio.gather(*self._owners)


class SessionGroup:
    """``ClientSessionGroup``: servers connected one after another, tools aggregated by name."""

    def __init__(self, params: dict[str, Any]) -> None:
        self._group = ClientSessionGroup(component_name_hook=lambda name, server: f"{server.name}_{name}")

    async def start(self, servers: list[list[str]]) -> int:
        await self._group.__aenter__()
        for argv in servers:
            await self._group.connect_to_server(parameters(argv))
        return len(self._group.tools)

    async def call(self, server: int, tool: str, message: str) -> str:
        return first_text(await self._group.call_tool(f"s{server}_{tool}", {"message": message}))

    async def close(self) -> None:
        await self._group.__aexit__(None, None, None)


if __name__ == "__main__":
    main({"client-per-server": OneClientPerServer, "session-group": SessionGroup}, library_imported=IMPORTED)
