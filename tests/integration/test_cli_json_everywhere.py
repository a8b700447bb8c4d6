"""``--json`` honoured by every command of the CLI contract, after the command as before it:
stdout holds one JSON document (JSON Lines for a stream: ``shell``, ``daemon logs -f``), a
failure included (``{"error": …}``, the exit code unchanged), and nothing else."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tests.conftest import PYTHON
from tests.servers.fixtures import FAKE_SERVER

from mcpfleet.paths import user_config_file

CLI = [sys.executable, "-m", "mcpfleet.cli.main"]


@pytest.fixture(autouse=True)
def fleet(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """One fast server, and a daemon runtime folder of the test's own (no daemon runs there)."""
    path = user_config_file()
    path.parent.mkdir(parents=True, exist_ok=True)
    entry = {
        "command": PYTHON,
        "args": [str(FAKE_SERVER), "--name", "files", "--tool", "echo", "--tool", "add"],
    }
    path.write_text(json.dumps({"mcpServers": {"files": entry}}))
    (Path.home() / ".cursor").mkdir()  # a host set up here, for `hosts install`
    with tempfile.TemporaryDirectory(prefix="mf-", dir="/tmp") as runtime:
        monkeypatch.setenv("MCPFLEET_RUNTIME_DIR", runtime)
        yield


def run(project: Path, arguments: list[str], stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*CLI, *arguments],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=120,
        env=os.environ.copy(),
        cwd=project,
        check=False,
    )


# (command line with --json after the command, exit code, what stdout holds: a key of the
# document, or "error: <words of the message>")
CASES: list[tuple[list[str], int, str]] = [
    (["config", "--json"], 0, "servers"),
    (["status", "--json"], 0, "servers"),
    (["tools", "--json"], 0, "tools"),
    (["tools", "--server", "files", "--json"], 0, "tools"),
    (["tools", "--server", "nosuch", "--json"], 2, "error: no server named 'nosuch'"),
    (["tools", "--search", "echo a message", "--json"], 0, "tools"),
    (["tools", "--profile", "nosuch", "--json"], 2, "error: unknown profile"),
    (["call", "files/echo", '{"message": "hi"}', "--json"], 0, "is_error"),
    (["call", "files/nosuch", "{}", "--json"], 1, "error: no tool named 'files/nosuch' on server 'files'"),
    (["call", "nosrv/read", "{}", "--json"], 1, "error: no server named 'nosrv'"),
    (["call", "files/echo", "not json", "--json"], 2, "error: arguments are not valid JSON"),
    (["approve", "nosuch", "--json"], 2, "unknown"),
    (["revoke", "nosuch", "--json"], 2, "unknown"),
    (["add", "more", "--command", PYTHON, "--json"], 0, "added"),
    (["remove", "nosuch", "--json"], 2, "error: no server named"),
    (["disable", "files", "--json"], 0, "disabled"),
    (["enable", "nosuch", "--json"], 2, "error: no server named"),
    (["login", "nosuch", "--json"], 2, "error: No MCP server named"),
    (["logout", "nosuch", "--json"], 2, "error: No MCP server named"),
    (["serve", "--profile", "nosuch", "--no-daemon", "--json"], 2, "error: unknown profile"),
    (["hosts", "--json"], 0, "hosts"),
    (["hosts", "install", "cursor", "--json"], 0, "added"),
    (["hosts", "uninstall", "cursor", "--json"], 0, "changed"),
    (["daemon", "status", "--json"], 0, "running"),
    (["daemon", "stop", "--json"], 0, "running"),
    (["daemon", "logs", "--json"], 1, "error: no daemon log yet"),
    (["audit", "--json"], 2, "error: no team file in"),
    (["audit", "--since", "soon", "--json"], 2, "error: argument --since: 'soon' is not an ISO 8601 time"),
    (["status", "--no-such-option", "--json"], 2, "error: unrecognized arguments: --no-such-option"),
    (["tools", "--startup-timeout", "soon", "--json"], 2, "error: argument --startup-timeout"),
    (["--config", "/dev/null", "status", "--json"], 2, "error: --config /dev/null: not a regular file"),
]


def single_document(stdout: str) -> dict[str, Any]:
    document = json.loads(stdout)  # one document and nothing else, or this raises
    assert isinstance(document, dict)
    return document


@pytest.mark.parametrize(
    ("arguments", "exit_code", "holds"), CASES, ids=lambda v: " ".join(v) if isinstance(v, list) else str(v)
)
def test_json_after_the_command_is_one_document_whatever_happens(
    tmp_path: Path, arguments: list[str], exit_code: int, holds: str
) -> None:
    completed = run(tmp_path, arguments)
    assert completed.returncode == exit_code, (completed.stdout, completed.stderr)
    document = single_document(completed.stdout)
    if holds.startswith("error: "):
        assert holds.removeprefix("error: ") in document["error"]
        # The same words on stderr, for a person watching.
        assert document["error"] in " ".join(completed.stderr.split())
    else:
        assert holds in document, document


@pytest.mark.parametrize(
    "arguments",
    [["--json", "daemon", "status"], ["daemon", "--json", "status"], ["daemon", "status", "--json"]],
)
def test_json_before_between_or_after_an_action_means_the_same(tmp_path: Path, arguments: list[str]) -> None:
    completed = run(tmp_path, arguments)
    assert completed.returncode == 0, completed.stderr
    assert single_document(completed.stdout)["running"] is False


def test_no_command_under_json_is_a_json_error(tmp_path: Path) -> None:
    completed = run(tmp_path, ["--json"])
    assert completed.returncode == 2
    assert "no command given" in single_document(completed.stdout)["error"]


def test_daemon_logs_json_holds_the_last_lines(tmp_path: Path) -> None:
    from mcpfleet.daemon_client import paths

    log = paths.log_path()
    log.parent.mkdir(parents=True, exist_ok=True)
    log.write_text("first line\nsecond line\nthird line\n")
    completed = run(tmp_path, ["daemon", "logs", "-n", "2", "--json"])
    assert completed.returncode == 0, completed.stderr
    assert single_document(completed.stdout) == {"log": str(log), "lines": ["second line", "third line"]}


def test_the_shell_under_json_answers_one_document_a_line(tmp_path: Path) -> None:
    script = '/tools\n/call files/add {"a": 2, "b": 3}\n/call files/nope\n/bogus\n/call files/add {oops\n'
    completed = run(tmp_path, ["shell", "--json"], stdin=script)
    assert completed.returncode == 0, completed.stderr
    banner, tools, added, missing, bogus, bad_json = (
        json.loads(line) for line in completed.stdout.splitlines()
    )
    assert (banner["tools"], banner["servers"]) == (2, 1)
    assert [tool["name"] for tool in tools["tools"]] == ["mcp_files_add", "mcp_files_echo"]
    assert (added["is_error"], added["structured"]) == (False, {"sum": 5})
    assert "no tool named 'files/nope'" in missing["error"]
    assert "unknown command '/bogus'" in bogus["error"]
    assert "arguments are not valid JSON" in bad_json["error"]
