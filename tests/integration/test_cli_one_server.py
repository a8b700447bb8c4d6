"""In-process commands start only what they need, and unknown names fail at once.

``tools --server S`` and ``call S/T`` start server S alone: a slow server of the same fleet,
one that cannot finish its start until a file appears, is never waited for (the commands
return while the file is still missing). Unknown names are refused from the config (and,
for a tool, from the cache) with the right noun and a few close names; ``--roots`` decides
what roots servers are offered, and without it a server that follows roots keeps the
folders its own config names (as the reference filesystem server does)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from tests.conftest import PYTHON, SERVERS_DIR
from tests.integration.user_fleet import fake_entry, write_user_config

CLI = [sys.executable, "-m", "mcpfleet.cli.main"]
ROOTS_SERVER = SERVERS_DIR / "roots_server.py"


def run(project: Path, *arguments: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*CLI, "--cwd", str(project), *arguments],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=120,
        env=os.environ.copy(),
        check=False,
    )


@pytest.fixture
def gate(tmp_path: Path) -> Path:
    """A fleet of ``fast`` and ``slow``; ``slow`` (never cached) starts once the returned file exists."""
    gate_file = tmp_path / "let-slow-start"
    write_user_config(
        {
            "fast": fake_entry("fast", "--tool", "echo", "--tool", "add"),
            "slow": fake_entry("slow", "--tool", "echo", "--start-when-exists", str(gate_file)),
        }
    )
    return gate_file


def test_tools_of_one_server_does_not_wait_for_a_slow_one(tmp_path: Path, gate: Path) -> None:
    completed = run(tmp_path, "tools", "--server", "fast", "--json")
    assert completed.returncode == 0, completed.stderr
    assert not gate.exists()  # returned while the slow server still could not start
    document = json.loads(completed.stdout)
    assert [tool["name"] for tool in document["tools"]] == ["mcp_fast_add", "mcp_fast_echo"]
    assert document["errors"] == []


def test_a_call_waits_only_for_the_server_it_calls(tmp_path: Path, gate: Path) -> None:
    completed = run(tmp_path, "call", "fast/add", '{"a": 2, "b": 3}', "--json")
    assert completed.returncode == 0, completed.stderr
    assert not gate.exists()
    assert json.loads(completed.stdout)["structured"] == {"sum": 5}
    spelled = run(tmp_path, "call", "mcp_fast_add", '{"a": 1, "b": 1}')
    assert (spelled.returncode, spelled.stdout.splitlines()[0]) == (0, "2")
    assert not gate.exists()


def test_an_unknown_server_is_named_as_a_server_at_once(tmp_path: Path, gate: Path) -> None:
    completed = run(tmp_path, "call", "nosrv/read", "{}")
    assert completed.returncode == 1
    assert completed.stderr == "mcpfleet: no server named 'nosrv' (`mcpfleet config` lists the servers)\n"
    close = run(tmp_path, "call", "fsat/echo", "{}")
    assert close.returncode == 1
    assert "no server named 'fsat'; did you mean 'fast'?" in close.stderr
    assert not gate.exists()


def test_an_unknown_tool_of_a_known_server_is_named_with_a_few_close_names(tmp_path: Path) -> None:
    write_user_config({"many": fake_entry("many", "--tools", "40", "--tool", "echo")})
    completed = run(tmp_path, "call", "many/tool_7x", "{}")
    assert completed.returncode == 1
    [line] = completed.stderr.splitlines()
    assert line.startswith("mcpfleet: no tool named 'many/tool_7x' on server 'many'; did you mean ")
    assert "'many/tool_7'" in line
    suggested = line.split("did you mean ", 1)[1].split("?", 1)[0].split(" or ")
    assert 1 <= len(suggested) <= 3  # a few names, not the server's 41
    assert "`mcpfleet tools --server many` lists its 41 tools" in line
    far = run(tmp_path, "call", "mcp_many_zzzzzzzz", "{}")
    assert "did you mean" not in far.stderr and "on server 'many'" in far.stderr


def test_an_unknown_tool_fails_from_the_cache_without_waiting_for_its_server(tmp_path: Path) -> None:
    gate_file = tmp_path / "let-it-start"
    write_user_config({"late": fake_entry("late", "--tool", "echo", "--start-when-exists", str(gate_file))})
    gate_file.touch()
    assert run(tmp_path, "tools", "--server", "late").returncode == 0  # its tools are now cached
    gate_file.unlink()
    completed = run(tmp_path, "call", "late/ecko", "{}")
    assert completed.returncode == 1
    assert "no tool named 'late/ecko' on server 'late'; did you mean 'late/echo'?" in completed.stderr
    assert not gate_file.exists()


def test_tools_of_an_unknown_server_is_a_usage_error(tmp_path: Path, gate: Path) -> None:
    for strict in ([], ["--strict"]):
        completed = run(tmp_path, "tools", "--server", "fsat", *strict)
        assert completed.returncode == 2
        assert completed.stdout == ""
        assert "no server named 'fsat'; did you mean 'fast'?" in completed.stderr
    assert not gate.exists()


def test_tools_answers_from_the_cache_and_live_waits_for_every_server(tmp_path: Path) -> None:
    gate_file = tmp_path / "let-it-start"
    write_user_config({"late": fake_entry("late", "--tool", "echo", "--start-when-exists", str(gate_file))})
    gate_file.touch()
    assert run(tmp_path, "tools").returncode == 0  # its tools are cached now
    gate_file.unlink()
    live = subprocess.Popen(
        [*CLI, "--cwd", str(tmp_path), "tools", "--json", "--live"], stdout=subprocess.PIPE, text=True
    )
    try:
        cached = run(tmp_path, "tools", "--json")
        assert cached.returncode == 0, cached.stderr
        assert [(tool["name"], tool["deferred"]) for tool in json.loads(cached.stdout)["tools"]] == [
            ("mcp_late_echo", True)
        ]
        assert live.poll() is None  # the server cannot start before the file exists
        gate_file.touch()
        output, _ = live.communicate(timeout=120)
    finally:
        live.kill()
        live.wait()
    assert live.returncode == 0
    assert [(tool["name"], tool["deferred"]) for tool in json.loads(output)["tools"]] == [
        ("mcp_late_echo", False)
    ]


# -- roots -------------------------------------------------------------------------------------------


@pytest.fixture
def docs(tmp_path: Path) -> Path:
    """A ``docs`` server whose config allows one folder, holding ``guide.txt``."""
    folder = tmp_path / "documents"
    folder.mkdir()
    (folder / "guide.txt").write_text("read me first\n")
    write_user_config({"docs": {"command": PYTHON, "args": [str(ROOTS_SERVER), "--allow", str(folder)]}})
    return folder


def test_a_call_offers_no_roots_so_the_server_keeps_its_configured_folders(
    tmp_path: Path, docs: Path
) -> None:
    project = tmp_path / "project"
    project.mkdir()
    read = run(project, "call", "docs/read_text_file", json.dumps({"path": str(docs / "guide.txt")}))
    assert (read.returncode, read.stdout) == (0, "read me first\n\n"), read.stderr
    seen = json.loads(run(project, "call", "docs/client_roots").stdout)
    assert seen == {"declared": True, "roots": [], "allowed": [str(docs.resolve())]}


def test_roots_are_offered_when_asked_and_replace_the_servers_folders(tmp_path: Path, docs: Path) -> None:
    project = tmp_path / "project"
    (project / "src").mkdir(parents=True)
    seen = json.loads(
        run(project, "call", "docs/client_roots", "--roots", "src", "--roots", str(docs)).stdout
    )
    assert seen["declared"] is True
    assert seen["roots"] == [(project / "src").resolve().as_uri(), docs.resolve().as_uri()]
    denied = run(
        project,
        "call",
        "docs/read_text_file",
        json.dumps({"path": str(docs / "guide.txt")}),
        "--roots",
        "src",
    )
    assert denied.returncode == 1 and "Access denied" in denied.stderr


def test_the_shell_offers_roots_only_when_asked(tmp_path: Path, docs: Path) -> None:
    guide = json.dumps({"path": str(docs / "guide.txt")})
    script = f"/call docs/client_roots\n/call docs/read_text_file {guide}\n"
    plain = run(tmp_path, "shell", stdin=script)
    assert plain.returncode == 0, plain.stderr
    assert '"roots": []' in plain.stdout and "read me first" in plain.stdout
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    asked = run(tmp_path, "shell", "--roots", str(elsewhere), stdin=script)
    assert f'"roots": ["{elsewhere.resolve().as_uri()}"]' in asked.stdout and "Access denied" in asked.stdout
