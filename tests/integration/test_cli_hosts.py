"""``mcpfleet hosts`` end to end: the venv's real ``mcpfleet`` script in a subprocess with a
throw-away HOME. Each host gets the gateway entry in its own file, a second run changes
nothing, ``--replace`` then ``uninstall`` gives the file back byte for byte, links and broken
files are refused with one line and exit 2, and discovery skips the entry it wrote."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from mcpfleet.config.gateway_entry import MOVED_SERVERS_KEY, REPLACED_KEY, moved_entries_file
from mcpfleet.config.readers import parse_text
from mcpfleet.hosts import HOST_IDS, Host, find_host

MCPFLEET = Path(sys.executable).parent / "mcpfleet"
"""The console script of this checkout's venv, run by its absolute path (as a host would)."""

ORIGINALS: dict[str, str] = {
    "claude-code": (
        '{\n  "numStartups": 2,\n  "mcpServers": {\n    "notes": {"type": "stdio", "command": "notes-mcp"}\n'
        "  }\n}\n"
    ),
    "cursor": '{\n  "mcpServers": {\n    "notes": {"command": "notes-mcp"}\n  }\n}\n',
    "vscode": (
        '// mine\n{\n  "servers": {\n    "notes": {"type": "stdio", "command": "notes-mcp"}, // notes\n'
        "  },\n}\n"
    ),
    "codex": '# Codex\nmodel = "o3"\n\n[mcp_servers.notes]\ncommand = "notes-mcp"\n',
    "gemini": '{"mcpServers": {"notes": {"command": "notes-mcp"}}, "theme": "Default"}\n',
    "claude-desktop": (
        '{\n  "mcpServers": {\n    "notes": {"command": "notes-mcp"}\n  },\n  "preferences": {}\n}\n'
    ),
    "windsurf": '{\n  "mcpServers": {\n    "notes": {"command": "notes-mcp"}\n  }\n}\n',
    "zed": '// Zed\n{\n  "context_servers": {\n    "notes": {"command": "notes-mcp", "args": []}\n  }\n}\n',
}


def run(cwd: Path, *arguments: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(MCPFLEET), "--cwd", str(cwd), *arguments],
        capture_output=True,
        text=True,
        env=dict(os.environ),
        cwd=cwd,
        timeout=60,
        check=False,
    )


def run_json(cwd: Path, *arguments: str) -> Any:
    completed = run(cwd, "--json", *arguments)
    assert completed.returncode == 0, completed.stderr
    return json.loads(completed.stdout)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    root.mkdir()
    return root.resolve()


def table_column(table: str, heading: str) -> str:
    """The text of one column of a printed table, its wrapped lines joined as a reader joins them.

    A cell wraps when the paths beside it are long (the temporary folder's path depends on the
    machine and on pytest-xdist's worker), so a phrase may span lines of the table.
    """
    headings = next(line for line in table.splitlines() if line.startswith("┃")).split("┃")
    index = [cell.strip() for cell in headings].index(heading)
    cells = [line.split("│")[index] for line in table.splitlines() if line.startswith("│")]
    return " ".join(" ".join(cells).split())


def _set_up(host: Host) -> None:
    host.path.parent.mkdir(parents=True, exist_ok=True)
    host.path.write_text(ORIGINALS[host.id], encoding="utf-8")


def _data(host: Host) -> Any:
    return parse_text(host.path.read_text(encoding="utf-8"), host.format, path=host.path)


def test_the_cli_knows_every_host_without_importing_them_for_help() -> None:
    from mcpfleet.cli import hosts_commands

    assert hosts_commands._HOST_IDS == HOST_IDS


def test_hosts_lists_every_host_and_whether_it_is_found(project: Path, isolated_home: Path) -> None:
    _set_up(find_host("cursor"))
    (isolated_home / ".config" / "zed").mkdir(parents=True)
    hosts = {row["id"]: row for row in run_json(project, "hosts")["hosts"]}
    assert list(hosts) == list(HOST_IDS)
    assert {host_id for host_id, row in hosts.items() if row["found"]} == {"cursor", "zed"}
    assert not any(row["gateway"] for row in hosts.values())
    assert hosts["cursor"]["path"] == str(isolated_home / ".cursor" / "mcp.json")
    table = run(project, "hosts")
    assert table.returncode == 0 and "not wired" in table.stdout and "not found" in table.stdout


@pytest.mark.parametrize("host_id", HOST_IDS)
def test_install_is_idempotent_and_replace_then_uninstall_restores_the_file(
    project: Path, host_id: str
) -> None:
    host = find_host(host_id)
    _set_up(host)
    installed = run(project, "hosts", "install", host_id)
    assert installed.returncode == 0, installed.stderr
    assert f'added the gateway entry "mcpfleet" to {host.path}' in installed.stdout
    entry = _data(host)[host.servers_key]["mcpfleet"]
    assert [entry["command"], *entry["args"]] == [str(MCPFLEET), "serve"]
    assert host.backup_path.read_text(encoding="utf-8") == ORIGINALS[host_id]

    again = run(project, "hosts", "install", host_id)
    assert again.returncode == 0 and "nothing changed" in again.stdout
    status = {row["id"]: row for row in run_json(project, "hosts")["hosts"]}[host_id]
    assert status["gateway"] and status["gateway_entries"] == ["mcpfleet"]

    replaced = run_json(project, "hosts", "install", host_id, "--replace")
    assert replaced["moved_aside"] == ["notes"] and replaced["changed"]
    assert "notes" not in _data(host)[host.servers_key]
    assert not run_json(project, "hosts", "install", host_id, "--replace")["changed"]

    removed = run(project, "hosts", "uninstall", host_id)
    assert removed.returncode == 0, removed.stderr
    assert "put back notes" in removed.stdout
    assert host.path.read_text(encoding="utf-8") == ORIGINALS[host_id]
    assert "nothing changed" in run(project, "hosts", "uninstall", host_id).stdout


