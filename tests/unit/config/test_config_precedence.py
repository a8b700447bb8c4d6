"""Precedence: level, then provider, then file order; shadowing, disabling, aliases,
the user override lists, --no-project-config, --config files and the Exa filter."""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.unit.config.config_helpers import WriteFile, discover, entry

from mcpfleet import paths
from mcpfleet.config import load_all_mcp_configs
from mcpfleet.errors import ConfigError


def servers(**entries: dict[str, object]) -> dict[str, object]:
    return {"mcpServers": entries}


def test_local_beats_project_beats_user(project: Path, home: Path, write: WriteFile) -> None:
    write(
        home / ".claude.json",
        {
            **servers(s={"command": "user"}),
            "projects": {str(project): servers(s={"command": "local"})},
        },
    )
    write(project / ".mcp.json", servers(s={"command": "project"}))
    result = discover(project, trust_project=True)
    assert result.configs["s"].command == "local"
    assert [(e.source.level, e.state) for e in result.entries] == [
        ("local", "active"),
        ("project", "shadowed"),
        ("user", "shadowed"),
    ]
    assert 'shadowed by "s" from Claude Code (local' in result.entries[1].reason


def test_provider_order_within_a_level(project: Path, home: Path, write: WriteFile) -> None:
    write(home / ".cursor" / "mcp.json", servers(s={"command": "cursor"}))
    write(home / ".gemini" / "settings.json", servers(s={"command": "gemini"}))
    write(paths.user_config_file(), servers(s={"command": "mcpfleet"}))
    write(home / ".claude.json", servers(s={"command": "claude"}))
    result = discover(project)
    assert [e.source.provider for e in result.entries] == ["mcpfleet", "claude-code", "gemini", "cursor"]
    assert result.configs["s"].command == "mcpfleet"


def test_order_within_a_file_is_kept(project: Path, home: Path, write: WriteFile) -> None:
    write(home / ".claude.json", servers(b={"command": "b"}, a={"command": "a"}, c={"command": "c"}))
    assert list(discover(project).configs) == ["b", "a", "c"]


def test_disabled_entry_claims_its_name(project: Path, home: Path, write: WriteFile) -> None:
    write(paths.user_config_file(), servers(s={"command": "x", "enabled": False}))
    write(home / ".claude.json", servers(s={"command": "y"}))
    result = discover(project)
    assert "s" not in result.configs
    assert [e.state for e in result.entries] == ["disabled", "shadowed"]
    assert "enabled: false" in result.entries[0].reason


def test_same_connection_under_two_names_is_shadowed(project: Path, home: Path, write: WriteFile) -> None:
    write(home / ".claude.json", servers(files={"command": "npx", "args": ["fs"]}))
    write(home / ".cursor" / "mcp.json", servers(filesystem={"command": "npx", "args": ["fs"]}))
    result = discover(project)
    alias = entry(result, "filesystem")
    assert alias.state == "shadowed"
    assert 'same connection as "files" from Claude Code' in alias.reason
    assert list(result.configs) == ["files"]


def test_user_deny_and_force_enable_lists(project: Path, home: Path, write: WriteFile) -> None:
    write(paths.user_config_file(), {"disabledServers": ["a", "b"], "enabledServers": ["b", "c"]})
    write(
        home / ".claude.json",
        servers(a={"command": "a"}, b={"command": "b"}, c={"command": "c", "enabled": False}),
    )
    result = discover(project)
    assert entry(result, "a").state == "disabled" and "disabledServers" in entry(result, "a").reason
    assert entry(result, "b").state == "disabled"  # deny wins over force-enable
    assert entry(result, "c").state == "active"  # force-enable overrides the tool's enabled: false
    assert result.configs["c"].enabled is True


def test_no_project_config_filters_project_entries_before_precedence(
    project: Path, home: Path, write: WriteFile
) -> None:
    write(project / ".mcp.json", servers(s={"command": "project", "enabled": False}))
    write(home / ".claude.json", servers(s={"command": "user"}))
    result = discover(project, enable_project_config=False)
    assert result.configs["s"].command == "user"
    assert entry(result, "s").state == "filtered" and "--no-project-config" in entry(result, "s").reason


def test_extra_config_files_override_and_later_files_win(
    project: Path, home: Path, tmp_path: Path, write: WriteFile
) -> None:
    write(
        home / ".claude.json",
        {**servers(s={"command": "claude"}), "projects": {str(project): servers(s={"command": "local"})}},
    )
    first = write(tmp_path / "one.json", servers(s={"command": "first"}, only={"command": "o"}))
    second = write(tmp_path / "two.json", servers(s={"command": "second"}))
    result = discover(project, extra_config_paths=[first, second])
    assert result.configs["s"].command == "second"
    assert result.sources["s"].provider == "config-file"
    assert result.configs["only"].command == "o"


def test_extra_config_can_disable_a_discovered_name(
    project: Path, home: Path, tmp_path: Path, write: WriteFile
) -> None:
    write(home / ".claude.json", servers(s={"command": "claude"}))
    extra = write(tmp_path / "off.json", servers(s={"command": "claude", "enabled": False}))
    assert "s" not in discover(project, extra_config_paths=[extra]).configs


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (None, "file not found"),
        ("{not json", "invalid JSON"),
        ('{"mcpServers": []}', '"mcpServers" must be an object'),
        ('{"mcpServers": {"s": 3}}', 'server "s" must be an object'),
        ("[]", "expected an object"),
    ],
)
def test_bad_extra_config_is_a_hard_error(
    project: Path, tmp_path: Path, write: WriteFile, content: str | None, message: str
) -> None:
    path = tmp_path / "extra.json"
    if content is not None:
        write(path, content)
    with pytest.raises(ConfigError, match=message) as caught:
        load_all_mcp_configs(project, extra_config_paths=[path])
    assert str(path) in str(caught.value)


def test_exa_filtered_with_keys_collected(
    project: Path, home: Path, write: WriteFile, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("EXA_KEY", "from-env")
    write(
        home / ".claude.json",
        servers(
            exa={"command": "npx", "args": ["exa-mcp"], "env": {"EXA_API_KEY": "${EXA_KEY}"}},
            search={"url": "https://mcp.exa.ai/mcp?exaApiKey=from-url"},
            research={
                "url": "https://mcp.exa.ai/mcp?exaApiKey=k3&tools=web_search_exa,deep_researcher_start"
            },
            other={"command": "npx", "args": ["other"]},
        ),
    )
    result = discover(project)
    assert entry(result, "exa").state == "filtered" and "Exa" in entry(result, "exa").reason
    assert entry(result, "search").state == "filtered"
    assert entry(result, "research").state == "active"  # asks for tools beyond the native one
    assert result.exa_api_keys == ["from-env", "from-url", "k3"]
    unfiltered = discover(project, filter_exa=False)
    assert {"exa", "search", "research", "other"} <= set(unfiltered.configs)
