"""The floor: no MCP library at all, raw JSON-RPC lines over the child's pipes (stdlib only).

It does the least any client must do (spawn, ``initialize``, ``tools/list``), so its time is
the physical limit of this machine for a scenario.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import time
from typing import Any

from common import main

IMPORTED = time.perf_counter()


class RawPipeFleet:
    def __init__(self, params: dict[str, Any]) -> None:
        self._processes: list[asyncio.subprocess.Process] = []
        self._readers: list[asyncio.Task[None]] = []
        self._waiting: dict[int, asyncio.Future[Any]] = {}
        self._next_id = 0

    async def start(self, servers: list[list[str]]) -> int:
        self._processes = list(await asyncio.gather(*(self._spawn(argv) for argv in servers)))
        self._readers = [asyncio.create_task(self._read(process)) for process in self._processes]
        counts = await asyncio.gather(*(self._handshake(index) for index in range(len(servers))))
        return sum(counts)

    async def _spawn(self, argv: list[str]) -> asyncio.subprocess.Process:
        return await asyncio.create_subprocess_exec(
            *argv, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, start_new_session=True
        )

    async def _handshake(self, index: int) -> int:
        init = {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "floor", "version": "0"},
        }
        await self._request(index, "initialize", init)
        self._send(index, {"jsonrpc": "2.0", "method": "notifications/initialized"})
        listed = await self._request(index, "tools/list", {})
        return len(listed["tools"])

    def _send(self, index: int, message: dict[str, Any]) -> None:
        stdin = self._processes[index].stdin
        assert stdin is not None
        stdin.write(json.dumps(message).encode() + b"\n")

    async def _request(self, index: int, method: str, params: dict[str, Any]) -> Any:
        self._next_id += 1
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._waiting[self._next_id] = future
        self._send(index, {"jsonrpc": "2.0", "id": self._next_id, "method": method, "params": params})
        return await future

    async def _read(self, process: asyncio.subprocess.Process) -> None:
        assert process.stdout is not None
        async for line in process.stdout:
            message = json.loads(line)
            future = self._waiting.pop(message.get("id"), None)
            if future is not None and not future.done():
                future.set_result(message.get("result"))

    async def call(self, server: int, tool: str, message: str) -> str:
        result = await self._request(server, "tools/call", {"name": tool, "arguments": {"message": message}})
        return str(result["content"][0]["text"])

    async def close(self) -> None:
        for process in self._processes:
            if process.stdin is not None:
                process.stdin.close()
        for process in self._processes:
            try:
                await asyncio.wait_for(process.wait(), 2.0)
            except TimeoutError:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(process.pid, signal.SIGKILL)
                await process.wait()
        for reader in self._readers:
            reader.cancel()


if __name__ == "__main__":
    main({"raw-pipes": RawPipeFleet}, library_imported=IMPORTED)
