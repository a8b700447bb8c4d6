"""OAuth against a real protected MCP server: login, stored tokens, refresh, logout."""

from __future__ import annotations

import socket
import stat
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Literal
from urllib.parse import parse_qs, urlsplit

import anyio
import httpx2
import pytest
from mcp import Client
from mcp.client.sse import sse_client
from mcp.client.streamable_http import streamable_http_client

from mcpfleet import paths
from mcpfleet.auth.login import login, logout
from mcpfleet.auth.provider import oauth_auth_for
from mcpfleet.auth.storage import FileTokenStorage
from mcpfleet.config.model import ServerConfig
from mcpfleet.errors import AuthRequiredError, ConfigError, LoginError

from .conftest import RunningOAuthServer

pytestmark = pytest.mark.anyio

SERVER_NAME = "secure"


def http_config(server: RunningOAuthServer, **oauth: object) -> ServerConfig:
    transport: Literal["http", "sse"] = "http" if server.transport == "streamable-http" else "sse"
    return ServerConfig(name=SERVER_NAME, transport=transport, url=server.mcp_url, oauth=oauth or None)


async def follow_in_browser(url: str) -> None:
    """Stand in for the browser: open the URL and follow the redirect to the loopback callback."""
    async with httpx2.AsyncClient(follow_redirects=True, timeout=10) as browser:
        response = await browser.get(url)
    assert response.status_code == 200, response.text


@asynccontextmanager
async def connected(config: ServerConfig, auth: httpx2.Auth) -> AsyncIterator[Client]:
    assert config.url is not None
    if config.transport == "sse":
        async with Client(sse_client(config.url, auth=auth), mode="legacy") as client:
            yield client
    else:
        async with (
            httpx2.AsyncClient(auth=auth, timeout=15) as http_client,
            Client(streamable_http_client(config.url, http_client=http_client), mode="legacy") as client,
        ):
            yield client


async def list_tool_names(config: ServerConfig) -> list[str]:
    auth = oauth_auth_for(SERVER_NAME, config)
    with anyio.fail_after(20):
        async with connected(config, auth) as client:
            result = await client.list_tools()
    return [tool.name for tool in result.tools]


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


def token_files() -> list[Path]:
    folder = paths.user_state_dir() / "oauth"
    return sorted(folder.glob("*.json")) if folder.exists() else []


async def test_connect_without_tokens_asks_for_a_login_without_waiting(
    oauth_server: RunningOAuthServer,
) -> None:
    config = http_config(oauth_server)
    with anyio.fail_after(15), pytest.raises(Exception) as caught:
        await list_tool_names(config)
    error = _auth_error_in(caught.value)
    assert "run: mcpfleet login secure" in str(error)
    assert error.server == SERVER_NAME
    assert oauth_server.stats()["registrations"] == 0, "a connect must not register a client by itself"
    assert token_files() == []


async def test_login_stores_private_tokens_that_later_connects_use(oauth_server: RunningOAuthServer) -> None:
    config = http_config(oauth_server)
    seen_urls: list[str] = []

    async def open_url(url: str) -> None:
        seen_urls.append(url)
        await follow_in_browser(url)

    with anyio.fail_after(30):
        await login(SERVER_NAME, config, on_authorize_url=open_url)

    assert len(seen_urls) == 1
    assert "code_challenge_method=S256" in seen_urls[0]
    (token_file,) = token_files()
    assert token_file.is_relative_to(Path(str(paths.home_dir())))
    assert stat.S_IMODE(token_file.stat().st_mode) == 0o600
    assert stat.S_IMODE(token_file.parent.stat().st_mode) == 0o700
    stored = await FileTokenStorage(config.url or "").get_tokens()
    assert stored is not None and stored.refresh_token
    stats = oauth_server.stats()
    assert stats["registrations"] == 1 and stats["code_exchanges"] == 1

    assert await list_tool_names(config) == ["whoami"]
    assert oauth_server.stats()["refreshes"] == 0


