"""The protected resource metadata and the 401's challenge, as documents: where they are served
for a given ``public_url``, and what a description may hold in a quoted header value."""

from __future__ import annotations

import base64
import json
from collections.abc import MutableMapping
from typing import Any

import pytest

from mcpfleet.team.identity import IdentityGate, metadata_paths, metadata_url, resource_metadata
from mcpfleet.team.model import IdentitySettings
from mcpfleet.team.tokens import JwtVerifier

pytestmark = pytest.mark.anyio


def test_the_metadata_is_served_at_the_root_and_at_the_resources_path() -> None:
    assert metadata_paths("https://mcp.example.com/mcp") == {
        "/.well-known/oauth-protected-resource",
        "/.well-known/oauth-protected-resource/mcp",
    }
    assert metadata_paths("https://mcp.example.com/") == {"/.well-known/oauth-protected-resource"}
    assert metadata_url("https://mcp.example.com:8443/team/mcp") == (
        "https://mcp.example.com:8443/.well-known/oauth-protected-resource/team/mcp"
    )
    assert resource_metadata("https://mcp.example.com/mcp", "https://idp.example.com") == {
        "resource": "https://mcp.example.com/mcp",
        "authorization_servers": ["https://idp.example.com"],
        "bearer_methods_supported": ["header"],
        "resource_name": "mcpfleet team gateway",
    }


async def answers(gate: IdentityGate, scope: dict[str, Any]) -> list[dict[str, Any]]:
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: MutableMapping[str, Any]) -> None:
        sent.append(dict(message))

    await gate(scope, receive, send)
    return sent


def gate_before(app: Any) -> IdentityGate:
    settings = IdentitySettings(issuer="https://idp.example.com", audience="https://mcp.example.com/mcp")
    return IdentityGate(app, public_url="https://mcp.example.com/mcp", tokens=JwtVerifier(settings))


async def test_a_description_is_kept_to_what_a_quoted_header_value_may_hold() -> None:
    async def never(scope: Any, receive: Any, send: Any) -> None:
        raise AssertionError("a refused request reached the app")

    # The header's alg comes back in the description: a quote, a backslash and a newline in it.
    header = base64.urlsafe_b64encode(json.dumps({"alg": 'x"y\\z\n'}).encode()).rstrip(b"=")
    scope = {
        "type": "http",
        "method": "POST",
        "path": "/mcp",
        "headers": [(b"authorization", b"Bearer " + header + b".e30.")],
    }
    start, body = await answers(gate_before(never), scope)
    challenge = dict(start["headers"])[b"www-authenticate"].decode()
    assert start["status"] == 401
    assert challenge.startswith('Bearer resource_metadata="https://mcp.example.com/.well-known/')
    assert 'error="invalid_token", error_description="the token\'s alg ' in challenge
    assert challenge.count('"') == 6  # three quoted values, no quote from the description
    assert "\\" not in challenge and "\n" not in challenge
    assert b'x"y' in body["body"]  # the body is not a header: it says it as it is


async def test_no_websocket_goes_around_the_check_and_the_lifespan_goes_through() -> None:
    reached: list[str] = []

    async def app(scope: Any, receive: Any, send: Any) -> None:
        reached.append(scope["type"])

    gate = gate_before(app)
    closed = await answers(gate, {"type": "websocket", "path": "/mcp", "headers": []})
    await answers(gate, {"type": "lifespan"})
    preflight = await answers(
        gate,
        {"type": "http", "method": "OPTIONS", "path": "/.well-known/oauth-protected-resource", "headers": []},
    )
    assert closed == [{"type": "websocket.close", "code": 1008}]
    assert reached == ["lifespan"]
    assert preflight[0]["status"] == 204
    assert (b"access-control-allow-origin", b"*") in preflight[0]["headers"]
