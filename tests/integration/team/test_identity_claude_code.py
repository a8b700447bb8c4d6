"""Claude Code (the real one, from ``.tools/claude-code``, offline) reaching a team gateway: with
a service account's key in ``--header`` it connects; without one it sees a server that wants
a sign-in, which it can only tell from the 401 and the resource metadata."""

from __future__ import annotations

import functools
from pathlib import Path

import anyio
import pytest
from tests.integration.gateway.test_gateway_real_clients import CLAUDE, claude, health, require_tool
from tests.integration.team.identity_provider import IdentityProvider, running_identity_gateway

from mcpfleet.team.api_keys import add_key

pytestmark = pytest.mark.anyio


async def listing(home: Path) -> str:
    return await anyio.to_thread.run_sync(functools.partial(claude, home, "mcp", "list"))


async def test_claude_code_connects_with_a_service_key_and_not_without(
    isolated_home: Path, identity_provider: IdentityProvider
) -> None:
    require_tool(CLAUDE, "Claude Code")
    key_file = isolated_home / "api-keys.json"
    key = add_key(key_file, "claude-ci")
    async with running_identity_gateway(identity_provider.issuer, api_keys=key_file) as gateway:
        url = gateway.public_url
        claude(
            isolated_home,
            "mcp",
            "add",
            "--transport",
            "http",
            "team",
            url,
            "--header",
            f"Authorization: Bearer {key}",
        )
        claude(isolated_home, "mcp", "add", "--transport", "http", "anonymous", url)
        shown = await listing(isolated_home)
    assert health(shown, "team") == "✔ Connected"
    # Told by the 401's resource metadata that this server signs users in (it would open the
    # provider's page on /mcp), not that it failed.
    assert health(shown, "anonymous") == "! Needs authentication"
