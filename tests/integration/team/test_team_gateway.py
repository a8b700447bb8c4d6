"""A team gateway end to end: a real ``mcpfleet serve --http --team FILE`` process in front of two
fake stdio backends, two service accounts signed in with keys made by ``mcpfleet team key add``.

Each principal lists only what its policy allows; a denied call is an ``MCP error:`` naming the
policy and never reaches the backend; a request without a key is a 401 naming the resource
metadata; an edit of the team file is reloaded by difference: a policy change tells only the
session whose view changed (``list_changed``), a server added starts and is listed.
"""

from __future__ import annotations

import base64
import json
import os
import secrets
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import httpx2
import mcp_types
import pytest
from mcp.client import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from tests.integration.gateway.gateway_harness import wait_until
from tests.integration.team.team_gateway import (
    MCPFLEET,
    add_key,
    fake,
    running_team_gateway,
    team_document,
    write_team_file,
)
from tests.servers.fixtures import HttpServer

pytestmark = pytest.mark.anyio

SERVERS = {"alpha": fake("alpha", "echo", "add"), "beta": fake("beta", "echo", "add")}
ANN_ALL = {"users": ["ann"], "allow": ["*"], "name": "ann-everything"}
BOB_ALPHA = {"users": ["bob"], "allow": ["alpha/*"], "deny": ["*/add"], "name": "bob-alpha"}
WAIT_S = 30


def client_of(url: str, key: str, on_message: Callable[[Any], Any] | None = None) -> Client:
    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {key}"}, timeout=httpx2.Timeout(20.0))
    options: dict[str, Any] = {"message_handler": on_message} if on_message is not None else {}
    return Client(streamable_http_client(url, http_client=http), mode="legacy", **options)


async def tool_names(client: Client) -> list[str]:
    return sorted(tool.name for tool in (await client.list_tools()).tools)


async def listed_when_ready(client: Client, expected: list[str]) -> list[str]:
    """The client's tools once every backend is in (the first lists do not wait for a backend
    still starting with nothing cached): a list_changed follows each that joins."""

    async def complete() -> bool:
        return await tool_names(client) == expected

    await wait_until(complete, timeout_s=WAIT_S)
    return expected


def text_of(result: Any) -> str:
    block = result.content[0]
    assert isinstance(block, mcp_types.TextContent)
    return block.text


class Heard:
    """The ``tools/list_changed`` notices one client received."""

    def __init__(self) -> None:
        self.count = 0
        self.news = anyio.Event()

    async def __call__(self, message: Any) -> None:
        if isinstance(message, mcp_types.ToolListChangedNotification):
            self.count += 1
            self.news.set()

    async def next(self) -> None:
        with anyio.fail_after(WAIT_S):
            await self.news.wait()
        self.news = anyio.Event()


@pytest.fixture
def team_file(tmp_path: Path) -> Path:
    return write_team_file(tmp_path / "team.json", team_document(SERVERS, [ANN_ALL, BOB_ALPHA]))


