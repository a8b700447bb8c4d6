"""The config commands end to end: ``python -m mcpfleet.cli.main`` in a subprocess with a
temporary HOME; JSON shapes and exit codes of the CLI contract."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    root.mkdir()
    (root / ".mcp.json").write_text(json.dumps({"mcpServers": {"proj": {"command": "proj-server"}}}))
    return root.resolve()


def run(project: Path, *arguments: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mcpfleet.cli.main", "--cwd", str(project), *arguments],
        capture_output=True,
        text=True,
        env=dict(os.environ),
        timeout=60,
        check=False,
    )


def config_json(project: Path, *options: str) -> dict[str, Any]:
    completed = run(project, "--json", *options, "config")
    assert completed.returncode == 0, completed.stderr
    data: dict[str, Any] = json.loads(completed.stdout)
    return data


def states(data: dict[str, Any]) -> dict[str, str]:
    return {server["name"]: server["state"] for server in data["servers"]}


def test_config_json_shape(project: Path, isolated_home: Path) -> None:
    (isolated_home / ".claude.json").write_text(
        json.dumps({"mcpServers": {"api": {"type": "http", "url": "https://a"}}})
    )
    (project / ".cursor").mkdir()
    (project / ".cursor" / "mcp.json").write_text("{broken")
    data = config_json(project)
    assert set(data) == {"servers", "errors"}
    api = next(server for server in data["servers"] if server["name"] == "api")
    assert api == {
        "name": "api",
        "transport": "http",
        "state": "active",
        "reason": "",
        "source": {
            "provider": "claude-code",
            "provider_name": "Claude Code",
            "path": str(isolated_home / ".claude.json"),
            "level": "user",
            "location": "/mcpServers/api",
        },
    }
    assert states(data)["proj"] == "pending-approval"
    assert data["errors"] == [
        {"path": str(project / ".cursor" / "mcp.json"), "error": data["errors"][0]["error"]}
    ]
    assert "invalid JSON" in data["errors"][0]["error"]
    assert run(project, "config", "--strict").returncode == 1


def test_human_table(project: Path) -> None:
    completed = run(project, "config")
    assert completed.returncode == 0
    assert "proj" in completed.stdout and "pending-approval" in completed.stdout


def test_approve_revoke_and_trust(project: Path) -> None:
    assert states(config_json(project, "--trust-project"))["proj"] == "active"
    assert run(project, "approve", "proj").returncode == 0
    assert states(config_json(project))["proj"] == "active"
    missing = run(project, "approve", "ghost")
    assert missing.returncode == 2 and "ghost" in missing.stderr
    assert run(project, "revoke", "proj").returncode == 0
    assert states(config_json(project))["proj"] == "pending-approval"
    assert run(project, "revoke", "proj").returncode == 2  # nothing left to revoke


def test_add_remove_enable_disable(project: Path) -> None:
    added = run(
        project, "--json", "add", "web", "--url", "https://w/mcp", "--header", "X-K=v", "--transport", "sse"
    )
    assert added.returncode == 0 and json.loads(added.stdout)["added"] == "web"
    assert (
        run(
            project, "add", "tool", "--command", "python3", "--arg=-m", "--env", "A=1", "--project"
        ).returncode
        == 0
    )
    data = config_json(project)
    assert states(data)["web"] == "active" and states(data)["tool"] == "active"  # user-added: approved
    assert run(project, "add", "web", "--url", "https://again").returncode == 1
    assert run(project, "add", "bad", "--env", "novalue", "--command", "x").returncode == 2
    assert run(project, "disable", "proj").returncode == 0
    assert states(config_json(project))["proj"] == "disabled"
    assert run(project, "enable", "proj").returncode == 0
    assert states(config_json(project))["proj"] == "pending-approval"
    assert run(project, "disable", "ghost").returncode == 2
    assert run(project, "remove", "web").returncode == 0
    assert "web" not in states(config_json(project))
    assert run(project, "remove", "web").returncode == 2


def test_bad_extra_config_exits_2_with_one_line(project: Path, tmp_path: Path) -> None:
    completed = run(project, "--config", str(tmp_path / "missing.json"), "config")
    assert completed.returncode == 2
    assert completed.stderr.count("\n") == 1 and "missing.json" in completed.stderr
    (tmp_path / "bad.json").write_text("{")
    assert run(project, "--config", str(tmp_path / "bad.json"), "--json", "config").returncode == 2


def test_no_project_config(project: Path) -> None:
    assert states(config_json(project, "--no-project-config"))["proj"] == "filtered"


def test_run_from_home_the_users_own_files_are_read_once_as_user_files(isolated_home: Path) -> None:
    """From the home folder, ``~/.cursor/mcp.json``, ``~/.codex/config.toml`` and
    ``~/.gemini/settings.json`` are also where a project's files would be: each is the user's
    file, read once, its servers active (not pending copies asking for approval)."""
    for folder, name, text in (
        (".cursor", "mcp.json", json.dumps({"mcpServers": {"editor": {"command": "editor-server"}}})),
        (".codex", "config.toml", '[mcp_servers.codex_time]\ncommand = "time-server"\n'),
        (".gemini", "settings.json", json.dumps({"mcpServers": {"gem": {"command": "gem-server"}}})),
    ):
        (isolated_home / folder).mkdir()
        (isolated_home / folder / name).write_text(text)
    completed = subprocess.run(
        [sys.executable, "-m", "mcpfleet.cli.main", "--json", "config"],
        capture_output=True,
        text=True,
        env=dict(os.environ),
        cwd=isolated_home,
        timeout=60,
        check=False,
    )
    assert completed.returncode == 0, completed.stderr
    servers = json.loads(completed.stdout)["servers"]
    assert sorted((row["name"], row["source"]["level"], row["state"]) for row in servers) == [
        ("codex_time", "user", "active"),
        ("editor", "user", "active"),
        ("gem", "user", "active"),
    ]
