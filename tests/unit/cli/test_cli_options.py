"""The six global options become one ``FleetOptions``, and every manager, agent session and
discovery a command builds takes its settings from it."""

from __future__ import annotations

import inspect
from pathlib import Path

import pytest

from mcpfleet.agent.session import open_agent_session
from mcpfleet.cli.main import build_parser
from mcpfleet.cli.options import FleetOptions
from mcpfleet.config.exa import exa_entry_filter
from mcpfleet.fleet.manager import MCPManager


def options_of(*arguments: str) -> FleetOptions:
    return FleetOptions.from_args(build_parser().parse_args([*arguments, "status"]))


def test_every_global_option_is_read_once(tmp_path: Path) -> None:
    options = options_of(
        "--cwd",
        str(tmp_path),
        "--config",
        "a.json",
        "--config",
        "b.json",
        "--no-project-config",
        "--trust-project",
        "--startup-timeout",
        "0",
        "--no-cache",
    )
    assert options == FleetOptions(
        project_root=tmp_path.resolve(),
        extra_config_paths=(Path("a.json"), Path("b.json")),
        enable_project_config=False,
        trust_project=True,
        startup_timeout_ms=0,
        use_cache=False,
    )


def test_without_options_the_fleet_is_the_current_folders_with_the_defaults(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    assert options_of() == FleetOptions(project_root=tmp_path.resolve())
    monkeypatch.setenv("MCPFLEET_TRUST_PROJECT", "1")
    assert options_of().trust_project is True


def test_a_manager_and_a_session_get_the_same_settings(tmp_path: Path) -> None:
    options = options_of(
        "--cwd", str(tmp_path), "--config", "a.json", "--startup-timeout", "80", "--no-cache"
    )
    session_settings = options.session_settings()
    assert session_settings == {
        "enable_project_config": True,
        "extra_config_paths": (Path("a.json"),),
        "trust_project": False,
        "cache": None,
        "startup_timeout_ms": 80,
    }
    assert options.manager_settings() == {**session_settings, "entry_filter": exa_entry_filter}
    # Every setting is a keyword the builder takes (a renamed keyword fails here, not at run time).
    assert set(options.manager_settings()) <= set(inspect.signature(MCPManager).parameters)
    assert set(session_settings) <= set(inspect.signature(open_agent_session).parameters)


def test_the_manager_built_is_configured_and_not_started(tmp_path: Path) -> None:
    manager = options_of("--cwd", str(tmp_path), "--trust-project", "--startup-timeout", "0").manager()
    settings = manager.settings
    assert (manager.cwd, settings.trust_project, settings.startup_timeout_ms) == (tmp_path.resolve(), True, 0)
    assert settings.entry_filter is exa_entry_filter
    with pytest.raises(RuntimeError, match="not running"):
        manager.task_group  # noqa: B018


def test_approving_and_editing_read_every_project_entry_and_trust_none(tmp_path: Path) -> None:
    options = options_of("--cwd", str(tmp_path), "--no-project-config", "--trust-project")
    assert options.discovery_settings(all_project_entries=True) == {
        "enable_project_config": True,
        "extra_config_paths": (),
        "trust_project": False,
    }
    assert options.discovery_settings() == {
        "enable_project_config": False,
        "extra_config_paths": (),
        "trust_project": True,
    }