async def test_each_principal_sees_and_calls_what_its_policy_allows(team_file: Path) -> None:
    ann_key, bob_key = add_key(team_file, "ann"), add_key(team_file, "bob")
    with running_team_gateway(team_file, "--no-cache") as gateway:
        async with client_of(gateway.url, ann_key) as ann, client_of(gateway.url, bob_key) as bob:
            assert await listed_when_ready(ann, ["alpha_add", "alpha_echo", "beta_add", "beta_echo"])
            assert await tool_names(bob) == ["alpha_echo"]
            assert [prompt.name for prompt in (await bob.list_prompts()).prompts] == ["alpha_greet"]

            assert text_of(await bob.call_tool("alpha_echo", {"message": "hi"})) == "hi"
            denied = await bob.call_tool("beta_echo", {"message": "hi"})
            assert denied.is_error
            assert text_of(denied) == "MCP error: beta/echo denied by policy 1 (bob-alpha) for bob"
            carved = await bob.call_tool("alpha_add", {"a": 1, "b": 2})
            assert carved.is_error and "alpha/add denied by policy 1 (bob-alpha)" in text_of(carved)
            with pytest.raises(MCPError, match="denied by policy 1"):
                await bob.get_prompt("beta_greet", {"who": "x"})

            assert text_of(await ann.call_tool("beta_add", {"a": 1, "b": 2})) == "3"

        # Every call on record, written before it answered: identity → policy → audit.
        audit = await anyio.run_process(
            [str(MCPFLEET), "audit", "--team", str(team_file), "--json"], stdin=subprocess.DEVNULL
        )
        records = [
            (record["user"], record["server"], record["tool"], record["outcome"])
            for record in json.loads(audit.stdout)["records"]
        ]
        assert records == [
            ("service:bob", "alpha", "echo", "ok"),
            ("service:bob", "beta", "echo", "denied"),
            ("service:bob", "alpha", "add", "denied"),
            ("service:ann", "beta", "add", "ok"),
        ]


async def test_a_request_without_a_key_is_told_where_to_sign_in(team_file: Path) -> None:
    with running_team_gateway(team_file, "--no-cache") as gateway:
        async with httpx2.AsyncClient(timeout=httpx2.Timeout(20.0)) as http:
            response = await http.post(gateway.url, json={"jsonrpc": "2.0", "id": 1, "method": "ping"})
        assert response.status_code == 401
        assert 'resource_metadata="' in response.headers["www-authenticate"]


async def test_a_reload_tells_only_the_sessions_whose_view_changed(team_file: Path) -> None:
    ann_key, bob_key = add_key(team_file, "ann"), add_key(team_file, "bob")
    ann_heard, bob_heard = Heard(), Heard()
    with running_team_gateway(team_file, "--no-cache") as gateway:
        async with (
            client_of(gateway.url, ann_key, ann_heard) as ann,
            client_of(gateway.url, bob_key, bob_heard) as bob,
        ):
            await listed_when_ready(ann, ["alpha_add", "alpha_echo", "beta_add", "beta_echo"])
            assert await tool_names(bob) == ["alpha_echo"]
            ann_before = ann_heard.count

            bob_more = {**BOB_ALPHA, "allow": ["alpha/*", "beta/echo"]}
            write_team_file(team_file, team_document(SERVERS, [ANN_ALL, bob_more]))
            await bob_heard.next()
            assert await tool_names(bob) == ["alpha_echo", "beta_echo"]
            assert text_of(await bob.call_tool("beta_echo", {"message": "now"})) == "now"

            # Now ann's view changes: had the first reload been told to her, it would come first.
            ann_less = {**ANN_ALL, "deny": ["beta/*"]}
            write_team_file(team_file, team_document(SERVERS, [ann_less, bob_more]))
            await ann_heard.next()
            assert ann_heard.count == ann_before + 1
            assert await tool_names(ann) == ["alpha_add", "alpha_echo"]


async def test_a_server_added_to_the_team_file_starts_and_is_listed(team_file: Path) -> None:
    ann_key = add_key(team_file, "ann")
    ann_heard = Heard()
    with running_team_gateway(team_file, "--no-cache") as gateway:
        async with client_of(gateway.url, ann_key, ann_heard) as ann:
            await listed_when_ready(ann, ["alpha_add", "alpha_echo", "beta_add", "beta_echo"])
            servers = {**SERVERS, "gamma": fake("gamma", "echo")}
            del servers["beta"]
            write_team_file(team_file, team_document(servers, [ANN_ALL, BOB_ALPHA]))
            assert await listed_when_ready(ann, ["alpha_add", "alpha_echo", "gamma_echo"])
            assert text_of(await ann.call_tool("gamma_echo", {"message": "new"})) == "new"


