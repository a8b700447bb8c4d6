"""Faults a host cannot get out of by itself, against the real daemon (issue 22 "Faults",
issue 23 item 3): a daemon stopped under an attached shim, a daemon that cannot start, and
input that ends before its answers came.

The host is ``ShimHost``: the console script as a host runs it. The daemon is the real one,
started by the shim on the test's private runtime folder (``conftest.py``).
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
from tests.integration.daemon.daemon_harness import fake, ping, user_config
from tests.integration.daemon.shim_harness import MCPFLEET, ShimHost

from mcpfleet.daemon_client import paths
from mcpfleet.daemon_client.shim import DAEMON_STOPPED, LIVENESS_TIMEOUT_S, PROBE_AFTER_S

FLEET_WAIT_S = 60.0
"""Bound of a wait for the fleet (a server's start on a loaded machine, a new process's)."""
STOPPED_ERROR_WAIT_S = 60.0
"""The test's upper bound for the error a request of a stopped daemon gets: far above the
shim's own (``PROBE_AFTER_S + LIVENESS_TIMEOUT_S``), far below "never" (what it was)."""
INITIALIZE: dict[str, Any] = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "pipe", "version": "1"},
    },
}


def echo(message: str) -> dict[str, Any]:
    return {"name": "alpha_echo", "arguments": {"message": message}}


def wait_for_tools(host: ShimHost, name: str) -> None:
    """Until ``tools/list`` holds ``name`` (a fresh home has no cache: the backend joins late)."""
    deadline = time.monotonic() + FLEET_WAIT_S
    while True:
        answer = host.answer_skipping_notifications(host.request("tools/list"), FLEET_WAIT_S)
        if name in [tool["name"] for tool in answer["result"]["tools"]]:
            return
        assert time.monotonic() < deadline, f"{name} never listed: {answer}"
        time.sleep(0.1)


def daemon_pid() -> int:
    pong = ping()
    assert pong is not None, "no daemon answers"
    return int(pong["pid"])


def test_a_stopped_daemon_gets_the_host_an_error_then_a_fleet_of_its_own(isolated_home: Path) -> None:
    user_config({"alpha": fake("alpha", "--tool", "echo")})
    with ShimHost("serve") as host:
        host.initialize()
        wait_for_tools(host, "alpha_echo")
        daemon = daemon_pid()
        os.kill(daemon, signal.SIGSTOP)
        try:
            asked = time.monotonic()
            pending = host.request("tools/call", echo("one"))
            answer = host.answer_skipping_notifications(pending, STOPPED_ERROR_WAIT_S)
            waited = time.monotonic() - asked
            assert answer["error"]["code"] == DAEMON_STOPPED
            assert answer["error"]["message"] == (
                f"the mcpfleet daemon (pid {daemon}) stopped answering while this request ran; retry it"
            )
            # Later requests are answered: by the session's own `serve --no-daemon`, since the
            # stopped daemon still holds the socket.
            later = host.answer_skipping_notifications(host.request("tools/call", echo("two")), FLEET_WAIT_S)
            assert later["result"]["structuredContent"] == {"message": "two"}
        finally:
            os.kill(daemon, signal.SIGCONT)
        host.close_stdin()
        assert host.wait_exit() == 0
    [line] = [line for line in host.stderr.splitlines() if "did not answer" in line]
    assert f"resume it with `kill -CONT {daemon}`" in line
    # The figure issue 22 asks for (run with -s to see it).
    print(f"\nstopped daemon: the host's request got its error {waited:.1f} s after it was sent")


def test_a_call_longer_than_the_silence_bound_on_a_live_daemon_completes(isolated_home: Path) -> None:
    """The daemon sends nothing while the call runs (no progress token): the shim asks whether
    it is alive, it is, and the call is left to finish."""
    user_config({"alpha": fake("alpha", "--tool", "sleep")})
    seconds = PROBE_AFTER_S + LIVENESS_TIMEOUT_S + 3
    with ShimHost("serve") as host:
        host.initialize()
        wait_for_tools(host, "alpha_sleep")
        daemon = daemon_pid()
        call = host.request("tools/call", {"name": "alpha_sleep", "arguments": {"seconds": seconds}})
        answer = host.answer_skipping_notifications(call, seconds + FLEET_WAIT_S)
        assert answer["result"]["content"][0]["text"] == f"slept {seconds}"
        assert daemon_pid() == daemon
        host.close_stdin()
        assert host.wait_exit() == 0
    assert "did not answer" not in host.stderr


