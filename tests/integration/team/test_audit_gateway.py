"""The audit log of a team gateway (``team.audited_guard`` around ``TeamGuard``).

End to end: a real ``mcpfleet serve --http --team FILE`` process, its state in each store, two
service accounts calling tools they may and may not use; each call is in the store (and the
audit file) when its answer comes back, and ``mcpfleet audit`` reads them. In process: the same
guard and hooks on a gateway served over real HTTP, with a store that no longer answers, to show
a record that cannot be written failing the call (or not, failing open), and a denied call keeping
the policy's words.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from functools import partial
from pathlib import Path
from typing import Any

import anyio
import httpx2
import mcp_types
import pytest
from mcp.client import Client
from mcp.client.streamable_http import streamable_http_client
from tests.integration.team.team_gateway import (
    MCPFLEET,
    add_key,
    fake,
    running_team_gateway,
    team_document,
    write_team_file,
)
from tests.servers.fixtures import FAKE_SERVER

from mcpfleet.fleet.manager import MCPManager
from mcpfleet.gateway.assembly import GatewayOptions, open_gateway
from mcpfleet.gateway.handlers import build_server
from mcpfleet.gateway.http import HttpListener, parse_bind, serve_http
from mcpfleet.gateway.relay import Relay
from mcpfleet.team.audit import AuditLog, arguments_digest
from mcpfleet.team.audited_guard import AuditedGuard
from mcpfleet.team.guard import TeamGuard
from mcpfleet.team.model import AuditSettings, Policy, StateSettings
from mcpfleet.team.principal import PRINCIPAL_SCOPE_KEY, Principal
from mcpfleet.team.state import TeamState
from mcpfleet.team.stores import open_team_state

pytestmark = pytest.mark.anyio

SERVERS = {"alpha": fake("alpha", "echo", "add"), "beta": fake("beta", "echo")}
POLICIES = [
    {"users": ["ann"], "allow": ["*"], "name": "ann-everything"},
    {"users": ["bob"], "allow": ["alpha/*"], "name": "bob-alpha"},
]
CLIENT_NAME = "audit-test-client"
TOOLS_READY_S = 30


def client_of(url: str, key: str) -> Client:
    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {key}"}, timeout=httpx2.Timeout(20.0))
    return Client(
        streamable_http_client(url, http_client=http),
        mode="legacy",
        client_info=mcp_types.Implementation(name=CLIENT_NAME, version="1"),
    )


def text_of(result: Any) -> str:
    block = result.content[0]
    assert isinstance(block, mcp_types.TextContent)
    return block.text


def state_section(settings: StateSettings) -> tuple[dict[str, Any], dict[str, str]]:
    """The team file's ``state:`` for ``settings``, and the environment its ``${VAR}`` needs."""
    if settings.postgres is None:
        return {"sqlite": str(settings.sqlite_path)}, {}
    return {"postgres": "${TEAM_STATE_DSN}"}, {"TEAM_STATE_DSN": settings.postgres}


async def records_of(settings: StateSettings) -> list[tuple[str, str | None, str, str, str]]:
    """What the store holds now, read beside the gateway (another connection, another process's file)."""
    state = await open_team_state(settings)
    try:
        return [(r.user, r.client, r.server, r.tool, r.outcome) for r in await state.audit_records()]
    finally:
        await state.aclose()


async def test_serve_team_records_every_call_before_it_answers(
    tmp_path: Path, state_settings: StateSettings
) -> None:
    state, environ = state_section(state_settings)
    audit_file = tmp_path / "audit.jsonl"
    team_file = write_team_file(
        tmp_path / "team.json",
        team_document(SERVERS, POLICIES, state=state, audit={"file": audit_file.name}),
    )
    environ = {**os.environ, **environ}
    ann_key, bob_key = add_key(team_file, "ann", environ), add_key(team_file, "bob", environ)
    with running_team_gateway(team_file, "--no-cache", environ=environ) as gateway:
        async with client_of(gateway.url, ann_key) as ann, client_of(gateway.url, bob_key) as bob:
            with anyio.fail_after(TOOLS_READY_S):
                assert text_of(await ann.call_tool("alpha_echo", {"message": "hi"})) == "hi"
            assert await records_of(state_settings) == [("service:ann", CLIENT_NAME, "alpha", "echo", "ok")]

            denied = await bob.call_tool("beta_echo", {"message": "secret"})
            assert denied.is_error and "denied by policy 1 (bob-alpha)" in text_of(denied)
            assert (await records_of(state_settings))[-1] == (
                "service:bob",
                CLIENT_NAME,
                "beta",
                "echo",
                "denied",
            )

            with anyio.fail_after(TOOLS_READY_S):
                assert text_of(await ann.call_tool("beta_echo", {"message": "there"})) == "there"
            assert text_of(await bob.call_tool("alpha_add", {"a": 1, "b": 2})) == "3"
            assert len(await records_of(state_settings)) == 4

    expected = [
        ("service:ann", CLIENT_NAME, "alpha", "echo", "ok"),
        ("service:bob", CLIENT_NAME, "beta", "echo", "denied"),
        ("service:ann", CLIENT_NAME, "beta", "echo", "ok"),
        ("service:bob", CLIENT_NAME, "alpha", "add", "ok"),
    ]
    assert await records_of(state_settings) == expected
    lines = [json.loads(line) for line in audit_file.read_text().splitlines()]
    assert [
        (line["user"], line["client"], line["server"], line["tool"], line["outcome"]) for line in lines
    ] == expected
    assert lines[1]["arguments_digest"] == arguments_digest({"message": "secret"})
    assert all("arguments" not in line for line in lines)

    read = await anyio.run_process(
        [str(MCPFLEET), "audit", "--team", str(team_file), "--user", "service:bob", "--json"],
        env={**os.environ, **environ},
        check=False,
    )
    assert read.returncode == 0, read.stderr.decode()
    assert [(r["tool"], r["outcome"]) for r in json.loads(read.stdout)["records"]] == [
        ("echo", "denied"),
        ("add", "ok"),
    ]


