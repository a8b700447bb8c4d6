"""The daemon's config keys: ``share``, ``keepWarm`` and ``idleTimeout`` in a server entry, and
the ``daemon`` object of mcpfleet's user config."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from tests.unit.config.config_helpers import WriteFile, discover, entry

from mcpfleet import paths
from mcpfleet.config.profiles import DaemonSettings, read_gateway_settings
from mcpfleet.errors import ConfigError

SERVER = {"command": "server-bin", "args": ["--flag"]}
RANGE = "from 0 to 1000000000"
HUGE = 10**400
"""A 400-digit whole number, as a JSON file can hold: too large to become a float."""
NAN, INFINITY = float("nan"), float("inf")


def user_entry(write: WriteFile, **keys: Any) -> None:
    write(paths.user_config_file(), {"mcpServers": {"one": {**SERVER, **keys}}})


@pytest.mark.parametrize(
    ("keys", "share", "keep_warm", "idle_timeout_s"),
    [
        ({}, None, False, None),
        ({"share": "session", "keepWarm": True, "idleTimeout": 300}, "session", True, 300.0),
        ({"share": "project", "keep_warm": True, "idle_timeout": 0.5}, "project", True, 0.5),
        ({"share": "user", "keepWarm": False, "idleTimeout": 0}, "user", False, 0.0),
    ],
)
def test_the_daemon_keys_of_an_entry_in_both_spellings(
    home: Path,
    project: Path,
    write: WriteFile,
    keys: dict[str, Any],
    share: str | None,
    keep_warm: bool,
    idle_timeout_s: float | None,
) -> None:
    user_entry(write, **keys)
    config = discover(project).configs["one"]
    assert (config.share, config.keep_warm, config.idle_timeout_s) == (share, keep_warm, idle_timeout_s)


def test_the_daemon_keys_leave_the_fingerprint_alone(home: Path, project: Path, write: WriteFile) -> None:
    """How the daemon runs a server is not what runs: no new approval, no restart, same cache row."""
    user_entry(write)
    plain = discover(project).configs["one"]
    user_entry(write, share="session", keepWarm=True, idleTimeout=5)
    tuned = discover(project).configs["one"]
    assert tuned.fingerprint == plain.fingerprint
    assert tuned.to_dict() == plain.to_dict()


@pytest.mark.parametrize(
    ("keys", "message"),
    [
        ({"share": "everyone"}, "\"share\" must be one of 'user', 'project', 'session', not 'everyone'"),
        ({"keepWarm": "yes"}, "\"keepWarm\" must be true or false, not 'yes'"),
        ({"idleTimeout": -1}, f'"idleTimeout" must be a number of seconds {RANGE}, not -1'),
        ({"idleTimeout": "10"}, f"\"idleTimeout\" must be a number of seconds {RANGE}, not '10'"),
        ({"idle_timeout": True}, f'"idleTimeout" must be a number of seconds {RANGE}, not True'),
        ({"idleTimeout": HUGE}, f'"idleTimeout" must be a number of seconds {RANGE}, not {HUGE}'),
        ({"idleTimeout": -HUGE}, f'"idleTimeout" must be a number of seconds {RANGE}, not -{HUGE}'),
        ({"idleTimeout": 1e10}, f'"idleTimeout" must be a number of seconds {RANGE}, not 10000000000.0'),
        ({"idleTimeout": 10**9 + 1}, f'"idleTimeout" must be a number of seconds {RANGE}, not 1000000001'),
        ({"idleTimeout": NAN}, f'"idleTimeout" must be a number of seconds {RANGE}, not nan'),
        ({"idleTimeout": INFINITY}, f'"idleTimeout" must be a number of seconds {RANGE}, not inf'),
    ],
)
def test_a_bad_daemon_key_makes_the_entry_invalid(
    home: Path, project: Path, write: WriteFile, keys: dict[str, Any], message: str
) -> None:
    user_entry(write, **keys)
    result = discover(project)
    found = entry(result, "one")
    assert found.state == "invalid"
    assert message in found.reason
    assert "one" not in result.configs


@pytest.mark.parametrize("level", ["project", "local"])
def test_a_project_entry_can_never_be_shared_by_every_session(
    home: Path, project: Path, write: WriteFile, level: str
) -> None:
    if level == "project":
        config_file = write(
            paths.project_config_file(project), {"mcpServers": {"one": {**SERVER, "share": "user"}}}
        )
    else:
        document = {"projects": {str(project): {"mcpServers": {"one": {**SERVER, "share": "user"}}}}}
        config_file = write(home / ".claude.json", document)
    result = discover(project, trust_project=True)
    found = entry(result, "one")
    assert found.state == "invalid"
    assert f'"share": "user" is for user-level entries only; a {level} server' in found.reason
    (error,) = result.errors
    assert error.subject == str(config_file)
    assert error.error.startswith(f"{config_file}: ")


def test_a_project_entry_may_ask_for_a_backend_per_session(
    home: Path, project: Path, write: WriteFile
) -> None:
    write(paths.project_config_file(project), {"mcpServers": {"one": {**SERVER, "share": "session"}}})
    assert discover(project, trust_project=True).configs["one"].share == "session"


def settings_file(tmp_path: Path, document: object) -> Path:
    path = tmp_path / "mcp.json"
    path.write_text(json.dumps(document), encoding="utf-8")
    return path


@pytest.mark.parametrize(
    ("daemon", "expected"),
    [
        (None, DaemonSettings(600.0, 1800.0)),
        ({}, DaemonSettings(600.0, 1800.0)),
        ({"idleTimeout": 60, "daemonIdleTimeout": 120.5}, DaemonSettings(60.0, 120.5)),
        ({"idle_timeout": 0, "daemon_idle_timeout": 7}, DaemonSettings(0.0, 7.0)),
    ],
)
def test_the_daemon_settings_of_the_user_config(
    tmp_path: Path, daemon: dict[str, Any] | None, expected: DaemonSettings
) -> None:
    document: dict[str, Any] = {"mcpServers": {}}
    if daemon is not None:
        document["daemon"] = daemon
    assert read_gateway_settings(settings_file(tmp_path, document)).daemon == expected


@pytest.mark.parametrize(
    ("daemon", "message"),
    [
        ([600], '"daemon" must be an object, e.g. {"idleTimeout": 600, "daemonIdleTimeout": 1800}'),
        ({"idleTimout": 5}, '"daemon" has an unknown key "idleTimout"; use idleTimeout, daemonIdleTimeout'),
        (
            {"idleTimeout": 5, "idle_timeout": 6},
            '"daemon" sets both "idleTimeout" and "idle_timeout"; keep one',
        ),
        (
            {"daemonIdleTimeout": -5},
            f'"daemon.daemonIdleTimeout" must be a number of seconds {RANGE}, not -5',
        ),
        ({"idleTimeout": "600"}, f"\"daemon.idleTimeout\" must be a number of seconds {RANGE}, not '600'"),
        ({"idleTimeout": HUGE}, f'"daemon.idleTimeout" must be a number of seconds {RANGE}, not {HUGE}'),
        (
            {"daemonIdleTimeout": 1e10},
            f'"daemon.daemonIdleTimeout" must be a number of seconds {RANGE}, not 10000000000.0',
        ),
        ({"idle_timeout": NAN}, f'"daemon.idle_timeout" must be a number of seconds {RANGE}, not nan'),
        ({"idleTimeout": INFINITY}, f'"daemon.idleTimeout" must be a number of seconds {RANGE}, not inf'),
    ],
)
def test_bad_daemon_settings_are_one_error_naming_the_file(
    tmp_path: Path, daemon: object, message: str
) -> None:
    path = settings_file(tmp_path, {"daemon": daemon})
    with pytest.raises(ConfigError) as raised:
        read_gateway_settings(path)
    assert str(raised.value) == f"{path}: {message}"