def test_piped_requests_are_all_answered_through_the_daemon(isolated_home: Path) -> None:
    """``printf '<initialize>\\n<tools/list>\\n' | mcpfleet serve``, with the daemon running."""
    user_config({"alpha": fake("alpha", "--tool", "echo")})
    subprocess.run([str(MCPFLEET), "daemon", "start"], check=True, capture_output=True, timeout=FLEET_WAIT_S)
    piped = (
        json.dumps(INITIALIZE) + "\n" + json.dumps({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}) + "\n"
    )
    completed = subprocess.run(
        [str(MCPFLEET), "serve"], input=piped.encode(), capture_output=True, timeout=FLEET_WAIT_S
    )
    assert completed.returncode == 0, completed.stderr
    answers = [json.loads(line) for line in completed.stdout.splitlines()]
    assert [answer.get("id") for answer in answers if "method" not in answer] == [1, 2], completed
    assert answers[0]["result"]["serverInfo"]["name"] == "mcpfleet"
    # The fleet's list_changed notifications may come after the last answer: pick it by its id.
    (listing,) = [answer for answer in answers if answer.get("id") == 2]
    assert "tools" in listing["result"]
    assert ping() is not None  # it was the daemon that answered


@pytest.mark.skipif(
    os.getuid() != 0 or shutil.which("unshare") is None,
    reason="needs root and unshare(1) for a read-only bind mount in a mount namespace of its own",
)
def test_a_read_only_state_folder_leaves_the_session_served_in_process(isolated_home: Path) -> None:
    user_config({"alpha": fake("alpha", "--tool", "echo")})
    state = paths.log_path().parent
    state.mkdir(parents=True, exist_ok=True)
    folder = shlex.quote(str(state))
    # The mount exists only in the shim's own namespace (and its children's).
    read_only = f'mount --bind {folder} {folder} && mount -o remount,bind,ro {folder} && exec "$0" "$@"'
    wrapper = ("unshare", "--mount", "--propagation", "private", "sh", "-c", read_only)
    with ShimHost("serve", wrapper=wrapper) as host:
        assert host.initialize()["result"]["serverInfo"]["name"] == "mcpfleet"
        wait_for_tools(host, "alpha_echo")
        answer = host.answer_skipping_notifications(host.request("tools/call", echo("served")), FLEET_WAIT_S)
        assert answer["result"]["structuredContent"] == {"message": "served"}
        host.close_stdin()
        assert host.wait_exit() == 0
    [line] = [line for line in host.stderr.splitlines() if "daemon" in line]
    assert f"{state / paths.LOG_NAME}: cannot open the daemon's log (Read-only file system)" in line
    assert "so this session runs its own servers in this process" in line
    assert ping() is None  # no daemon was left half started


def test_a_session_started_while_the_daemon_is_stopped_is_served_in_process(isolated_home: Path) -> None:
    """``--startup-timeout 0`` waits for the hello's answer as long as the daemon takes: a
    stopped daemon takes forever, unless the shim asks whether it still runs."""
    user_config({"alpha": fake("alpha", "--tool", "echo")})
    subprocess.run([str(MCPFLEET), "daemon", "start"], check=True, capture_output=True, timeout=FLEET_WAIT_S)
    daemon = daemon_pid()
    os.kill(daemon, signal.SIGSTOP)
    try:
        with ShimHost("--startup-timeout", "0", "serve") as host:
            answer = host.answer_skipping_notifications(
                host.request("initialize", INITIALIZE["params"]), STOPPED_ERROR_WAIT_S
            )
            assert answer["result"]["serverInfo"]["name"] == "mcpfleet"
            host.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
            called = host.answer_skipping_notifications(
                host.request("tools/call", echo("here")), FLEET_WAIT_S
            )
            assert called["result"]["structuredContent"] == {"message": "here"}
            host.close_stdin()
            assert host.wait_exit() == 0
    finally:
        os.kill(daemon, signal.SIGCONT)
    [line] = [line for line in host.stderr.splitlines() if "daemon" in line]
    assert f"the mcpfleet daemon (pid {daemon}) did not answer" in line
    assert "so this session runs its own servers in this process" in line