def test_serve_team_with_an_unreachable_store_serves_nothing(tmp_path: Path) -> None:
    team_file = write_team_file(
        tmp_path / "team.json",
        team_document(
            SERVERS, POLICIES, state={"sqlite": str(tmp_path / "no-such-folder" / "state.sqlite3")}
        ),
    )
    done = subprocess.run(
        [str(MCPFLEET), "serve", "--http", "127.0.0.1:0", "--team", str(team_file), "--no-cache"],
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 1
    assert "the team state (SQLite," in done.stderr and "cannot be opened" in done.stderr
    assert "serving on" not in done.stderr


# -- in process: a store that no longer answers ------------------------------------------------------

IN_PROCESS_POLICIES = (
    Policy(index=0, allow=("*",), users=("ann",), name="ann-everything"),
    Policy(index=1, allow=("alpha/*",), users=("bob",), name="bob-alpha"),
)
USER_HEADER = b"x-test-user"


def put_principal(app: Any) -> Any:
    """The identity check's part here: the header's service account as the request's principal."""

    async def layer(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            for key, value in scope["headers"]:
                if key == USER_HEADER:
                    name = value.decode()
                    scope[PRINCIPAL_SCOPE_KEY] = Principal(subject=f"service:{name}", service_account=name)
        await app(scope, receive, send)

    return layer


@asynccontextmanager
async def guarded_gateway(home: Path, audit: AuditLog) -> AsyncIterator[str]:
    """A gateway over ``alpha`` and ``beta`` behind a ``TeamGuard`` in an ``AuditedGuard``, as
    ``serve --team`` assembles them."""
    entries = {
        name: {"command": sys.executable, "args": [str(FAKE_SERVER), "--name", name]} for name in SERVERS
    }
    config = home / "servers.json"
    config.write_text(json.dumps({"mcpServers": entries}))

    def own_fleet(relay: Relay) -> contextlib.nullcontext[MCPManager]:
        manager = MCPManager(
            home, cache=None, startup_timeout_ms=0, extra_config_paths=[config], server_requests=relay
        )
        return contextlib.nullcontext(manager)

    guard = AuditedGuard(TeamGuard(IN_PROCESS_POLICIES), audit)
    listener = HttpListener.open(parse_bind("127.0.0.1:0"))
    async with (
        open_gateway(own_fleet, GatewayOptions(guard=guard)) as gateway,
        anyio.create_task_group() as group,
    ):
        url = await group.start(
            partial(
                serve_http,
                build_server(gateway),
                listener,
                auth_token=None,
                notice=lambda _: None,
                around=put_principal,
            )
        )
        yield url
        group.cancel_scope.cancel()


def account_client(url: str, name: str) -> Client:
    http = httpx2.AsyncClient(headers={"X-Test-User": name}, timeout=httpx2.Timeout(20.0))
    return Client(streamable_http_client(url, http_client=http), mode="legacy")


async def closed_store(tmp_path: Path) -> TeamState:
    """A store that no longer answers: every write raises ``TeamStateError``."""
    state = await open_team_state(StateSettings(sqlite_path=tmp_path / "state.sqlite3"))
    await state.aclose()
    return state


async def test_a_call_whose_record_cannot_be_written_fails(isolated_home: Path, tmp_path: Path) -> None:
    audit = AuditLog(AuditSettings(), await closed_store(tmp_path))
    async with guarded_gateway(isolated_home, audit) as url, account_client(url, "ann") as ann:
        result = await ann.call_tool("alpha_echo", {"message": "hi"})

    assert result.is_error
    assert "the audit record of alpha/echo by 'service:ann' could not be written" in text_of(result)


async def test_a_denied_call_keeps_the_policys_words_when_its_record_fails(
    isolated_home: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    audit = AuditLog(AuditSettings(), await closed_store(tmp_path))
    async with guarded_gateway(isolated_home, audit) as url, account_client(url, "bob") as bob:
        denied = await bob.call_tool("beta_echo", {"message": "x"})

    assert denied.is_error and "denied by policy 1 (bob-alpha)" in text_of(denied)
    assert "the audit record of beta/echo by 'service:bob' could not be written" in caplog.text


async def test_failing_open_the_call_answers(isolated_home: Path, tmp_path: Path) -> None:
    audit = AuditLog(AuditSettings(fail_closed=False), await closed_store(tmp_path))
    async with guarded_gateway(isolated_home, audit) as url, account_client(url, "ann") as ann:
        assert text_of(await ann.call_tool("alpha_echo", {"message": "hi"})) == "hi"