async def test_expired_access_token_is_refreshed_transparently(start_oauth_server: object) -> None:
    server: RunningOAuthServer = start_oauth_server(access_token_ttl=2)  # type: ignore[operator]
    config = http_config(server)
    with anyio.fail_after(30):
        await login(SERVER_NAME, config, on_authorize_url=follow_in_browser)
    storage = FileTokenStorage(config.url or "")
    before = await storage.get_tokens()
    assert before is not None
    await anyio.sleep(2.5)  # the server now refuses that access token

    assert await list_tool_names(config) == ["whoami"]
    after = await storage.get_tokens()
    assert after is not None and after.access_token != before.access_token
    assert after.refresh_token != before.refresh_token, "the rotated refresh token must be stored"
    stats = server.stats()
    assert stats["refreshes"] >= 1 and stats["code_exchanges"] == 1


async def test_rejected_token_of_unknown_lifetime_is_refreshed_once(oauth_server: RunningOAuthServer) -> None:
    config = http_config(oauth_server)
    with anyio.fail_after(30):
        await login(SERVER_NAME, config, on_authorize_url=follow_in_browser)
    oauth_server.revoke_access_tokens()

    assert await list_tool_names(config) == ["whoami"]
    assert oauth_server.stats()["refreshes"] == 1


async def test_refresh_refused_means_login_again(start_oauth_server: object) -> None:
    server: RunningOAuthServer = start_oauth_server()  # type: ignore[operator]
    config = http_config(server)
    with anyio.fail_after(30):
        await login(SERVER_NAME, config, on_authorize_url=follow_in_browser)
    storage = FileTokenStorage(config.url or "")
    tokens = await storage.get_tokens()
    assert tokens is not None
    tokens.refresh_token = "not-a-refresh-token-the-server-knows"
    tokens.expires_in = 0
    await storage.set_tokens(tokens)

    with anyio.fail_after(15), pytest.raises(Exception) as caught:
        await list_tool_names(config)
    assert "run: mcpfleet login secure" in str(_auth_error_in(caught.value))


async def test_login_over_sse(start_oauth_server: object) -> None:
    server: RunningOAuthServer = start_oauth_server(transport="sse")  # type: ignore[operator]
    config = http_config(server)
    with anyio.fail_after(30):
        await login(SERVER_NAME, config, on_authorize_url=follow_in_browser)
    assert await list_tool_names(config) == ["whoami"]


async def test_second_login_reuses_the_registration_of_a_fixed_callback_port(
    oauth_server: RunningOAuthServer,
) -> None:
    config = http_config(oauth_server, callback_port=free_port())
    for _ in range(2):
        with anyio.fail_after(30):
            await login(SERVER_NAME, config, on_authorize_url=follow_in_browser)
    stats = oauth_server.stats()
    assert stats["registrations"] == 1 and stats["code_exchanges"] == 2


async def test_login_times_out_when_nobody_comes_back(oauth_server: RunningOAuthServer) -> None:
    config = http_config(oauth_server)
    started = time.monotonic()
    with anyio.fail_after(20), pytest.raises(LoginError, match="timed out"):
        await login(SERVER_NAME, config, on_authorize_url=lambda url: None, timeout_s=1)
    assert time.monotonic() - started < 15
    assert await FileTokenStorage(config.url or "").get_tokens() is None


async def test_logout_forgets_the_tokens(oauth_server: RunningOAuthServer) -> None:
    config = http_config(oauth_server)
    with anyio.fail_after(30):
        await login(SERVER_NAME, config, on_authorize_url=follow_in_browser)
    assert len(token_files()) == 1

    assert logout(SERVER_NAME, config) is True
    assert token_files() == []
    assert logout(SERVER_NAME, config) is False
    with anyio.fail_after(15), pytest.raises(Exception) as caught:
        await list_tool_names(config)
    assert "mcpfleet login secure" in str(_auth_error_in(caught.value))


async def test_stdio_servers_have_no_oauth() -> None:
    config = ServerConfig(name="local", transport="stdio", command="true")
    with pytest.raises(ConfigError, match='"local" uses the stdio transport'):
        await login("local", config, on_authorize_url=follow_in_browser)
    with pytest.raises(ConfigError):
        logout("local", config)


