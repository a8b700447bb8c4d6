"""``mcpfleet login`` / ``logout`` end to end: a real config file, the real command, the real server."""

from __future__ import annotations

import json
import os
import selectors
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest
from tests.conftest import PYTHON

from mcpfleet import paths

from .conftest import RunningOAuthServer

COMMAND_TIMEOUT_S = 60.0


def write_project(root: Path, servers: dict[str, object]) -> Path:
    config_file = root / ".mcpfleet" / "mcp.json"
    config_file.parent.mkdir(parents=True)
    config_file.write_text(json.dumps({"mcpServers": servers}), encoding="utf-8")
    return root


def mcpfleet(project: Path, *arguments: str) -> list[str]:
    return [PYTHON, "-m", "mcpfleet.cli.main", "--cwd", str(project), "--trust-project", *arguments]


def run(project: Path, *arguments: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        mcpfleet(project, *arguments),
        capture_output=True,
        text=True,
        timeout=COMMAND_TIMEOUT_S,
        env=dict(os.environ),
        check=False,
    )


def read_line_containing(process: subprocess.Popen[str], marker: str, timeout_s: float) -> str:
    assert process.stderr is not None
    selector = selectors.DefaultSelector()
    selector.register(process.stderr, selectors.EVENT_READ)
    deadline = time.monotonic() + timeout_s
    seen: list[str] = []
    try:
        while time.monotonic() < deadline:
            if not selector.select(timeout=deadline - time.monotonic()):
                continue
            line = process.stderr.readline()
            if not line:
                break
            seen.append(line)
            if marker in line:
                return line
    finally:
        selector.close()
    raise AssertionError(f"no line with {marker!r} on stderr; got {''.join(seen)!r}")


def test_login_command_prints_the_url_waits_and_stores_tokens(
    oauth_server: RunningOAuthServer, tmp_path: Path
) -> None:
    project = write_project(tmp_path / "project", {"secure": {"type": "http", "url": oauth_server.mcp_url}})
    environment = dict(os.environ, DISPLAY="", WAYLAND_DISPLAY="")
    process = subprocess.Popen(
        mcpfleet(project, "login", "secure", "--no-browser", "--timeout", "30"),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=environment,
    )
    try:
        line = read_line_containing(process, "Open this URL to log in to secure: ", COMMAND_TIMEOUT_S)
        authorize_url = line.split(": ", 1)[1].strip()
        # The browser: /authorize approves and redirects to the command's loopback callback.
        with urllib.request.urlopen(authorize_url, timeout=15) as response:
            assert response.status == 200
            assert "Logged in to secure" in response.read().decode()
        stdout, stderr = process.communicate(timeout=COMMAND_TIMEOUT_S)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    assert process.returncode == 0, stderr
    assert "Logged in to secure" in stderr
    assert stdout == ""
    assert len(list((paths.user_state_dir() / "oauth").glob("*.json"))) == 1
    assert oauth_server.stats()["code_exchanges"] == 1

    logout = run(project, "logout", "secure")
    assert logout.returncode == 0, logout.stderr
    assert "Forgot the OAuth tokens of secure" in logout.stderr
    assert list((paths.user_state_dir() / "oauth").glob("*.json")) == []
    again = run(project, "--json", "logout", "secure")
    assert json.loads(again.stdout) == {"server": "secure", "forgot_tokens": False}


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("missing", 'No MCP server named "missing"'),
        ("local", 'MCP server "local" uses the stdio transport'),
    ],
)
def test_login_refuses_unknown_and_non_http_servers(tmp_path: Path, name: str, message: str) -> None:
    project = write_project(tmp_path / "project", {"local": {"command": "true"}})
    result = run(project, "login", name, "--no-browser")
    assert result.returncode == 2
    assert message in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr
