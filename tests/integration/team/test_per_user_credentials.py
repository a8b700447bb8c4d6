"""Per-user upstream credentials through the connect pages, against a real OAuth-protected
MCP server (tests/servers/oauth_server.py as a subprocess: authorization server and resource
server, issuing tokens per signed-in user, whose ``whoami`` names the user it sees)."""

from __future__ import annotations

import base64
import logging
import secrets
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import httpx2
import pytest
from tests.integration.oauth.conftest import RunningOAuthServer, _start, _stop
from tests.integration.team.per_user_parts import (
    PRINCIPAL_HEADER,
    UPSTREAM_USER_HEADER,
    ConnectSite,
    connect_site,
    form_token_of,
    link_in,
    sqlite_state,
    upstream_config,
)

from mcpfleet.client.connection import ServerConnection
from mcpfleet.config.model import ServerConfig
from mcpfleet.errors import ConfigError
from mcpfleet.team.connect_flow import ConnectRequiredError
from mcpfleet.team.connect_pages import FORM_FIELD
from mcpfleet.team.per_user import PerUserCredentials
from mcpfleet.team.sealing import TEAM_KEY_VARIABLE, Sealer
from mcpfleet.team.user_connections import IDLE_TIMEOUT_S

pytestmark = pytest.mark.anyio

SERVER = "upstream"


@pytest.fixture(scope="module")
def upstream() -> Iterator[RunningOAuthServer]:
    """One upstream for the module: each test's users sign in afresh (a gateway of its own
    registers its own clients), so they share nothing but the process."""
    server = _start(3600, "streamable-http")
    yield server
    _stop(server)


def new_key() -> str:
    return base64.b64encode(secrets.token_bytes(32)).decode()


def sealer_of(keys: str) -> Sealer:
    return Sealer.from_environment({TEAM_KEY_VARIABLE: keys})


@asynccontextmanager
async def site_for(
    upstream: RunningOAuthServer,
    tmp_path: Path,
    keys: str | None = None,
    idle_timeout_s: float = IDLE_TIMEOUT_S,
) -> AsyncIterator[ConnectSite]:
    """The connect pages over the SQLite state in ``tmp_path`` (the same file on every call)."""
    servers = {SERVER: upstream_config(SERVER, upstream.mcp_url)}
    sealer = sealer_of(keys or new_key())
    async with (
        sqlite_state(tmp_path) as state,
        connect_site(servers, sealer, state, cwd=tmp_path, idle_timeout_s=idle_timeout_s) as site,
    ):
        yield site


def is_closed(connection: ServerConnection) -> bool:
    """Read afresh each time (the type checker would take one read for all)."""
    return connection.closed


def as_user(user: str) -> dict[str, str]:
    return {PRINCIPAL_HEADER.decode(): user}


