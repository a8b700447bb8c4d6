"""Tool pinning under the daemon (B15): a rug pull is withheld from the daemon's sessions,
``tools --json`` (answered by the daemon) marks it withheld, and ``mcpfleet tools approve`` in
another process reaches the daemon (it watches the pin files of what it withholds): its
sessions are told ``list_changed`` and get the tool."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path

from tests.integration.daemon.conftest import StartDaemon
from tests.integration.daemon.daemon_harness import Connection, fleet_spec, session, user_config
from tests.integration.pinning_fleet import EVENT_BOUND_S, rug_pull_entry, run_cli

LIST_CHANGED = "notifications/tools/list_changed"


def hear_list_changed(connection: Connection) -> None:
    """Read the session's lines until the daemon says its tools changed (bounded)."""
    deadline = time.monotonic() + EVENT_BOUND_S
    while True:
        message = connection.receive(timeout_s=max(0.1, deadline - time.monotonic()))
        if message.get("method") == LIST_CHANGED:
            return


def until(holds: Callable[[], bool]) -> None:
    deadline = time.monotonic() + EVENT_BOUND_S
    while not holds():
        assert time.monotonic() < deadline, "not within the bound"
        time.sleep(0.05)


def call_text(connection: Connection, tool: str) -> tuple[bool, str]:
    result = connection.call_tool(tool, {})["result"]
    return bool(result.get("isError")), str(result["content"][0]["text"])


def test_the_daemon_withholds_a_rug_pull_from_its_sessions_until_approved(
    isolated_home: Path, start_daemon: StartDaemon, tmp_path: Path
) -> None:
    flag = tmp_path / "turn-hostile"
    project = tmp_path / "project"
    project.mkdir()
    user_config({"rug": rug_pull_entry(flag)})
    daemon = start_daemon()
    with session(fleet_spec(project)) as connection:
        until(lambda: connection.tool_names() == ["rug_echo", "rug_read_notes"])
        flag.touch()
        hear_list_changed(connection)
        until(lambda: connection.tool_names() == ["rug_echo"])
        is_error, text = call_text(connection, "rug_read_notes")
        assert is_error
        assert text.startswith("MCP error:")
        assert "mcpfleet tools review rug" in text

        listed = run_cli("tools", "--json", cwd=project)
        assert listed.returncode == 0, listed.stderr
        rows = {row["mcp_name"]: row["withheld"] for row in json.loads(listed.stdout)["tools"]}
        assert rows == {"echo": False, "read_notes": True, "exfiltrate": True}

        approve = run_cli("tools", "approve", "rug", "read_notes", cwd=project)
        assert approve.returncode == 0, approve.stderr
        hear_list_changed(connection)
        until(lambda: connection.tool_names() == ["rug_echo", "rug_read_notes"])
        assert call_text(connection, "rug_read_notes") == (False, "called read_notes")
        assert call_text(connection, "rug_exfiltrate")[0]
        called = run_cli("call", "mcp_rug_exfiltrate", cwd=project)
        assert called.returncode == 1
        assert any(line.startswith("MCP error: ") for line in called.stderr.splitlines())
        assert "mcpfleet tools review rug" in called.stderr
    assert "withheld until reviewed (`mcpfleet tools review rug`)" in daemon.stderr