def _auth_error_in(error: BaseException) -> AuthRequiredError:
    """The AuthRequiredError itself, or the one the SDK wrapped (exception groups, causes)."""
    pending = [error]
    while pending:
        current = pending.pop()
        if isinstance(current, AuthRequiredError):
            return current
        if isinstance(current, BaseExceptionGroup):
            pending.extend(current.exceptions)
        pending.extend(linked for linked in (current.__cause__, current.__context__) if linked is not None)
    raise AssertionError(f"no AuthRequiredError in {error!r}") from error


async def test_connection_layer_uses_the_stored_tokens(
    oauth_server: RunningOAuthServer, tmp_path: Path
) -> None:
    from mcpfleet.client.opening import connect_to_server

    config = http_config(oauth_server)
    with anyio.fail_after(20), pytest.raises(AuthRequiredError, match="run: mcpfleet login secure"):
        async with connect_to_server(
            SERVER_NAME, config, cwd=tmp_path, auth=oauth_auth_for(SERVER_NAME, config)
        ):
            pass

    with anyio.fail_after(30):
        await login(SERVER_NAME, config, on_authorize_url=follow_in_browser)
    with anyio.fail_after(20):
        async with connect_to_server(
            SERVER_NAME, config, cwd=tmp_path, auth=oauth_auth_for(SERVER_NAME, config)
        ) as connection:
            assert [tool.name for tool in await connection.list_tools()] == ["whoami"]


async def test_a_refused_authorization_is_a_clear_login_error(oauth_server: RunningOAuthServer) -> None:
    config = http_config(oauth_server)

    async def user_clicks_deny(url: str) -> None:
        query = parse_qs(urlsplit(url).query)
        redirect_uri, state = query["redirect_uri"][0], query["state"][0]
        async with httpx2.AsyncClient(timeout=10) as browser:
            await browser.get(redirect_uri, params={"error": "access_denied", "state": state})

    with anyio.fail_after(30), pytest.raises(LoginError, match=r"refused the login .*access_denied"):
        await login(SERVER_NAME, config, on_authorize_url=user_clicks_deny)
    assert await FileTokenStorage(config.url or "").get_tokens() is None


async def test_token_file_is_keyed_by_the_normalised_url(tmp_path: Path) -> None:
    first = FileTokenStorage("HTTP://Example.COM:80/mcp/", directory=tmp_path)
    second = FileTokenStorage("http://example.com/mcp", directory=tmp_path)
    other = FileTokenStorage("http://example.com/other", directory=tmp_path)
    assert first.path == second.path != other.path
    assert first.clear() is False


async def test_interactive_auth_runs_the_flow_inside_a_plain_connect(
    oauth_server: RunningOAuthServer,
) -> None:
    config = http_config(oauth_server)
    auth = oauth_auth_for(SERVER_NAME, config, interactive=True, on_authorize_url=follow_in_browser)
    with anyio.fail_after(30):
        async with connected(config, auth) as client:
            assert [tool.name for tool in (await client.list_tools()).tools] == ["whoami"]
    assert await list_tool_names(config) == ["whoami"], "the tokens of the interactive flow are stored"


@pytest.mark.parametrize("setting", ["callback_port", "redirect_uri"])
async def test_configured_scope_and_callback_are_honoured(
    oauth_server: RunningOAuthServer, setting: str
) -> None:
    port = free_port()
    callback = (
        {"callback_port": port}
        if setting == "callback_port"
        else {"redirect_uri": f"http://localhost:{port}/cb"}
    )
    config = http_config(oauth_server, scope="mcp", **callback)
    seen_urls: list[str] = []

    async def open_url(url: str) -> None:
        seen_urls.append(url)
        await follow_in_browser(url)

    with anyio.fail_after(30):
        await login(SERVER_NAME, config, on_authorize_url=open_url)
    query = parse_qs(urlsplit(seen_urls[0]).query)
    assert query["scope"] == ["mcp"]
    expected = (
        f"http://127.0.0.1:{port}/callback" if setting == "callback_port" else f"http://localhost:{port}/cb"
    )
    assert query["redirect_uri"] == [expected]
    assert await list_tool_names(config) == ["whoami"]
