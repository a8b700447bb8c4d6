"""The protected resource metadata and the 401's challenge, as documents: where they are served
for a given ``public_url``, and what a description may hold in a quoted header value."""

from __future__ import annotations

import base64
import json
from collections.abc import MutableMapping
from typing import Any

import pytest

from mcpfleet.team.identity import IdentityCheck, metadata_paths, metadata_url, resource_metadata
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


async def answers(check: IdentityCheck, scope: dict[str, Any]) -> tuple[Any, list[dict[str, Any]]]:
    """What ``check.admit`` returns for ``scope``, and what it sent."""
    sent: list[dict[str, Any]] = []

    async def send(message: MutableMapping[str, Any]) -> None:
        sent.append(dict(message))

    return await check.admit(scope, send), sent


def check_for_example() -> IdentityCheck:
    settings = IdentitySettings(issuer="https://idp.example.com", audience="https://mcp.example.com/mcp")
    return IdentityCheck(public_url="https://mcp.example.com/mcp", tokens=JwtVerifier(settings))


async def test_a_description_is_kept_to_what_a_quoted_header_value_may_hold() -> None:
    # The header's alg comes back in the description: a quote, a backslash and a newline in it.
    header = base64.urlsafe_b64encode(json.dumps({"alg": 'x"y\\z\n'}).encode()).rstrip(b"=")
    scope = {
        "type": "http",
        "method": "POST",
        "path": "/mcp",
        "headers": [(b"authorization", b"Bearer " + header + b".e30.")],
    }
    admitted, (start, body) = await answers(check_for_example(), scope)
    challenge = dict(start["headers"])[b"www-authenticate"].decode()
    assert admitted is None and start["status"] == 401
    assert challenge.startswith('Bearer resource_metadata="https://mcp.example.com/.well-known/')
    assert 'error="invalid_token", error_description="the token\'s alg ' in challenge
    assert challenge.count('"') == 6  # three quoted values, no quote from the description
    assert "\\" not in challenge and "\n" not in challenge
    assert b'x"y' in body["body"]  # the body is not a header: it says it as it is


async def test_open_paths_pass_as_they_are_and_the_metadata_answers_a_preflight() -> None:
    check = check_for_example()
    health = {"type": "http", "method": "GET", "path": "/healthz", "headers": []}
    preflight = {
        "type": "http",
        "method": "OPTIONS",
        "path": "/.well-known/oauth-protected-resource",
        "headers": [],
    }
    assert await answers(check, health) == (health, [])
    admitted, sent = await answers(check, preflight)
    assert admitted is None and sent[0]["status"] == 204
    assert (b"access-control-allow-origin", b"*") in sent[0]["headers"]


async def test_the_scopes_of_the_team_file_are_what_clients_are_told_to_ask_for() -> None:
    """An issuer that ignores RFC 8707's resource (Entra ID) mints a token for the gateway only
    when asked for its scope: the metadata lists it, and the 401 names it (RFC 6750's scope)."""
    scopes = ("api://0f9c-client/mcp.access", "offline_access")
    settings = IdentitySettings(
        issuer="https://login.example.com/tenant/v2.0", audience="0f9c-client", scopes=scopes
    )
    check = IdentityCheck(public_url="https://mcp.example.com/mcp", tokens=JwtVerifier(settings))
    metadata = {
        "type": "http",
        "method": "GET",
        "path": "/.well-known/oauth-protected-resource",
        "headers": [],
    }
    _, sent = await answers(check, metadata)
    assert json.loads(sent[1]["body"])["scopes_supported"] == list(scopes)
    unsigned = {"type": "http", "method": "POST", "path": "/mcp", "headers": []}
    _, (start, _) = await answers(check, unsigned)
    challenge = dict(start["headers"])[b"www-authenticate"].decode()
    assert challenge.endswith(', scope="api://0f9c-client/mcp.access offline_access"')
    # Without scopes in the team file, neither says any.
    _, sent = await answers(check_for_example(), metadata)
    assert "scopes_supported" not in json.loads(sent[1]["body"])
