"""Per-user connects across three team gateway replicas behind HAProxy (round-robin, no
stickiness) on real PostgreSQL and a real redis-server (``tests/integration/team/cluster.py``),
started once for this file. The per-user server is the OAuth-protected test server
(tests/servers/oauth_server.py): each user signs in there as themselves, and its ``whoami``
answers with the identity of the token it got.

A browser (``Browser``, httpx with a cookie jar) walks each step of a connect on the replica the
test names, so the link, the page that starts the flow and the upstream's callback land on
different replicas; and through the balancer itself. Then every replica calls the upstream as the
user; a link opened on one replica is refused on the others; the callback of a flow whose replica
was killed says so, and a new connect works; with Redis stopped, links and connects are refused
with a message, and work once it is back (docs/team.md, "Running more than one replica").
"""

from __future__ import annotations

import base64
import secrets
import time
from collections.abc import Callable, Iterator
from functools import partial
from typing import Any

import anyio
import httpx2
import mcp_types
import psycopg
import pytest
from mcp.client import Client
from mcp.client.streamable_http import streamable_http_client
from psycopg import sql
from tests.integration.oauth.conftest import RunningOAuthServer, _start, _stop
from tests.integration.team.cluster import REPLICAS, TeamCluster
from tests.integration.team.per_user_parts import (
    UPSTREAM_USER_HEADER,
    form_token_of,
    link_in,
    upstream_access_token,
)
from tests.postgres import PostgresServer, database_name

from mcpfleet.team.connect_pages import FORM_FIELD

pytestmark = pytest.mark.anyio

SERVER = "upstream"
TOOL = f"{SERVER}_whoami"
WAIT_S = 60
USERS = ("ann", "bob", "cat", "dan")


@pytest.fixture(scope="module")
def upstream() -> Iterator[RunningOAuthServer]:
    server = _start(3600, "streamable-http")
    yield server
    _stop(server)


@pytest.fixture(scope="module")
def cluster(
    postgres_server: PostgresServer,
    tmp_path_factory: pytest.TempPathFactory,
    upstream: RunningOAuthServer,
) -> Iterator[TeamCluster]:
    name = database_name("team_cluster_connect")
    with psycopg.connect(postgres_server.dsn(), autocommit=True) as admin:
        admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    team_key = base64.b64encode(secrets.token_bytes(32)).decode()
    listing_token = anyio.run(upstream_access_token, upstream.base_url, "catalog@upstream")
    # The shared fleet lists the upstream with a token of its own; users' calls never carry it.
    entry = {
        "url": upstream.mcp_url,
        "credentials": "per-user",
        "headers": {"Authorization": f"Bearer {listing_token}"},
    }
    started = TeamCluster.start(
        tmp_path_factory.mktemp("cluster-connect"),
        {SERVER: entry},
        [{"name": "everyone", "allow": ["*"]}],
        postgres_server.dsn(name),
        users=USERS,
        replica_env={index: {"MCPFLEET_TEAM_KEY": team_key} for index in range(REPLICAS)},
    )
    try:
        _every_replica_listens(started)
        yield started
    finally:
        started.stop()
        with psycopg.connect(postgres_server.dsn(), autocommit=True) as admin:
            admin.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))


