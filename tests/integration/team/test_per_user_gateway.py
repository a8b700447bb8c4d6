"""Per-user servers through the gateway itself: two users call the same OAuth-protected upstream
(tests/servers/oauth_server.py) through one gateway over real HTTP, each with their own token.

The gateway's guard here is this file's: it routes every request for the per-user server to the
caller's own backend (``team.user_backend.per_user_permit``), wrapped in the team's audit
(``AuditedGuard`` over the SQLite state, values of the arguments recorded). The principal comes
from ``X-Test-Principal`` (``HeaderPrincipal``), where the team identity check stands in the real
gateway. The shared fleet lists the upstream with a
token of its own (``catalog@upstream``): the calls must never go with it.
"""

from __future__ import annotations

import base64
import contextlib
import json
import logging
import secrets
from collections.abc import AsyncIterator, Callable, Hashable, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import anyio
import httpx2
import mcp_types
import pytest
from mcp.client import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from tests.integration.oauth.conftest import RunningOAuthServer, _start, _stop
from tests.integration.team.per_user_parts import (
    PRINCIPAL_HEADER,
    ConnectSite,
    HeaderPrincipal,
    as_it_is,
    link_in,
    sqlite_state,
    upstream_access_token,
    upstream_config,
)

from mcpfleet.fleet.manager import MCPManager
from mcpfleet.gateway.assembly import GatewayOptions, open_gateway
from mcpfleet.gateway.guard import ALLOWED, CallOutcome, GuardedRequest, GuardRefusal, Permit, Scope
from mcpfleet.gateway.handlers import build_server
from mcpfleet.gateway.http import HttpListener, parse_bind, serve_http
from mcpfleet.gateway.relay import Relay
from mcpfleet.gateway.served_catalog import ListKind
from mcpfleet.team.audit import AuditLog
from mcpfleet.team.audited_guard import AuditedGuard
from mcpfleet.team.connect_pages import ConnectLayer
from mcpfleet.team.model import AuditSettings
from mcpfleet.team.per_user import PerUserCredentials
from mcpfleet.team.principal import principal_of_scope
from mcpfleet.team.sealing import TEAM_KEY_VARIABLE, Sealer
from mcpfleet.team.state import TeamState
from mcpfleet.team.user_backend import per_user_permit

pytestmark = pytest.mark.anyio

SERVER = "upstream"
TOOL = f"{SERVER}_whoami"


@pytest.fixture(scope="module")
def upstream() -> Iterator[RunningOAuthServer]:
    server = _start(3600, "streamable-http")
    yield server
    _stop(server)


@dataclass
class PerUserGuard:
    """Per-user servers to the caller's own backend; everything else to the fleet; outcomes kept."""

    credentials: PerUserCredentials | None = None
    outcomes: list[tuple[str, str, CallOutcome]] = field(default_factory=list)
    passive = False

    def viewer(self, scope: Scope | None) -> Hashable:
        principal = principal_of_scope(scope or {})
        if principal is None:
            raise GuardRefusal("no principal")
        return principal.subject

    def refusal(self, viewer: Hashable, kind: ListKind, server: str, name: str) -> str | None:
        return None

    async def before(self, request: GuardedRequest) -> Permit:
        assert self.credentials is not None
        permit = await per_user_permit(self.credentials, request)
        return permit if permit is not None else ALLOWED

    async def after(self, request: GuardedRequest, outcome: CallOutcome, duration_ms: float) -> None:
        self.outcomes.append((str(request.asker.viewer), request.name, outcome))

    def on_views_changed(self, listener: Callable[[], None]) -> Callable[[], None]:
        return lambda: None


@asynccontextmanager
async def per_user_gateway(
    home: Path, upstream: RunningOAuthServer, guard: PerUserGuard
) -> AsyncIterator[tuple[ConnectSite, TeamState]]:
    """A gateway whose fleet is the upstream (listed with the catalog's own token), guarded by
    ``guard``, serving the connect pages beside its MCP endpoint."""
    listing_token = await upstream_access_token(upstream.base_url, "catalog@upstream")
    entry = {"url": upstream.mcp_url, "headers": {"Authorization": f"Bearer {listing_token}"}}
    config = home / "servers.json"
    config.write_text(json.dumps({"mcpServers": {SERVER: entry}}))

    def own_fleet(relay: Relay) -> contextlib.nullcontext[MCPManager]:
        manager = MCPManager(
            home, cache=None, startup_timeout_ms=0, extra_config_paths=[config], server_requests=relay
        )
        return contextlib.nullcontext(manager)

    listener = HttpListener.open(parse_bind("127.0.0.1:0"))
    base_url = f"http://127.0.0.1:{listener.socket.getsockname()[1]}"
    sealer = Sealer.from_environment({TEAM_KEY_VARIABLE: base64.b64encode(secrets.token_bytes(32)).decode()})
    servers = {SERVER: upstream_config(SERVER, upstream.mcp_url)}
    async with (
        sqlite_state(home) as state,
        PerUserCredentials.running(
            state, sealer, servers, public_url=f"{base_url}/mcp", cwd=home
        ) as credentials,
        open_gateway(
            own_fleet,
            GatewayOptions(guard=AuditedGuard(guard, AuditLog(AuditSettings(arguments=True), state))),
        ) as gateway,
        anyio.create_task_group() as task_group,
    ):
        guard.credentials = credentials
        await task_group.start(
            partial(
                serve_http,
                build_server(gateway),
                listener,
                auth_token=None,
                notice=lambda _: None,
                around=lambda app: HeaderPrincipal(ConnectLayer(app, credentials)),
                admission=credentials.passes.admission(as_it_is),
            )
        )
        yield ConnectSite(base_url, credentials), state
        task_group.cancel_scope.cancel()


