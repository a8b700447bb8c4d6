"""A running daemon reads mcpfleet's user config (profiles) when a session or a control
request asks for its fleet, not once at its start: a profile added while it runs is served."""

from __future__ import annotations

import json
from pathlib import Path

from tests.integration.daemon.conftest import StartDaemon
from tests.integration.daemon.daemon_harness import control, fake, fleet_spec, session, user_config


def test_a_profile_added_while_the_daemon_runs_is_served(
    isolated_home: Path, start_daemon: StartDaemon
) -> None:
    config = user_config({"alpha": fake("alpha", "--tool", "echo"), "beta": fake("beta", "--tool", "echo")})
    start_daemon()
    document = json.loads(config.read_text())
    document["profiles"] = {"narrow": {"servers": ["alpha"]}}
    config.write_text(json.dumps(document))

    narrow = fleet_spec(isolated_home, profile="narrow", startup_timeout_ms=0)
    with session(narrow) as host:
        assert host.answer["ok"] is True
        assert host.tool_names() == ["alpha_echo"]
    with control() as connection:
        answer = connection.control("tools", fleet=narrow.to_json())
    assert [tool["name"] for tool in answer["result"]["tools"]] == ["mcp_alpha_echo"]
