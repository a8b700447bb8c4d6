"""Requests sent below the SDK (``client.raw.RawExchange``): what is written, and which of the
server's messages are taken before the SDK's session would see them."""

from __future__ import annotations

import json
from typing import Any

import anyio
import mcp_types
import pytest
from mcp.shared.message import SessionMessage

from mcpfleet.client.raw import RawExchange

pytestmark = pytest.mark.anyio


class Recorded:
    """A ``RawCall`` that writes down what it is told."""

    def __init__(self) -> None:
        self.answers: list[Any] = []
        self.progress = 0
        self.ends = 0

    def answered(self, message: Any) -> None:
        self.answers.append(message)

    def progressed(self) -> None:
        self.progress += 1

    def ended(self) -> None:
        self.ends += 1


def from_server(message: dict[str, Any]) -> SessionMessage:
    return SessionMessage(mcp_types.jsonrpc_message_adapter.validate_python(message, by_name=False))


def exchange_without_session() -> RawExchange:
    """An exchange whose connection has no SDK session to read answers with: enough for what
    is written and taken."""
    return RawExchange("notes", lambda: None, lambda: None, lambda: False)


async def attached() -> tuple[RawExchange, list[dict[str, Any]]]:
    written: list[dict[str, Any]] = []

    async def write(data: bytes) -> None:
        assert data.endswith(b"\n") and data.count(b"\n") == 1
        written.append(json.loads(data))

    exchange = exchange_without_session()
    exchange.attach(write)
    return exchange, written


async def test_a_raw_request_is_written_under_an_id_the_sdk_never_mints_with_its_own_progress_token() -> None:
    exchange, written = await attached()
    call = Recorded()
    request_id = await exchange.send("tools/call", {"name": "echo", "arguments": {"m": 1}}, call)
    assert request_id == "mcpfleet-1"
    assert written == [
        {
            "jsonrpc": "2.0",
            "id": "mcpfleet-1",
            "method": "tools/call",
            "params": {"name": "echo", "arguments": {"m": 1}, "_meta": {"progressToken": "mcpfleet-1"}},
        }
    ]


async def test_only_the_answers_and_progress_of_raw_requests_are_taken() -> None:
    exchange, _ = await attached()
    call = Recorded()
    request_id = await exchange.send("tools/call", {"name": "echo"}, call)
    progress = {"progressToken": request_id, "progress": 1}
    assert exchange.intercept(
        from_server({"jsonrpc": "2.0", "method": "notifications/progress", "params": progress})
    )
    # The SDK's own traffic, and a server's request that happens to use such an id, go on.
    assert not exchange.intercept(from_server({"jsonrpc": "2.0", "id": 1, "result": {}}))
    assert not exchange.intercept(from_server({"jsonrpc": "2.0", "id": "mcpfleet-9", "method": "roots/list"}))
    log = {"jsonrpc": "2.0", "method": "notifications/message", "params": {"level": "info", "data": "x"}}
    assert not exchange.intercept(from_server(log))
    assert exchange.logs_seen == 1
    assert exchange.intercept(from_server({"jsonrpc": "2.0", "id": request_id, "result": {"content": []}}))
    assert call.progress == 1 and len(call.answers) == 1 and call.ends == 0
    # A second answer under that id (late, or a server's mistake) is dropped, not handed on.
    assert exchange.intercept(from_server({"jsonrpc": "2.0", "id": request_id, "result": {}}))
    assert len(call.answers) == 1


async def test_an_abandoned_request_is_cancelled_at_the_server_and_its_late_answer_dropped() -> None:
    exchange, written = await attached()
    call = Recorded()
    request_id = await exchange.send("tools/call", {"name": "slow"}, call)
    assert request_id is not None
    await exchange.abandon(request_id, "caller cancelled")
    assert written[-1] == {
        "jsonrpc": "2.0",
        "method": "notifications/cancelled",
        "params": {"requestId": request_id, "reason": "caller cancelled"},
    }
    assert exchange.intercept(from_server({"jsonrpc": "2.0", "id": request_id, "result": {}}))
    assert call.answers == []


async def test_the_end_of_the_transport_ends_every_open_request_and_sends_no_more() -> None:
    exchange, _ = await attached()
    calls = [Recorded(), Recorded()]
    for call in calls:
        await exchange.send("tools/call", {"name": "slow"}, call)
    exchange.detach()
    assert [call.ends for call in calls] == [1, 1]
    assert not exchange.available
    assert await exchange.send("tools/call", {"name": "again"}, Recorded()) is None


async def test_a_pipe_that_refuses_the_write_sends_nothing_and_keeps_nothing() -> None:
    async def closed(data: bytes) -> None:
        raise anyio.BrokenResourceError

    exchange = exchange_without_session()
    exchange.attach(closed)
    call = Recorded()
    assert await exchange.send("tools/call", {"name": "echo"}, call) is None
    exchange.detach()
    assert call.ends == 0
