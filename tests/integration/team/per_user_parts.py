"""The parts of the per-user credentials tests: a team gateway's connect pages served on real
HTTP on 127.0.0.1 over a real SQLite team state, and a browser stand-in that walks a user
through the connect.

The principal is put in the scope by ``HeaderPrincipal``, a test-only layer standing where the
team identity check stands in the gateway: it reads the ``X-Test-Principal`` header. In front of
it, as in the gateway, the connect passes admit a browser that opened a link (``admitted``).
"""

from __future__ import annotations

import base64
import hashlib
import re
import secrets
import socket
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import anyio
import httpx2
import uvicorn
from mcp_types import CallToolResult, TextContent
from starlette.responses import PlainTextResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from mcpfleet.config.model import ServerConfig
from mcpfleet.gateway.http import Admission
from mcpfleet.team.connect_pages import FORM_FIELD, ConnectLayer
from mcpfleet.team.per_user import PerUserCredentials
from mcpfleet.team.principal import PRINCIPAL_SCOPE_KEY, Principal
from mcpfleet.team.sealing import Sealer
from mcpfleet.team.sqlite_state import SQLiteTeamState
from mcpfleet.team.state import TeamState
from mcpfleet.team.user_connections import IDLE_TIMEOUT_S

PRINCIPAL_HEADER = b"x-test-principal"
UPSTREAM_USER_HEADER = "X-Test-User"


async def as_it_is(scope: Scope, send: Send) -> Scope:
    """An admission that admits everything as it is (``HeaderPrincipal`` then names who asks)."""
    return scope


def admitted(app: ASGIApp, admission: Admission) -> ASGIApp:
    """``app`` behind ``admission``, as ``serve_http``'s gate puts it."""

    async def gate(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            let_in = await admission(scope, send)
            if let_in is None:
                return
            scope = let_in
        await app(scope, receive, send)

    return gate


class HeaderPrincipal:
    """Test-only: the principal named by ``X-Test-Principal`` (its ``sub``), put in the scope."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            found = [value.decode() for name, value in scope["headers"] if name == PRINCIPAL_HEADER]
            if found:
                scope = {
                    **scope,
                    PRINCIPAL_SCOPE_KEY: Principal(subject=found[0], email=f"{found[0]}@example.com"),
                }
        await self.app(scope, receive, send)


@dataclass
class ConnectSite:
    """The connect pages on 127.0.0.1, and the credentials behind them."""

    base_url: str
    credentials: PerUserCredentials

    async def connect(self, user: str, server: str, *, upstream_user: str) -> httpx2.Response:
        """Walk ``user``'s browser through the connect of ``server``, signing in upstream as
        ``upstream_user``; the callback page's answer."""
        async with httpx2.AsyncClient(timeout=30) as browser:
            as_user = {PRINCIPAL_HEADER.decode(): user}
            page = await browser.get(self.credentials.connect_url(server), headers=as_user)
            assert page.status_code == 200, page.text
            token = form_token_of(page.text)
            started = await browser.post(
                self.credentials.connect_url(server), data={FORM_FIELD: token}, headers=as_user
            )
            assert started.status_code == 303, started.text
            authorized = await browser.get(
                started.headers["location"], headers={UPSTREAM_USER_HEADER: upstream_user}
            )
            assert authorized.status_code == 302, authorized.text
            callback = authorized.headers["location"]
            assert callback.startswith(self.credentials.callback_url(server))
            return await browser.get(callback, headers=as_user)

    async def connect_with_link(self, link: str, *, upstream_user: str) -> httpx2.Response:
        """Open ``link`` (the one a call answered with) in a browser that holds nothing else, and
        walk it through the connect, signing in upstream as ``upstream_user``; the callback page's
        answer."""
        async with httpx2.AsyncClient(timeout=30) as browser:
            traded = await browser.get(link)
            assert traded.status_code == 303, traded.text
            page = await browser.get(f"{self.base_url}{traded.headers['location']}")
            assert page.status_code == 200, page.text
            started = await browser.post(str(page.url), data={FORM_FIELD: form_token_of(page.text)})
            assert started.status_code == 303, started.text
            authorized = await browser.get(
                started.headers["location"], headers={UPSTREAM_USER_HEADER: upstream_user}
            )
            assert authorized.status_code == 302, authorized.text
            return await browser.get(authorized.headers["location"])

    async def revoke(self, user: str, server: str) -> httpx2.Response:
        """Press "Revoke" for ``server`` on ``user``'s ``/connect`` page."""
        async with httpx2.AsyncClient(timeout=30) as browser:
            as_user = {PRINCIPAL_HEADER.decode(): user}
            overview = await browser.get(f"{self.base_url}/connect", headers=as_user)
            assert overview.status_code == 200, overview.text
            return await browser.post(
                f"{self.credentials.connect_url(server)}/revoke",
                data={FORM_FIELD: form_token_of(overview.text)},
                headers=as_user,
            )

    async def state_row(self, user: str, server: str = "upstream") -> bytes:
        """The sealed row the state store holds for ``user`` and ``server``."""
        row = await self.credentials.state.get_credential(user, server)
        assert row is not None
        return row

    async def whoami(self, user: str, server: str) -> str:
        """What the upstream's ``whoami`` answers on ``user``'s own connection."""
        async with self.credentials.use(user, server) as connection:
            result = await connection.call_tool("whoami", {})
        assert isinstance(result, CallToolResult) and isinstance(result.content[0], TextContent)
        return result.content[0].text


def link_in(text: str) -> str:
    """The connect link in a call's answer (``… open <link> to connect it …``)."""
    found = re.search(r"open (\S+) to connect it", text)
    assert found is not None, text
    return found.group(1)


def form_token_of(page: str) -> str:
    found = re.search(rf'name="{FORM_FIELD}" value="([^"]+)"', page)
    assert found is not None, page
    return found.group(1)


def _listening_socket() -> socket.socket:
    listening = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listening.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listening.bind(("127.0.0.1", 0))
    listening.listen(64)
    return listening


async def _not_mcp(scope: Scope, receive: Receive, send: Send) -> None:
    await PlainTextResponse("the MCP endpoint is not part of this test", status_code=404)(
        scope, receive, send
    )


@asynccontextmanager
async def connect_site(
    servers: dict[str, ServerConfig] | Callable[[str], dict[str, ServerConfig]],
    sealer: Sealer,
    state: TeamState,
    *,
    cwd: Path,
    idle_timeout_s: float = IDLE_TIMEOUT_S,
) -> AsyncIterator[ConnectSite]:
    """The connect pages of ``servers`` served on a free port of 127.0.0.1 (``servers`` may be
    built from the site's base URL, for entries that name their callback)."""
    listening = _listening_socket()
    base_url = f"http://127.0.0.1:{listening.getsockname()[1]}"
    if callable(servers):
        servers = servers(base_url)
    async with PerUserCredentials.running(
        state, sealer, servers, public_url=f"{base_url}/mcp", cwd=cwd, idle_timeout_s=idle_timeout_s
    ) as credentials:
        app = admitted(
            HeaderPrincipal(ConnectLayer(_not_mcp, credentials)), credentials.passes.admission(as_it_is)
        )
        server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="off"))
        async with anyio.create_task_group() as group:
            # The socket listens already: a request sent before uvicorn accepts waits in its queue.
            group.start_soon(server.serve, [listening])
            try:
                yield ConnectSite(base_url, credentials)
            finally:
                server.should_exit = True
    listening.close()


