"""What many tasks send on one stdio transport at once reaches the server whole and in the order
they sent it, however the writer groups the lines into writes (``StdioTransport._write_stdin``)."""

from __future__ import annotations

import sys
from pathlib import Path

import anyio
import mcp_types
import pytest
from mcp.shared.message import SessionMessage

from mcpfleet.transport.process import ServerProcess
from mcpfleet.transport.stdio import StdioTransport

pytestmark = pytest.mark.anyio

SENDERS = 20

ANSWERING_SERVER = """
import json, sys
for line in sys.stdin:
    request = json.loads(line)
    answer = {"jsonrpc": "2.0", "id": request["id"], "result": {"method": request["method"]}}
    sys.stdout.write(json.dumps(answer) + "\\n")
    sys.stdout.flush()
"""


def request(number: int) -> SessionMessage:
    return SessionMessage(mcp_types.JSONRPCRequest(jsonrpc="2.0", id=number, method=f"method/{number}"))


async def test_requests_sent_at_once_arrive_whole_and_in_order(tmp_path: Path) -> None:
    script = tmp_path / "answering_server.py"
    script.write_text(ANSWERING_SERVER)
    process = ServerProcess("answering", sys.executable, [str(script)], env={}, cwd=str(tmp_path))
    async with StdioTransport(process) as (read_stream, write_stream):
        answers: list[tuple[int, str]] = []
        async with anyio.create_task_group() as senders:
            for number in range(SENDERS):
                senders.start_soon(write_stream.send, request(number))
        for _ in range(SENDERS):
            message = await read_stream.receive()
            assert isinstance(message, SessionMessage)
            assert isinstance(message.message, mcp_types.JSONRPCResponse)
            answers.append((int(message.message.id), str(message.message.result["method"])))
    assert answers == [(number, f"method/{number}") for number in range(SENDERS)]
