"""The shim (``mcpfleet serve`` through the daemon) against a scripted daemon on a real socket.

The shim runs as hosts run it: the console script in a process of its own, its stdio the
host's session. The daemon is ``ScriptedDaemon`` (``shim_harness.py``): what the shim must do
with what a daemon sends, and with a daemon that goes away, is what these tests pin.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from tests.integration.daemon.shim_harness import MCPFLEET, WAIT_S, ScriptedDaemon, ShimHost

from mcpfleet.contract import wire
from mcpfleet.daemon_client.launch import RECONNECT_LIMIT
from mcpfleet.daemon_client.shim import (
    ANSWER_TIMEOUT_S,
    DAEMON_STOPPED,
    MAX_HOST_LINE_BYTES,
    REPLAY_ID_PREFIX,
)

FORBIDDEN_IMPORTS = ("mcp", "mcp_types", "anyio", "pydantic", "pydantic_core", "platformdirs", "rich", "yaml")


def call(action: str, **arguments: Any) -> dict[str, Any]:
    return {"name": "scripted_echo", "arguments": {"action": action, **arguments}}


def test_the_shim_relays_both_ways_and_says_which_fleet(daemon_runtime: Path, tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    with (
        ScriptedDaemon(daemon_runtime / "daemon.sock") as daemon,
        ShimHost(
            "--trust-project",
            "--startup-timeout",
            "0",
            "serve",
            "--profile",
            "small",
            "--max-tools",
            "9",
            cwd=project,
        ) as host,
    ):
        assert host.initialize()["result"]["serverInfo"]["name"] == "scripted-daemon"
        assert host.call("tools/list")["result"]["tools"][0]["name"] == "scripted_echo"
        assert host.call("tools/call", call("echo", text="héllo"))["result"]["content"][0]["text"] == "héllo"

        # A request of the daemon reaches the host, and the host's answer the daemon.
        host.request("tools/call", call("ask"))
        question = host.receive()
        assert question["method"] == "roots/list"
        host.send({"jsonrpc": "2.0", "id": question["id"], "result": {"roots": []}})
        session = daemon.session(0)
        daemon.wait_until(
            lambda: {"jsonrpc": "2.0", "id": 1, "result": {"roots": []}} in session.lines, "the answer"
        )

        # A line far longer than what the shim parses whole goes through unchanged.
        big = host.call("tools/call", call("big", size=3 * 1024 * 1024))
        assert big["result"]["content"][0]["text"] == "x" * (3 * 1024 * 1024)

    hello = daemon.hellos[0]
    assert hello["kind"] == "session" and hello["mcpfleet"] == wire.PROTOCOL
    assert hello["fleet"] == {
        "cwd": str(project.resolve()),
        "trust_project": True,
        "enable_project_config": True,
        "startup_timeout_ms": 0,
        "profile": "small",
        "prefix": "always",
        "max_name_length": 64,
        "tools": "auto",
        "max_tools": 9,
    }
    assert hello["env"]["HOME"] == os.environ["HOME"]
    # The host is the shim's parent: this test's process.
    assert hello["host"] == Path("/proc/self/comm").read_text().strip()
    assert isinstance(hello["pid"], int)


def test_a_folder_whose_name_is_not_utf8_is_the_session_s_folder(
    daemon_runtime: Path, tmp_path: Path
) -> None:
    """Its name reaches the daemon escaped in the hello (it used to end the shim with a traceback)."""
    project = Path(os.fsdecode(os.fsencode(tmp_path) + b"/caf\xe9"))
    project.mkdir()
    with ScriptedDaemon(daemon_runtime / "daemon.sock") as daemon, ShimHost("serve", cwd=project) as host:
        assert host.initialize()["result"]["serverInfo"]["name"] == "scripted-daemon"
    assert daemon.hellos[0]["fleet"]["cwd"] == str(project.resolve())


def test_a_lost_daemon_is_replaced_without_the_host_noticing_more_than_a_list_change(
    daemon_runtime: Path,
) -> None:
    with ScriptedDaemon(daemon_runtime / "daemon.sock") as daemon, ShimHost("serve") as host:
        host.initialize()
        first = daemon.session(0)
        # Answered, in a line too long to be read whole: it must not be taken for one in flight.
        assert "result" in host.call("tools/call", call("big", size=200_000))
        # In flight, in a line too long to be read whole: it must get its error all the same.
        in_flight = host.request("tools/call", call("hang", padding="p" * 100_000))
        asked = host.request("tools/call", call("ask"))
        question = host.receive()
        daemon.wait_until(lambda: any(line.get("id") == in_flight for line in first.lines), "the call")

        daemon.drop_sessions()

        answers = [host.receive() for _ in range(2)]
        assert sorted(answer["id"] for answer in answers) == sorted([in_flight, asked])
        for answer in answers:
            assert answer["error"]["code"] == DAEMON_STOPPED
            assert "retry" in answer["error"]["message"]
        assert [host.receive()["method"] for _ in range(3)] == [
            "notifications/tools/list_changed",
            "notifications/resources/list_changed",
            "notifications/prompts/list_changed",
        ]
        # The host's late answer to the old daemon's question goes nowhere.
        host.send({"jsonrpc": "2.0", "id": question["id"], "result": {"roots": []}})
        assert host.call("tools/call", call("echo", text="again"))["result"]["content"][0]["text"] == "again"

        second = daemon.session(1)
        replayed, initialized, after = second.lines[:3]
        assert replayed["method"] == "initialize" and replayed["id"].startswith(REPLAY_ID_PREFIX)
        assert replayed["params"] == first.lines[0]["params"]
        assert initialized == {"jsonrpc": "2.0", "method": "notifications/initialized"}
        assert after["method"] == "tools/call"
        assert not [line for line in second.lines if "result" in line]
        host.close_stdin()
        assert host.wait_exit() == 0
    # Said in words a user knows: what happened, and what it means for the session.
    assert "the mcpfleet daemon (pid 1001) went away" in host.stderr
    assert "a new daemon (pid 1002) now serves this session" in host.stderr
    assert "pid 4096" not in host.stderr and "goes on with pid" not in host.stderr


def test_the_host_hears_of_the_lists_its_first_answer_declared_only(daemon_runtime: Path) -> None:
    with (
        ScriptedDaemon(
            daemon_runtime / "daemon.sock", capabilities={"tools": {"listChanged": True}, "prompts": {}}
        ) as daemon,
        ShimHost("serve") as host,
    ):
        host.initialize()
        daemon.session(0)
        daemon.drop_sessions()
        assert host.receive() == {"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}
        assert host.call("ping")["result"] == {}


def test_a_daemon_gone_mid_line_leaves_the_host_lines_it_can_read(daemon_runtime: Path) -> None:
    with ScriptedDaemon(daemon_runtime / "daemon.sock") as daemon, ShimHost("serve") as host:
        host.initialize()
        cut = host.request("tools/call", call("cut"))
        broken = host.receive_line()
        assert broken.startswith(b'{"jsonrpc": "2.0", "id": ') and broken.endswith(b"\n")
        assert host.receive() == {
            "jsonrpc": "2.0",
            "id": cut,
            "error": {
                "code": DAEMON_STOPPED,
                "message": "the mcpfleet daemon stopped while this request ran; retry it",
            },
        }
        assert host.receive()["method"] == "notifications/tools/list_changed"
        daemon.session(1)


def test_an_initialize_in_flight_is_sent_again_as_it_came(daemon_runtime: Path) -> None:
    with (
        ScriptedDaemon(daemon_runtime / "daemon.sock", silent_initialize=1) as daemon,
        ShimHost("serve") as host,
    ):
        initialize = host.request("initialize", {"protocolVersion": "2025-06-18", "capabilities": {}})
        first = daemon.session(0)
        daemon.wait_until(lambda: len(first.lines) == 1, "the initialize")
        daemon.drop_sessions()
        # The host still waits for its answer: the new daemon gives it, to the host's own id.
        answer = host.receive()
        assert answer["id"] == initialize and answer["result"]["serverInfo"]["name"] == "scripted-daemon"
        assert daemon.session(1).lines == first.lines


def test_a_session_waiting_for_every_server_waits_for_the_daemon_s_answer(daemon_runtime: Path) -> None:
    """``--startup-timeout 0``: the daemon answers once every server is up, however long that is."""
    delay_s = ANSWER_TIMEOUT_S + 1
    with (
        ScriptedDaemon(daemon_runtime / "daemon.sock", answer_delay_s=delay_s),
        ShimHost("--startup-timeout", "0", "serve") as host,
    ):
        assert host.initialize()["result"]["serverInfo"]["name"] == "scripted-daemon"


def test_a_daemon_that_keeps_going_away_ends_the_shim(daemon_runtime: Path) -> None:
    with ScriptedDaemon(daemon_runtime / "daemon.sock") as daemon, ShimHost("serve") as host:
        host.initialize()
        for index in range(RECONNECT_LIMIT + 1):
            session = daemon.session(index)
            # Dropped once the session is carried over (the replay done), each time.
            daemon.wait_for_lines(session, 2)
            daemon.drop_sessions()
        assert host.wait_exit() == 1
    lines = host.stderr.splitlines()
    assert len(lines) == RECONNECT_LIMIT + 1
    assert all("now serves this session" in line for line in lines[:-1])
    assert f"went away {RECONNECT_LIMIT} times within 30 s" in lines[-1]


def test_a_new_daemon_that_fails_the_replay_has_its_connection_closed_before_the_next_try(
    daemon_runtime: Path,
) -> None:
    """A session left half open would hold the daemon's servers for nobody."""
    with (
        ScriptedDaemon(daemon_runtime / "daemon.sock", failed_replays=1) as daemon,
        ShimHost("serve") as host,
    ):
        host.initialize()
        daemon.wait_for_lines(daemon.session(0), 2)
        daemon.drop_sessions()
        refused_replay = daemon.session(1)
        daemon.wait_for_lines(daemon.session(2), 2)  # the try after it carries the session on
        assert refused_replay.lines[0]["id"].startswith(REPLAY_ID_PREFIX) and len(refused_replay.lines) == 1
        timeline = daemon.timeline
        third_hello = [index for index, entry in enumerate(timeline) if entry == "hello"][2]
        assert "end 1" in timeline[:third_hello], timeline
        assert [host.receive()["method"] for _ in range(3)] == [
            "notifications/tools/list_changed",
            "notifications/resources/list_changed",
            "notifications/prompts/list_changed",
        ]
        assert host.call("tools/list")["result"]["tools"][0]["name"] == "scripted_echo"


