"""The daemon's control operations over its real socket: the documents of ``fleet_status``,
``tools`` and ``call`` are the ones ``mcpfleet status/tools/call --json`` print in-process;
``status`` describes the daemon; ``watch`` pushes changes; ``cancel`` stops a call at its
backend; a wrong request is answered with what is wrong and exit code 2."""

from __future__ import annotations

import calendar
import json
import os
import subprocess
import time
from pathlib import Path
from typing import Any

from tests.integration.daemon.conftest import StartDaemon
from tests.integration.daemon.daemon_harness import (
    ANSWER_TIMEOUT_S,
    MCPFLEET,
    control,
    fake,
    fleet_spec,
    session,
    user_config,
)

from mcpfleet import __version__
from mcpfleet.contract import wire
from mcpfleet.daemon_client import paths


def in_process(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """``mcpfleet ARGS`` in a process of its own, never through the daemon."""
    return subprocess.run(
        [str(MCPFLEET), *args],
        env={**os.environ, "MCPFLEET_NO_DAEMON": "1"},
        cwd=home,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_tools_and_call_give_the_documents_of_the_cli(isolated_home: Path, start_daemon: StartDaemon) -> None:
    user_config({"alpha": fake("alpha"), "beta": fake("beta", "--tool", "echo")})
    start_daemon()
    # Every server waited for on both sides: no tool is "deferred" on one and live on the other.
    fleet = fleet_spec(isolated_home, startup_timeout_ms=0).to_json()
    with control() as link:
        tools = link.control("tools", fleet=fleet)["result"]
        only_beta = link.control("tools", fleet=fleet, server="beta")["result"]
        called = link.control("call", fleet=fleet, tool="mcp_alpha_add", arguments={"a": 2, "b": 3})["result"]
        failed = link.control("call", fleet=fleet, tool="alpha/fail", arguments={"message": "no"})["result"]
        unknown = link.control("call", fleet=fleet, tool="mcp_gamma_echo", arguments={})
    expected_tools = in_process(isolated_home, "--json", "--startup-timeout", "0", "tools")
    assert expected_tools.returncode == 0, expected_tools.stderr
    assert tools == json.loads(expected_tools.stdout)
    assert [tool["name"] for tool in only_beta["tools"]] == ["mcp_beta_echo"]
    expected_call = in_process(isolated_home, "--json", "call", "mcp_alpha_add", '{"a": 2, "b": 3}')
    assert called == json.loads(expected_call.stdout)
    assert called["structured"] == {"sum": 5} and called["is_error"] is False
    assert failed["is_error"] is True
    expected_unknown = in_process(isolated_home, "call", "mcp_gamma_echo")
    assert expected_unknown.returncode == unknown["error"]["exit"] == 1
    assert unknown["error"]["message"] in expected_unknown.stderr


def test_fleet_status_gives_the_document_of_status(isolated_home: Path, start_daemon: StartDaemon) -> None:
    user_config(
        {"alpha": fake("alpha"), "broken": fake("broken", "--exit-before-handshake", "--exit-code", "3")}
    )
    start_daemon()
    with control() as link:
        document = link.control("fleet_status", fleet=fleet_spec(isolated_home).to_json())["result"]
    expected = in_process(isolated_home, "--json", "status")
    assert expected.returncode == 0, expected.stderr
    expected_document = json.loads(expected.stdout)

    def comparable(server: dict[str, Any]) -> dict[str, Any]:
        # Timings and how the start-up gate met each server are this run's own (a warm daemon's
        # servers are up before the gate, a fresh process's are not); the rest is the fleet's state.
        return {key: value for key, value in server.items() if key not in ("timings_ms", "at_gate")}

    assert json.dumps([comparable(server) for server in document["servers"]], indent=1) == json.dumps(
        [comparable(server) for server in expected_document["servers"]], indent=1
    )
    assert document["errors"] == expected_document["errors"]
    states = {server["name"]: server["status"] for server in document["servers"]}
    assert states == {"alpha": "connected", "broken": "failed"}


def test_status_describes_the_daemon_its_sessions_and_servers(
    isolated_home: Path, start_daemon: StartDaemon
) -> None:
    user_config({"alpha": fake("alpha")})
    daemon = start_daemon()
    before = time.time()
    # The session names its folder through a link: its project is the folder the link leads to.
    link_to_home = isolated_home / "link-to-home"
    link_to_home.symlink_to(isolated_home.resolve())
    with session(wire.FleetSpec(cwd=str(link_to_home)), host="claude"), control() as link:
        status = link.control("status")["result"]
        # The start-up gate may answer the session before alpha is up (a loaded machine: it
        # joins later); the report is read once the daemon says it is, within the answer bound.
        deadline = time.monotonic() + ANSWER_TIMEOUT_S
        while [row["state"] for row in status["servers"]] != ["connected"] and time.monotonic() < deadline:
            time.sleep(0.05)
            status = link.control("status")["result"]
        ping = link.control("ping")["result"]
    assert ping == {"pid": daemon.pid, "version": __version__, "since": status["since"]}
    assert status["pid"] == daemon.pid and status["version"] == __version__
    assert status["socket"] == str(paths.socket_path()) and status["log"] == str(paths.log_path())
    assert status["draining"] is False
    assert status["controls"] == 1
    [host] = status["sessions"]
    assert host["host"] == "claude"
    assert host["project"] == str(isolated_home.resolve())
    assert host["pid"] == os.getpid()
    started = calendar.timegm(time.strptime(host["since"], "%Y-%m-%dT%H:%M:%SZ"))
    assert before - 2 <= started <= time.time() + 1
    [server] = status["servers"]
    assert {"name", "state", "share", "sessions", "pid", "rss_bytes", "idle_s", "project"} <= server.keys()
    assert server["name"] == "alpha" and server["state"] == "connected" and server["sessions"] == 1
    assert status["rss_bytes"] > 0
    # Every process under the daemon: itself, its watchdog, alpha.
    assert status["totals"]["processes"] == 3 and server["processes"] == 1
    assert status["totals"]["rss_bytes"] > status["rss_bytes"] + int(server["rss_bytes"] or 0)


def test_watch_pushes_a_change_of_the_fleets_tools(isolated_home: Path, start_daemon: StartDaemon) -> None:
    # Its tools grow while it runs: pinning would withhold the added one (tests/integration/test_pinning.py).
    user_config({"alpha": {**fake("alpha", "--list-changed-after", "1"), "pinning": "off"}})
    start_daemon()
    with control() as link:
        link.send({"id": "w", "op": "watch", "fleet": fleet_spec(isolated_home).to_json()})
        assert link.receive() == {"id": "w", "result": {}}
        assert link.receive() == {"event": "tools_changed", "id": "w"}
        # The watched fleet is the one the next request sees: the change is there.
        tools = link.control("tools", fleet=fleet_spec(isolated_home).to_json())["result"]
    assert "mcp_alpha_late_tool" in [tool["name"] for tool in tools["tools"]]


def test_cancel_stops_a_call_at_its_backend(isolated_home: Path, start_daemon: StartDaemon) -> None:
    cancel_log, request_log = isolated_home / "cancelled.log", isolated_home / "requests.log"
    user_config({"alpha": fake("alpha", "--cancel-log", str(cancel_log), "--request-log", str(request_log))})
    start_daemon()
    fleet = fleet_spec(isolated_home).to_json()
    with control() as link:
        link.send(
            {"id": 1, "op": "call", "fleet": fleet, "tool": "mcp_alpha_sleep", "arguments": {"seconds": 60}}
        )
        wait_for_text(request_log, "tools/call")  # the backend is running the call
        link.send({"id": 2, "op": "cancel", "request": 1})
        answers = {answer["id"]: answer for answer in (link.receive(), link.receive())}
    assert answers[2] == {"id": 2, "result": {}}
    assert answers[1]["error"] == {"message": "cancelled by the client", "exit": 130}
    wait_for_text(cancel_log, "cancelled")


def wait_for_text(path: Path, text: str, timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not (path.exists() and text in path.read_text()):
        assert time.monotonic() < deadline, f"{text!r} never appeared in {path}"
        time.sleep(0.05)


def test_wrong_requests_are_answered_with_what_is_wrong(
    isolated_home: Path, start_daemon: StartDaemon
) -> None:
    start_daemon()
    with control() as link:
        unknown = link.control("reboot")
        no_fleet = link.control("tools")
        bad_arguments = link.control(
            "call", fleet=fleet_spec(isolated_home).to_json(), tool="x", arguments=[1]
        )
        link.send_line(b"{not json")
        not_json = link.receive()
        link.send_line(b"[" * 200_000)
        too_deep = link.receive()
        link.send({"op": "ping"})
        no_id = link.receive()
        # The connection goes on after each of them.
        assert link.control("ping")["result"]["pid"] > 0
    assert unknown["error"]["exit"] == 2 and "unknown op 'reboot'" in unknown["error"]["message"]
    assert no_fleet["error"]["exit"] == 2 and '"fleet" must be an object' in no_fleet["error"]["message"]
    assert (
        bad_arguments["error"]["exit"] == 2
        and '"arguments" must be a JSON object' in bad_arguments["error"]["message"]
    )
    assert not_json["id"] is None and not_json["error"]["exit"] == 2
    assert too_deep["id"] is None and "maximum recursion depth" in too_deep["error"]["message"]
    assert no_id["id"] is None and 'needs an "id"' in no_id["error"]["message"]
