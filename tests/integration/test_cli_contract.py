"""The CLI contract's edges: a closed pipe, global ``--strict``, ``demo --json``, exit codes
of unknown names and bad options, and a transport nobody speaks."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from tests.conftest import PYTHON
from tests.servers.fixtures import FAKE_SERVER

from mcpfleet.client.opening import connect_to_server
from mcpfleet.config.model import ServerConfig
from mcpfleet.errors import ConnectError
from mcpfleet.fleet.manager import MCPManager
from mcpfleet.paths import user_config_file

CLI = [sys.executable, "-m", "mcpfleet.cli.main"]


def run(project: Path, *arguments: str, timeout: float = 90) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*CLI, "--cwd", str(project), *arguments],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=os.environ.copy(),
        check=False,
    )


@pytest.fixture
def many_servers(tmp_path: Path) -> Path:
    """A project whose ``config`` output is far larger than a pipe's buffer."""
    config_file = tmp_path / ".mcpfleet" / "mcp.json"
    config_file.parent.mkdir()
    servers = {f"server_{index}": {"command": "server-command"} for index in range(2000)}
    config_file.write_text(json.dumps({"mcpServers": servers}))
    return tmp_path


@pytest.mark.parametrize("json_output", [True, False], ids=["json", "table"])
def test_a_reader_that_stops_early_ends_the_output_quietly(many_servers: Path, json_output: bool) -> None:
    options = ["--json"] if json_output else []
    process = subprocess.Popen(
        [*CLI, "--cwd", str(many_servers), *options, "config"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=os.environ.copy(),
    )
    assert process.stdout is not None and process.stderr is not None
    first_lines = [process.stdout.readline() for _ in range(3)]  # what `| head -3` reads
    process.stdout.close()
    stderr = process.stderr.read().decode()
    # 1 when the failed write is seen (rich's own choice too); a write the OS cut short may
    # go unnoticed and end in 0. Either way: no traceback, nothing on stderr.
    assert process.wait(timeout=60) in (0, 1)
    assert all(first_lines)
    assert stderr == ""


def test_strict_is_a_global_option_and_a_command_option(tmp_path: Path) -> None:
    (tmp_path / ".mcp.json").write_text("{broken")
    assert run(tmp_path, "--strict", "config").returncode == 1
    assert run(tmp_path, "config", "--strict").returncode == 1
    assert run(tmp_path, "config").returncode == 0

    path = user_config_file()
    path.parent.mkdir(parents=True, exist_ok=True)
    broken = {"command": PYTHON, "args": [str(FAKE_SERVER), "--exit-before-handshake", "--exit-code", "3"]}
    path.write_text(json.dumps({"mcpServers": {"broken": broken}}))
    (tmp_path / ".mcp.json").unlink()
    assert run(tmp_path, "--strict", "--json", "status").returncode == 1
    assert run(tmp_path, "--json", "--strict", "tools").returncode == 1
    assert run(tmp_path, "--json", "tools").returncode == 0


def test_demo_emits_a_json_report() -> None:
    completed = subprocess.run(
        [*CLI, "--json", "demo"], capture_output=True, text=True, timeout=180, env=os.environ.copy()
    )
    assert completed.returncode == 0, completed.stdout + completed.stderr
    report = json.loads(completed.stdout)  # nothing but the report on stdout
    assert report["ok"] is True
    assert [step["step"] for step in report["steps"]] == [
        "cold start",
        "warm start",
        "reload",
        "shutdown",
        "host sessions",
    ]
    cold, warm, reload, shutdown, hosts = report["steps"]
    servers = {server["name"]: server for server in cold["servers"]}
    assert servers["notes"]["status"] == "connected"
    assert servers["failing"]["status"] == "failed" and "exited with code 3" in servers["failing"]["error"]
    assert cold["call"]["is_error"] is False and "Saved note" in cold["call"]["text"]
    assert any(server["deferred"] for server in warm["servers"])
    assert "MCP reload complete" in reload["reload"]
    assert cold["processes_left"] == [] and shutdown["processes_left"] == []
    # The second act: two hosts on `mcpfleet serve`, one daemon, one process per server for both.
    assert hosts["editor-a"]["tools"] == hosts["editor-b"]["tools"] == 6
    assert hosts["sessions"] == 2
    assert {server["name"] for server in hosts["servers"]} == {"notes", "slow"}
    assert all(server["sessions"] == 2 for server in hosts["servers"])
    late = hosts["late_server"]
    assert late["announced_to"] == ["editor-a", "editor-b"]
    assert len(late["new_tools"]) == 2  # the late server's clock and dice, under the gateway's names
    assert late["call"]["tool"] in late["new_tools"] and late["call"]["is_error"] is False
    assert hosts["daemon_stop"]["exit_code"] == 0 and hosts["processes_left"] == []


@pytest.mark.parametrize(
    "command",
    [
        ["approve", "ghost"],
        ["revoke", "ghost"],
        ["enable", "ghost"],
        ["disable", "ghost"],
        ["remove", "ghost"],
        ["remove", "--project", "ghost"],
        ["login", "ghost"],
        ["logout", "ghost"],
    ],
    ids=" ".join,
)
def test_an_unknown_name_is_a_usage_error(tmp_path: Path, command: list[str]) -> None:
    completed = run(tmp_path, *command)
    assert completed.returncode == 2
    assert completed.stderr.count("\n") == 1 and "ghost" in completed.stderr


@pytest.mark.parametrize("value", ["-5", "soon"])
def test_a_bad_startup_timeout_is_a_usage_error(tmp_path: Path, value: str) -> None:
    completed = run(tmp_path, "--startup-timeout", value, "config")
    assert completed.returncode == 2
    assert "--startup-timeout" in completed.stderr
    assert completed.stdout == ""


@pytest.mark.anyio
async def test_an_unknown_transport_is_named_as_such(tmp_path: Path) -> None:
    config = ServerConfig(name="odd", transport="ftp", url="ftp://files.example/")  # type: ignore[arg-type]
    async with MCPManager(tmp_path, cache=None) as manager:
        result = await manager.connect_servers({"odd": config}, {})
    assert (
        result.errors["odd"] == 'MCP server "odd" has unknown transport \'ftp\': use "stdio", "http" or "sse"'
    )
    with pytest.raises(ConnectError, match="unknown transport 'ftp'"):
        async with connect_to_server("odd", config, cwd=tmp_path):
            pass


def test_verbose_shows_what_caused_an_error_and_the_plain_message_stays_one_line(tmp_path: Path) -> None:
    broken = tmp_path / "broken.json"
    broken.write_text("{ not json")
    plain = run(tmp_path, "--config", str(broken), "config")
    assert plain.returncode == 2
    assert plain.stderr.count("\n") == 1
    assert plain.stderr.startswith(f"mcpfleet: {broken}: invalid JSON")
    verbose = run(tmp_path, "-v", "--config", str(broken), "config")
    assert verbose.returncode == 2
    first, *causes = verbose.stderr.splitlines()
    assert first == plain.stderr.strip()
    assert [line for line in causes if "caused by JSONDecodeError: Expecting property name" in line], causes
