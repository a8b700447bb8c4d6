"""``mcpfleet tools --search`` and ``--profile``, and ``mcpfleet hosts install --profile``: the
venv's real ``mcpfleet`` in a subprocess with a throw-away home, over the recorded tools of the
MCP project's reference servers (``tests/servers/reference_catalog_server.py``)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.servers.fixtures import SERVERS_DIR

from mcpfleet.config.readers import parse_text
from mcpfleet.hosts import find_host

MCPFLEET = Path(sys.executable).parent / "mcpfleet"
REFERENCE_SERVER = SERVERS_DIR / "reference_catalog_server.py"
PROFILES = {
    "profiles": {
        "files": {
            "servers": ["filesystem"],
            "exclude": ["*write*", "filesystem/edit_file"],
            "pin": ["filesystem_read_text_file"],
        }
    }
}


def fleet_config(home: Path, *servers: str) -> Path:
    config = home / "servers.json"
    entries = {
        name: {"command": sys.executable, "args": [str(REFERENCE_SERVER), "--server", name]}
        for name in servers
    }
    config.write_text(json.dumps({"mcpServers": entries}), encoding="utf-8")
    return config


def user_config(document: dict[str, Any]) -> Path:
    folder = Path(os.environ["XDG_CONFIG_HOME"]) / "mcpfleet"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "mcp.json"
    path.write_text(json.dumps(document), encoding="utf-8")
    return path


def run(home: Path, *arguments: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(MCPFLEET), "--cwd", str(home), "--startup-timeout", "0", *arguments],
        capture_output=True,
        text=True,
        env=dict(os.environ),
        cwd=home,
        timeout=60,
        check=False,
    )


def test_tools_search_ranks_as_find_tools_does_best_first(isolated_home: Path) -> None:
    config = fleet_config(isolated_home, "filesystem", "git", "memory")
    completed = run(
        isolated_home,
        "--config",
        str(config),
        "--json",
        "tools",
        "--search",
        "list the branches of the repository",
    )
    assert completed.returncode == 0, completed.stderr
    tools = json.loads(completed.stdout)["tools"]
    assert (
        tools[0]["name"] == "git_branch"
        and tools[0]["server"] == "git"
        and tools[0]["mcp_name"] == "git_branch"
    )
    scores = [tool["score"] for tool in tools]
    assert scores == sorted(scores, reverse=True) and 1 <= len(tools) <= 8
    assert tools[0]["input_schema"]["properties"]["repo_path"]["type"] == "string"

    limited = run(
        isolated_home, "--config", str(config), "--json", "tools", "--search", "file", "--limit", "2"
    )
    assert len(json.loads(limited.stdout)["tools"]) == 2


def test_tools_profile_shows_what_a_host_would_be_served(isolated_home: Path) -> None:
    user_config(PROFILES)
    config = fleet_config(isolated_home, "filesystem", "git")
    completed = run(isolated_home, "--config", str(config), "--json", "tools", "--profile", "files")
    assert completed.returncode == 0, completed.stderr
    tools = {tool["name"]: tool for tool in json.loads(completed.stdout)["tools"]}
    assert "filesystem_read_text_file" in tools and tools["filesystem_read_text_file"]["pinned"] is True
    assert tools["filesystem_list_directory"]["pinned"] is False
    assert not {"filesystem_write_file", "filesystem_edit_file"} & set(tools)
    assert all(tool["server"] == "filesystem" for tool in tools.values())
    assert len(tools) == 12


def test_an_unknown_profile_is_one_line_and_exit_2(isolated_home: Path) -> None:
    path = user_config(PROFILES)
    completed = run(isolated_home, "tools", "--profile", "cursor")
    assert completed.returncode == 2
    assert completed.stderr.strip() == (
        f'mcpfleet: unknown profile "cursor": define it under "profiles" in {path} (profiles there: files)'
    )


def test_hosts_install_with_a_profile_writes_it_into_the_entry(isolated_home: Path) -> None:
    user_config(PROFILES)
    host = find_host("cursor", isolated_home)
    host.path.parent.mkdir(parents=True)
    refused = run(isolated_home, "hosts", "install", "cursor", "--profile", "nope")
    assert refused.returncode == 2 and 'unknown profile "nope"' in refused.stderr
    assert not host.path.exists()

    installed = run(isolated_home, "hosts", "install", "cursor", "--profile", "files")
    assert installed.returncode == 0, installed.stderr
    entry = parse_text(host.path.read_text(), "json", path=host.path)["mcpServers"]["mcpfleet"]
    assert entry["args"][-3:] == ["serve", "--profile", "files"]
