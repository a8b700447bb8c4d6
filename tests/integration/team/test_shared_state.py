"""The replicas' shared ephemeral state (``team.shared``) on a real redis-server (tests/redis.py):
two ``RedisShared`` stand for two replicas. Messages reach the other replica and not the sender;
counters add up across replicas; a session's record and its streams' events written by one are
read by the other, a stream's events only by its own session, and a replay waits for an answer
the other replica has yet to store; a claim is won once across replicas, a record written by one
is read by the other, and a message sent to one replica says whether it listens. Without Redis
(``LocalShared``, one replica) limits count in memory, end to end through a real ``mcpfleet serve
--team`` process.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import httpx2
import mcp_types
import pytest
from mcp.client import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.server.streamable_http import EventMessage
from tests.integration.team.team_gateway import (
    add_key,
    fake,
    running_team_gateway,
    team_document,
    write_team_file,
)
from tests.redis import RedisServer, namespace

from mcpfleet.team.redis_shared import MAX_EVENT_BYTES, RedisShared
from mcpfleet.team.shared import LocalShared, window_now
from mcpfleet.team.state import TeamStateError

pytestmark = pytest.mark.anyio

WAIT_S = 30


@pytest.fixture
async def replicas(
    redis_server: RedisServer, request: pytest.FixtureRequest
) -> AsyncIterator[list[RedisShared]]:
    prefix = namespace(request.node.name) + ":"
    opened = [await RedisShared.open(redis_server.url, prefix) for _ in range(2)]
    try:
        async with anyio.create_task_group() as group:
            for shared in opened:
                await group.start(shared.run)
            yield opened
            group.cancel_scope.cancel()
    finally:
        for shared in opened:
            await shared.aclose()


async def test_a_message_reaches_the_other_replica_and_not_its_sender(replicas: list[RedisShared]) -> None:
    first, second = replicas
    heard: dict[str, list[dict[str, Any]]] = {"first": [], "second": []}
    arrived = anyio.Event()

    async def on_second(message: dict[str, Any]) -> None:
        heard["second"].append(message)
        arrived.set()

    async def on_first(message: dict[str, Any]) -> None:
        heard["first"].append(message)

    first.listen(on_first)
    second.listen(on_second)
    await first.publish({"kind": "reload"})
    with anyio.fail_after(WAIT_S):
        await arrived.wait()
    assert heard["second"] == [{"kind": "reload", "replica": first.replica}]
    assert heard["first"] == []


async def test_counters_add_up_across_replicas(replicas: list[RedisShared]) -> None:
    first, second = replicas
    assert [await first.count("user:ann"), await second.count("user:ann"), await first.count("user:ann")] == [
        1,
        2,
        3,
    ]
    assert await second.count("user:bob") == 1
    assert 0 < first.seconds_left() <= 60


async def test_a_session_record_written_by_one_replica_is_read_by_the_other(
    replicas: list[RedisShared],
) -> None:
    first, second = replicas
    assert first.sessions is not None and second.sessions is not None
    await first.sessions.save("s1", b'{"params": {}}')
    assert await second.sessions.load("s1") == b'{"params": {}}'
    await second.sessions.forget("s1")
    assert await first.sessions.load("s1") is None


def _progress(number: int) -> mcp_types.JSONRPCMessage:
    return mcp_types.JSONRPCNotification(
        jsonrpc="2.0", method="notifications/progress", params={"progressToken": "p", "progress": number}
    )


def _answer(request_id: int) -> mcp_types.JSONRPCMessage:
    return mcp_types.JSONRPCResponse(jsonrpc="2.0", id=request_id, result={"content": []})


async def test_a_stream_resumes_on_the_other_replica_for_its_own_session_only(
    replicas: list[RedisShared],
) -> None:
    first, second = replicas
    assert first.sessions is not None and second.sessions is not None
    writer = first.sessions.event_store_for("session-a")
    primed = await writer.store_event("7", None)
    await writer.store_event("7", _progress(1))
    await writer.store_event("7", _progress(2))
    await writer.store_event("7", _answer(7))
    replayed: list[EventMessage] = []

    async def collect(event: EventMessage) -> None:
        replayed.append(event)

    reader = second.sessions.event_store_for("session-a")
    assert await reader.replay_events_after(primed, collect) == "7"
    assert [event.message for event in replayed] == [_progress(1), _progress(2), _answer(7)]
    # Another session naming the same stream id finds nothing of it.
    stranger = second.sessions.event_store_for("session-b")
    assert await stranger.replay_events_after(primed, collect) is None
    assert len(replayed) == 3


async def test_a_replay_waits_for_an_answer_the_other_replica_stores_later(
    replicas: list[RedisShared],
) -> None:
    first, second = replicas
    assert first.sessions is not None and second.sessions is not None
    writer = first.sessions.event_store_for("session-c")
    primed = await writer.store_event("3", None)
    replayed: list[EventMessage] = []
    first_seen = anyio.Event()

    async def collect(event: EventMessage) -> None:
        replayed.append(event)
        first_seen.set()

    reader = second.sessions.event_store_for("session-c")
    async with anyio.create_task_group() as group:
        outcome: list[str | None] = []

        async def replay() -> None:
            outcome.append(await reader.replay_events_after(primed, collect))

        group.start_soon(replay)
        await writer.store_event("3", _progress(1))
        with anyio.fail_after(WAIT_S):
            await first_seen.wait()
        assert outcome == []  # still waiting: the call's answer is not in yet
        await writer.store_event("3", _answer(3))
    assert outcome == ["3"]
    assert [event.message for event in replayed] == [_progress(1), _answer(3)]


async def test_an_answer_too_large_to_keep_still_ends_the_replay(replicas: list[RedisShared]) -> None:
    first, second = replicas
    assert first.sessions is not None and second.sessions is not None
    writer = first.sessions.event_store_for("session-d")
    primed = await writer.store_event("5", None)
    await writer.store_event("5", _progress(1))
    huge = mcp_types.JSONRPCResponse(jsonrpc="2.0", id=5, result={"text": "x" * (MAX_EVENT_BYTES + 1)})
    await writer.store_event("5", huge)
    replayed: list[EventMessage] = []

    async def collect(event: EventMessage) -> None:
        replayed.append(event)

    with anyio.fail_after(WAIT_S):  # the mark says the answer went out: no wait for it
        assert await second.sessions.event_store_for("session-d").replay_events_after(primed, collect) == "5"
    assert [event.message for event in replayed] == [_progress(1)]


async def test_a_redis_that_cannot_be_reached_is_one_error_naming_it_without_its_password() -> None:
    with pytest.raises(TeamStateError) as raised:
        await RedisShared.open("redis://:hunter2-secret@127.0.0.1:1/0", "x:")
    message = str(raised.value)
    assert "cannot be reached" in message and "state.redis" in message
    assert "hunter2-secret" not in message


async def test_one_replica_without_redis_counts_in_memory() -> None:
    shared = LocalShared()
    assert [await shared.count("user:ann") for _ in range(3)] == [1, 2, 3]
    assert shared.sessions is None


async def test_limits_hold_on_one_replica_without_redis(tmp_path: Path) -> None:
    document = team_document(
        {"alpha": fake("alpha", "echo")},
        [{"allow": ["*"]}],
        limits={"per_user": 2},
    )
    team_file = write_team_file(tmp_path / "team.json", document)
    key = add_key(team_file, "ann")
    with running_team_gateway(team_file) as gateway:
        http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {key}"}, timeout=httpx2.Timeout(30.0))
        async with Client(streamable_http_client(gateway.url, http_client=http), mode="legacy") as client:
            window = window_now()
            results = [await client.call_tool("alpha_echo", {"message": "m"}) for _ in range(3)]
            if window_now() != window:
                pytest.skip("the minute turned during the calls: the count started again, no verdict")
    assert [result.is_error for result in results] == [False, False, True]
    block = results[-1].content[0]
    assert isinstance(block, mcp_types.TextContent)
    assert "limits.per_user" in block.text and "429" in block.text


async def test_a_replica_that_reloaded_its_team_file_makes_the_others_read_theirs_at_once(
    replicas: list[RedisShared], tmp_path: Path
) -> None:
    from mcpfleet.team.fleet import LiveTeamFile, TeamFleet
    from mcpfleet.team.loading import load_team_file
    from mcpfleet.team.replicas import ReplicaLink

    document = team_document({}, [{"allow": ["*"]}])
    for index in range(2):
        (tmp_path / f"replica-{index}").mkdir()
    files = [write_team_file(tmp_path / f"replica-{index}" / "team.json", document) for index in range(2)]
    lives = []
    for shared, path in zip(replicas, files, strict=True):
        team = load_team_file(path, {})
        live = LiveTeamFile(team, interval_s=3600)  # never polled here: only checked when told
        ReplicaLink(shared, TeamFleet(team), live).start()
        lives.append(live)
    edited = {**document, "policies": [{"allow": ["alpha/*"]}]}
    for path in files:  # every replica's copy of the file holds the edit (a ConfigMap updated)
        write_team_file(path, edited)
    second_reloaded = lives[1].reloaded
    assert await lives[0].check()
    with anyio.fail_after(WAIT_S):
        await second_reloaded.wait()
    assert lives[1].current.policies[0].allow == ("alpha/*",)


async def test_a_session_in_use_has_its_record_renewed(
    replicas: list[RedisShared], monkeypatch: pytest.MonkeyPatch
) -> None:
    import json

    from mcp.server.lowlevel import Server

    from mcpfleet.gateway import shared_sessions
    from mcpfleet.gateway.shared_sessions import SharedSessions
    from mcpfleet.team.redis_shared import SESSION_TTL_S

    shared = replicas[0]
    assert shared.sessions is not None
    server: Server[Any] = Server("renewal")
    server.streamable_http_app()
    passed: list[str] = []

    async def inner(scope: Any, receive: Any, send: Any) -> None:
        passed.append(scope["method"])

    layer = SharedSessions(inner, server, shared.sessions, lambda scope: "service:ann")
    params = {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "c", "version": "1"},
    }
    await shared.sessions.save("renewed", json.dumps({"params": params, "owner": "service:ann"}).encode())
    key = shared.key("session", "renewed")
    scope = {"type": "http", "method": "POST", "path": "/mcp", "headers": [(b"mcp-session-id", b"renewed")]}

    async def nothing() -> Any:
        return {"type": "http.disconnect"}

    async def ignored(message: Any) -> None:
        return None

    monkeypatch.setattr(shared_sessions, "TOUCH_INTERVAL_S", 0)
    async with server.session_manager.run():
        await layer(scope, nothing, ignored)  # adopted: the record was just read, and renewed
        assert layer.adopted == 1
        await shared.client.expire(key, 10)
        await layer(scope, nothing, ignored)  # in use again, past the interval: renewed
        assert await shared.client.ttl(key) > 10
        assert 0 < await shared.client.ttl(key) <= SESSION_TTL_S
    assert passed == ["POST", "POST"]


async def test_a_claim_is_won_once_across_replicas_and_a_message_to_one_replica_says_if_it_listens(
    replicas: list[RedisShared],
) -> None:
    first, second = replicas
    assert [await first.claim("pass:x", 60), await second.claim("pass:x", 60)] == [True, False]
    await first.put_record("connect:y", b"owner", 60)
    assert await second.get_record("connect:y") == b"owner"
    await second.delete_record("connect:y")
    assert await first.get_record("connect:y") is None

    heard: list[dict[str, Any]] = []
    arrived = anyio.Event()

    async def on_second(message: dict[str, Any]) -> None:
        heard.append(message)
        arrived.set()

    second.listen(on_second)
    assert await first.send(second.replica, {"kind": "connect_result"})
    with anyio.fail_after(WAIT_S):
        await arrived.wait()
    assert heard == [{"kind": "connect_result", "replica": first.replica}]
    assert not await first.send("a-replica-that-stopped", {"kind": "connect_result"})
