"""``mcpfleet status``, ``tools`` and ``call`` with a real daemon running: the same documents as
in-process, printed by a process that loads no SDK; and a daemon killed while it answers
(the command then runs in-process, except a call, which is never run twice)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from tests.integration.daemon.conftest import StartDaemon
from tests.integration.daemon.daemon_harness import MCPFLEET, fake, server_processes, user_config

HEAVY_MODULES = {"mcp", "anyio", "pydantic", "httpx", "uvicorn"}


def mcpfleet(
    project: Path, *arguments: str, in_process: bool = False, importtime: bool = False
) -> subprocess.CompletedProcess[str]:
    """The console script, as a user runs it (``in_process``: with ``MCPFLEET_NO_DAEMON=1``)."""
    env = {**os.environ, **({"MCPFLEET_NO_DAEMON": "1"} if in_process else {})}
    prefix = [sys.executable, "-X", "importtime"] if importtime else []
    return subprocess.run(
        [*prefix, str(MCPFLEET), "--cwd", str(project), *arguments],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )


def imported_modules(stderr: str) -> set[str]:
    """The top-level packages ``-X importtime`` saw imported."""
    return {
        line.split("|")[-1].strip().split(".")[0]
        for line in stderr.splitlines()
        if line.startswith("import time:")
    }


def without_import_times(stderr: str) -> str:
    return "\n".join(line for line in stderr.splitlines() if not line.startswith("import time:"))


def wait_for(condition: Any, within_s: float = 60.0) -> None:
    deadline = time.monotonic() + within_s
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def test_tools_json_through_the_daemon_is_the_in_process_document_without_the_sdk(
    isolated_home: Path, start_daemon: StartDaemon, tmp_path: Path
) -> None:
    user_config(
        {
            "files": fake("files", "--tool", "echo", "--tool", "add"),
            "notes": fake("notes", "--tool", "echo"),
            # The CLI leaves an Exa server to the agent's native integration, in-process or not.
            "exa": fake("exa", "--tool", "echo"),
        }
    )
    start_daemon()
    # --startup-timeout 0: both wait for every server, so "deferred" says the same on both sides.
    through = mcpfleet(tmp_path, "--startup-timeout", "0", "--json", "tools", importtime=True)
    local = mcpfleet(tmp_path, "--startup-timeout", "0", "--json", "tools", in_process=True)
    assert through.returncode == local.returncode == 0, through.stderr + local.stderr
    document = json.loads(through.stdout)
    assert document == json.loads(local.stdout)
    assert {tool["name"] for tool in document["tools"]} == {
        "mcp_files_echo",
        "mcp_files_add",
        "mcp_notes_echo",
    }
    assert not imported_modules(through.stderr) & HEAVY_MODULES
    one_server = json.loads(mcpfleet(tmp_path, "--json", "tools", "--server", "notes").stdout)
    assert [tool["name"] for tool in one_server["tools"]] == ["mcp_notes_echo"]
    text = mcpfleet(tmp_path, "tools")
    assert text.returncode == 0 and "3 MCP tools" in text.stdout and "mcp_files_add" in text.stdout


def test_status_through_the_daemon_reports_what_in_process_does(
    isolated_home: Path, start_daemon: StartDaemon, tmp_path: Path
) -> None:
    user_config(
        {
            "files": fake("files", "--tool", "echo"),
            "broken": fake("broken", "--exit-before-handshake", "--exit-code", "3"),
        }
    )
    start_daemon()
    through = mcpfleet(tmp_path, "--json", "status", importtime=True)
    local = mcpfleet(tmp_path, "--json", "status", in_process=True)
    assert through.returncode == local.returncode == 0
    assert not imported_modules(through.stderr) & HEAVY_MODULES

    def comparable(document: dict[str, Any]) -> dict[str, Any]:
        # Timings and the gate's verdict depend on the run; the rest is the fleet's.
        kept = ("name", "status", "state", "tools", "error", "source", "era", "protocol_version")
        servers = {row["name"]: {key: row[key] for key in kept} for row in document["servers"]}
        return {"servers": servers, "errors": document["errors"]}

    assert comparable(json.loads(through.stdout)) == comparable(json.loads(local.stdout))
    assert mcpfleet(tmp_path, "--json", "status", "--strict").returncode == 1


def test_call_through_the_daemon(isolated_home: Path, start_daemon: StartDaemon, tmp_path: Path) -> None:
    user_config({"files": fake("files", "--tool", "add", "--tool", "fail")})
    start_daemon()
    added = mcpfleet(tmp_path, "call", "mcp_files_add", '{"a": 2, "b": 3}', importtime=True)
    assert added.returncode == 0, without_import_times(added.stderr)
    assert added.stdout.splitlines()[0] == "5"
    assert not imported_modules(added.stderr) & HEAVY_MODULES
    through = mcpfleet(tmp_path, "--json", "call", "files/add", '{"a": 2, "b": 3}')
    local = mcpfleet(tmp_path, "--json", "call", "files/add", '{"a": 2, "b": 3}', in_process=True)
    assert json.loads(through.stdout) == json.loads(local.stdout)
    failed = mcpfleet(tmp_path, "call", "mcp_files_fail", '{"message": "no luck"}')
    assert failed.returncode == 1 and "no luck" in failed.stderr
    missing, missing_local = (
        mcpfleet(tmp_path, "call", "mcp_files_nope"),
        mcpfleet(tmp_path, "call", "mcp_files_nope", in_process=True),
    )
    assert missing.returncode == missing_local.returncode == 1
    assert missing.stderr == missing_local.stderr
    assert "no tool named 'mcp_files_nope'" in missing.stderr


def test_a_daemon_killed_while_it_answers_tools_leaves_the_command_to_this_process(
    isolated_home: Path, start_daemon: StartDaemon, tmp_path: Path
) -> None:
    user_config({"slow": fake("slow", "--tool", "echo", "--delay-start", "3")})
    daemon = start_daemon()
    command = subprocess.Popen(
        [str(MCPFLEET), "--cwd", str(tmp_path), "-v", "--startup-timeout", "0", "--json", "tools"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    # The daemon is starting the slow server for this very request: kill it now.
    wait_for(lambda: server_processes(isolated_home, "slow"))
    daemon.signal(signal.SIGKILL)
    stdout, stderr = command.communicate(timeout=120)
    assert command.returncode == 0, stderr
    assert [tool["name"] for tool in json.loads(stdout)["tools"]] == ["mcp_slow_echo"]
    assert "the daemon closed the connection during 'tools': serving in this process" in stderr


def test_a_call_the_daemon_died_during_is_not_run_again(
    isolated_home: Path, start_daemon: StartDaemon, tmp_path: Path
) -> None:
    requests = tmp_path / "requests.log"
    user_config({"files": fake("files", "--tool", "sleep", "--request-log", str(requests))})
    daemon = start_daemon()
    command = subprocess.Popen(
        [str(MCPFLEET), "--cwd", str(tmp_path), "call", "mcp_files_sleep", '{"seconds": 60}'],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    wait_for(lambda: requests.exists() and "tools/call" in requests.read_text())
    daemon.signal(signal.SIGKILL)
    stdout, stderr = command.communicate(timeout=60)
    assert command.returncode == 1
    assert stdout == ""
    assert "the mcpfleet daemon stopped while the call ran, so the tool may or may not have run" in stderr
    assert requests.read_text().splitlines().count("tools/call") == 1


def test_unknown_names_through_the_daemon_read_as_in_process(
    isolated_home: Path, start_daemon: StartDaemon, tmp_path: Path
) -> None:
    user_config({"files": fake("files", "--tool", "add")})
    start_daemon()
    for arguments in (["tools", "--server", "fils"], ["call", "nosrv/add"], ["call", "files/ad"]):
        through, local = mcpfleet(tmp_path, *arguments), mcpfleet(tmp_path, *arguments, in_process=True)
        assert (through.returncode, through.stderr) == (local.returncode, local.stderr), arguments
    tools = mcpfleet(tmp_path, "tools", "--server", "fils", "--strict")
    assert tools.returncode == 2
    assert "no server named 'fils'; did you mean 'files'?" in tools.stderr
    call = mcpfleet(tmp_path, "call", "files/ad")
    assert call.returncode == 1 and "on server 'files'; did you mean 'files/add'?" in call.stderr