def client_of(site: ConnectSite, user: str, **options: Any) -> Client:
    http = httpx2.AsyncClient(headers={PRINCIPAL_HEADER.decode(): user}, timeout=httpx2.Timeout(30.0))
    return Client(streamable_http_client(f"{site.base_url}/mcp", http_client=http), mode="legacy", **options)


def text_of(result: Any) -> str:
    block = result.content[0]
    assert isinstance(block, mcp_types.TextContent)
    return block.text


async def test_two_users_call_the_same_upstream_each_as_themselves(
    isolated_home: Path, upstream: RunningOAuthServer, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    guard = PerUserGuard()
    async with (
        per_user_gateway(isolated_home, upstream, guard) as (site, state),
        client_of(site, "alice") as alice,
        client_of(site, "bob") as bob,
    ):
        assert [tool.name for tool in (await alice.list_tools()).tools] == [TOOL]
        for user, client in (("alice", alice), ("bob", bob)):
            unconnected = await client.call_tool(TOOL, {})
            assert unconnected.is_error
            link = link_in(text_of(unconnected))
            assert link.startswith(f"{site.base_url}/connect/{SERVER}/signin/")
            assert text_of(unconnected) == (
                f'MCP error: MCP server "{SERVER}" uses your own account: open {link} to connect it, '
                "then call again"
            )
            # The link alone signs the browser in as the caller: each user's own account is bound.
            connected = await site.connect_with_link(link, upstream_user=f"{user}@upstream")
            assert connected.status_code == 200, connected.text
        for _ in range(2):
            assert text_of(await alice.call_tool(TOOL, {})) == "authenticated as alice@upstream"
            assert text_of(await bob.call_tool(TOOL, {})) == "authenticated as bob@upstream"
        assert (await site.revoke("bob", SERVER)).status_code == 303
        assert "open" in text_of(await bob.call_tool(TOOL, {})), "revoked: the link again"
        assert text_of(await alice.call_tool(TOOL, {})) == "authenticated as alice@upstream"
        tokens = [await site.credentials.store("alice", SERVER).get_tokens()]
        audit = await state.audit_records()
    assert ("alice", "whoami", "ok") in guard.outcomes and ("bob", "whoami", "ok") in guard.outcomes
    assert [(record.user, record.outcome) for record in audit].count(("alice", "ok")) == 3
    assert ("bob", "denied") in [(record.user, record.outcome) for record in audit], "the link is a denial"
    secrets_held = [token.access_token for token in tokens if token is not None]
    if tokens[0] is not None and tokens[0].refresh_token is not None:
        secrets_held.append(tokens[0].refresh_token)
    assert len(secrets_held) == 2
    for secret in secrets_held:
        assert secret not in caplog.text
        assert secret not in repr(audit)


async def test_a_client_that_declares_url_elicitation_is_asked_to_open_the_link(
    isolated_home: Path, upstream: RunningOAuthServer
) -> None:
    async def no_form(*_: Any) -> mcp_types.ElicitResult:
        return mcp_types.ElicitResult(action="decline")

    async with (
        per_user_gateway(isolated_home, upstream, PerUserGuard()) as (site, _),
        client_of(site, "carol", elicitation_callback=no_form) as carol,
    ):
        with pytest.raises(MCPError) as raised:
            await carol.call_tool(TOOL, {})
        assert raised.value.error.code == mcp_types.URL_ELICITATION_REQUIRED
        data = raised.value.error.data
        assert isinstance(data, dict)
        [elicitation] = data["elicitations"]
        assert elicitation["mode"] == "url"
        assert elicitation["url"].startswith(f"{site.base_url}/connect/{SERVER}/signin/")
        await site.connect("carol", SERVER, upstream_user="carol@upstream")
        assert text_of(await carol.call_tool(TOOL, {})) == "authenticated as carol@upstream"