def test_a_daemon_of_another_version_is_replaced_once(daemon_runtime: Path) -> None:
    with (
        ScriptedDaemon(daemon_runtime / "daemon.sock", refusals=("version-mismatch",)) as daemon,
        ShimHost("serve") as host,
    ):
        assert host.initialize()["result"]["serverInfo"]["name"] == "scripted-daemon"
        assert len(daemon.hellos) == 2

    with (
        ScriptedDaemon(daemon_runtime / "daemon.sock", refusals=("version-mismatch", "draining")) as daemon,
        ShimHost("serve") as host,
    ):
        assert host.wait_exit() == 1
    assert "refused the session: scripted draining" in host.stderr


def test_a_session_the_daemon_refuses_for_what_it_asked_is_a_usage_error(daemon_runtime: Path) -> None:
    with ScriptedDaemon(daemon_runtime / "daemon.sock", refusals=("refused",)), ShimHost("serve") as host:
        assert host.wait_exit() == 2
    assert host.stderr == "mcpfleet: the mcpfleet daemon refused the session: scripted refused\n"


def test_a_daemon_reading_other_config_files_leaves_the_session_in_process(daemon_runtime: Path) -> None:
    with (
        ScriptedDaemon(daemon_runtime / "daemon.sock", refusals=("environment-mismatch",)),
        ShimHost("serve") as host,
    ):
        answer = host.initialize()
        assert answer["result"]["serverInfo"]["name"] != "scripted-daemon"  # the in-process gateway
        assert host.call("tools/list")["result"]["tools"] == []
        host.close_stdin()
        assert host.wait_exit() == 0
    assert "runs its own servers in this process" in host.stderr