def upstream_config(name: str, url: str) -> ServerConfig:
    return ServerConfig(name=name, transport="http", url=url)


async def upstream_access_token(upstream_base_url: str, user: str) -> str:
    """An access token of ``user`` at the OAuth test server, got by hand (registration,
    authorization with PKCE, exchange): what the shared fleet lists a per-user server with in
    these tests, so that the upstream's tools are served before any user connects."""
    redirect_uri = "http://127.0.0.1/listing-callback"
    verifier = secrets.token_urlsafe(48)
    challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).decode().rstrip("=")
    async with httpx2.AsyncClient(base_url=upstream_base_url, timeout=30) as http:
        registered = await http.post(
            "/register",
            json={
                "redirect_uris": [redirect_uri],
                "token_endpoint_auth_method": "none",
                "grant_types": ["authorization_code", "refresh_token"],
                "response_types": ["code"],
                "scope": "mcp",
            },
        )
        client_id = registered.json()["client_id"]
        query = {
            "response_type": "code",
            "client_id": client_id,
            "redirect_uri": redirect_uri,
            "code_challenge": challenge,
            "code_challenge_method": "S256",
            "state": "listing",
            "scope": "mcp",
        }
        authorized = await http.get("/authorize", params=query, headers={UPSTREAM_USER_HEADER: user})
        code = parse_qs(urlsplit(authorized.headers["location"]).query)["code"][0]
        exchange = {
            "grant_type": "authorization_code",
            "code": code,
            "redirect_uri": redirect_uri,
            "client_id": client_id,
            "code_verifier": verifier,
        }
        token: str = (await http.post("/token", data=exchange)).json()["access_token"]
    return token


@asynccontextmanager
async def sqlite_state(folder: Path) -> AsyncIterator[TeamState]:
    """The team state in ``folder``'s SQLite file (opened again by a later call on the same folder)."""
    state = await SQLiteTeamState.open(folder / "team-state.sqlite3")
    try:
        yield state
    finally:
        await state.aclose()
