"""Where servers and ``!command`` secret look-ups run: never in a project they were not declared by.

A cloned repository can plant a module (``pkg/``, ``keyring.py``) or a ``node_modules``
package where an interpreter looks first: its working directory. So a user-level (or
local-level) server and every ``!command`` run in the user's home unless the entry sets a
``cwd``; only an approved project-level server runs in the project.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from tests.conftest import PYTHON
from tests.servers.fixtures import FAKE_SERVER, READS_TEST_SERVERS

from mcpfleet.client.secrets import clear_secret_cache
from mcpfleet.config import load_all_mcp_configs
from mcpfleet.fleet.manager import MCPManager
from mcpfleet.paths import user_config_file

pytestmark = pytest.mark.anyio


def write_user_servers(servers: dict[str, dict[str, object]]) -> None:
    path = user_config_file()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"mcpServers": servers}))


def plant_module(project: Path, module: str, evidence: Path) -> None:
    """A module in the project that, if ever imported, writes ``evidence``."""
    code = f"open({str(evidence)!r}, 'w').write('imported from the project')\n"
    (project / module).mkdir()
    (project / module / "__init__.py").write_text(code)
    (project / module / "__main__.py").write_text(code)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "cloned-repo"
    root.mkdir()
    return root.resolve()


async def test_a_user_level_server_does_not_import_a_module_planted_in_the_project(
    project: Path, tmp_path: Path
) -> None:
    evidence = tmp_path / "evidence"
    plant_module(project, "mcpfleet_planted_pkg", evidence)
    write_user_servers({"victim": {"command": PYTHON, "args": ["-m", "mcpfleet_planted_pkg"]}})
    async with MCPManager(project, cache=None, startup_timeout_ms=0) as manager:
        result = await manager.discover_and_connect()
    assert not evidence.exists(), "a user-level server ran code planted in the project"
    assert "victim" in result.errors
    assert "No module named mcpfleet_planted_pkg" in result.errors["victim"]


async def test_a_secret_command_does_not_import_a_module_planted_in_the_project(
    project: Path, tmp_path: Path
) -> None:
    evidence = tmp_path / "evidence"
    plant_module(project, "mcpfleet_planted_keyring", evidence)
    clear_secret_cache()
    write_user_servers(
        {
            "victim": {
                "command": PYTHON,
                "args": [str(FAKE_SERVER), "--name", "victim"],
                "env": {"TOKEN": f"!{PYTHON} -m mcpfleet_planted_keyring"},
            }
        }
    )
    try:
        async with MCPManager(project, cache=None, startup_timeout_ms=0) as manager:
            result = await manager.discover_and_connect()
    finally:
        clear_secret_cache()
    assert not evidence.exists(), "a !command secret look-up ran code planted in the project"
    assert "the !command for TOKEN exited with status 1" in result.errors["victim"]


async def test_user_and_local_servers_run_in_the_home_and_approved_project_servers_in_the_project(
    project: Path, isolated_home: Path
) -> None:
    def entry(name: str) -> dict[str, object]:
        return {"command": PYTHON, "args": [str(FAKE_SERVER), "--name", name, "--tool", "env"]}

    write_user_servers({"mine": entry("mine")})
    claude_user_file = {"projects": {str(project): {"mcpServers": {"local": entry("local")}}}}
    (isolated_home / ".claude.json").write_text(json.dumps(claude_user_file))
    theirs = {**entry("theirs"), "sandbox": READS_TEST_SERVERS}
    (project / ".mcp.json").write_text(json.dumps({"mcpServers": {"theirs": theirs}}))
    async with MCPManager(project, cache=None, startup_timeout_ms=0, trust_project=True) as manager:
        await manager.discover_and_connect()
        folders = {
            name: (await manager.call_tool(name, "env", {"name": "HOME"})).structured_content["cwd"]
            for name in ("mine", "local", "theirs")
        }
    assert folders == {"mine": str(isolated_home), "local": str(isolated_home), "theirs": str(project)}


def test_workspace_placeholders_still_expand_to_the_project_as_text(
    project: Path, isolated_home: Path
) -> None:
    vscode_user = isolated_home / ".config" / "Code" / "User" / "mcp.json"
    vscode_user.parent.mkdir(parents=True)
    servers = {
        "lint": {"command": "lint-server", "args": ["--root", "${workspaceFolder}"]},
        "pinned": {"command": "tool", "cwd": "${workspaceFolder}"},
    }
    vscode_user.write_text(json.dumps({"servers": servers}))
    result = load_all_mcp_configs(project)
    assert result.configs["lint"].args == ("--root", str(project))
    assert result.configs["lint"].cwd == str(isolated_home)
    assert result.configs["pinned"].cwd == str(project)


def test_the_same_server_in_a_user_file_and_an_approved_project_file_stays_one_server(
    project: Path,
) -> None:
    entry: dict[str, object] = {"command": "npx", "args": ["-y", "some-mcp-server"]}
    write_user_servers({"mine": entry})
    (project / ".mcp.json").write_text(json.dumps({"mcpServers": {"theirs": entry}}))
    result = load_all_mcp_configs(project, trust_project=True)
    assert list(result.configs) == ["theirs"]
    assert result.configs["theirs"].cwd == str(project)
    assert "same connection as" in next(e for e in result.entries if e.name == "mine").reason
