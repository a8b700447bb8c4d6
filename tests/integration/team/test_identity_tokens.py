"""Every kind of bad credential refused by a team gateway, with a 401 that says why, and the
good ones let through with the principal they name; the resource metadata clients sign in by.

The tokens are the real provider's (client credentials, for this gateway or another
resource) and tokens signed with the provider's own key that it would never issue (expired,
another issuer, no ``sub``), plus forgeries (another key, ``alg: none``, HMAC keyed with the
provider's public key)."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import time
from typing import Any
from urllib.parse import urlsplit

import anyio
import httpx2
import pytest
from cryptography.hazmat.primitives import serialization
from mcp.client import Client
from mcp.client.streamable_http import streamable_http_client
from tests.integration.team.identity_provider import (
    IdentityGateway,
    IdentityProvider,
    new_signing_key,
    running_identity_gateway,
)

pytestmark = pytest.mark.anyio

INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "t", "version": "1"},
    },
}
MCP_HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


async def post_initialize(gateway: IdentityGateway, headers: list[tuple[str, str]]) -> httpx2.Response:
    async with httpx2.AsyncClient() as http:
        return await http.post(gateway.public_url, json=INITIALIZE, headers=[*MCP_HEADERS.items(), *headers])


async def refusal(gateway: IdentityGateway, token: str) -> str:
    """The ``error_description`` of the 401 answering ``token`` (which must be refused)."""
    response = await post_initialize(gateway, [("Authorization", f"Bearer {token}")])
    assert response.status_code == 401, response.text
    challenge = response.headers["www-authenticate"]
    assert challenge.startswith(f'Bearer resource_metadata="{gateway.metadata_url}"')
    assert 'error="invalid_token"' in challenge
    assert response.text in challenge  # the body says it too
    return response.text


async def whoami(gateway: IdentityGateway, token: str) -> dict[str, Any]:
    headers = {"Authorization": f"Bearer {token}"}
    async with (
        httpx2.AsyncClient(headers=headers) as http,
        Client(streamable_http_client(gateway.public_url, http_client=http), mode="legacy") as client,
    ):
        result = await client.call_tool("whoami", {})
    assert result.structured_content is not None, result
    return dict(result.structured_content)


def hmac_forgery(provider: IdentityProvider, claims: dict[str, Any]) -> str:
    """An HS256 token keyed with the provider's *public* key, which anybody can fetch."""
    public_pem = provider.signing_key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )

    def part(data: bytes) -> str:
        return base64.urlsafe_b64encode(data).rstrip(b"=").decode()

    header = part(json.dumps({"alg": "HS256", "kid": "team-tests-1", "typ": "JWT"}).encode())
    payload = part(json.dumps(claims).encode())
    signature = hmac.new(public_pem, f"{header}.{payload}".encode(), hashlib.sha256).digest()
    return f"{header}.{payload}.{part(signature)}"


def unsigned(claims: dict[str, Any]) -> str:
    def part(data: bytes) -> str:
        return base64.urlsafe_b64encode(data).rstrip(b"=").decode()

    return f"{part(json.dumps({'alg': 'none', 'typ': 'JWT'}).encode())}.{part(json.dumps(claims).encode())}."


async def test_without_a_token_the_401_points_at_the_resource_metadata(
    identity_provider: IdentityProvider,
) -> None:
    async with running_identity_gateway(identity_provider.issuer) as gateway:
        response = await post_initialize(gateway, [])
        assert response.status_code == 401
        assert response.headers["www-authenticate"] == f'Bearer resource_metadata="{gateway.metadata_url}"'
        async with httpx2.AsyncClient() as http:
            suffixed = await http.get(gateway.metadata_url)
            root = await http.get(gateway.public_url.replace("/mcp", "/.well-known/oauth-protected-resource"))
            posted = await http.post(gateway.metadata_url)
            health = await http.get(gateway.public_url.replace("/mcp", "/healthz"))
    assert suffixed.status_code == root.status_code == 200
    assert suffixed.json() == root.json()
    assert suffixed.json()["resource"] == gateway.public_url
    assert suffixed.json()["authorization_servers"] == [identity_provider.issuer]
    assert posted.status_code == 405
    # /healthz passes without a token: the server behind the gate answers it (here, 404).
    assert health.status_code == 404


async def test_the_providers_token_for_this_gateway_is_accepted(identity_provider: IdentityProvider) -> None:
    async with running_identity_gateway(identity_provider.issuer) as gateway:
        token = await identity_provider.client_credentials_token(gateway.public_url)
        answer = await whoami(gateway, token)
    assert answer["subject"] == "ci-robot"
    assert answer["service_account"] is None


async def test_the_providers_token_for_another_resource_is_refused(
    identity_provider: IdentityProvider,
) -> None:
    async with running_identity_gateway(identity_provider.issuer) as gateway:
        token = await identity_provider.client_credentials_token("http://127.0.0.1:1/other/mcp")
        reason = await refusal(gateway, token)
    assert "not for this gateway" in reason and gateway.public_url in reason


