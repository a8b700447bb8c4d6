"""A config file that stops parsing under a running ``mcpfleet daemon run``: the daemon keeps
that file's servers as it last parsed (same processes, no entry switched to another file's),
says what is wrong once in its log, in ``daemon status`` and in ``status``, and applies the
file again once it is fixed. A session is the SDK's ``Client`` on the daemon's socket.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import anyio
import pytest
from tests.integration.daemon.conftest import StartDaemon
from tests.integration.daemon.daemon_harness import ANSWER_TIMEOUT_S, MCPFLEET, control, fleet_spec
from tests.integration.daemon.test_daemon_sharing import SETTLE_S, daemon_client, lists_within, tool_names
from tests.integration.test_last_good_config import (
    CODEX,
    CURSOR,
    TYPO,
    codex_entry,
    write_codex,
    write_cursor,
)

from mcpfleet.daemon_client import paths

pytestmark = pytest.mark.anyio


def daemon_status() -> dict[str, Any]:
    with control() as link:
        result: dict[str, Any] = link.control("status")["result"]
    return result


def server_pids(status: dict[str, Any]) -> dict[str, int]:
    return {row["name"]: row["pid"] for row in status["servers"]}


async def status_until(holds: Any) -> dict[str, Any]:
    """The daemon's status once ``holds(status)`` (bounded: a config change settles first)."""
    with anyio.fail_after(SETTLE_S):
        while True:
            status = await anyio.to_thread.run_sync(daemon_status)
            if holds(status):
                return status
            await anyio.sleep(0.1)


def mcpfleet(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(MCPFLEET), *args], cwd=cwd, capture_output=True, text=True, timeout=120)


async def test_a_file_that_stops_parsing_under_a_running_daemon_stops_none_of_its_servers(
    isolated_home: Path, start_daemon: StartDaemon, tmp_path: Path
) -> None:
    codex = write_codex(isolated_home, CODEX)
    write_cursor(isolated_home, CURSOR)
    start_daemon()
    with anyio.fail_after(ANSWER_TIMEOUT_S * 3):
        async with daemon_client(fleet_spec(tmp_path)) as client:
            for tool in ("time_echo", "other_echo"):
                await lists_within(client, tool)
            before = server_pids(daemon_status())
            assert sorted(before) == ["other", "time"] and all(before.values()), before

            write_codex(isolated_home, CODEX + TYPO)
            broken = await status_until(lambda status: status.get("errors"))
            assert [error["path"] for error in broken["errors"]] == [str(codex)]
            assert "until then its servers run as it last parsed" in broken["errors"][0]["error"]
            assert server_pids(broken) == before
            assert await tool_names(client) == ["other_echo", "time_echo"]  # not Cursor's time

            # What a user types: `daemon status` and `status` say it too.
            cli_status = mcpfleet("--json", "daemon", "status", cwd=tmp_path)
            assert [error["path"] for error in json.loads(cli_status.stdout)["errors"]] == [str(codex)]
            fleet_status = mcpfleet("--json", "status", cwd=tmp_path)
            assert str(codex) in [error["path"] for error in json.loads(fleet_status.stdout)["errors"]]

            # Another file's edit re-reads every discovery: still nothing stopped, nothing said again.
            write_cursor(isolated_home, {**CURSOR, "later": ["--tool", "echo"]})
            await lists_within(client, "later_echo")
            assert {
                name: pid for name, pid in server_pids(daemon_status()).items() if name in before
            } == before

            write_codex(isolated_home, CODEX + codex_entry("broken", "echo"))
            await lists_within(client, "broken_echo")
            fixed = daemon_status()
            assert fixed["errors"] == []
            assert {name: pid for name, pid in server_pids(fixed).items() if name in before} == before
    said = [line for line in paths.log_path().read_text().splitlines() if "MCP config: " in line]
    assert len(said) == 1 and str(codex) in said[0], said