def test_a_host_line_over_the_limit_is_refused_and_the_session_goes_on(daemon_runtime: Path) -> None:
    with ScriptedDaemon(daemon_runtime / "daemon.sock") as daemon, ShimHost("serve") as host:
        host.initialize()
        padding = "y" * (MAX_HOST_LINE_BYTES + 10)
        host.send_raw(
            b'{"jsonrpc": "2.0", "id": 77, "method": "tools/call", "params": {"p": "%s"}}\n'
            % padding.encode()
        )
        refusal = host.receive()
        assert refusal["id"] == 77 and refusal["error"]["code"] == -32600
        assert "over the gateway's limit of 16 MiB" in refusal["error"]["message"]
        assert host.call("ping")["result"] == {}
        assert all(line.get("id") != 77 for line in daemon.session(0).lines)


def test_the_host_leaving_ends_the_session(daemon_runtime: Path) -> None:
    with ScriptedDaemon(daemon_runtime / "daemon.sock") as daemon, ShimHost("serve") as host:
        host.initialize()
        session = daemon.session(0)
        host.close_stdin()
        assert host.wait_exit() == 0
        session.connection.settimeout(WAIT_S)
        assert session.connection.recv(1) == b""  # the shim closed its end


@pytest.mark.parametrize("stop", [signal.SIGTERM, signal.SIGINT])
def test_a_stop_signal_closes_the_socket_and_exits_0(daemon_runtime: Path, stop: signal.Signals) -> None:
    with ScriptedDaemon(daemon_runtime / "daemon.sock") as daemon, ShimHost("serve") as host:
        host.initialize()
        session = daemon.session(0)
        host.process.send_signal(stop)
        assert host.wait_exit() == 0
        session.connection.settimeout(WAIT_S)
        assert session.connection.recv(1) == b""
    assert host.stderr == ""


