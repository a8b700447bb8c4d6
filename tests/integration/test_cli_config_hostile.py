"""The config commands against a hostile repository, end to end (``python -m
mcpfleet.cli.main`` in a subprocess with a temporary HOME): planted links, files nested
past any parser's recursion limit, and approval of exactly what the user reviewed."""

from __future__ import annotations

import json
import stat
from pathlib import Path
from typing import Any

import pytest
from tests.conftest import PYTHON
from tests.integration.test_cli_config import run
from tests.servers.fixtures import FAKE_SERVER

DEEP = 100_000
"""Far past Python's recursion limit."""


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    root.mkdir()
    return root.resolve()


def config_json(project: Path) -> dict[str, Any]:
    completed = run(project, "--json", "config")
    assert completed.returncode == 0, completed.stderr
    data: dict[str, Any] = json.loads(completed.stdout)
    return data


def write_json(path: Path, document: Any) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(document))
    return path


def entries_named(data: dict[str, Any], name: str) -> dict[str, dict[str, Any]]:
    """The entries called ``name``, by the path of their config file."""
    return {item["source"]["path"]: item for item in data["servers"] if item["name"] == name}


# -- planted links -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "arguments",
    [
        ("disable", "github"),
        ("add", "--project", "evil", "--command", "x"),
        ("remove", "--project", "github"),
    ],
    ids=["disable", "add-project", "remove-project"],
)
def test_edits_refuse_a_link_planted_in_the_project(
    project: Path, isolated_home: Path, arguments: tuple[str, ...]
) -> None:
    cursor = write_json(isolated_home / ".cursor" / "mcp.json", {"mcpServers": {"github": {"command": "gh"}}})
    cursor.chmod(0o644)
    before = cursor.read_bytes()
    planted = project / ".mcpfleet" / "mcp.json"
    planted.parent.mkdir()
    planted.symlink_to(cursor)

    completed = run(project, *arguments)

    assert completed.returncode == 2, completed.stderr
    assert completed.stderr.count("\n") == 1 and "Traceback" not in completed.stderr
    assert str(planted) in completed.stderr and "symbolic link" in completed.stderr
    assert cursor.read_bytes() == before
    assert stat.S_IMODE(cursor.stat().st_mode) == 0o644


def test_edits_refuse_a_linked_folder_leaving_the_project(
    project: Path, tmp_path: Path, isolated_home: Path
) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (project / ".mcpfleet").symlink_to(elsewhere)
    completed = run(project, "add", "--project", "evil", "--command", "x")
    assert completed.returncode == 2 and "outside" in completed.stderr
    assert list(elsewhere.iterdir()) == []


# -- files nested past the recursion limit -------------------------------------------------------------


def test_deeply_nested_files_never_crash_a_command(project: Path, isolated_home: Path) -> None:
    write_json(
        isolated_home / ".claude.json",
        {
            "mcpServers": {
                "mine": {"command": PYTHON, "args": [str(FAKE_SERVER), "--name", "mine", "--tool", "echo"]}
            }
        },
    )
    write_json(project / ".cursor" / "mcp.json", {"mcpServers": {"proj": {"command": "proj-server"}}})
    deep_files = {
        project / ".mcp.json": "[" * DEEP + "]" * DEEP,
        project / ".codex" / "config.toml": "a = " + "[" * DEEP + "]" * DEEP + "\n",
        project / ".continue" / "mcpServers" / "deep.yaml": "mcpServers: " + "[" * DEEP + "]" * DEEP + "\n",
    }
    for path, text in deep_files.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)

    commands = {
        "config": ("--json", "config"),
        "status": ("--json", "status"),
        "tools": ("--json", "tools"),
        "approve": ("approve", "proj"),
        "disable": ("disable", "mine"),
    }
    for command, arguments in commands.items():
        completed = run(project, *arguments)
        assert completed.returncode == 0, f"{command}: {completed.stderr}"
        assert "Traceback" not in completed.stderr and "RecursionError" not in completed.stderr, command
        if command in ("config", "status", "tools"):
            errors = {error["path"]: error["error"] for error in json.loads(completed.stdout)["errors"]}
            for path in deep_files:
                assert "nesting deeper than" in errors[str(path)], (command, errors)
        if command == "status":
            rows = {row["name"]: row for row in json.loads(completed.stdout)["servers"]}
            assert rows["mine"]["status"] == "connected"  # the user's own server still loads
        if command == "tools":
            assert [tool["server"] for tool in json.loads(completed.stdout)["tools"]] == ["mine"]


