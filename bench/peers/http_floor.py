"""The floor of the HTTP benchmark: a bare stdio-to-HTTP bridge in front of one stdio backend.

    python http_floor.py PORT_FILE -- BACKEND ARGV...

Each POST's body is one JSON-RPC message, written to the backend's stdin under an id of the
bridge's own (so concurrent clients cannot collide) and answered with the backend's line, its
id given back, as one ``application/json`` body; a notification gets 202. No MCP library, no
sessions, no checks: the least any HTTP front of a stdio server does, so its figures are the
physical limit of this machine. It writes its port to PORT_FILE once it listens.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import sys
from pathlib import Path
from typing import Any


async def main(port_file: str, backend: list[str]) -> None:
    child = await asyncio.create_subprocess_exec(*backend, stdin=-1, stdout=-1, limit=1 << 24)
    assert child.stdin is not None and child.stdout is not None
    stdin, stdout = child.stdin, child.stdout
    waiting: dict[int, tuple[asyncio.Future[dict[str, Any]], Any]] = {}
    ids = itertools.count(1)

    async def read_backend() -> None:
        async for line in stdout:
            message = json.loads(line)
            future, client_id = waiting.pop(message.get("id"), (None, None))
            if future is not None:
                message["id"] = client_id
                future.set_result(message)

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = (await reader.readuntil(b"\r\n\r\n")).lower()
                length = int(head.split(b"content-length:", 1)[1].split(b"\r\n", 1)[0])
                message = json.loads(await reader.readexactly(length))
                if "id" not in message:
                    stdin.write(json.dumps(message).encode() + b"\n")
                    writer.write(b"HTTP/1.1 202 Accepted\r\ncontent-length: 0\r\n\r\n")
                    continue
                own_id, future = next(ids), asyncio.get_running_loop().create_future()
                waiting[own_id] = (future, message["id"])
                stdin.write(json.dumps({**message, "id": own_id}).encode() + b"\n")
                body = json.dumps(await future).encode()
                writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n")
                writer.write(b"content-length: %d\r\n\r\n%s" % (len(body), body))
        except (asyncio.IncompleteReadError, ConnectionError):
            pass  # the client closed its connection
        finally:
            writer.close()

    reading = asyncio.create_task(read_backend())
    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    Path(port_file).write_text(str(server.sockets[0].getsockname()[1]))  # noqa: ASYNC240 - once, at start
    async with server:
        await asyncio.gather(server.serve_forever(), reading)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[sys.argv.index("--") + 1 :]))
