"""The async control client against a scripted daemon on a real Unix socket: concurrent
requests answered out of order, events, the end of the connection, and a cancelled request
that tells the daemon."""

from __future__ import annotations

import threading
from typing import Any

import anyio
import pytest
from tests.servers.control_peer import Reply, control_peer, result

from mcpfleet.agent.remote_client import AsyncControlClient
from mcpfleet.daemon_client import paths
from mcpfleet.daemon_client.control import (
    DaemonLost,
    DaemonRefused,
    DaemonUnavailable,
    Event,
    OperationFailed,
)

pytestmark = pytest.mark.anyio


async def test_no_daemon_is_unavailable_with_the_cause_that_says_so() -> None:
    with pytest.raises(DaemonUnavailable) as raised:
        async with AsyncControlClient.connect():
            pass
    assert isinstance(raised.value.__cause__, FileNotFoundError)


async def test_concurrent_requests_each_get_their_own_answer() -> None:
    held: list[dict[str, Any]] = []
    both_arrived = threading.Event()

    def script(request: dict[str, Any]) -> Reply | None:
        # Hold the first two requests, then answer them in the reverse order.
        held.append(request)
        if len(held) < 2:
            return None
        both_arrived.set()
        return Reply(tuple({"id": r["id"], "result": {"tool": r["tool"]}} for r in reversed(held)))

    answers: dict[str, dict[str, Any]] = {}
    with control_peer(paths.socket_path(), script):
        async with AsyncControlClient.connect() as client:

            async def call(tool: str) -> None:
                answers[tool] = await client.request("call", {"tool": tool, "arguments": {}})

            with anyio.fail_after(10):
                async with anyio.create_task_group() as group:
                    group.start_soon(call, "first")
                    group.start_soon(call, "second")
    assert answers == {"first": {"tool": "first"}, "second": {"tool": "second"}}
    assert both_arrived.is_set()


async def test_events_arrive_in_order_and_end_with_the_connection() -> None:
    def script(request: dict[str, Any]) -> Reply:
        if request["op"] == "watch":
            return Reply(
                ({"id": request["id"], "result": {}}, {"event": "tools_changed"}, {"event": "other"})
            )
        return Reply(close=True)

    with control_peer(paths.socket_path(), script):
        async with AsyncControlClient.connect() as client:
            with anyio.fail_after(10):
                assert await client.request("watch", {"fleet": {"cwd": "/p"}}) == {}
                first = await client.events.receive()
                second = await client.events.receive()
                with pytest.raises(DaemonLost) as raised:
                    await client.request("tools", {"fleet": {"cwd": "/p"}})
                remaining = [event async for event in client.events]
            with pytest.raises(DaemonLost) as again:
                await client.request("tools", {"fleet": {"cwd": "/p"}})
    assert (first, second) == (
        Event("tools_changed", {"event": "tools_changed"}),
        Event("other", {"event": "other"}),
    )
    assert remaining == []
    assert raised.value.request_sent
    assert not again.value.request_sent


async def test_a_cancelled_request_sends_cancel_with_its_id() -> None:
    def script(request: dict[str, Any]) -> Reply | None:
        if request["op"] == "call":
            return None  # the call never answers on its own
        return result(request, {"op": request["op"]})

    with control_peer(paths.socket_path(), script) as peer:
        async with AsyncControlClient.connect() as client:
            with anyio.move_on_after(0.2):
                await client.request("call", {"tool": "slow", "arguments": {}})
            # The connection stays good; the peer reads in order, so the cancel came first.
            with anyio.fail_after(10):
                assert await client.request("ping") == {"op": "ping"}
    call, cancel, ping = peer.requests
    assert call["op"] == "call"
    assert cancel == {"id": cancel["id"], "op": "cancel", "request": call["id"]}
    assert ping["op"] == "ping"


async def test_an_error_answer_and_a_refusal() -> None:
    def script(request: dict[str, Any]) -> Reply:
        return Reply(({"id": request["id"], "error": {"message": "bad config", "exit": 2}},))

    with control_peer(paths.socket_path(), script):
        async with AsyncControlClient.connect() as client:
            with pytest.raises(OperationFailed) as raised:
                await client.request("tools", {"fleet": {"cwd": "/p"}})
    assert (raised.value.message, raised.value.exit_code) == ("bad config", 2)
    refusal = ("environment-mismatch", "other HOME")
    with control_peer(paths.socket_path(), script, refusal=refusal), pytest.raises(DaemonRefused) as refused:
        async with AsyncControlClient.connect():
            pass
    assert refused.value.code == "environment-mismatch"