def assert_served_in_process(host: ShimHost, reason: str) -> None:
    """The host gets its session all the same, from a gateway in the shim's own process, and
    one line on stderr says why the daemon could not be used, and what that means."""
    assert host.initialize()["result"]["serverInfo"]["name"] == "mcpfleet"
    assert host.call("tools/list")["result"]["tools"] == []
    host.close_stdin()
    assert host.wait_exit() == 0
    [line] = [line for line in host.stderr.splitlines() if "daemon" in line]
    assert reason in line, host.stderr
    assert "this session runs its own servers in this process" in line


def test_a_runtime_folder_that_is_a_symbolic_link_is_refused(
    daemon_runtime: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tmp_path / "elsewhere"
    target.mkdir(mode=0o700)
    link = daemon_runtime / "link"
    link.symlink_to(target)
    monkeypatch.setenv("MCPFLEET_RUNTIME_DIR", str(link))
    with ShimHost("serve") as host:
        assert_served_in_process(host, "is not a folder (a symbolic link or a file is never trusted)")
    assert list(target.iterdir()) == []


@pytest.mark.skipif(os.getuid() != 0, reason="needs root to give the folder to another user")
def test_a_runtime_folder_of_another_user_is_refused(daemon_runtime: Path) -> None:
    os.chown(daemon_runtime, 65534, 65534)
    with ShimHost("serve") as host:
        assert_served_in_process(host, "belongs to user 65534, not to you; set MCPFLEET_RUNTIME_DIR")
    assert list(daemon_runtime.iterdir()) == []


def test_a_runtime_folder_too_long_for_a_socket_is_refused(
    daemon_runtime: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    long_folder = daemon_runtime / ("d" * 120)
    monkeypatch.setenv("MCPFLEET_RUNTIME_DIR", str(long_folder))
    with ShimHost("serve") as host:
        assert_served_in_process(host, "too long for a Unix socket path")
    assert not long_folder.exists()


@pytest.mark.skipif(os.getuid() != 0, reason="needs root to listen as another user")
def test_a_socket_answered_by_another_user_is_refused(daemon_runtime: Path) -> None:
    socket_file = daemon_runtime / "daemon.sock"
    # Bound in our folder, but listening as "nobody": SO_PEERCRED names who called listen().
    impostor = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import os, socket, sys, time\n"
            "s = socket.socket(socket.AF_UNIX)\n"
            f"s.bind({str(socket_file)!r})\n"
            "os.setuid(65534)\n"
            "s.listen(4)\n"
            "print('listening', flush=True)\n"
            "time.sleep(60)\n",
        ],
        stdout=subprocess.PIPE,
    )
    try:
        assert impostor.stdout is not None and impostor.stdout.readline() == b"listening\n"
        with ShimHost("serve") as host:
            assert_served_in_process(host, "of user 65534, not by your own daemon")
        assert re.search(
            rf"{re.escape(str(socket_file))}: answered by process \d+ of user 65534, not by your own daemon",
            host.stderr,
        )
    finally:
        impostor.kill()
        impostor.wait()


