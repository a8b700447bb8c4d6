"""``open_agent_session(daemon=True)`` with a real daemon: tools listed and called at once when
the daemon is warm, a list change followed, a call cancelled at its backend, a daemon started
when none runs and replaced when it is killed, and a session the daemon refuses served by a
fleet of this process."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import anyio
import pytest
from tests.integration.daemon.conftest import StartDaemon
from tests.integration.daemon.daemon_harness import fake, ping, server_processes, user_config

from mcpfleet import open_agent_session
from mcpfleet.agent.remote import DaemonTool

pytestmark = pytest.mark.anyio

WARM_BOUND_S = 5.0
"""Generous: a warm daemon answers in milliseconds; this only catches a daemon far too slow (the
server's pid, compared, is what catches a fleet started anew)."""


async def wait_until(condition: Callable[[], bool], within_s: float = 60.0) -> None:
    with anyio.fail_after(within_s):
        while True:
            if condition():
                return
            await anyio.sleep(0.05)


async def test_a_warm_daemon_gives_a_session_its_tools_and_answers_its_calls(
    isolated_home: Path, start_daemon: StartDaemon, tmp_path: Path
) -> None:
    user_config({"files": fake("files", "--tool", "echo", "--tool", "add")})
    start_daemon()
    async with open_agent_session(tmp_path, daemon=True) as warming:
        assert {tool.name for tool in warming.tools} == {"mcp_files_echo", "mcp_files_add"}
    [warm_server] = server_processes(isolated_home, "files")
    started = time.monotonic()
    async with open_agent_session(tmp_path, daemon=True) as session:
        listed = time.monotonic() - started
        assert all(isinstance(tool, DaemonTool) for tool in session.tools)
        result = await session.call_tool("mcp_files_add", {"a": 20, "b": 22})
        answered = time.monotonic() - started
        # The server the first session warmed answered: nothing was started anew.
        assert server_processes(isolated_home, "files") == [warm_server]
    assert (result.is_error, result.structured) == (False, {"sum": 42})
    assert result.details == {"server": "files", "tool": "add", "provider": None}
    assert answered < WARM_BOUND_S, f"listed after {listed:.3f} s, answered after {answered:.3f} s"


async def test_a_change_of_the_fleets_tools_reaches_the_session(
    isolated_home: Path, start_daemon: StartDaemon, tmp_path: Path
) -> None:
    # Its tools grow while it runs: pinning would withhold the added one (tests/integration/test_pinning.py).
    user_config({"files": {**fake("files", "--tool", "echo", "--list-changed-after", "1"), "pinning": "off"}})
    start_daemon()
    async with open_agent_session(tmp_path, daemon=True) as session:
        assert "mcp_files_late_tool" not in {tool.name for tool in session.tools}
        await wait_until(lambda: "mcp_files_late_tool" in {tool.name for tool in session.tools})
        result = await session.call_tool("mcp_files_late_tool", {"message": "new"})
    assert not result.is_error, result.text


async def test_a_call_given_up_on_is_cancelled_at_its_backend(
    isolated_home: Path, start_daemon: StartDaemon, tmp_path: Path
) -> None:
    cancelled = tmp_path / "cancelled.log"
    user_config({"files": fake("files", "--tool", "sleep", "--cancel-log", str(cancelled))})
    start_daemon()
    async with open_agent_session(tmp_path, daemon=True) as session:
        tool = session.get_tool("mcp_files_sleep")
        assert isinstance(tool, DaemonTool)
        result = await tool.execute({"seconds": 60}, timeout_ms=1000)
        assert result.is_error
        assert "files/sleep did not answer within 1000 ms" in result.text
        await wait_until(lambda: cancelled.exists() and "cancelled" in cancelled.read_text())
        # The connection is still good after the cancelled call.
        quick = await tool.execute({"seconds": 0})
    assert not quick.is_error, quick.text


async def test_a_daemon_is_started_when_none_runs_and_replaced_when_it_is_killed(
    isolated_home: Path, tmp_path: Path
) -> None:
    user_config({"files": fake("files", "--tool", "echo")})
    assert ping() is None
    async with open_agent_session(tmp_path, daemon=True) as session:
        first = ping()
        assert first is not None
        assert [tool.name for tool in session.tools] == ["mcp_files_echo"]
        os.kill(int(first["pid"]), signal.SIGKILL)
        # The session notices, starts a new daemon and watches and lists again there.
        await wait_until(lambda: (found := ping()) is not None and found["pid"] != first["pid"])
        result = await session.call_tool("mcp_files_echo", {"message": "again"})
        assert not result.is_error, result.text
        assert [tool.name for tool in session.tools] == ["mcp_files_echo"]


def test_a_session_the_daemon_refuses_runs_its_fleet_in_this_process(
    isolated_home: Path, start_daemon: StartDaemon, tmp_path: Path
) -> None:
    user_config({"files": fake("files", "--tool", "echo")})
    start_daemon()
    # The daemon reads the config files its environment names; this agent names others. It
    # runs in a process of its own: the fleet it then starts ends with it, watchdog included.
    agent = f"""
import anyio, logging
from mcpfleet import open_agent_session
logging.basicConfig(level=logging.WARNING, format="%(name)s: %(message)s")
async def main():
    async with open_agent_session({str(tmp_path)!r}, daemon=True) as session:
        status = session.mcp_manager.get_connection_status("files")
        result = await session.call_tool("mcp_files_echo", {{"message": "local"}})
        print(status, result.is_error)
anyio.run(main)
"""
    env = {**os.environ, "CODEX_HOME": str(tmp_path / "codex")}
    completed = subprocess.run(
        [sys.executable, "-c", agent], capture_output=True, text=True, timeout=120, env=env
    )
    assert completed.returncode == 0, completed.stderr
    assert completed.stdout.split() == ["connected", "False"]
    assert "refused the connection (environment-mismatch)" in completed.stderr
    assert "its MCP servers run in this process" in completed.stderr
