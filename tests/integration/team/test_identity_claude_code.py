"""Claude Code (the real one, from ``.tools/claude-code``, offline) reaching a real team gateway,
``mcpfleet serve --http … --team FILE``: with a service account's key in ``--header`` it
connects, and the same key lists the fleet; without one it sees a server that wants a sign-in,
which it can only tell from the 401 and the resource metadata."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.integration.gateway.http_gateway import wait_until_listed
from tests.integration.gateway.test_gateway_real_clients import CLAUDE, claude, health, require_tool
from tests.integration.team.identity_provider import (
    IdentityProvider,
    free_port,
    running_team_gateway,
    write_team_file,
)

MCPFLEET = Path(sys.executable).parent / "mcpfleet"


def test_claude_code_connects_to_serve_team_with_a_service_key_and_not_without(
    isolated_home: Path, identity_provider: IdentityProvider
) -> None:
    require_tool(CLAUDE, "Claude Code")
    port = free_port()
    policies = [{"users": ["claude-ci"], "allow": ["*"]}]
    team = write_team_file(isolated_home, identity_provider.issuer, port, policies)
    added = subprocess.run(
        [str(MCPFLEET), "team", "key", "add", "claude-ci", "--team", str(team)],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    key = added.stdout.strip()
    with running_team_gateway(team, port, key) as gateway:
        bearer = f"Authorization: Bearer {key}"
        claude(isolated_home, "mcp", "add", "--transport", "http", "team", gateway.url, "--header", bearer)
        claude(isolated_home, "mcp", "add", "--transport", "http", "anonymous", gateway.url)
        shown = claude(isolated_home, "mcp", "list")
        # The same key lists the fleet: the team file's server, through its policy.
        wait_until_listed(gateway, "clock_echo")
    assert health(shown, "team") == "✔ Connected"
    # Told by the 401's resource metadata that this server signs users in (it would open the
    # provider's page on /mcp), not that it failed.
    assert health(shown, "anonymous") == "! Needs authentication"
