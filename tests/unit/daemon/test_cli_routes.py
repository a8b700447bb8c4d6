"""``mcpfleet status``, ``tools`` and ``call`` through a scripted daemon (a real socket speaking
the wire; the CLI process is what is under test): the document the daemon sends is what
``--json`` prints and what the text is drawn from, with the same exit codes; the CLI loads no
SDK on that path; and anything wrong with the daemon falls back to in-process, quietly."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from tests.servers.control_peer import ControlPeer, Reply, control_peer, failure, result
from tests.servers.fixtures import FAKE_SERVER

from mcpfleet.daemon_client import paths
from mcpfleet.paths import user_config_file

CLI = [sys.executable, "-m", "mcpfleet.cli.main"]

SERVER_ROW: dict[str, Any] = {
    "name": "files",
    "status": "connected",
    "state": "connected",
    "tools": 1,
    "deferred": False,
    "at_gate": "live",
    "error": None,
    "stderr_tail": [],
    "source": {"provider": "mcpfleet", "provider_name": "mcpfleet", "path": "/u/mcp.json", "level": "user"},
    "timings_ms": {"total": 12.0},
    "era": "legacy",
    "protocol_version": "2025-11-25",
}
TOOL_ROW: dict[str, Any] = {
    "name": "mcp_files_echo",
    "server": "files",
    "mcp_name": "echo",
    "description": "Echo from the daemon",
    "deferred": False,
    "input_schema": {"type": "object"},
}
SERVER_FAILURE = {"path": "mcp:broken", "error": "exited with code 3"}


def run(
    project: Path, *arguments: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*CLI, "--cwd", str(project), *arguments],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, **(env or {})},
    )


def documents(request: dict[str, Any]) -> Reply:
    if request["op"] == "fleet_status":
        return result(request, {"servers": [SERVER_ROW], "errors": []})
    if request["op"] == "tools":
        return result(request, {"tools": [TOOL_ROW], "errors": [SERVER_FAILURE]})
    if request["op"] == "call" and request["tool"] == "mcp_files_echo":
        text = request["arguments"].get("message", "")
        return result(request, {"is_error": text == "fail", "text": text, "content": [], "structured": None})
    return failure(request, f"no tool named {request.get('tool')!r}", 1)


@pytest.fixture
def peer() -> Any:
    with control_peer(paths.socket_path(), documents) as scripted:
        yield scripted


@pytest.fixture
def local_fleet() -> None:
    """A fleet this process can start, so a fallback to in-process shows."""
    path = user_config_file()
    path.parent.mkdir(parents=True, exist_ok=True)
    entry = {"command": sys.executable, "args": [str(FAKE_SERVER), "--name", "local", "--tool", "ping"]}
    path.write_text(json.dumps({"mcpServers": {"local": entry}}))


def test_tools_json_prints_the_daemons_document_and_loads_no_sdk(tmp_path: Path, peer: ControlPeer) -> None:
    completed = subprocess.run(
        [
            sys.executable,
            "-X",
            "importtime",
            *CLI[1:],
            "--cwd",
            str(tmp_path),
            "--trust-project",
            "--json",
            "tools",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert completed.returncode == 0, completed.stderr
    assert json.loads(completed.stdout) == {"tools": [TOOL_ROW], "errors": [SERVER_FAILURE]}
    imported = {
        line.split("|")[-1].strip()
        for line in completed.stderr.splitlines()
        if line.startswith("import time:")
    }
    top_level = {name.split(".")[0] for name in imported}
    assert "mcpfleet.cli.main" in imported
    assert not top_level & {"mcp", "anyio", "pydantic", "rich"}, sorted(
        top_level & {"mcp", "anyio", "pydantic", "rich"}
    )
    (request,) = peer.requests
    assert request["op"] == "tools"
    assert request["fleet"]["cwd"] == str(tmp_path.resolve())
    assert request["fleet"]["trust_project"] is True
    assert request["fleet"]["enable_project_config"] is True
    assert "server" not in request


def test_tools_text_is_drawn_from_the_document_and_strict_counts_the_failed_server(
    tmp_path: Path, peer: ControlPeer
) -> None:
    completed = run(tmp_path, "tools", "--server", "files")
    assert completed.returncode == 0, completed.stderr
    assert completed.stdout.splitlines()[0].strip() == "1 MCP tool"
    assert "mcp_files_echo" in completed.stdout and "Echo from the daemon" in completed.stdout
    assert "mcp:broken: exited with code 3" in completed.stderr
    assert peer.requests[0]["server"] == "files"
    assert run(tmp_path, "--json", "tools", "--strict").returncode == 1


def test_status_asks_for_the_fleets_status(tmp_path: Path, peer: ControlPeer) -> None:
    completed = run(
        tmp_path, "--no-project-config", "--startup-timeout", "900", "--json", "status", "--strict"
    )
    assert completed.returncode == 0, completed.stderr
    assert json.loads(completed.stdout) == {"servers": [SERVER_ROW], "errors": []}
    (request,) = peer.requests
    assert request["op"] == "fleet_status"
    assert request["fleet"]["enable_project_config"] is False
    assert request["fleet"]["startup_timeout_ms"] == 900
    text = run(tmp_path, "status")
    assert "files" in text.stdout and "mcpfleet (user)" in text.stdout


def test_call_through_the_daemon_keeps_its_exit_codes(tmp_path: Path, peer: ControlPeer) -> None:
    done = run(tmp_path, "call", "mcp_files_echo", '{"message": "hello"}')
    assert (done.returncode, done.stdout.strip()) == (0, "hello")
    failed = run(tmp_path, "--json", "call", "mcp_files_echo", '{"message": "fail"}')
    assert failed.returncode == 1
    assert json.loads(failed.stdout)["is_error"] is True
    missing = run(tmp_path, "call", "mcp_nope")
    assert missing.returncode == 1
    assert missing.stderr.strip() == "mcpfleet: no tool named 'mcp_nope'"
    assert [(r["op"], r["tool"], r["arguments"]) for r in peer.requests] == [
        ("call", "mcp_files_echo", {"message": "hello"}),
        ("call", "mcp_files_echo", {"message": "fail"}),
        ("call", "mcp_nope", {}),
    ]
    # Arguments that are no JSON object are refused before anyone is asked.
    assert run(tmp_path, "call", "mcp_files_echo", "[1]").returncode == 2
    assert len(peer.requests) == 3


@pytest.mark.usefixtures("local_fleet")
@pytest.mark.parametrize("code", ["environment-mismatch", "version-mismatch", "draining"])
def test_a_refusal_falls_back_to_in_process_quietly_unless_verbose(tmp_path: Path, code: str) -> None:
    with control_peer(paths.socket_path(), documents, refusal=(code, "not for you")) as peer:
        quiet = run(tmp_path, "--json", "tools")
        verbose = run(tmp_path, "-v", "--json", "tools")
    for completed in (quiet, verbose):
        assert completed.returncode == 0, completed.stderr
        assert [tool["name"] for tool in json.loads(completed.stdout)["tools"]] == ["mcp_local_ping"]
    assert quiet.stderr == ""
    assert re.search(
        f"refused the connection \\({code}\\): not for you: serving in this process", verbose.stderr
    )
    assert len(peer.hellos) == 2 and peer.requests == []


@pytest.mark.usefixtures("local_fleet")
def test_a_daemon_gone_mid_way_falls_back_for_tools_but_never_repeats_a_call(tmp_path: Path) -> None:
    with control_peer(paths.socket_path(), lambda request: Reply(close=True)) as peer:
        tools = run(tmp_path, "--json", "tools")
        call = run(tmp_path, "call", "mcp_local_ping")
    assert tools.returncode == 0, tools.stderr
    assert [tool["name"] for tool in json.loads(tools.stdout)["tools"]] == ["mcp_local_ping"]
    assert call.returncode == 1
    assert "stopped while the call ran, so the tool may or may not have run" in call.stderr
    assert call.stdout == ""
    assert [request["op"] for request in peer.requests] == ["tools", "call"]


@pytest.mark.usefixtures("local_fleet")
@pytest.mark.parametrize(
    ("arguments", "env"),
    [
        (("--no-cache",), {}),
        (("--config", "{extra}"), {}),
        ((), {"MCPFLEET_NO_DAEMON": "1"}),
    ],
    ids=["no-cache", "config", "MCPFLEET_NO_DAEMON"],
)
def test_invocations_the_daemon_cannot_serve_never_ask_it(
    tmp_path: Path, peer: ControlPeer, arguments: tuple[str, ...], env: dict[str, str]
) -> None:
    extra = tmp_path / "extra.json"
    extra.write_text(json.dumps({"mcpServers": {}}))
    options = [argument.format(extra=extra) for argument in arguments]
    completed = run(tmp_path, *options, "--json", "tools", env=env)
    assert completed.returncode == 0, completed.stderr
    assert [tool["name"] for tool in json.loads(completed.stdout)["tools"]] == ["mcp_local_ping"]
    assert peer.hellos == []
