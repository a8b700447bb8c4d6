"""A running daemon reads mcpfleet's user config (profiles) when a session or a control
request asks for its fleet, not once at its start: a profile added while it runs is served.
Its own settings (``daemon.idleTimeout``, ``daemon.daemonIdleTimeout``) are re-read when the
file changes, and applied to what is idle already."""

from __future__ import annotations

import json
import time
from pathlib import Path

from tests.integration.daemon.conftest import StartDaemon
from tests.integration.daemon.daemon_harness import (
    ANSWER_TIMEOUT_S,
    control,
    fake,
    fleet_spec,
    server_processes,
    session,
    user_config,
    wait_until_gone,
)

from mcpfleet.daemon_client import paths


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


def _with_daemon_settings(config: Path, **settings: float) -> None:
    document = json.loads(config.read_text())
    document["daemon"] = settings
    config.write_text(json.dumps(document))


def test_an_idle_timeout_edited_while_the_daemon_runs_stops_a_lingering_server(
    isolated_home: Path, start_daemon: StartDaemon
) -> None:
    config = user_config({"alpha": fake("alpha", "--tool", "echo")})
    _with_daemon_settings(config, idleTimeout=600)
    start_daemon()
    with session(fleet_spec(isolated_home, startup_timeout_ms=0)) as host:
        assert host.tool_names() == ["alpha_echo"]
    [server] = server_processes(isolated_home, "alpha")
    # The session's end reaches the daemon when it reads the closed socket, which may be after
    # the control request below arrives: wait for that event, then see the server linger.
    row = _status_row_once_unused("alpha")
    assert row["state"] == "connected"
    assert server_processes(isolated_home, "alpha") == [server]  # no session uses it: it lingers

    _with_daemon_settings(config, idleTimeout=1)
    # Read with the config, and applied to the server lingering already: not 600 s from now.
    assert wait_until_gone([server]) == []


def test_a_daemon_idle_timeout_edited_while_the_daemon_runs_applies(
    isolated_home: Path, start_daemon: StartDaemon
) -> None:
    config = user_config({"alpha": fake("alpha", "--tool", "echo")})
    _with_daemon_settings(config, daemonIdleTimeout=1800)
    daemon = start_daemon()
    _with_daemon_settings(config, daemonIdleTimeout=1)
    assert daemon.wait_exit() == 0
    assert "idle: no connection for 1 s" in paths.log_path().read_text()


def test_a_bad_edit_of_the_daemon_settings_keeps_them(isolated_home: Path, start_daemon: StartDaemon) -> None:
    config = user_config({"alpha": fake("alpha", "--tool", "echo")})
    _with_daemon_settings(config, daemonIdleTimeout=1800)
    daemon = start_daemon()
    _with_daemon_settings(config, daemonIdleTimeout=-5)
    wait_for_log("daemon settings kept as they were")
    assert daemon.process.poll() is None
    with control() as connection:
        assert connection.control("ping")["result"]["pid"] == daemon.pid


def _status_row_once_unused(name: str) -> dict[str, object]:
    deadline = time.monotonic() + ANSWER_TIMEOUT_S
    while True:
        with control() as connection:
            [row] = connection.control("status")["result"]["servers"]
        assert row["name"] == name
        if row["sessions"] == 0:
            return dict(row)
        assert time.monotonic() < deadline, f"the daemon still counts a session on {name}: {row}"
        time.sleep(0.05)


def wait_for_log(text: str) -> None:
    deadline = time.monotonic() + ANSWER_TIMEOUT_S
    while text not in paths.log_path().read_text():
        assert time.monotonic() < deadline, f"the daemon never logged {text!r}"
        time.sleep(0.1)
