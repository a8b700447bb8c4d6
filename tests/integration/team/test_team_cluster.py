"""Three team gateway replicas behind HAProxy (round-robin, no stickiness) on real PostgreSQL and a
real redis-server (``tests/integration/team/cluster.py``), started once for this file (one
pytest-xdist unit of work).

Every 2026-07-28 call is answered, by every replica in turn; a 2025-11-25 session and a
resumable stream go on after SIGKILL of the replica that opened them; a backend's
``list_changed`` on one replica reaches a client of another; a team-file edit reaches every
replica; ``limits:`` hold across replicas; with Redis stopped calls are still served, and once it
is back sessions move between replicas again (docs/team.md, "Running more than one replica").
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import anyio
import httpx2
import mcp_types
import psycopg
import pytest
from mcp.client import Client
from mcp.client.streamable_http import streamable_http_client
from psycopg import sql
from tests.integration.gateway.gateway_harness import wait_until
from tests.integration.team.cluster import (
    REPLICAS,
    TeamCluster,
    headers_for,
    initialize_request,
    messages_of,
    open_session,
    tool_call,
)
from tests.integration.team.team_gateway import fake, write_team_file
from tests.postgres import PostgresServer, database_name
from tests.servers.fixtures import FAKE_SERVER

pytestmark = pytest.mark.anyio

MODERN = "2026-07-28"
LIMIT = 4
WAIT_S = 60
ANNOUNCER = {"ANNOUNCE_FLAG": "--list-changed-every", "ANNOUNCE_VALUE": "1"}
"""Replica 0's copy of ``alpha`` announces ``tools/list_changed`` every second; the others' never."""


def _alpha() -> dict[str, Any]:
    entry = fake("alpha")
    entry["args"] = [
        str(FAKE_SERVER),
        "--name",
        "alpha",
        "${ANNOUNCE_FLAG:---name}",
        "${ANNOUNCE_VALUE:-alpha}",
    ]
    return entry


POLICIES = [{"name": "everyone", "allow": ["*"]}]


@pytest.fixture(scope="module")
def cluster(
    postgres_server: PostgresServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[TeamCluster]:
    name = database_name("team_cluster")
    with psycopg.connect(postgres_server.dsn(), autocommit=True) as admin:
        admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    started = TeamCluster.start(
        tmp_path_factory.mktemp("cluster"),
        {"alpha": _alpha()},
        POLICIES,
        postgres_server.dsn(name),
        users=("ann", "bob", "cat", "dan"),
        replica_env={0: ANNOUNCER},
        limits={"per_tool": {"alpha/add": LIMIT}},
    )
    try:
        yield started
    finally:
        started.stop()
        with psycopg.connect(postgres_server.dsn(), autocommit=True) as admin:
            admin.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))


def modern_client(url: str, key: str) -> Client:
    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {key}"}, timeout=httpx2.Timeout(30.0))
    return Client(streamable_http_client(url, http_client=http), mode=MODERN)


def text_of(result: Any) -> str:
    block = result.content[0]
    assert isinstance(block, mcp_types.TextContent)
    return block.text


async def test_modern_clients_are_spread_over_every_replica_and_every_call_is_answered(
    cluster: TeamCluster,
) -> None:
    answered_by: list[str] = []

    async def one_client(number: int) -> None:
        async with modern_client(cluster.url, cluster.keys["ann"]) as client:
            for call in range(3):
                message = f"client {number} call {call}"
                echoed = await client.call_tool("alpha_echo", {"message": message})
                assert not echoed.is_error, text_of(echoed)
                assert text_of(echoed) == message  # each answer carries its own request's argument
                replica = await client.call_tool("alpha_env", {"name": "REPLICA"})
                assert replica.structured_content is not None
                answered_by.append(replica.structured_content["value"])

    async with anyio.create_task_group() as group:
        for number in range(6):
            group.start_soon(one_client, number)
    assert len(answered_by) == 18
    assert set(answered_by) == {str(index) for index in range(REPLICAS)}


def test_a_2025_session_goes_on_after_the_replica_that_opened_it_is_killed(cluster: TeamCluster) -> None:
    key = cluster.keys["ann"]
    session = open_session(cluster.replicas[1].url, key)
    cluster.kill(1)
    try:
        with httpx2.Client(timeout=60) as http:
            for request_id in range(1, 4):  # round-robin: both living replicas serve it
                answer = http.post(
                    cluster.url,
                    json=tool_call(request_id, "alpha_echo", {"message": f"after {request_id}"}),
                    headers=headers_for(key, session),
                )
                assert answer.status_code == 200, answer.text
                (message,) = [m for m in messages_of(answer) if m.get("id") == request_id]
                assert message["result"]["content"][0]["text"] == f"after {request_id}"
    finally:
        cluster.restart(1)


def test_a_session_is_served_elsewhere_only_for_the_principal_who_opened_it(cluster: TeamCluster) -> None:
    session = open_session(cluster.replicas[0].url, cluster.keys["ann"])
    with httpx2.Client(timeout=60) as http:
        answer = http.post(
            cluster.replicas[2].url,
            json=tool_call(1, "alpha_echo", {"message": "not bob's"}),
            headers=headers_for(cluster.keys["bob"], session),
        )
    assert answer.status_code == 404


def test_a_session_with_oversized_initialize_parameters_stays_on_its_own_replica(
    cluster: TeamCluster,
) -> None:
    key = cluster.keys["ann"]
    opening = initialize_request()
    opening["params"]["capabilities"] = {"experimental": {"padding": {"text": "x" * 70_000}}}
    with httpx2.Client(timeout=60) as http:
        opened = http.post(cluster.replicas[0].url, json=opening, headers=headers_for(key))
        assert opened.status_code == 200, opened.text
        session = opened.headers["mcp-session-id"]
        call = tool_call(1, "alpha_echo", {"message": "big"})
        assert (
            http.post(cluster.replicas[0].url, json=call, headers=headers_for(key, session)).status_code
            == 200
        )
        assert (
            http.post(cluster.replicas[1].url, json=call, headers=headers_for(key, session)).status_code
            == 404
        )
    assert "served by this replica only" in cluster.stderr(0)


def test_a_session_ended_on_one_replica_is_ended_on_every_replica(cluster: TeamCluster) -> None:
    key = cluster.keys["ann"]
    session = open_session(cluster.replicas[0].url, key)
    with httpx2.Client(timeout=60) as http:
        on_second = http.post(
            cluster.replicas[1].url,
            json=tool_call(1, "alpha_echo", {"message": "here"}),
            headers=headers_for(key, session),
        )
        assert on_second.status_code == 200, on_second.text  # replica 1 holds a copy now too
        ended = http.delete(cluster.replicas[2].url, headers=headers_for(key, session))
        assert ended.status_code == 200, ended.text

        def gone_everywhere() -> bool:
            statuses = [
                http.post(
                    replica.url,
                    json=tool_call(2, "alpha_echo", {"message": "after delete"}),
                    headers=headers_for(key, session),
                ).status_code
                for replica in cluster.replicas
            ]
            return statuses == [404] * REPLICAS

        _wait(gone_everywhere)


def test_a_resumable_stream_resumes_on_another_replica_after_its_own_is_killed(cluster: TeamCluster) -> None:
    key = cluster.keys["cat"]
    session = open_session(cluster.replicas[2].url, key)
    call = tool_call(7, "alpha_sleep", {"seconds": 1.5, "progress_interval": 0.1}, progressToken="p7")
    last_event_id = None
    with (
        httpx2.Client(timeout=60) as http,
        http.stream("POST", cluster.replicas[2].url, json=call, headers=headers_for(key, session)) as stream,
    ):
        for line in stream.iter_lines():
            if line.startswith("id:"):
                last_event_id = line[3:].strip()
            if line.startswith("data:") and "notifications/progress" in line:
                break  # the client's connection breaks here, mid-call
    assert last_event_id is not None
    stream_key = f"events:{session}:7"

    def answered() -> bool:
        entries = _redis_stream(cluster, stream_key)
        return any(b'"id":7' in data for data in entries)

    _wait(answered)
    cluster.kill(2)
    try:
        replayed: list[dict[str, Any]] = []
        resume_headers = headers_for(key, session, **{"Last-Event-ID": last_event_id})
        with (
            httpx2.Client(timeout=60) as http,
            http.stream("GET", cluster.url, headers=resume_headers) as resumed,
        ):
            assert resumed.status_code == 200
            for line in resumed.iter_lines():
                if line.startswith("data:") and line[5:].strip():
                    replayed.append(json.loads(line[5:]))
                    if replayed[-1].get("id") == 7:
                        break  # the call's answer: the stream has nothing more to say
        assert any(m.get("method") == "notifications/progress" for m in replayed)
        assert replayed[-1]["result"]["content"][0]["text"]
    finally:
        cluster.restart(2)


async def test_list_changed_of_one_replicas_backend_reaches_a_client_of_another(cluster: TeamCluster) -> None:
    # Replica 1's own copy of alpha never announces anything (ANNOUNCER is replica 0's alone).
    heard = anyio.Event()

    async def on_message(message: Any) -> None:
        if isinstance(message, mcp_types.ToolListChangedNotification):
            heard.set()

    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {cluster.keys['bob']}"}, timeout=30)
    client = Client(
        streamable_http_client(cluster.replicas[1].url, http_client=http),
        mode="legacy",
        message_handler=on_message,
    )
    async with client:
        with anyio.fail_after(WAIT_S):
            await heard.wait()


async def test_a_team_file_edit_reaches_every_replica(cluster: TeamCluster) -> None:
    document = json.loads(cluster.team_file.read_text())
    document["servers"]["beta"] = fake("beta", "echo")
    write_team_file(cluster.team_file, document)
    for replica in cluster.replicas:
        async with modern_client(replica.url, cluster.keys["ann"]) as client:

            async def has_beta(client: Client = client) -> bool:
                return "beta_echo" in {tool.name for tool in (await client.list_tools()).tools}

            await wait_until(has_beta, timeout_s=WAIT_S)


async def test_limits_hold_across_replicas(cluster: TeamCluster) -> None:
    from mcpfleet.team.shared import window_now

    for user in ("bob", "dan"):
        async with modern_client(cluster.url, cluster.keys[user]) as client:
            window = window_now()
            outcomes = [await client.call_tool("alpha_add", {"a": 1, "b": 2}) for _ in range(LIMIT + 1)]
        if window_now() != window:
            continue  # the minute turned during the calls: count again with another user
        # Round-robin: no replica saw more than two of these calls, and the fifth is refused.
        assert [result.is_error for result in outcomes] == [False] * LIMIT + [True]
        refusal = text_of(outcomes[-1])
        assert refusal.startswith("MCP error: rate limit (429 Too Many Requests): ")
        assert 'limits.per_tool."alpha/add"' in refusal
        return
    pytest.fail("the minute turned during every attempt")


async def test_with_redis_stopped_calls_are_served_and_once_it_is_back_sessions_move_again(
    cluster: TeamCluster,
) -> None:
    key = cluster.keys["ann"]
    cluster.redis.stop(remove=False)
    try:
        async with modern_client(cluster.url, key) as client:
            for call in range(REPLICAS):
                echoed = await client.call_tool("alpha_echo", {"message": f"no redis {call}"})
                assert text_of(echoed) == f"no redis {call}"
    finally:
        cluster.redis.start()
    session = open_session(cluster.replicas[0].url, key)
    with httpx2.Client(timeout=60) as http:
        answer = http.post(
            cluster.replicas[1].url,
            json=tool_call(1, "alpha_echo", {"message": "moved"}),
            headers=headers_for(key, session),
        )
    assert answer.status_code == 200, cluster.stderr(0)[-3000:] + cluster.stderr(1)[-3000:]
    for index in range(REPLICAS):
        assert "cannot be reached" in cluster.stderr(index)


def _redis_stream(cluster: TeamCluster, suffix: str) -> list[bytes]:
    """The data of every entry of the Redis stream whose key ends with ``suffix``."""
    import redis

    client = redis.Redis.from_url(cluster.redis.url)
    try:
        keys = [key for key in client.scan_iter(match=f"*{suffix}") if key.endswith(suffix.encode())]
        streams: list[Any] = [client.xrange(key) for key in keys]
        return [bytes(fields.get(b"m", b"")) for stream in streams for _, fields in stream]
    finally:
        client.close()


def _wait(predicate: Any) -> None:
    import time

    deadline = time.monotonic() + WAIT_S
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)
