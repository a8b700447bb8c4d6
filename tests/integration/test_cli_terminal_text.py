"""Text from servers, config files and paths reaches the terminal as text (B13).

A real server (``tests/servers/hostile_text_server.py``) puts rich markup and escape
sequences in its tool descriptions, stderr, results, resources and prompts; the CLI runs
as a user runs it, in a subprocess. Every command must exit as usual, show the markup
literally and the control characters as visible escapes, and keep the exact strings in
``--json`` output.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from tests.conftest import PYTHON, SERVERS_DIR

from mcpfleet.paths import user_config_file

CLI = [sys.executable, "-m", "mcpfleet.cli.main"]
HOSTILE_SERVER = SERVERS_DIR / "hostile_text_server.py"
HOSTILE_TEXT = (
    "[/bogus] [link=http://x]y[/link] \x1b]0;pwned\x07 \x1b]52;c;aGk=\x07 \x1b[2J \u202eexe.txt \x9b31m"
)
"""Markup that crashes rich (``[/bogus]``) or makes a hyperlink, then a window-title change,
a clipboard write (OSC 52), a screen clear, a right-to-left override and a C1 CSI."""
HOSTILE_SHOWN = [
    "[/bogus]",
    "[link=http://x]y[/link]",
    "\\x1b]0;pwned\\x07",
    "\\x1b]52;c;aGk=\\x07",
    "\\x1b[2J",
    "\\u202eexe.txt",
    "\\x9b31m",
]
"""How ``HOSTILE_TEXT`` must look on the terminal: the markup as typed, controls as escapes."""
RAW_CONTROLS = ("\x1b", "\x07", "\x9b", "\u202e")


def hostile_entry(name: str, *flags: str) -> dict[str, Any]:
    return {"command": PYTHON, "args": [str(HOSTILE_SERVER), "--text", HOSTILE_TEXT, "--name", name, *flags]}


def run(project: Path, *arguments: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*CLI, "--cwd", str(project), "--no-cache", *arguments],
        input=stdin,
        capture_output=True,
        text=True,
        encoding="utf-8",
        timeout=90,
        # Wide enough that rich never wraps a table cell: each hostile piece stays on one line.
        env={**os.environ, "COLUMNS": "1000"},
    )


def assert_no_raw_control(output: str) -> None:
    for control in RAW_CONTROLS:
        assert control not in output, f"raw {control!r} reached the terminal:\n{output}"


def assert_shown_as_text(output: str) -> None:
    assert_no_raw_control(output)
    for shown in HOSTILE_SHOWN:
        assert shown in output, f"{shown!r} is not visible in:\n{output}"


@pytest.fixture
def hostile_fleet() -> None:
    path = user_config_file()
    path.parent.mkdir(parents=True, exist_ok=True)
    servers = {
        "evil": hostile_entry("evil", "--tool", "echo"),
        "dead": hostile_entry("dead", "--exit-before-handshake", "--exit-code", "3"),
    }
    path.write_text(json.dumps({"mcpServers": servers}))


@pytest.mark.usefixtures("hostile_fleet")
def test_tools_shows_hostile_descriptions_as_text(tmp_path: Path) -> None:
    completed = run(tmp_path, "tools")
    assert completed.returncode == 0, completed.stderr
    assert "Traceback" not in completed.stderr
    assert "mcp_evil_hostile" in completed.stdout
    assert_shown_as_text(completed.stdout)
    # The failed server's error (with its stderr) goes to stderr, shown the same way.
    assert_shown_as_text(completed.stderr)


@pytest.mark.usefixtures("hostile_fleet")
def test_status_shows_hostile_stderr_as_text(tmp_path: Path) -> None:
    completed = run(tmp_path, "status")
    assert completed.returncode == 0, completed.stderr
    assert "Traceback" not in completed.stderr
    assert "dead" in completed.stdout and "failed" in completed.stdout
    assert_shown_as_text(completed.stdout)
    assert_no_raw_control(completed.stderr)


@pytest.mark.usefixtures("hostile_fleet")
def test_call_shows_a_hostile_result_as_text(tmp_path: Path) -> None:
    completed = run(tmp_path, "call", "mcp_evil_hostile")
    assert completed.returncode == 0, completed.stderr
    assert completed.stdout.startswith("result [/bogus]")
    assert_shown_as_text(completed.stdout)
    assert "dead" not in completed.stderr  # only the server called is started


@pytest.mark.usefixtures("hostile_fleet")
def test_shell_shows_hostile_text_as_text(tmp_path: Path) -> None:
    script = ["/tools", "/call mcp_evil_hostile", "/mcp list", "/mcp resources", "/mcp prompts", "/exit"]
    completed = run(tmp_path, "shell", stdin="\n".join(script) + "\n")
    assert completed.returncode == 0, completed.stderr
    out = completed.stdout
    assert "result [/bogus]" in out and "readme [/bogus]" in out and "/evil:greet[/bogus]" in out
    assert "✗ dead: failed" in out
    assert_shown_as_text(out)
    assert_shown_as_text(completed.stderr)


@pytest.mark.usefixtures("hostile_fleet")
def test_json_output_keeps_the_exact_strings(tmp_path: Path) -> None:
    tools = run(tmp_path, "--json", "tools")
    assert tools.returncode == 0, tools.stderr
    for control in RAW_CONTROLS:
        assert control not in tools.stdout  # JSON escapes stand for them
    described = {tool["name"]: tool["description"] for tool in json.loads(tools.stdout)["tools"]}
    assert described["mcp_evil_echo"] == f"Echo a message back {HOSTILE_TEXT}"

    called = run(tmp_path, "--json", "call", "mcp_evil_hostile")
    assert called.returncode == 0, called.stderr
    assert json.loads(called.stdout)["text"] == f"result {HOSTILE_TEXT}"

    status = run(tmp_path, "--json", "status")
    rows = {row["name"]: row for row in json.loads(status.stdout)["servers"]}
    assert f"stderr {HOSTILE_TEXT}" in rows["dead"]["error"]


def test_config_shows_a_hostile_project_path_as_text(tmp_path: Path) -> None:
    project = tmp_path / "a[" / "b] \x1b]0;pwned\x07 [link=x]y[/link]"
    project.mkdir(parents=True)
    (project / ".mcp.json").write_text(json.dumps({"mcpServers": {"proj": {"command": "x"}}}))
    completed = run(project, "config")
    assert completed.returncode == 0, completed.stderr
    assert "Traceback" not in completed.stderr
    assert "\x1b" not in completed.stdout and "\x07" not in completed.stdout
    assert "a[/b] \\x1b]0;pwned\\x07 [link=x]y[/link]" in completed.stdout

    as_json = json.loads(run(project, "--json", "config").stdout)
    assert {server["source"]["path"] for server in as_json["servers"]} >= {str(project / ".mcp.json")}
