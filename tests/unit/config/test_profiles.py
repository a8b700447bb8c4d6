"""Profiles and tool budgets read from mcpfleet's user config: their shape, and one error line
naming the file and the fix for anything else."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mcpfleet.config.profiles import Profile, read_gateway_settings
from mcpfleet.errors import ConfigError


def settings_file(tmp_path: Path, document: object) -> Path:
    path = tmp_path / "mcp.json"
    path.write_text(json.dumps(document), encoding="utf-8")
    return path


def test_profiles_and_budgets_are_read_with_their_defaults(tmp_path: Path) -> None:
    path = settings_file(
        tmp_path,
        {
            "mcpServers": {},
            "profiles": {"cursor": {"servers": ["github"], "pin": ["github_*issue*"]}, "all": {}},
            "toolBudgets": {"Cursor*": 60, "codex*": None},
        },
    )
    settings = read_gateway_settings(path)
    assert settings.profile("cursor") == Profile("cursor", servers=("github",), pin=("github_*issue*",))
    assert settings.profile("all") == Profile("all")
    assert settings.client_budgets == (("cursor*", 60), ("codex*", None))


def test_a_missing_file_has_no_profiles(tmp_path: Path) -> None:
    settings = read_gateway_settings(tmp_path / "absent.json")
    assert settings.profiles == {} and settings.client_budgets == ()
    with pytest.raises(
        ConfigError,
        match=r'unknown profile "x": define it under "profiles" in .*\(it defines none yet\)',
    ):
        settings.profile("x")


def test_an_unknown_profile_names_it_and_the_known_ones(tmp_path: Path) -> None:
    path = settings_file(tmp_path, {"profiles": {"b": {}, "a": {}}})
    with pytest.raises(ConfigError) as error:
        read_gateway_settings(path).profile("cursor")
    assert (
        str(error.value)
        == f'unknown profile "cursor": define it under "profiles" in {path} (profiles there: a, b)'
    )


@pytest.mark.parametrize(
    ("document", "fragment"),
    [
        ([], "must hold a JSON object"),
        ({"profiles": []}, '"profiles" must be an object'),
        ({"profiles": {"p": []}}, 'profile "p" must be an object'),
        ({"profiles": {"p": {"tools": []}}}, 'unknown key "tools"'),
        ({"profiles": {"p": {"include": "github_*"}}}, '"include" must be a list'),
        ({"profiles": {"p": {"pin": [""]}}}, '"pin" must be a list of non-empty strings'),
        ({"toolBudgets": [40]}, '"toolBudgets" must be an object'),
        ({"toolBudgets": {"cursor*": 0}}, "1 or more"),
        ({"toolBudgets": {"cursor*": "40"}}, "whole number"),
        ({"toolBudgets": {"cursor*": True}}, "whole number"),
    ],
)
def test_a_malformed_section_is_one_error_naming_the_file(
    tmp_path: Path, document: object, fragment: str
) -> None:
    path = settings_file(tmp_path, document)
    with pytest.raises(ConfigError) as error:
        read_gateway_settings(path)
    assert fragment in str(error.value) and str(path) in str(error.value)
    assert error.value.path == str(path)


def test_globs_match_the_served_name_or_the_server_tool_pair() -> None:
    profile = Profile(
        "p", include=("github_*", "files/read_*"), exclude=("*delete*",), pin=("files/read_text_file",)
    )
    assert profile.keeps_tool("github", "create_issue", "github_create_issue")
    assert profile.keeps_tool("files", "read_text_file", "read_text_file")  # --prefix none: by pair
    assert not profile.keeps_tool("files", "write_file", "files_write_file")
    assert not profile.keeps_tool("github", "delete_repo", "github_delete_repo")
    assert profile.pins_tool("files", "read_text_file", "files_read_text_file")
    assert Profile("q", servers=("a",)).entry_filter()(type("C", (), {"name": "b"})()) is not None