async def test_a_team_file_that_stops_loading_keeps_the_last_good_one(team_file: Path) -> None:
    ann_key = add_key(team_file, "ann")
    with running_team_gateway(team_file, "--no-cache") as gateway:
        async with client_of(gateway.url, ann_key) as ann:
            await listed_when_ready(ann, ["alpha_add", "alpha_echo", "beta_add", "beta_echo"])
            broken = team_document(SERVERS, [{"users": ["ann"]}])  # no allow: not a policy
            write_team_file(team_file, broken)
            await wait_until(lambda: "policies[0].allow" in gateway.stderr, timeout_s=WAIT_S)
            assert "still serving the last good team file" in gateway.stderr
            assert await tool_names(ann) == ["alpha_add", "alpha_echo", "beta_add", "beta_echo"]


async def test_a_reload_that_changes_what_is_read_at_start_says_so_and_applies_the_rest(
    team_file: Path,
) -> None:
    ann_key = add_key(team_file, "ann")
    with running_team_gateway(team_file, "--no-cache") as gateway:
        async with client_of(gateway.url, ann_key) as ann:
            await listed_when_ready(ann, ["alpha_add", "alpha_echo", "beta_add", "beta_echo"])
            moved = team_document(SERVERS, [{**ANN_ALL, "deny": ["beta/*"]}], drain_timeout=5)
            moved["identity"] = {**moved["identity"], "groups_claim": "roles"}
            write_team_file(team_file, moved)
            await wait_until(lambda: "changed identity, drain_timeout" in gateway.stderr, timeout_s=WAIT_S)
            assert "apply when this replica restarts" in gateway.stderr
            # the policy, in the same reload, applies at once
            assert await listed_when_ready(ann, ["alpha_add", "alpha_echo"])


HTTP = ["--http", "127.0.0.1:0"]


@pytest.mark.parametrize(
    ("arguments", "said"),
    [
        (["serve", "--team", "TEAM"], "--team serves over HTTP only"),
        (["serve", *HTTP, "--team", "TEAM", "--insecure-no-auth"], "does not apply to --team"),
        (["--config", "x.json", "serve", *HTTP, "--team", "TEAM"], "--config does not apply"),
        (["serve", *HTTP, "--team", "MISSING"], "no such file"),
    ],
)
def test_serve_team_refuses_what_it_cannot_serve_in_one_line(
    team_file: Path, arguments: list[str], said: str
) -> None:
    named = {"TEAM": str(team_file), "MISSING": str(team_file.with_name("missing.yaml"))}
    words = [named.get(word, word) for word in arguments]
    done = subprocess.run(
        [str(MCPFLEET), *words], capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL
    )
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and said in lines[0]


async def test_a_per_user_server_asks_each_caller_to_connect_their_own_account(
    team_file: Path, http_server_factory: Callable[..., HttpServer]
) -> None:
    """identity → policy → audit → per-user credentials, through serve --team: the shared fleet
    lists the per-user server, and a caller without their own credentials is sent to
    ``/connect/<server>``, never served with the shared connection."""
    upstream = http_server_factory("--name", "tracker")
    servers = {**SERVERS, "tracker": {"url": upstream.url, "credentials": "per-user"}}
    write_team_file(team_file, team_document(servers, [ANN_ALL, BOB_ALPHA]))
    ann_key = add_key(team_file, "ann")
    team_key = base64.b64encode(secrets.token_bytes(32)).decode()
    environ = {**os.environ, "MCPFLEET_TEAM_KEY": team_key}
    with running_team_gateway(team_file, "--no-cache", environ=environ) as gateway:
        async with client_of(gateway.url, ann_key) as ann:
            everything = ["alpha_add", "alpha_echo", "beta_add", "beta_echo"]
            await listed_when_ready(
                ann, sorted([*everything, "tracker_add", "tracker_echo", "tracker_review", "tracker_sleep"])
            )
            refused = await ann.call_tool("tracker_echo", {"message": "hi"})
            assert refused.is_error
            assert "http://127.0.0.1/connect/tracker" in text_of(refused)
        assert team_key not in gateway.stderr
