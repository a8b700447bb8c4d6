"""``"sandbox"`` in a server entry and in mcpfleet's user config: shapes, defaults per level,
paths, the fingerprint, and the errors bad values get."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from tests.unit.config.config_helpers import WriteFile, discover, entry

from mcpfleet import paths
from mcpfleet.config.model import SANDBOX_OFF, Sandbox

SERVER = {"command": "server-bin", "args": ["--flag"]}
MINE = {"command": "my-own-server"}


def project_entry(write: WriteFile, project: Path, **keys: Any) -> None:
    write(project / ".mcp.json", {"mcpServers": {"one": {**SERVER, **keys}}})


def user_entry(write: WriteFile, **keys: Any) -> None:
    write(paths.user_config_file(), {"mcpServers": {"one": {**SERVER, **keys}}})


def test_a_project_server_is_sandboxed_and_a_user_server_is_not_by_default(
    home: Path, project: Path, write: WriteFile
) -> None:
    project_entry(write, project)
    write(home / ".cursor" / "mcp.json", {"mcpServers": {"two": SERVER | {"args": ["two"]}}})
    configs = discover(project, trust_project=True).configs
    assert configs["one"].effective_sandbox == Sandbox()
    assert configs["two"].effective_sandbox == SANDBOX_OFF


def test_a_remote_server_is_never_sandboxed(home: Path, project: Path, write: WriteFile) -> None:
    write(project / ".mcp.json", {"mcpServers": {"web": {"url": "https://example.com/mcp", "sandbox": True}}})
    assert discover(project, trust_project=True).configs["web"].effective_sandbox == SANDBOX_OFF


def test_paths_are_expanded_from_the_home_and_the_working_folder(
    home: Path, project: Path, write: WriteFile
) -> None:
    sandbox = {"network": False, "paths": ["data", "~/shared"], "readOnlyPaths": ["/srv/models"]}
    project_entry(write, project, sandbox=sandbox)
    config = discover(project, trust_project=True).configs["one"]
    assert config.effective_sandbox == Sandbox(
        network=False, paths=(str(project / "data"), str(home / "shared")), read_only_paths=("/srv/models",)
    )


@pytest.mark.parametrize("source", ["codex", "opencode"])
def test_the_key_is_honoured_in_every_source(
    home: Path, project: Path, write: WriteFile, source: str
) -> None:
    if source == "codex":
        write(home / ".codex" / "config.toml", '[mcp_servers.one]\ncommand = "server-bin"\nsandbox = true\n')
    else:
        write(
            home / ".config" / "opencode" / "opencode.json",
            {"mcp": {"one": {"type": "local", "command": ["server-bin"], "sandbox": True}}},
        )
    assert discover(project).configs["one"].effective_sandbox == Sandbox()


def test_the_user_config_sets_the_defaults_per_level(home: Path, project: Path, write: WriteFile) -> None:
    write(
        paths.user_config_file(),
        {"sandbox": {"project": {"network": False}, "user": True}, "mcpServers": {"mine": MINE}},
    )
    project_entry(write, project)
    configs = discover(project, trust_project=True).configs
    assert configs["one"].effective_sandbox == Sandbox(network=False)
    assert configs["mine"].effective_sandbox == Sandbox()


def test_an_entry_of_its_own_wins_over_the_level_default(home: Path, project: Path, write: WriteFile) -> None:
    write(paths.user_config_file(), {"sandbox": {"project": True}})
    project_entry(write, project, sandbox=False)
    assert discover(project, trust_project=True).configs["one"].effective_sandbox == SANDBOX_OFF


def test_a_declared_sandbox_is_part_of_the_fingerprint_and_the_default_is_not(
    home: Path, project: Path, write: WriteFile
) -> None:
    """A repository that loosens its server's sandbox asks for a new approval; an entry written
    before the key existed keeps its approval."""
    project_entry(write, project)
    plain = discover(project, trust_project=True).configs["one"]
    project_entry(write, project, sandbox=False)
    loosened = discover(project, trust_project=True).configs["one"]
    assert loosened.fingerprint != plain.fingerprint
    write(paths.user_config_file(), {"sandbox": {"project": False}})
    assert discover(project, trust_project=True).configs["one"].fingerprint == loosened.fingerprint
    project_entry(write, project)
    assert discover(project, trust_project=True).configs["one"].fingerprint == plain.fingerprint


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("yes", '"sandbox" must be true, false or an object, not \'yes\'; write true, false, or {"network"'),
        ({"net": False}, "\"sandbox\" has unknown key 'net' (known: network, paths, readOnlyPaths); write"),
        ({"network": "no"}, '"sandbox".network must be true or false'),
        ({"paths": "/data"}, '"sandbox".paths must be a list of paths (absolute, "~/…" or relative to'),
        ({"readOnlyPaths": [3]}, '"sandbox".readOnlyPaths must be a list of paths'),
        ({"paths": [""]}, '"sandbox".paths must be a list of paths'),
    ],
)
def test_a_bad_value_is_an_error_naming_the_file_the_server_and_the_fix(
    home: Path, project: Path, write: WriteFile, value: Any, message: str
) -> None:
    user_entry(write, sandbox=value)
    result = discover(project)
    assert "one" not in result.configs
    assert entry(result, "one").state == "invalid"
    [error] = result.errors
    assert error.path == str(paths.user_config_file())
    assert error.message.startswith(f'{paths.user_config_file()}: server "one": ')
    assert message in error.message


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (True, '"sandbox" must be an object of levels (project, local, user)'),
        ({"team": True}, "\"sandbox\" has unknown level 'team'"),
        ({"project": "on"}, '"sandbox.project" must be true, false or an object'),
    ],
)
def test_a_bad_default_is_one_error_naming_the_user_file_and_the_built_in_defaults_stay(
    home: Path, project: Path, write: WriteFile, value: Any, message: str
) -> None:
    write(paths.user_config_file(), {"sandbox": value, "mcpServers": {"mine": MINE}})
    project_entry(write, project)
    result = discover(project, trust_project=True)
    [error] = result.errors
    assert error.message.startswith(f"{paths.user_config_file()}: ")
    assert message in error.message
    assert result.configs["one"].effective_sandbox == Sandbox()
    assert result.configs["mine"].effective_sandbox == SANDBOX_OFF
