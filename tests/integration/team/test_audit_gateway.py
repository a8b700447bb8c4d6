"""The audit log on a real gateway (``team.audited_guard``): calls of two users over HTTP, allowed
and denied, each on record before its answer comes back, in both stores.

The gateway serves two fake stdio backends over real HTTP; a small ASGI layer puts the
``Principal`` named by the request's ``X-Test-User`` header in its scope, as the identity check
does, and a small policy guard refuses bob the server ``beta``. What is shown is the audit
side: the records the store holds right after each call returned, and a record that cannot be
written failing the call (or not, failing open).
"""

from __future__ import annotations

import contextlib
import json
import sys
from collections.abc import AsyncIterator, Callable, Hashable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import anyio
import httpx2
import mcp_types
import pytest
from mcp.client import Client
from mcp.client.streamable_http import streamable_http_client
from tests.servers.fixtures import FAKE_SERVER

from mcpfleet.fleet.manager import MCPManager
from mcpfleet.gateway.assembly import GatewayOptions, open_gateway
from mcpfleet.gateway.guard import (
    ALLOWED,
    CallOutcome,
    GuardedRequest,
    GuardRefusal,
    Permit,
    Scope,
    ViewsChangedListener,
)
from mcpfleet.gateway.handlers import build_server
from mcpfleet.gateway.http import HttpListener, parse_bind, serve_http
from mcpfleet.gateway.relay import Relay
from mcpfleet.gateway.served_catalog import ListKind
from mcpfleet.team.audit import AuditLog, arguments_digest
from mcpfleet.team.audited_guard import AuditedGuard
from mcpfleet.team.model import AuditSettings, StateSettings
from mcpfleet.team.principal import PRINCIPAL_SCOPE_KEY, Principal, principal_of_scope
from mcpfleet.team.state import TeamState
from mcpfleet.team.stores import open_team_state

pytestmark = pytest.mark.anyio

USER_HEADER = b"x-test-user"
CLIENT_NAME = "audit-test-client"


@dataclass
class RefuseBobBeta:
    """The inner guard: the principal's subject is the viewer; bob may not use ``beta``."""

    passive = False

    def viewer(self, scope: Scope | None) -> Hashable:
        principal = principal_of_scope(scope or {})
        if principal is None:
            raise GuardRefusal("no principal")
        return principal.subject

    def refusal(self, viewer: Hashable, kind: ListKind, server: str, name: str) -> str | None:
        return (
            f"denied by policy 0: {viewer} may not use {server}"
            if (viewer, server) == ("bob", "beta")
            else None
        )

    async def before(self, request: GuardedRequest) -> Permit:
        refusal = self.refusal(request.asker.viewer, request.kind, request.server, request.name)
        return Permit(refusal=refusal) if refusal is not None else ALLOWED

    async def after(self, request: GuardedRequest, outcome: CallOutcome, duration_ms: float) -> None:
        return None

    def on_views_changed(self, listener: ViewsChangedListener) -> Callable[[], None]:
        return lambda: None