def test_the_shim_imports_neither_the_sdk_nor_anyio(daemon_runtime: Path) -> None:
    """The console script as a host runs it, with a daemon up: every module it imported."""
    with ScriptedDaemon(daemon_runtime / "daemon.sock"):
        completed = subprocess.run(
            [sys.executable, "-X", "importtime", str(MCPFLEET), "serve"],
            input=b"",
            capture_output=True,
            timeout=WAIT_S,
        )
    assert completed.returncode == 0, completed.stderr.decode()
    imported = {
        line.rsplit("|", 1)[1].strip()
        for line in completed.stderr.decode().splitlines()
        if line.startswith("import time:") and "|" in line
    }
    assert "mcpfleet.daemon_client.shim" in imported
    roots = {name.split(".")[0] for name in imported}
    assert roots.isdisjoint(FORBIDDEN_IMPORTS), sorted(roots & set(FORBIDDEN_IMPORTS))
    assert "mcpfleet.cli.main" not in imported


def test_serve_stays_in_process_when_asked_to_or_when_its_fleet_is_its_own(
    daemon_runtime: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = tmp_path / "extra.json"
    config.write_text(json.dumps({"mcpServers": {}}), encoding="utf-8")
    cases: list[tuple[list[str], dict[str, str], str]] = [
        (["serve", "--no-daemon"], {}, ""),
        (["serve"], {"MCPFLEET_NO_DAEMON": "1"}, ""),
        (["--no-cache", "serve"], {}, "mcpfleet: serve --no-cache runs in this process"),
        (["--config", str(config), "serve"], {}, "mcpfleet: serve --config runs in this process"),
    ]
    with ScriptedDaemon(daemon_runtime / "daemon.sock") as daemon:
        for arguments, variables, notice in cases:
            with ShimHost(*arguments, env={**os.environ, **variables}) as host:
                assert host.initialize()["result"]["serverInfo"]["name"] != "scripted-daemon", arguments
                host.close_stdin()
                assert host.wait_exit() == 0
            assert host.stderr.startswith(notice), (arguments, host.stderr)
        assert daemon.hellos == []


def test_python_dash_m_mcpfleet_is_the_command(daemon_runtime: Path) -> None:
    completed = subprocess.run(
        [sys.executable, "-m", "mcpfleet", "serve", "--help"], capture_output=True, text=True, timeout=WAIT_S
    )
    assert completed.returncode == 0
    assert "--no-daemon" in completed.stdout