def test_config_shows_the_installed_entry_filtered_as_the_gateways_own(project: Path) -> None:
    host = find_host("claude-code")
    _set_up(host)
    assert run(project, "hosts", "install", "claude-code").returncode == 0
    servers = run_json(project, "config")["servers"]
    own = next(server for server in servers if server["name"] == "mcpfleet")
    assert own["state"] == "filtered"
    assert "gateway's own entry" in own["reason"]
    assert own["source"]["path"] == str(host.path)
    table = run(project, "config").stdout
    assert "filtered" in table_column(table, "State")
    assert "mcpfleet never serves itself" in table_column(table, "Reason")


@pytest.mark.parametrize("host_id", ["cursor", "codex"])
def test_entries_moved_aside_stay_served_by_the_gateway(project: Path, host_id: str) -> None:
    host = find_host(host_id)
    _set_up(host)
    assert run(project, "hosts", "install", host_id, "--replace").returncode == 0
    servers = run_json(project, "config")["servers"]
    notes = [server for server in servers if server["name"] == "notes"]
    # Codex warns about a table it does not know: its entries move into mcpfleet's state.
    kept_in = moved_entries_file(host_id, host.path) if host_id == "codex" else host.path
    key = MOVED_SERVERS_KEY if host_id == "codex" else REPLACED_KEY
    assert [
        (server["state"], server["source"]["path"], server["source"]["location"]) for server in notes
    ] == [("active", str(kept_in), f"/{key}/notes")]
    assert all(server["state"] == "filtered" for server in servers if server["name"] == "mcpfleet")


def test_a_symlinked_host_file_is_refused_with_one_line(project: Path, tmp_path: Path) -> None:
    host = find_host("claude-desktop")
    host.path.parent.mkdir(parents=True)
    target = tmp_path / "dotfiles" / "claude.json"
    target.parent.mkdir()
    target.write_text(ORIGINALS["claude-desktop"])
    host.path.symlink_to(target)
    refused = run(project, "hosts", "install", "claude-desktop")
    assert refused.returncode == 2
    lines = refused.stderr.strip().splitlines()
    assert len(lines) == 1 and str(host.path) in lines[0] and "symbolic link" in lines[0]
    assert "remove the link" in lines[0]
    assert target.read_text() == ORIGINALS["claude-desktop"]


def test_an_unparsable_host_file_is_refused_with_one_line(project: Path) -> None:
    host = find_host("gemini")
    host.path.parent.mkdir(parents=True)
    host.path.write_text('{"mcpServers": {"notes": ')
    refused = run(project, "hosts", "install", "gemini")
    assert refused.returncode == 2
    lines = refused.stderr.strip().splitlines()
    assert len(lines) == 1 and str(host.path) in lines[0] and "invalid JSON" in lines[0]
    assert "fix the file" in lines[0]
    assert host.path.read_text() == '{"mcpServers": {"notes": '
    listed = {row["id"]: row for row in run_json(project, "hosts")["hosts"]}["gemini"]
    assert "invalid JSON" in listed["error"]


def test_an_unknown_host_is_a_usage_error(project: Path) -> None:
    completed = run(project, "hosts", "install", "notepad")
    assert completed.returncode == 2 and "invalid choice" in completed.stderr


@pytest.mark.parametrize("scope", ["local", "project"])
def test_a_gateway_entry_in_any_scope_claude_code_reads_counts_as_wired(project: Path, scope: str) -> None:
    """``claude mcp add fleet -- mcpfleet serve`` (the README's alternative) writes the local
    scope, ``projects[<folder>].mcpServers`` of ``~/.claude.json``; ``--scope project`` writes
    the project's ``.mcp.json``. Either way Claude Code runs the gateway in this project."""
    host = find_host("claude-code", project)
    fleet = {"type": "stdio", "command": "mcpfleet", "args": ["serve"], "env": {}}
    if scope == "local":
        host.path.write_text(json.dumps({"projects": {str(project): {"mcpServers": {"fleet": fleet}}}}))
    else:
        host.path.write_text(json.dumps({"numStartups": 1}))
        (project / ".mcp.json").write_text(json.dumps({"mcpServers": {"fleet": fleet}}))
    row = {row["id"]: row for row in run_json(project, "hosts")["hosts"]}["claude-code"]
    assert row["gateway"] and row["gateway_entries"] == ["fleet"]
    assert row["gateway_scopes"] == [{"scope": scope, "name": "fleet"}]
    assert "uses the gateway" in table_column(run(project, "hosts").stdout, "State")
    elsewhere = project.parent / "elsewhere"
    elsewhere.mkdir()
    other = {row["id"]: row for row in run_json(elsewhere, "hosts")["hosts"]}["claude-code"]
    assert not other["gateway"], "another project's local scope wires only that project"