async def test_tokens_signed_by_the_provider_but_not_valid_here_are_refused(
    identity_provider: IdentityProvider,
) -> None:
    provider = identity_provider
    async with running_identity_gateway(provider.issuer) as gateway:
        audience = gateway.public_url
        now = int(time.time())
        cases = {
            "expired": provider.claims_for(audience, iat=now - 7200, exp=now - 3600),
            "not valid yet": provider.claims_for(audience, nbf=now + 3600),
            "iss is not this gateway's issuer": provider.claims_for(audience, iss="http://127.0.0.1:1"),
            "not for this gateway": provider.claims_for("http://127.0.0.1:1/mcp"),
            "no 'sub' claim": provider.claims_for(audience, sub=None),
            "no 'exp' claim": provider.claims_for(audience, exp=None),
            "which names service accounts": provider.claims_for(audience, sub="service:ci"),
            "is an ID token (it has 'nonce')": provider.claims_for(audience, nonce="n-0S6_WzA2Mj"),
        }
        for expected, claims in cases.items():
            assert expected in await refusal(gateway, provider.sign(claims)), expected


async def test_forged_tokens_are_refused(identity_provider: IdentityProvider) -> None:
    provider = identity_provider
    async with running_identity_gateway(provider.issuer) as gateway:
        claims = provider.claims_for(gateway.public_url)
        assert "does not verify" in await refusal(gateway, provider.sign(claims, key=new_signing_key()))
        assert "alg 'none' is not accepted" in await refusal(gateway, unsigned(claims))
        assert "alg 'HS256' is not accepted" in await refusal(gateway, hmac_forgery(provider, claims))
        other_use = provider.sign(claims, algorithm="RS512")  # the issuer's key is published for RS256
        assert "is for RS256, not the token's RS512" in await refusal(gateway, other_use)
        id_token = provider.sign(claims, headers={"typ": "id_token+jwt"})
        assert "typ 'id_token+jwt' is not an access token's" in await refusal(gateway, id_token)
        other_kid = provider.sign(claims, key=new_signing_key(), headers={"kid": "rotated-in-by-nobody"})
        assert "not among the issuer's published keys" in await refusal(gateway, other_kid)
        # Untouched, the same claims pass: the refusals above are the forgeries', not the claims'.
        assert (await whoami(gateway, provider.sign(claims)))["subject"] == "alice"


async def test_opaque_and_malformed_credentials_are_refused(identity_provider: IdentityProvider) -> None:
    async with running_identity_gateway(identity_provider.issuer) as gateway:
        assert "opaque, not a JWT" in await refusal(gateway, "2YotnFZFEjr1zCsicMWpAA")
        assert "header is not" in await refusal(gateway, "bm90IGpzb24.e30.")  # "not json"
        assert "not one this gateway knows" in await refusal(gateway, "mcpfleet_sk_never-added")
        token = identity_provider.sign(identity_provider.claims_for(gateway.public_url))
        basic = await post_initialize(gateway, [("Authorization", f"Basic {token}")])
        twice = await post_initialize(gateway, [("Authorization", f"Bearer {token}")] * 2)
    assert basic.status_code == 401 and "must be 'Bearer <token>'" in basic.text
    assert twice.status_code == 401 and 'error="invalid_request"' in twice.headers["www-authenticate"]


async def test_an_unverified_email_names_nobody(identity_provider: IdentityProvider) -> None:
    provider = identity_provider
    async with running_identity_gateway(provider.issuer) as gateway:
        claims = provider.claims_for(gateway.public_url, email="ceo@example.com", email_verified=False)
        answer = await whoami(gateway, provider.sign(claims))
    assert answer == {"subject": "alice", "email": None, "groups": ["eng", "oncall"], "service_account": None}


async def test_a_request_nobody_admits_is_refused_before_its_body_is_read(
    identity_provider: IdentityProvider,
) -> None:
    """The check sees the headers only: a client without a valid credential announces a 4 MB body,
    sends none of it, and has its 401 all the same (the gateway never waits for, nor holds, it)."""
    async with running_identity_gateway(identity_provider.issuer) as gateway:
        parts = urlsplit(gateway.public_url)
        stream = await anyio.connect_tcp(parts.hostname or "127.0.0.1", parts.port or 80)
        async with stream:
            head = (
                f"POST {parts.path} HTTP/1.1\r\nHost: {parts.netloc}\r\nContent-Type: application/json\r\n"
                f"Accept: application/json, text/event-stream\r\nAuthorization: Bearer not-a-token\r\n"
                f"Content-Length: {4 * 1024 * 1024}\r\n\r\n"
            )
            await stream.send(head.encode())
            answer = b""
            while b"\r\n\r\n" not in answer:
                answer += await stream.receive()
    assert answer.startswith(b"HTTP/1.1 401 "), answer
