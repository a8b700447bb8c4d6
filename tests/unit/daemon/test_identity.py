"""A server's identity is its resolved entry: the pure parts, without processes.

Which scope of a share runs a session's resolution of an entry (``scopes.place``), the
connect-time variable lookups done from a session's values (``sharing.bind_session_values``),
which variables a session is asked for (``sharing.referenced_names``), how config folders
compare (``wire.config_folders``) and what the daemon keeps of the environment it is
started with (``launch.daemon_environment``).
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from mcpfleet.config import load_all_mcp_configs
from mcpfleet.config.model import DiscoveryResult, ServerConfig, SourceInfo, fingerprint_of
from mcpfleet.contract import wire
from mcpfleet.daemon.scopes import Scope, Wanted, place
from mcpfleet.daemon.sharing import bind_session_values, referenced_names
from mcpfleet.daemon_client.launch import daemon_environment

SOURCE = SourceInfo("mcpfleet", "mcpfleet", "/home/user/mcp.json", "user")


def wanted(token: str | None) -> Wanted:
    template = ServerConfig("gh", "stdio", command="gh-mcp", env={"TOKEN": "${GITHUB_TOKEN}"})
    resolved = replace(
        template,
        fingerprint=fingerprint_of(template),
        env={"TOKEN": token if token is not None else "${GITHUB_TOKEN}"},
        literal_env_keys=frozenset({"TOKEN"}) if token is not None else frozenset(),
    )
    return Wanted(resolved, SOURCE)


def new_scope() -> Scope:
    return Scope("user", Path("/home/user"), None)


def placed(scopes: list[Scope], session: str, entry: Wanted) -> Scope:
    current = next((scope for scope in scopes if session in scope.users.get("gh", set())), None)
    scope = place(scopes, "gh", entry, session=session, current=current, new_scope=new_scope)
    if current is not None and current is not scope:
        current.release(session, "gh")
    scope.use(session, "gh")
    return scope


def test_sessions_share_a_backend_only_when_their_resolved_entries_are_equal() -> None:
    scopes: list[Scope] = []
    first = placed(scopes, "s1", wanted("token-a"))
    second = placed(scopes, "s2", wanted(None))
    third = placed(scopes, "s3", wanted("token-a"))
    assert second is not first
    assert third is first
    assert len(scopes) == 2
    assert first.available["gh"].config.env == {"TOKEN": "token-a"}
    assert second.available["gh"].config.env == {"TOKEN": "${GITHUB_TOKEN}"}


def test_a_session_whose_entry_changed_restarts_its_own_backend_in_place() -> None:
    scopes: list[Scope] = []
    alone = placed(scopes, "s1", wanted("token-a"))
    assert placed(scopes, "s1", wanted("token-b")) is alone
    assert alone.available["gh"].config.env == {"TOKEN": "token-b"}
    assert len(scopes) == 1


def test_a_lingering_backend_is_not_taken_over_by_another_resolution() -> None:
    scopes: list[Scope] = []
    idle = placed(scopes, "s1", wanted("token-a"))
    idle.forget("s1")
    assert "gh" in idle.lingering
    other = placed(scopes, "s2", wanted("token-b"))
    assert other is not idle
    assert idle.available["gh"].config.env == {"TOKEN": "token-a"}
    assert placed(scopes, "s3", wanted("token-a")) is idle  # the idle one is taken over as it is


def discovered(**env: str) -> DiscoveryResult:
    config = ServerConfig(
        "svc",
        "stdio",
        command="svc",
        env={"KEY": "SERVICE_KEY", "RUN": "!pass show svc", "MODE": "fast-mode", **env},
        headers={},
    )
    result = DiscoveryResult(configs={"svc": config}, sources={"svc": SOURCE})
    result.referenced_variables = {"FROM_PLACEHOLDER"}
    return result


def test_connect_time_lookups_come_from_the_session_and_nothing_looks_into_the_daemon() -> None:
    found = discovered()
    assert referenced_names(found) == {"FROM_PLACEHOLDER", "SERVICE_KEY"}
    bound = bind_session_values(found, {"SERVICE_KEY": "session-value"})
    config = bound.configs["svc"]
    assert config.env == {"KEY": "session-value", "RUN": "!pass show svc", "MODE": "fast-mode"}
    assert config.literal_env_keys == {"KEY", "MODE"}  # never looked up again at connect time
    unset = bind_session_values(found, {}).configs["svc"]
    assert unset.env["KEY"] == "SERVICE_KEY"
    assert "KEY" in unset.literal_env_keys  # the daemon's own SERVICE_KEY, if any, is never read


def test_discovery_records_every_variable_a_placeholder_names_and_uses_the_values_given(
    isolated_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from mcpfleet.paths import user_config_file

    path = user_config_file()
    path.parent.mkdir(parents=True, exist_ok=True)
    entry = {"command": "svc", "args": ["${ARG_VALUE}"], "env": {"T": "${TOKEN:-none}"}}
    path.write_text(json.dumps({"mcpServers": {"svc": entry}}))
    monkeypatch.setenv("TOKEN", "of-this-process")
    found = load_all_mcp_configs(tmp_path, environ={"ARG_VALUE": "given"})
    config = found.configs["svc"]
    assert config.args == ("given",)
    assert config.env == {"T": "none"}
    assert {"ARG_VALUE", "TOKEN"} <= found.referenced_variables


def test_config_folders_compare_after_defaults_and_real_paths(tmp_path: Path) -> None:
    home = tmp_path / "home"
    (home / ".config").mkdir(parents=True)
    (tmp_path / "link").symlink_to(home)
    unset = wire.config_folders({"HOME": str(home)})
    assert unset == wire.config_folders({"HOME": str(home), "XDG_CONFIG_HOME": str(home / ".config")})
    assert unset == wire.config_folders({"HOME": str(tmp_path / "link")})
    assert unset == wire.config_folders({"HOME": str(home), "XDG_STATE_HOME": "relative"})
    assert unset["CODEX_HOME"] == str(home / ".codex")
    assert unset["MCPFLEET_HOME"] is None
    assert unset != wire.config_folders({"HOME": str(home), "XDG_CONFIG_HOME": str(tmp_path)})


def test_the_daemon_keeps_the_base_and_the_config_folders_of_its_starter_only() -> None:
    starter = {
        "PATH": "/usr/bin",
        "HOME": "/home/user",
        "LC_ALL": "C.UTF-8",
        "XDG_CONFIG_HOME": "/home/user/.config",
        "MCPFLEET_RUNTIME_DIR": "/tmp/mf-x",
        "HOST_A_API_KEY": "secret",
        "XDG_RUNTIME_DIR": "/run/user/1000",
        "SSH_AUTH_SOCK": "/tmp/ssh-agent",
    }
    assert daemon_environment(starter) == {
        "PATH": "/usr/bin",
        "HOME": "/home/user",
        "LC_ALL": "C.UTF-8",
        "XDG_CONFIG_HOME": "/home/user/.config",
        "MCPFLEET_RUNTIME_DIR": "/tmp/mf-x",
    }
