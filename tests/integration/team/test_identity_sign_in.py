"""Signing in to a team gateway as a client that implements MCP's authorization does: the SDK's
OAuth client, against a real OpenID provider, with nothing configured but the gateway's URL."""

from __future__ import annotations

from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urljoin, urlsplit

import anyio
import httpx2
import pytest
from mcp.client import Client
from mcp.client.auth import AuthorizationCodeResult, OAuthClientProvider
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.auth import OAuthClientInformationFull, OAuthClientMetadata, OAuthToken
from pydantic import AnyUrl
from tests.integration.team.identity_provider import (
    IdentityProvider,
    free_port,
    running_identity_gateway,
    running_team_gateway,
    write_team_file,
)

pytestmark = pytest.mark.anyio

REDIRECT_URI = "http://127.0.0.1:1/callback"
"""Never listened on: the headless browser below stops at the redirect and reads the code from it."""


class MemoryStorage:
    def __init__(self) -> None:
        self.tokens: OAuthToken | None = None
        self.client_info: OAuthClientInformationFull | None = None

    async def get_tokens(self) -> OAuthToken | None:
        return self.tokens

    async def set_tokens(self, tokens: OAuthToken) -> None:
        self.tokens = tokens

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        return self.client_info

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        self.client_info = client_info


class HeadlessBrowser:
    """Plays the user's browser: opens the authorization URL as ``user`` (the provider's
    login page signs in whoever ``login_hint`` names) and follows redirects until the one to
    the client's redirect URI, whose code and state it keeps for the callback."""

    def __init__(self, user: str) -> None:
        self.user = user
        self.result: AuthorizationCodeResult | None = None
        self.opened: list[str] = []

    async def open(self, url: str) -> None:
        self.opened.append(url)
        async with httpx2.AsyncClient(follow_redirects=False) as browser:
            response = await browser.get(f"{url}&login_hint={self.user}")
            for _ in range(10):
                location = response.headers.get("location")
                assert response.status_code in (302, 303) and location, response.text
                target = urljoin(str(response.url), location)
                if target.startswith(REDIRECT_URI):
                    query = parse_qs(urlsplit(target).query)
                    assert "code" in query, query
                    self.result = AuthorizationCodeResult(
                        code=query["code"][0], state=query["state"][0], iss=query.get("iss", [None])[0]
                    )
                    return
                response = await browser.get(target)
        raise AssertionError("the provider never redirected back to the client")

    async def callback(self) -> AuthorizationCodeResult:
        assert self.result is not None
        return self.result


def oauth_client(url: str, browser: HeadlessBrowser, storage: MemoryStorage) -> OAuthClientProvider:
    metadata = OAuthClientMetadata(
        client_name="identity test client",
        redirect_uris=[AnyUrl(REDIRECT_URI)],
        grant_types=["authorization_code", "refresh_token"],
        response_types=["code"],
        token_endpoint_auth_method="none",
    )
    return OAuthClientProvider(url, metadata, storage, browser.open, browser.callback)


async def whoami(url: str, auth: Any) -> dict[str, Any]:
    async with (
        httpx2.AsyncClient(auth=auth, timeout=httpx2.Timeout(20.0)) as http,
        Client(streamable_http_client(url, http_client=http), mode="legacy") as client,
    ):
        tools = await client.list_tools()
        assert [tool.name for tool in tools.tools] == ["whoami"]
        result = await client.call_tool("whoami", {})
    assert result.structured_content is not None, result
    return dict(result.structured_content)


async def test_the_sdk_client_signs_in_from_the_401_alone_and_lists_tools(
    identity_provider: IdentityProvider,
) -> None:
    async with running_identity_gateway(identity_provider.issuer) as gateway:
        browser, storage = HeadlessBrowser("alice"), MemoryStorage()
        answer = await whoami(gateway.public_url, oauth_client(gateway.public_url, browser, storage))

    assert answer == {
        "subject": "alice",
        "email": "alice@example.com",
        "groups": ["eng", "oncall"],
        "service_account": None,
    }
    # The client went 401 -> resource metadata -> the provider, and asked for a token for this gateway.
    (authorization_url,) = browser.opened
    assert authorization_url.startswith(f"{identity_provider.issuer}/auth?")
    assert parse_qs(urlsplit(authorization_url).query)["resource"] == [gateway.public_url]
    assert storage.tokens is not None and storage.client_info is not None


async def test_two_users_are_two_principals(identity_provider: IdentityProvider) -> None:
    async with running_identity_gateway(identity_provider.issuer) as gateway:
        bob = await whoami(
            gateway.public_url, oauth_client(gateway.public_url, HeadlessBrowser("bob"), MemoryStorage())
        )
    assert (bob["subject"], bob["email"], bob["groups"]) == ("bob", "bob@example.com", ["sales"])


async def signed_in_tools(url: str, user: str, *, wait_for: str | None = None) -> list[str]:
    """The tools ``user`` is listed after signing in as the SDK does; with ``wait_for``, once that
    tool is listed (a backend joins a cold gateway late)."""
    auth = oauth_client(url, HeadlessBrowser(user), MemoryStorage())
    async with (
        httpx2.AsyncClient(auth=auth, timeout=httpx2.Timeout(30.0)) as http,
        Client(streamable_http_client(url, http_client=http), mode="legacy") as client,
    ):
        with anyio.fail_after(60):
            while True:
                names = [tool.name for tool in (await client.list_tools()).tools]
                if wait_for is None or wait_for in names:
                    return names
                await anyio.sleep(0.1)


async def test_signed_in_through_serve_team_each_user_sees_what_the_policies_give(
    identity_provider: IdentityProvider, isolated_home: Path
) -> None:
    port = free_port()
    policies = [{"groups": ["eng"], "allow": ["clock/*"], "name": "engineers"}]
    team = write_team_file(isolated_home, identity_provider.issuer, port, policies)
    with running_team_gateway(team, port) as gateway:
        alice = await signed_in_tools(gateway.url, "alice", wait_for="clock_echo")
        bob = await signed_in_tools(gateway.url, "bob")
    assert alice == ["clock_echo"]
    assert bob == []  # signed in, and a principal, but no policy gives the sales group anything