# -- approval of what the user saw -------------------------------------------------------------------


@pytest.fixture
def two_githubs(project: Path) -> tuple[Path, Path]:
    mcp_json = write_json(project / ".mcp.json", {"mcpServers": {"github": {"command": "harmless"}}})
    block = project / ".continue" / "mcpServers" / "z.yaml"
    block.parent.mkdir(parents=True)
    block.write_text("mcpServers:\n  - name: github\n    command: curl-evil-sh\n")
    return mcp_json, block


def test_approve_approves_only_the_entry_that_would_be_active(
    project: Path, two_githubs: tuple[Path, Path]
) -> None:
    mcp_json, block = two_githubs
    completed = run(project, "--json", "approve", "github")
    assert completed.returncode == 0, completed.stderr
    assert json.loads(completed.stdout)["approved"] == [{"name": "github", "path": str(mcp_json)}]
    assert entries_named(config_json(project), "github")[str(mcp_json)]["state"] == "active"

    write_json(mcp_json, {"mcpServers": {}})  # the harmless entry goes away…
    github = entries_named(config_json(project), "github")
    assert github[str(block)]["state"] == "pending-approval"  # …and the other one never ran unasked


def test_approve_source_chooses_the_entry(project: Path, two_githubs: tuple[Path, Path]) -> None:
    mcp_json, block = two_githubs
    relative = str(block.relative_to(project))
    completed = run(project, "--json", "approve", "github", "--source", relative)
    assert completed.returncode == 0, completed.stderr
    assert json.loads(completed.stdout)["approved"] == [{"name": "github", "path": str(block)}]
    github = entries_named(config_json(project), "github")
    assert github[str(mcp_json)]["state"] == "pending-approval"
    assert github[str(block)]["state"] == "active"  # the pending .mcp.json entry claims nothing

    missing = run(project, "approve", "github", "--source", ".vscode/mcp.json")
    assert missing.returncode == 2 and ".vscode/mcp.json" in missing.stderr  # unknown NAME: usage error


def test_config_shows_what_a_pending_entry_would_run(project: Path) -> None:
    write_json(
        project / ".mcp.json",
        {
            "mcpServers": {
                "tool": {
                    "command": "npx",
                    "args": ["-y", "some-pkg"],
                    "env": {"API_TOKEN": "literal-value-123"},
                },
                "web": {"url": "https://mcp.example/x", "headers": {"X-Key": "header-value-456"}},
            }
        },
    )
    servers = {item["name"]: item for item in config_json(project)["servers"]}
    assert servers["tool"]["review"] == {
        "command": "npx",
        "args": ["-y", "some-pkg"],
        "cwd": None,
        "env": ["API_TOKEN"],
    }
    assert servers["web"]["review"] == {"url": "https://mcp.example/x", "headers": ["X-Key"]}

    table = run(project, "config")
    assert table.returncode == 0, table.stderr
    for shown in ("npx -y some-pkg", "API_TOKEN", "https://mcp.example/x", "X-Key"):
        assert shown in table.stdout
    for hidden in ("literal-value-123", "header-value-456"):
        assert hidden not in table.stdout


def test_pending_review_shows_control_characters_as_text(project: Path) -> None:
    write_json(project / ".mcp.json", {"mcpServers": {"tool": {"command": "npx\u001b]0;owned\u0007"}}})
    table = run(project, "config")
    assert table.returncode == 0, table.stderr
    assert "\x1b" not in table.stdout and "\x07" not in table.stdout
    assert "npx\\x1b]0;owned\\x07" in table.stdout
