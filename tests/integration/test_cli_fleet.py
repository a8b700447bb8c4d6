"""The fleet commands as a user runs them: ``status``, ``tools``, ``call``, ``shell``,
``demo``, with their JSON shapes and exit codes (the CLI contract of DESIGN.md)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from tests.conftest import PYTHON
from tests.integration.user_fleet import fake_entry, write_user_config

CLI = [sys.executable, "-m", "mcpfleet.cli.main"]


def run(
    project: Path, *arguments: str, stdin: str | None = None, timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*CLI, "--cwd", str(project), *arguments],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=timeout,
        env=os.environ.copy(),
    )


@pytest.fixture
def fleet() -> None:
    write_user_config(
        {
            "files": fake_entry("files", "--tool", "echo", "--tool", "add"),
            "broken": fake_entry(
                "broken", "--exit-before-handshake", "--exit-code", "3", "--stderr-lines", "1"
            ),
        }
    )


@pytest.mark.usefixtures("fleet")
def test_status_json_reports_every_server_and_exits_zero(tmp_path: Path) -> None:
    completed = run(tmp_path, "--json", "status")
    assert completed.returncode == 0, completed.stderr
    report = json.loads(completed.stdout)
    rows = {row["name"]: row for row in report["servers"]}
    assert rows["files"]["status"] == "connected"
    assert rows["files"]["tools"] == 2
    assert rows["files"]["error"] is None
    assert rows["files"]["source"]["provider"] == "mcpfleet"
    assert rows["files"]["source"]["level"] == "user"
    assert set(rows["files"]["timings_ms"]) >= {"spawn", "handshake", "list", "total"}
    assert rows["broken"]["status"] == "failed"
    assert "exited with code 3" in rows["broken"]["error"]
    assert report["errors"] == []


@pytest.mark.usefixtures("fleet")
def test_status_strict_fails_when_a_server_failed(tmp_path: Path) -> None:
    assert run(tmp_path, "--json", "status", "--strict").returncode == 1


def test_status_waits_for_a_server_the_gate_answered_from_the_cache(tmp_path: Path) -> None:
    # One config, two outcomes: the switch file makes the same server exit at start, so
    # the cache entry written by the first run still matches in the second.
    switch = tmp_path / "exit-at-start"
    write_user_config(
        {
            "flip": fake_entry(
                "flip",
                "--tool",
                "echo",
                "--delay-start",
                "1",
                "--exit-if-exists",
                str(switch),
                "--exit-code",
                "3",
            )
        }
    )
    project = tmp_path / "project"
    project.mkdir()
    warm = run(project, "--json", "status", "--strict")
    assert warm.returncode == 0, warm.stderr
    [row] = json.loads(warm.stdout)["servers"]
    assert (row["status"], row["at_gate"], row["tools"]) == ("connected", "waited", 1)

    switch.touch()
    completed = run(project, "--json", "status", "--strict")
    assert completed.returncode == 1, completed.stdout
    [row] = json.loads(completed.stdout)["servers"]
    assert (row["status"], row["at_gate"], row["tools"]) == ("failed", "deferred", 0)
    assert "exited with code 3" in row["error"]


def test_a_disabled_server_is_shown_as_disabled_never_as_an_error(tmp_path: Path) -> None:
    write_user_config(
        {"files": fake_entry("files", "--tool", "echo"), "off": {**fake_entry("off"), "enabled": False}}
    )
    status = run(tmp_path, "--json", "status", "--strict")
    assert status.returncode == 0, status.stdout
    rows = {row["name"]: row for row in json.loads(status.stdout)["servers"]}
    assert (rows["off"]["status"], rows["off"]["error"], rows["off"]["at_gate"]) == ("disabled", None, None)
    assert "off" not in status.stderr
    tools = run(tmp_path, "--json", "tools", "--strict")
    assert tools.returncode == 0, tools.stdout
    assert json.loads(tools.stdout)["errors"] == []


@pytest.mark.usefixtures("fleet")
def test_tools_json_lists_what_an_agent_sees(tmp_path: Path) -> None:
    completed = run(tmp_path, "--json", "tools")
    assert completed.returncode == 0, completed.stderr
    report = json.loads(completed.stdout)
    assert [tool["name"] for tool in report["tools"]] == ["mcp_files_add", "mcp_files_echo"]
    echo = report["tools"][1]
    assert echo["server"] == "files"
    assert echo["mcp_name"] == "echo"
    assert echo["deferred"] is False
    assert echo["input_schema"]["properties"]["message"]["type"] == "string"
    assert [error["path"] for error in report["errors"]] == ["mcp:broken"]
    only = json.loads(run(tmp_path, "--json", "tools", "--server", "files").stdout)
    assert [tool["name"] for tool in only["tools"]] == ["mcp_files_add", "mcp_files_echo"]
    assert only["errors"] == []  # "broken" was not started


@pytest.mark.usefixtures("fleet")
def test_call_prints_the_result_and_exit_codes(tmp_path: Path) -> None:
    completed = run(tmp_path, "--json", "call", "mcp_files_add", '{"a": 2, "b": 40}')
    assert completed.returncode == 0, completed.stderr
    result = json.loads(completed.stdout)
    assert result["is_error"] is False
    assert "42" in result["text"]
    assert result["structured"] == {"sum": 42}
    assert result["content"][0]["type"] == "text"

    plain = run(tmp_path, "call", "files/echo", '{"message": "hi there"}')
    assert plain.returncode == 0
    assert "hi there" in plain.stdout

    bad_json = run(tmp_path, "call", "mcp_files_add", "{not json")
    assert bad_json.returncode == 2
    assert bad_json.stderr.count("\n") == 1 and "JSON" in bad_json.stderr

    missing = run(tmp_path, "call", "mcp_files_nothing")
    assert missing.returncode == 1
    assert "no tool named 'mcp_files_nothing'" in missing.stderr


def test_call_of_a_failing_tool_exits_one(tmp_path: Path) -> None:
    write_user_config({"box": fake_entry("box", "--tool", "fail")})
    completed = run(tmp_path, "--json", "call", "mcp_box_fail", '{"message": "it broke"}')
    assert completed.returncode == 1
    assert json.loads(completed.stdout)["is_error"] is True


def test_an_explicit_config_that_is_missing_is_a_usage_error(tmp_path: Path) -> None:
    completed = run(tmp_path, "--config", str(tmp_path / "absent.json"), "status")
    assert completed.returncode == 2
    assert "absent.json" in completed.stderr
    assert completed.stdout == ""


@pytest.mark.usefixtures("fleet")
def test_shell_runs_a_script_from_stdin(tmp_path: Path) -> None:
    script = "\n".join(
        [
            "/tools",
            '/call mcp_files_echo {"message": "scripted"}',
            "/call mcp_files_echo {broken",
            "/mcp list",
            "/mcp frobnicate",
            "/nonsense",
            "/exit",
            "/tools",  # never reached
        ]
    )
    completed = run(tmp_path, "shell", stdin=script + "\n")
    assert completed.returncode == 0, completed.stderr
    out = completed.stdout
    assert "mcp_files_echo" in out
    assert "scripted" in out
    assert "● files: connected, 2 tools" in out
    assert "Unknown subcommand: frobnicate" in out
    assert "unknown command '/nonsense'" in completed.stderr
    assert "arguments are not valid JSON" in completed.stderr
    assert out.count("mcp_files_add") == 1  # the /tools after /exit did not run


@pytest.mark.parametrize("checkout", ["here", "deep"])
def test_demo_runs_the_whole_lifecycle(checkout: str, tmp_path: Path) -> None:
    python = PYTHON
    if checkout == "deep":
        # The same interpreter reached through a long path, as in a CI clone deep in a tree:
        # the demo's shortened lines must still say why the failing server failed.
        virtualenv = tmp_path / ("deeply-nested-checkout-" * 4) / ".venv"
        virtualenv.parent.mkdir(parents=True)
        virtualenv.symlink_to(sys.prefix, target_is_directory=True)
        python = str(virtualenv / Path(PYTHON).relative_to(sys.prefix))
    completed = subprocess.run(
        [python, "-m", "mcpfleet.cli.main", "demo"],
        capture_output=True,
        text=True,
        timeout=120,
        env=os.environ.copy(),
    )
    assert completed.returncode == 0, completed.stdout + completed.stderr
    out = completed.stdout
    assert "1. cold start" in out and "2. warm start" in out
    assert "(deferred, from cache)" in out
    assert "exited with code 3" in out
    assert "MCP reload complete" in out
    assert "server processes left: none" in out
    # The second act: two host sessions through `mcpfleet serve` sharing the daemon's servers.
    assert "5. two host sessions through `mcpfleet serve`" in out
    assert "notes: one process" in out and "for 2 sessions" in out
    assert "both sessions were told tools/list_changed" in out
    assert "6. mcpfleet daemon status" in out and "2 sessions" in out
    assert "stopped; processes left: none" in out
    assert "demo complete" in out


def test_import_and_help_stay_light() -> None:
    probe = (
        "import sys, mcpfleet, mcpfleet.cli.main as m; "
        "m.build_parser(); "
        "heavy = [n for n in ('mcp', 'mcp_types', 'pydantic', 'httpx2', 'rich') if n in sys.modules]; "
        "print(heavy)"
    )
    completed = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert completed.stdout.strip() == "[]"