class Browser:
    """One user's browser: a cookie jar, and each request sent to the replica a test names
    (``None``: to the balancer)."""

    def __init__(self, cluster: TeamCluster) -> None:
        self.cluster = cluster
        self.http = httpx2.Client(timeout=WAIT_S)

    def at(self, url: str, replica: int | None) -> str:
        """``url`` (the gateway's, on the balancer) sent to ``replica`` itself."""
        balancer = f"http://127.0.0.1:{self.cluster.port}/"
        assert url.startswith(balancer), url
        if replica is None:
            return url
        return f"http://127.0.0.1:{self.cluster.replicas[replica].port}/{url.removeprefix(balancer)}"

    def open_link(self, link: str, replica: int | None) -> httpx2.Response:
        return self.http.get(self.at(link, replica))

    def start(self, replica: int | None, *, page: int | None = None) -> httpx2.Response:
        """Open the server's page (on ``page``) and press "Connect" (on ``replica``)."""
        connect_url = f"http://127.0.0.1:{self.cluster.port}/connect/{SERVER}"
        shown = self.http.get(self.at(connect_url, page))
        assert shown.status_code == 200, shown.text
        return self.http.post(self.at(connect_url, replica), data={FORM_FIELD: form_token_of(shown.text)})

    def sign_in_upstream(self, started: httpx2.Response, upstream_user: str) -> str:
        """Follow the redirect to the upstream's sign-in as ``upstream_user``: the callback URL."""
        assert started.status_code == 303, started.text
        authorized = self.http.get(started.headers["location"], headers={UPSTREAM_USER_HEADER: upstream_user})
        assert authorized.status_code == 302, authorized.text
        callback: str = authorized.headers["location"]
        return callback

    def callback(self, callback: str, replica: int | None) -> httpx2.Response:
        return self.http.get(self.at(callback, replica))

    def connect(self, link: str, upstream_user: str, replicas: tuple[int | None, ...]) -> httpx2.Response:
        """The whole connect: the link, the page, "Connect", the upstream, the callback; each
        step of the four of ours on the replica ``replicas`` names for it."""
        link_on, page_on, start_on, callback_on = replicas
        traded = self.open_link(link, link_on)
        assert traded.status_code == 303, traded.text
        started = self.start(start_on, page=page_on)
        return self.callback(self.sign_in_upstream(started, upstream_user), callback_on)

    def close(self) -> None:
        self.http.close()


@pytest.fixture
def browser(cluster: TeamCluster) -> Iterator[Browser]:
    opened = Browser(cluster)
    yield opened
    opened.close()


def modern_client(url: str, key: str) -> Client:
    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {key}"}, timeout=httpx2.Timeout(30.0))
    return Client(streamable_http_client(url, http_client=http), mode="2026-07-28")


def text_of(result: Any) -> str:
    block = result.content[0]
    assert isinstance(block, mcp_types.TextContent)
    return block.text


async def call_whoami(url: str, key: str) -> str:
    async with modern_client(url, key) as client:
        return text_of(await client.call_tool(TOOL, {}))


async def connect_link(cluster: TeamCluster, user: str) -> str:
    """The link a call of ``user`` who holds no tokens answers with (through the balancer)."""
    answer = await call_whoami(cluster.url, cluster.keys[user])
    link = link_in(answer)
    assert link.startswith(f"http://127.0.0.1:{cluster.port}/connect/{SERVER}/signin/"), answer
    return link


async def test_each_step_of_a_connect_on_another_replica_and_every_replica_calls_as_the_user(
    cluster: TeamCluster, browser: Browser
) -> None:
    key = cluster.keys["ann"]
    link = await connect_link(cluster, "ann")
    # The link on 0, the page on 1, "Connect" on 2 (the flow's replica), the callback on 0.
    done = browser.connect(link, "ann@upstream", (0, 1, 2, 0))
    assert done.status_code == 200, done.text + cluster.stderr(2)[-3000:]
    assert "now use your account" in done.text
    for replica in cluster.replicas:
        assert await call_whoami(replica.url, key) == "authenticated as ann@upstream"

    # Again, as another upstream account, every step through the balancer: every replica drops
    # the connection it holds with the old tokens (which still work upstream) for the new ones.
    callback = browser.sign_in_upstream(browser.start(None, page=None), "ann-again@upstream")
    again = browser.callback(callback, None)
    assert again.status_code == 200, again.text
    for replica in cluster.replicas:
        await _eventually(partial(call_whoami, replica.url, key), "authenticated as ann-again@upstream")


