"""Substituted values through the real CLI: secrets never printed or logged, and a value
produced by substitution never run as a ``!command`` (``python -m mcpfleet.cli.main`` in
a subprocess, real servers: the fake stdio server, ``sh``, and HTTP on 127.0.0.1)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tests.conftest import PYTHON
from tests.servers.fixtures import FAKE_SERVER, HttpServer, start_http_server

from mcpfleet.paths import user_config_file

SUBSTITUTED = "hunter2-from-env"
FROM_COMMAND = "cmd-secret-42"
FROM_NAMED_VARIABLE = "named-secret-77"
SECRETS = (SUBSTITUTED, FROM_COMMAND, FROM_NAMED_VARIABLE)


def run(project: Path, *arguments: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mcpfleet.cli.main", "--cwd", str(project), *arguments],
        capture_output=True,
        text=True,
        env={**os.environ, **env},
        timeout=120,
        check=False,
    )


def write_json(path: Path, document: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(document))


@pytest.fixture
def http_server() -> Iterator[HttpServer]:
    server = start_http_server()
    yield server
    server.stop()


@pytest.fixture
def leaky_fleet(http_server: HttpServer) -> dict[str, str]:
    """User servers that fail with their secrets in the URL, the args or their stderr."""
    write_json(
        user_config_file(),
        {
            "mcpServers": {
                # 404: the error names the URL, query string included.
                "web": {
                    "type": "http",
                    "url": f"http://127.0.0.1:{http_server.port}/nope?k=${{MYSECRET}}",
                    "headers": {"Authorization": "Bearer ${MYSECRET}"},
                },
                # argparse rejects the flag: the error carries the command line and the stderr tail.
                "args": {
                    "command": PYTHON,
                    "args": [str(FAKE_SERVER), "--name", "args", "--token=${MYSECRET}"],
                },
                # Connect-time values: a !command result and a variable named by its value.
                "command": {
                    "command": "sh",
                    "args": ["-c", 'echo "bad token $TOKEN" >&2; exit 3'],
                    "env": {"TOKEN": f"!echo {FROM_COMMAND}"},
                },
                "named": {
                    "command": "sh",
                    "args": ["-c", 'echo "bad key $API_KEY" >&2; exit 4'],
                    "env": {"API_KEY": "NAMED_SECRET_VAR"},
                },
            }
        },
    )
    return {"MYSECRET": SUBSTITUTED, "NAMED_SECRET_VAR": FROM_NAMED_VARIABLE}


def assert_no_secret(text: str) -> None:
    for secret in SECRETS:
        assert secret not in text, f"{secret!r} leaked in:\n{text}"


def test_status_json_redacts_substituted_and_resolved_secrets(
    tmp_path: Path, leaky_fleet: dict[str, str]
) -> None:
    completed = run(tmp_path, "--json", "status", env=leaky_fleet)
    assert completed.returncode == 0, completed.stderr
    assert_no_secret(completed.stdout + completed.stderr)
    rows = {row["name"]: row for row in json.loads(completed.stdout)["servers"]}
    assert {row["status"] for row in rows.values()} == {"failed"}
    assert "answered HTTP 404" in rows["web"]["error"] and "nope?k=***" in rows["web"]["error"]
    assert "--token=***" in rows["args"]["error"] and "unrecognized arguments" in rows["args"]["error"]
    assert "bad token ***" in rows["command"]["error"]
    assert "bad key ***" in rows["named"]["error"]


def test_status_table_and_debug_logs_redact_secrets(tmp_path: Path, leaky_fleet: dict[str, str]) -> None:
    table = run(tmp_path, "status", env=leaky_fleet)
    assert table.returncode == 0, table.stderr
    assert "HTTP 404" in table.stdout
    assert_no_secret(table.stdout + table.stderr)

    verbose = run(tmp_path, "-vv", "status", env=leaky_fleet)
    assert verbose.returncode == 0, verbose.stderr
    assert "nope?k=***" in verbose.stderr  # the HTTP client's own request log, redacted
    assert_no_secret(verbose.stdout + verbose.stderr)


def test_workspace_values_are_not_secrets(tmp_path: Path, http_server: HttpServer) -> None:
    project = tmp_path / "my-project"
    project.mkdir()
    write_json(
        project / ".cursor" / "mcp.json",
        {"mcpServers": {"web": {"url": f"http://127.0.0.1:{http_server.port}/${{workspaceFolderBasename}}"}}},
    )
    completed = run(project, "--trust-project", "--json", "status", env={})
    error = json.loads(completed.stdout)["servers"][0]["error"]
    assert f"{http_server.port}/my-project" in error


# -- substituted values are text, never commands ------------------------------------------------------


def call_env(project: Path, variable: str, env: dict[str, str]) -> dict[str, Any]:
    completed = run(project, "--json", "call", "mcp_fake_env", json.dumps({"name": variable}), env=env)
    assert completed.returncode == 0, completed.stderr
    result: dict[str, Any] = json.loads(completed.stdout)
    return result


def test_a_substituted_value_is_never_run_as_a_command(tmp_path: Path, isolated_home: Path) -> None:
    project = tmp_path / "!touch INJECTED"
    project.mkdir()
    write_json(
        isolated_home / ".config" / "Code" / "User" / "mcp.json",
        {
            "servers": {
                "fake": {
                    "command": PYTHON,
                    "args": [str(FAKE_SERVER), "--name", "fake", "--tool", "env"],
                    "env": {"P": "${workspaceFolderBasename}", "Q": "${env:BANG}", "R": "${env:NAME_OF_VAR}"},
                }
            }
        },
    )
    marker = tmp_path / "INJECTED_FROM_ENV"
    env = {"BANG": f"!touch {marker}", "NAME_OF_VAR": "HOME"}

    assert call_env(project, "P", env)["structured"]["value"] == "!touch INJECTED"
    assert call_env(project, "Q", env)["structured"]["value"] == f"!touch {marker}"
    # A substituted value that names a variable stays that name, too.
    assert call_env(project, "R", env)["structured"]["value"] == "HOME"

    created = [*tmp_path.rglob("INJECTED*"), *isolated_home.rglob("INJECTED*")]
    assert created == []


def test_a_literal_command_value_still_runs(tmp_path: Path, isolated_home: Path) -> None:
    write_json(
        user_config_file(),
        {
            "mcpServers": {
                "fake": {
                    "command": PYTHON,
                    "args": [str(FAKE_SERVER), "--name", "fake", "--tool", "env"],
                    "env": {"FROM_COMMAND": "!echo computed", "FROM_NAME": "SOURCE_VAR"},
                }
            }
        },
    )
    env = {"SOURCE_VAR": "looked-up"}
    assert call_env(tmp_path, "FROM_COMMAND", env)["structured"]["value"] == "computed"
    assert call_env(tmp_path, "FROM_NAME", env)["structured"]["value"] == "looked-up"


def test_login_error_redacts_the_url(tmp_path: Path, leaky_fleet: dict[str, str]) -> None:
    completed = run(tmp_path, "login", "web", "--timeout", "5", env=leaky_fleet)
    assert completed.returncode != 0
    assert "HTTP 404" in completed.stderr and "nope?k=***" in completed.stderr
    assert_no_secret(completed.stdout + completed.stderr)