def put_principal(app: Any) -> Any:
    async def layer(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            for key, value in scope["headers"]:
                if key == USER_HEADER:
                    scope[PRINCIPAL_SCOPE_KEY] = Principal(subject=value.decode())
        await app(scope, receive, send)

    return layer


@asynccontextmanager
async def audited_gateway(home: Path, guard: AuditedGuard) -> AsyncIterator[str]:
    """A gateway over fake servers ``alpha`` and ``beta`` behind ``guard``; yields its URL."""
    entries = {
        name: {
            "command": sys.executable,
            "args": [str(FAKE_SERVER), "--name", name, "--tool", "echo", "--tool", "fail"],
        }
        for name in ("alpha", "beta")
    }
    config = home / "servers.json"
    config.write_text(json.dumps({"mcpServers": entries}))

    def own_fleet(relay: Relay) -> contextlib.nullcontext[MCPManager]:
        manager = MCPManager(
            home, cache=None, startup_timeout_ms=0, extra_config_paths=[config], server_requests=relay
        )
        return contextlib.nullcontext(manager)

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


def client_of(url: str, user: str) -> Client:
    http = httpx2.AsyncClient(headers={"X-Test-User": user}, timeout=httpx2.Timeout(20.0))
    return Client(
        streamable_http_client(url, http_client=http),
        mode="legacy",
        client_info=mcp_types.Implementation(name=CLIENT_NAME, version="1"),
    )


def text_of(result: Any) -> str:
    block = result.content[0]
    assert isinstance(block, mcp_types.TextContent)
    return block.text


async def test_every_call_of_two_users_is_on_record_when_it_answers(
    isolated_home: Path, state_settings: StateSettings
) -> None:
    state = await open_team_state(state_settings)
    audit_file = isolated_home / "audit.jsonl"
    guard = AuditedGuard(RefuseBobBeta(), AuditLog(AuditSettings(file=audit_file), state))
    try:
        async with (
            audited_gateway(isolated_home, guard) as url,
            client_of(url, "alice") as alice,
            client_of(url, "bob") as bob,
        ):
            assert text_of(await alice.call_tool("alpha_echo", {"message": "hi"})) == "hi"
            assert [(r.user, r.tool, r.outcome) for r in await state.audit_records()] == [
                ("alice", "echo", "ok")
            ]

            assert (await alice.call_tool("beta_fail", {"message": "no"})).is_error
            assert len(await state.audit_records()) == 2

            denied = await bob.call_tool("beta_echo", {"message": "secret"})
            assert denied.is_error and "denied by policy 0: bob may not use beta" in text_of(denied)
            assert len(await state.audit_records()) == 3

            assert text_of(await bob.call_tool("alpha_echo", {"message": "fine"})) == "fine"

        records = await state.audit_records()
        assert [(r.user, r.client, r.server, r.tool, r.outcome) for r in records] == [
            ("alice", CLIENT_NAME, "alpha", "echo", "ok"),
            ("alice", CLIENT_NAME, "beta", "fail", "error"),
            ("bob", CLIENT_NAME, "beta", "echo", "denied"),
            ("bob", CLIENT_NAME, "alpha", "echo", "ok"),
        ]
        assert records[2].arguments_digest == arguments_digest({"message": "secret"})
        assert all(record.arguments is None and record.duration_ms >= 0 for record in records)
        assert [r.user for r in await state.audit_records(user="bob")] == ["bob", "bob"]
        lines = [json.loads(line) for line in audit_file.read_text().splitlines()]
        assert [(line["user"], line["tool"], line["outcome"]) for line in lines] == [
            (r.user, r.tool, r.outcome) for r in records
        ]
    finally:
        await state.aclose()


async def closed_store(tmp_path: Path) -> TeamState:
    """A store that no longer answers: every write raises ``TeamStateError``."""
    state = await open_team_state(StateSettings(sqlite_path=tmp_path / "state.sqlite3"))
    await state.aclose()
    return state


async def test_a_call_whose_record_cannot_be_written_fails(isolated_home: Path, tmp_path: Path) -> None:
    guard = AuditedGuard(RefuseBobBeta(), AuditLog(AuditSettings(), await closed_store(tmp_path)))
    async with audited_gateway(isolated_home, guard) as url, client_of(url, "alice") as alice:
        result = await alice.call_tool("alpha_echo", {"message": "hi"})

    assert result.is_error
    assert "the audit record of alpha/echo by 'alice' could not be written" in text_of(result)


async def test_a_denied_call_keeps_the_policys_words_when_its_record_fails(
    isolated_home: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    guard = AuditedGuard(RefuseBobBeta(), AuditLog(AuditSettings(), await closed_store(tmp_path)))
    async with audited_gateway(isolated_home, guard) as url, client_of(url, "bob") as bob:
        denied = await bob.call_tool("beta_echo", {"message": "x"})

    assert denied.is_error and "denied by policy 0: bob may not use beta" in text_of(denied)
    assert "the audit record of beta/echo by 'bob' could not be written" in caplog.text


async def test_failing_open_the_call_answers(isolated_home: Path, tmp_path: Path) -> None:
    log = AuditLog(AuditSettings(fail_closed=False), await closed_store(tmp_path))
    guard = AuditedGuard(RefuseBobBeta(), log)
    async with audited_gateway(isolated_home, guard) as url, client_of(url, "alice") as alice:
        assert text_of(await alice.call_tool("alpha_echo", {"message": "hi"})) == "hi"