async def test_a_link_opened_on_one_replica_is_refused_on_every_other(
    cluster: TeamCluster, browser: Browser
) -> None:
    link = await connect_link(cluster, "bob")
    assert browser.open_link(link, 1).status_code == 303
    with httpx2.Client(timeout=WAIT_S) as stranger:
        for replica in (0, 2, 1):
            replayed = stranger.get(browser.at(link, replica))
            assert replayed.status_code == 401, replayed.text
            assert "already used" in replayed.text
            assert "set-cookie" not in replayed.headers


async def test_a_callback_for_a_killed_replica_says_so_and_a_new_connect_works(
    cluster: TeamCluster, browser: Browser
) -> None:
    link = await connect_link(cluster, "cat")
    assert browser.open_link(link, 0).status_code == 303
    callback = browser.sign_in_upstream(browser.start(1, page=0), "cat@upstream")
    cluster.kill(1)
    try:
        orphaned = browser.callback(callback, 2)
        assert orphaned.status_code == 502, orphaned.text
        assert "replica that started this sign-in has stopped" in orphaned.text
        assert f'href="http://127.0.0.1:{cluster.port}/connect/{SERVER}"' in orphaned.text, "start again"
        assert browser.callback(callback, 0).status_code == 502, "still nothing to finish it"
    finally:
        cluster.restart(1)
        _every_replica_listens(cluster)
    # The cookie still signs the browser in: the user starts again, on a replica that runs.
    callback = browser.sign_in_upstream(browser.start(0, page=2), "cat@upstream")
    finished = browser.callback(callback, 2)
    assert finished.status_code == 200, finished.text
    assert await call_whoami(cluster.replicas[1].url, cluster.keys["cat"]) == "authenticated as cat@upstream"


async def test_with_redis_stopped_links_and_connects_are_refused_until_it_is_back(
    cluster: TeamCluster, browser: Browser
) -> None:
    link = await connect_link(cluster, "dan")
    cluster.redis.stop(remove=False)
    try:
        unchecked = browser.open_link(link, 0)
        assert unchecked.status_code == 503, unchecked.text
        assert "cannot reach its shared state (Redis)" in unchecked.text
    finally:
        cluster.redis.start()
        _every_replica_listens(cluster)
    assert browser.open_link(link, 1).status_code == 303, "the link was not spent while refused"
    shown = browser.http.get(browser.at(f"http://127.0.0.1:{cluster.port}/connect/{SERVER}", 2))
    cluster.redis.stop(remove=False)
    try:
        refused = browser.http.post(
            browser.at(f"http://127.0.0.1:{cluster.port}/connect/{SERVER}", 2),
            data={FORM_FIELD: form_token_of(shown.text)},
        )
        assert refused.status_code == 502, refused.text
        assert "cannot reach its shared state (Redis)" in refused.text
    finally:
        cluster.redis.start()
        _every_replica_listens(cluster)
    done = browser.callback(browser.sign_in_upstream(browser.start(2, page=0), "dan@upstream"), 1)
    assert done.status_code == 200, done.text
    assert await call_whoami(cluster.replicas[0].url, cluster.keys["dan"]) == "authenticated as dan@upstream"
    assert "A connect link was not taken" in cluster.stderr(0)
    assert 'The connect of user "service:dan" to "upstream" was not started' in cluster.stderr(2)


def _every_replica_listens(cluster: TeamCluster) -> None:
    """Wait until each replica is subscribed to its own channel in Redis (after a start, or once
    Redis is back): a callback handed over before that would find its replica gone."""
    import redis

    client = redis.Redis.from_url(cluster.redis.url)
    try:
        deadline = time.monotonic() + WAIT_S
        while len(client.pubsub_channels("*:replica:*")) != REPLICAS:
            assert time.monotonic() < deadline, "the replicas did not subscribe"
            time.sleep(0.05)
    finally:
        client.close()


async def _eventually(answer: Callable[[], Any], expected: str) -> None:
    """Wait until ``await answer()`` is ``expected`` (another replica hears of the new tokens over
    Redis, as its own message): a safety-net deadline only."""
    deadline = time.monotonic() + WAIT_S
    while (found := await answer()) != expected:
        assert time.monotonic() < deadline, found
        await anyio.sleep(0.05)
