"""``gateway.draining``: which requests a draining gateway turns away, which it waits for, and
how the wait ends (every request answered, or the deadline and the cut). The process-level
drain (SIGTERM to ``serve --team``) is ``tests/integration/team/test_team_health_and_drain.py``."""

from __future__ import annotations

from typing import Any

import anyio
import mcp_types
import pytest
from mcp.server.streamable_http import GET_STREAM_KEY

from mcpfleet.gateway.draining import Drain
from mcpfleet.gateway.resumption import BoundedEventStore

pytestmark = pytest.mark.anyio

INITIALIZE = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}}
MODERN_CALL = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "a_echo"}}
NEXT_ROUND = {
    "jsonrpc": "2.0",
    "id": 3,
    "method": "tools/call",
    "params": {"name": "a_ask", "requestState": "opaque", "inputResponses": {}},
}
NOTIFICATION = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 2}}
RESPONSE = {"jsonrpc": "2.0", "id": 9, "result": {}}


def request(method: str, *headers: tuple[bytes, bytes]) -> dict[str, Any]:
    return {"type": "http", "method": method, "path": "/mcp", "headers": list(headers)}


SESSION = (b"mcp-session-id", b"a-session")


def draining() -> Drain:
    drain = Drain(timeout_s=30)
    drain.start()
    return drain


def test_nothing_is_refused_before_the_drain() -> None:
    drain = Drain(timeout_s=30)
    assert not drain.draining
    assert not drain.refuses(request("POST"), INITIALIZE)
    assert not drain.refuses(request("POST"), MODERN_CALL)


@pytest.mark.parametrize(
    ("scope", "message", "refused"),
    [
        (request("POST"), INITIALIZE, True),  # a new session
        (request("POST"), MODERN_CALL, True),  # a 2026-07-28 request of its own
        (request("POST"), [MODERN_CALL], True),  # a batch opens nothing this replica holds
        (request("POST", SESSION), MODERN_CALL, False),  # a session this replica holds
        (request("POST", SESSION), RESPONSE, False),  # a backend's question answered
        (request("POST"), NEXT_ROUND, False),  # a round of a call in flight
        (request("GET", SESSION), None, False),
        (request("DELETE", SESSION), None, False),
    ],
    ids=["initialize", "modern", "batch", "session-call", "answer", "next-round", "get", "delete"],
)
def test_a_draining_gateway_refuses_only_work_that_has_not_begun(
    scope: dict[str, Any], message: Any, refused: bool
) -> None:
    assert draining().refuses(scope, message) is refused


async def test_a_resumed_request_stream_is_waited_for_the_sessions_own_stream_is_not() -> None:
    store = BoundedEventStore()
    drain = draining()
    drain.resumes_a_request = store.resumes_a_request  # as serve_http sets it
    ping = mcp_types.JSONRPCRequest(jsonrpc="2.0", id=1, method="ping")
    of_a_request = await store.store_event("request-7", ping)
    of_the_session = await store.store_event(GET_STREAM_KEY, ping)

    def get(last_event_id: str) -> dict[str, Any]:
        return request("GET", SESSION, (b"last-event-id", last_event_id.encode()))

    assert drain.holds(get(of_a_request), None)
    assert not drain.holds(get(of_the_session), None)
    assert not drain.holds(get("another-run-1"), None)  # not one of this store's: nothing to resume
    assert not drain.holds(request("GET", SESSION), None)
    assert drain.holds(request("POST", SESSION), MODERN_CALL)
    assert drain.holds(request("POST", SESSION), [NOTIFICATION, MODERN_CALL])
    assert not drain.holds(request("POST", SESSION), NOTIFICATION)
    assert not drain.holds(request("POST", SESSION), RESPONSE)


async def test_the_drain_ends_when_the_last_request_held_is_answered() -> None:
    drain = Drain(timeout_s=600)  # a hang guard: the release below ends the wait
    release = anyio.Event()
    outcome: list[int] = []

    async def answering() -> None:
        with drain.tracking():
            await release.wait()

    async def waiting() -> None:
        outcome.append(await drain.drained())

    async with anyio.create_task_group() as group:
        group.start_soon(answering)
        group.start_soon(waiting)
        await anyio.wait_all_tasks_blocked()
        assert drain.in_flight == 1 and outcome == []  # not started: nothing ends the wait
        drain.start()
        await anyio.wait_all_tasks_blocked()
        assert outcome == []  # started, but a request is still held
        release.set()
    assert outcome == [0] and drain.in_flight == 0


async def test_at_the_deadline_the_requests_still_held_are_counted_then_cut() -> None:
    drain = Drain(timeout_s=0.01)
    cut: list[bool] = []

    async def never_answering() -> None:
        with drain.tracking() as scope:
            with scope:
                await anyio.sleep_forever()
            cut.append(scope.cancelled_caught)

    async with anyio.create_task_group() as group:
        group.start_soon(never_answering)
        await anyio.wait_all_tasks_blocked()
        drain.start()
        assert await drain.drained() == 1
        await drain.cut(within_s=600)
    assert cut == [True] and drain.in_flight == 0