async def test_two_users_each_see_only_their_own_identity_upstream(
    upstream: RunningOAuthServer, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    pages: list[str] = []
    registrations = upstream.stats()["registrations"]
    async with site_for(upstream, tmp_path) as site:
        for user in ("alice", "bob"):
            with pytest.raises(ConnectRequiredError) as raised:
                await site.whoami(user, SERVER)
            link = link_in(str(raised.value))
            assert link.startswith(f"{site.base_url}/connect/{SERVER}/signin/")
            assert str(raised.value) == (
                f'MCP server "{SERVER}" uses your own account: open {link} to connect it, then call again'
            )
            answer = await site.connect_with_link(link, upstream_user=f"{user}@upstream")
            assert answer.status_code == 200, answer.text
            assert "now use your account" in answer.text
            pages.append(answer.text)
        assert await site.whoami("alice", SERVER) == "authenticated as alice@upstream"
        assert await site.whoami("bob", SERVER) == "authenticated as bob@upstream"
        assert await site.whoami("alice", SERVER) == "authenticated as alice@upstream"
        assert site.credentials.connections.open_pairs() == [("alice", SERVER), ("bob", SERVER)]
        async with httpx2.AsyncClient() as browser:
            overview = await browser.get(f"{site.base_url}/connect", headers=as_user("alice"))
        assert f"{SERVER}</a>: connected" in overview.text
        pages.append(overview.text)
        tokens = [await site.credentials.store(user, SERVER).get_tokens() for user in ("alice", "bob")]
        stored = b"".join([await site.state_row(user) for user in ("alice", "bob")])
    assert upstream.stats()["registrations"] == registrations + 2, "one client registration per user"
    secrets_seen = [t.access_token for t in tokens if t] + [
        t.refresh_token for t in tokens if t and t.refresh_token
    ]
    assert len(secrets_seen) == 4
    for secret in secrets_seen:
        assert secret not in caplog.text
        assert secret.encode() not in stored
        assert all(secret not in page for page in pages)


async def test_a_revoked_server_asks_for_a_connect_again(
    upstream: RunningOAuthServer, tmp_path: Path
) -> None:
    async with site_for(upstream, tmp_path) as site:
        await site.connect("alice", SERVER, upstream_user="alice@upstream")
        await site.connect("bob", SERVER, upstream_user="bob@upstream")
        assert await site.whoami("alice", SERVER) == "authenticated as alice@upstream"
        async with site.credentials.use("alice", SERVER) as connection:
            pass
        tokens = await site.credentials.store("alice", SERVER).get_tokens()
        assert tokens is not None and tokens.refresh_token is not None
        assert upstream.refresh_token_is_live(tokens.refresh_token)
        revoked = await site.revoke("alice", SERVER)
        assert revoked.status_code == 303 and revoked.headers["location"] == "/connect"
        assert connection.closed, "the revoked user's connection is closed"
        assert not upstream.refresh_token_is_live(tokens.refresh_token), "revoked upstream too"
        with pytest.raises(ConnectRequiredError):
            await site.whoami("alice", SERVER)
        assert await site.credentials.connected_servers("alice") == []
        # Another user's credentials are untouched.
        assert await site.whoami("bob", SERVER) == "authenticated as bob@upstream"
        await site.connect("alice", SERVER, upstream_user="alice@upstream")
        assert await site.whoami("alice", SERVER) == "authenticated as alice@upstream"


async def test_an_expired_access_token_is_refreshed_for_its_own_user(
    upstream: RunningOAuthServer, tmp_path: Path
) -> None:
    refreshes = upstream.stats()["refreshes"]
    async with site_for(upstream, tmp_path) as site:
        await site.connect("alice", SERVER, upstream_user="alice@upstream")
        assert await site.whoami("alice", SERVER) == "authenticated as alice@upstream"
        before = await site.credentials.store("alice", SERVER).get_tokens()
        upstream.expire_access_tokens()
        # Her open connection meets the upstream's 401, refreshes, and sends the call again.
        assert await site.whoami("alice", SERVER) == "authenticated as alice@upstream"
        after = await site.credentials.store("alice", SERVER).get_tokens()
    assert upstream.stats()["refreshes"] == refreshes + 1
    assert before is not None and after is not None
    assert after.access_token != before.access_token, "the refreshed pair is sealed in her row"
    assert after.refresh_token != before.refresh_token


async def test_a_sealed_blob_moved_to_another_user_does_not_open(
    upstream: RunningOAuthServer, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    async with site_for(upstream, tmp_path) as site:
        await site.connect("alice", SERVER, upstream_user="alice@upstream")
        state = site.credentials.state
        alices = await state.get_credential("alice", SERVER)
        assert alices is not None
        await state.put_credential("mallory", SERVER, alices)
        with pytest.raises(ConnectRequiredError):
            await site.whoami("mallory", SERVER)
        assert 'credentials of user "mallory" for "upstream" do not open' in caplog.text
        assert await site.whoami("alice", SERVER) == "authenticated as alice@upstream"


async def test_a_rotated_key_still_opens_and_seals_again_with_the_new_one(
    upstream: RunningOAuthServer, tmp_path: Path
) -> None:
    old, new = new_key(), new_key()
    async with site_for(upstream, tmp_path, keys=old) as site:
        await site.connect("alice", SERVER, upstream_user="alice@upstream")
        sealed_with_old = await site.state_row("alice")
    async with site_for(upstream, tmp_path, keys=f"{new},{old}") as site:
        assert await site.whoami("alice", SERVER) == "authenticated as alice@upstream"
        assert await site.state_row("alice") != sealed_with_old
    async with site_for(upstream, tmp_path, keys=new) as site:
        assert await site.whoami("alice", SERVER) == "authenticated as alice@upstream"


async def test_the_pages_refuse_other_users_forms_and_callbacks(
    upstream: RunningOAuthServer, tmp_path: Path
) -> None:
    async with site_for(upstream, tmp_path) as site, httpx2.AsyncClient(timeout=30) as browser:
        url = site.credentials.connect_url(SERVER)
        assert (await browser.get(url)).status_code == 401, "no principal, no page"
        assert (
            await browser.get(f"{site.base_url}/connect/nothing", headers=as_user("bob"))
        ).status_code == 404
        alice_page = await browser.get(url, headers=as_user("alice"))
        alice_token = form_token_of(alice_page.text)
        for form in ({}, {FORM_FIELD: "forged"}, {FORM_FIELD: alice_token}):
            refused = await browser.post(url, data=form, headers=as_user("bob"))
            assert refused.status_code == 403, form
            refused = await browser.post(f"{url}/revoke", data=form, headers=as_user("bob"))
            assert refused.status_code == 403, form
        started = await browser.post(url, data={FORM_FIELD: alice_token}, headers=as_user("alice"))
        authorized = await browser.get(
            started.headers["location"], headers={UPSTREAM_USER_HEADER: "alice@upstream"}
        )
        callback = authorized.headers["location"]
        # Bob cannot finish Alice's connect (which would bind her upstream account to him)…
        assert (await browser.get(callback, headers=as_user("bob"))).status_code == 403
        with pytest.raises(ConnectRequiredError):
            await site.whoami("bob", SERVER)
        # …she can, once.
        assert (await browser.get(callback, headers=as_user("alice"))).status_code == 200
        assert (await browser.get(callback, headers=as_user("alice"))).status_code == 400
        assert await site.whoami("alice", SERVER) == "authenticated as alice@upstream"


async def test_an_idle_connection_is_closed_and_opened_again_on_the_next_call(
    upstream: RunningOAuthServer, tmp_path: Path
) -> None:
    async with site_for(upstream, tmp_path, idle_timeout_s=0) as site:
        await site.connect("alice", SERVER, upstream_user="alice@upstream")
        async with site.credentials.use("alice", SERVER) as first:
            await site.credentials.connections.close_idle()
            assert not is_closed(first), "a connection in use is never idle"
        await site.credentials.connections.close_idle()
        assert is_closed(first) and site.credentials.connections.open_pairs() == []
        async with site.credentials.use("alice", SERVER) as second:
            assert second is not first
        assert await site.whoami("alice", SERVER) == "authenticated as alice@upstream"
        with pytest.raises(ConnectRequiredError):
            await site.whoami("bob", SERVER)
        await site.credentials.connections.close_idle()
        assert site.credentials.connections.held_pairs() == [], "nothing kept for a call that never connected"


async def test_a_client_registered_beforehand_is_shared_by_every_user(
    upstream: RunningOAuthServer, tmp_path: Path
) -> None:
    def servers(base_url: str) -> dict[str, ServerConfig]:
        registration = registered_client(upstream, base_url)
        oauth = {
            "client_id": registration["client_id"],
            "client_secret": registration["client_secret"],
            "token_endpoint_auth_method": "client_secret_post",
        }
        return {SERVER: ServerConfig(name=SERVER, transport="http", url=upstream.mcp_url, oauth=oauth)}

    async with (
        sqlite_state(tmp_path) as state,
        connect_site(servers, sealer_of(new_key()), state, cwd=tmp_path) as site,
    ):
        registrations = upstream.stats()["registrations"]
        for user in ("alice", "bob"):
            answer = await site.connect(user, SERVER, upstream_user=f"{user}@upstream")
            assert answer.status_code == 200, answer.text
            assert await site.whoami(user, SERVER) == f"authenticated as {user}@upstream"
        assert upstream.stats()["registrations"] == registrations, "no registration per user"


def registered_client(upstream: RunningOAuthServer, base_url: str) -> dict[str, str]:
    """A client registered at the upstream beforehand, for the site's callback of ``SERVER``."""
    registration: dict[str, str] = httpx2.post(
        f"{upstream.base_url}/register",
        json={
            "redirect_uris": [f"{base_url}/connect/{SERVER}/callback"],
            "token_endpoint_auth_method": "client_secret_post",
            "grant_types": ["authorization_code", "refresh_token"],
            "response_types": ["code"],
            "scope": "mcp",
        },
    ).json()
    return registration


async def test_a_refused_token_exchange_is_shown_and_leaves_the_user_unconnected(
    upstream: RunningOAuthServer, tmp_path: Path
) -> None:
    def servers(base_url: str) -> dict[str, ServerConfig]:
        client = registered_client(upstream, base_url)
        oauth = {
            "client_id": client["client_id"],
            "client_secret": "not its secret",
            "token_endpoint_auth_method": "client_secret_post",
        }
        return {SERVER: ServerConfig(name=SERVER, transport="http", url=upstream.mcp_url, oauth=oauth)}

    async with (
        sqlite_state(tmp_path) as state,
        connect_site(servers, sealer_of(new_key()), state, cwd=tmp_path) as site,
    ):
        answer = await site.connect("alice", SERVER, upstream_user="alice@upstream")
        assert answer.status_code == 502
        assert "Token exchange failed (401)" in answer.text and "mcpfleet login" not in answer.text
        with pytest.raises(ConnectRequiredError):
            await site.whoami("alice", SERVER)


async def test_a_sign_in_refused_upstream_ends_the_connect_with_its_reason(
    upstream: RunningOAuthServer, tmp_path: Path
) -> None:
    async with site_for(upstream, tmp_path) as site, httpx2.AsyncClient(timeout=30) as browser:
        url = site.credentials.connect_url(SERVER)
        page = await browser.get(url, headers=as_user("alice"))
        started = await browser.post(
            url, data={FORM_FIELD: form_token_of(page.text)}, headers=as_user("alice")
        )
        state = parse_qs(urlsplit(started.headers["location"]).query)["state"][0]
        callback = site.credentials.callback_url(SERVER)
        refused = await browser.get(
            callback, params={"state": state, "error": "<access_denied>"}, headers=as_user("alice")
        )
        assert refused.status_code == 502
        assert "the authorization server refused: &lt;access_denied&gt;" in refused.text
        again = await browser.get(callback, params={"state": state, "code": "late"}, headers=as_user("alice"))
        assert again.status_code == 400, "the connect is over"
        assert (await browser.get(callback, headers=as_user("alice"))).status_code == 400, "no state"
        with pytest.raises(ConnectRequiredError):
            await site.whoami("alice", SERVER)


async def test_a_per_user_server_must_be_an_http_server(tmp_path: Path) -> None:
    servers = {"local": ServerConfig(name="local", transport="stdio", command="true")}
    async with sqlite_state(tmp_path) as state:
        with pytest.raises(ConfigError) as raised:
            async with PerUserCredentials.running(
                state, sealer_of(new_key()), servers, public_url="https://mcp.example.com/mcp", cwd=tmp_path
            ):
                pass
    assert str(raised.value).startswith(
        'server "local" has "credentials": "per-user" but is not an HTTP server'
    )
