"""Reading a team file (``team.loading``): JSON and YAML, ``${VAR}`` from the environment only,
paths against the file's folder, and one error line naming the file, the key and the fix; and
``mcpfleet team check FILE`` on top of it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from mcpfleet.redaction import redact_text
from mcpfleet.team.loading import TeamFileError, load_team_file, server_configs

MCPFLEET = Path(sys.executable).parent / "mcpfleet"

GOOD_YAML = """\
public_url: https://mcp.example.com/mcp
servers:
  github: {url: "https://api.example.com/mcp", headers: {Authorization: "Bearer ${GITHUB_TOKEN}"}}
  jira: {url: "https://jira.example.com/mcp", credentials: per-user}
  time: {command: uvx, args: [mcp-server-time], cwd: tools}
identity:
  issuer: https://idp.example.com
  groups_claim: roles
  api_keys: keys/api-keys.json
policies:
  - {groups: [eng], allow: ["github/*", "jira/read_*"], name: engineers}
  - {users: [alice@example.com], allow: ["*"]}
  - {allow: ["time/*"], deny: ["*/delete_*"]}
audit: {file: audit.jsonl, on_failure: open}
"""

BACKGROUND_SYNC = GOOD_YAML.replace("on_failure: open}", "on_failure: open, sync: background}")

MINIMAL: dict[str, Any] = {
    "public_url": "https://mcp.example.com/mcp",
    "identity": {"issuer": "https://idp.example.com"},
}


def write(tmp_path: Path, document: dict[str, Any] | str, name: str = "team.json") -> Path:
    path = tmp_path / name
    path.write_text(document if isinstance(document, str) else json.dumps(document))
    return path


def error_of(path: Path, environ: dict[str, str] | None = None) -> str:
    with pytest.raises(TeamFileError) as raised:
        load_team_file(path, environ or {})
    message = str(raised.value)
    assert "\n" not in message
    assert message.startswith(str(path))
    return message


def test_a_yaml_team_file_loads_with_its_variables_paths_and_defaults(tmp_path: Path) -> None:
    path = write(tmp_path, GOOD_YAML, "team.yaml")
    team = load_team_file(path, {"GITHUB_TOKEN": "ghp-secret-value-123"})
    assert team.public_url == "https://mcp.example.com/mcp"
    assert team.identity.audience == team.public_url  # the default
    assert team.identity.groups_claim == "roles"
    assert team.identity.api_keys == tmp_path / "keys" / "api-keys.json"
    assert team.state.sqlite_path == tmp_path / "team-state.sqlite3" and team.state.postgres is None
    assert team.audit.file == tmp_path / "audit.jsonl" and not team.audit.fail_closed and team.audit.store
    assert team.audit.sync == "each"  # the default: every record on disk before its call answers
    assert [policy.index for policy in team.policies] == [0, 1, 2]
    assert team.policies[0].groups == ("eng",) and team.policies[0].name == "engineers"
    assert team.policies[2].deny == ("*/delete_*",) and team.policies[2].users is None
    assert team.per_user_servers() == {"jira"}
    assert team.servers["github"]["headers"]["Authorization"] == "Bearer ghp-secret-value-123"
    # What substitution put in is a secret: masked wherever mcpfleet prints it.
    assert "ghp-secret-value-123" not in redact_text("sent Bearer ghp-secret-value-123")


def test_servers_become_configs_whose_values_are_all_final_text(tmp_path: Path) -> None:
    document = {
        **MINIMAL,
        "servers": {
            "tool": {"command": "run-tool", "env": {"TOKEN": "!echo hi", "HOME_NAME": "HOME"}, "cwd": "sub"},
        },
    }
    configs = server_configs(load_team_file(write(tmp_path, document), {}))
    tool = configs["tool"]
    assert tool.cwd == str(tmp_path / "sub")
    # A team file's only substitution is ${VAR}: a "!command" or a bare name is text, never run or read.
    assert tool.literal_env_keys == {"TOKEN", "HOME_NAME"}


def test_a_variable_with_a_default_and_an_unset_one(tmp_path: Path) -> None:
    document = {**MINIMAL, "public_url": "${PUBLIC_URL:-https://fallback.example.com/mcp}"}
    assert load_team_file(write(tmp_path, document), {}).public_url == "https://fallback.example.com/mcp"
    document = {**MINIMAL, "state": {"postgres": "postgresql://gw:${PGPASSWORD}@db/gw"}}
    message = error_of(write(tmp_path, document))
    assert "state.postgres" in message and "PGPASSWORD" in message and "set PGPASSWORD" in message


@pytest.mark.parametrize(
    ("change", "key", "fix"),
    [
        ({"polices": []}, "polices", "the keys here are"),
        ({"public_url": None}, "public_url", "required"),
        ({"public_url": "http://mcp.example.com/mcp"}, "public_url", "https://"),
        ({"identity": {"issuer": "http://idp.example.com"}}, "identity.issuer", "loopback only"),
        (
            {"identity": {"issuer": "https://idp.example.com", "audiance": "x"}},
            "identity.audiance",
            "unknown key",
        ),
        ({"identity": None}, "identity", "issuer"),
        ({"policies": {"allow": ["*"]}}, "policies", "must be a list"),
        ({"policies": [{"groups": ["eng"]}]}, "policies[0].allow", "required"),
        ({"policies": [{"allow": ["github"]}]}, "policies[0].allow", "github/*"),
        ({"policies": [{"allow": ["*"], "users": [3]}]}, "policies[0].users", "list of names"),
        ({"servers": {"bad": {"command": "x", "url": "https://y"}}}, "servers.bad", "either stdio"),
        ({"servers": {"s": {"command": "x", "credentials": "per-user"}}}, "servers.s.credentials", "remote"),
        (
            {"servers": {"s": {"url": "https://y", "credentials": "mine"}}},
            "servers.s.credentials",
            "per-user",
        ),
        ({"audit": {"on_failure": "maybe"}}, "audit.on_failure", "closed, open"),
        ({"audit": {"sync": "never"}}, "audit.sync", "each, background"),
        (
            {"identity": {"issuer": "https://idp.example.com", "scopes": ["a b"]}},
            "identity.scopes",
            "one word",
        ),
        ({"metrics": "open"}, "metrics", "private, public"),
        ({"state": {"postgres": "mysql://db"}}, "state.postgres", "postgresql://"),
        ({"drain_timeout": "30s"}, "drain_timeout", "number of seconds"),
        ({"drain_timeout": 0}, "drain_timeout", "above 0"),
        ({"drain_timeout": -5}, "drain_timeout", "above 0"),
        ({"drain_timeout": 86400}, "drain_timeout", "at most 3600"),
        ({"drain_timeout": True}, "drain_timeout", "number of seconds"),
        ({"limits": 60}, "limits", "per_user"),
        ({"limits": {"per_minute": 60}}, "limits.per_minute", "the keys here are per_tool, per_user"),
        ({"limits": {"per_user": 0}}, "limits.per_user", "1 or more"),
        ({"limits": {"per_user": "60"}}, "limits.per_user", "whole number"),
        ({"limits": {"per_user": True}}, "limits.per_user", "whole number"),
        ({"limits": {"per_tool": ["github/*"]}}, "limits.per_tool", '{"github/*": 60}'),
        ({"limits": {"per_tool": {"github": 5}}}, 'limits.per_tool."github"', "github/*"),
        ({"limits": {"per_tool": {"github/*": 2.5}}}, 'limits.per_tool."github/*"', "whole number"),
        ({"ui": True}, "ui", "client_id"),
        (
            {"ui": {"admins": {"groups": ["ops"]}}},
            "ui.client_id",
            "redirect URI is <public_url's origin>/ui/callback",
        ),
        ({"ui": {"client_id": "c"}}, "ui.admins", "required: who may open /ui"),
        ({"ui": {"client_id": "c", "admins": {}}}, "ui.admins", "names nobody"),
        ({"ui": {"client_id": "c", "admins": {"groups": []}}}, "ui.admins", "names nobody"),
        ({"ui": {"client_id": "c", "admins": {"team": ["ops"]}}}, "ui.admins.team", "groups, users"),
        ({"ui": {"client_id": "c", "admins": {"users": [7]}}}, "ui.admins.users", "list of names"),
        ({"ui": {"client_id": "", "admins": {"users": ["a"]}}}, "ui.client_id", "non-empty"),
        ({"ui": {"client_id": "c", "admins": {"users": ["a"]}, "scopes": ["email"]}}, "ui.scopes", "openid"),
        ({"ui": {"client_id": "c", "admins": {"users": ["a"]}, "secret": "s"}}, "ui.secret", "client_secret"),
    ],
)
def test_each_mistake_is_one_line_naming_the_key_and_the_fix(
    tmp_path: Path, change: dict[str, Any], key: str, fix: str
) -> None:
    message = error_of(write(tmp_path, {**MINIMAL, **change}))
    assert f": {key}: " in message and fix in message


def test_a_ui_block_names_its_admins_and_client_and_none_means_no_dashboard(tmp_path: Path) -> None:
    assert load_team_file(write(tmp_path, MINIMAL), {}).ui is None
    ui = {"client_id": "mcpfleet-ui", "client_secret": "${UI_SECRET}", "admins": {"groups": "platform"}}
    team = load_team_file(write(tmp_path, {**MINIMAL, "ui": ui}), {"UI_SECRET": "s3cret-value"})
    assert team.ui is not None
    assert (team.ui.client_id, team.ui.client_secret) == ("mcpfleet-ui", "s3cret-value")
    assert (team.ui.admin_groups, team.ui.admin_users, team.ui.scopes) == (
        ("platform",),
        (),
        ("openid", "email"),
    )
    assert redact_text("secret is s3cret-value") != "secret is s3cret-value"
    done = run_check(write(tmp_path, {**MINIMAL, "ui": ui}), environ={"UI_SECRET": "s3cret-value"})
    assert done.returncode == 0 and "dashboard at /ui for group platform (client mcpfleet-ui)" in done.stdout
    unset = run_check(write(tmp_path, {**MINIMAL, "ui": ui}), environ={})
    assert unset.returncode == 2 and "ui.client_secret" in unset.stderr and "UI_SECRET" in unset.stderr


def test_drain_timeout_defaults_to_30_seconds_and_takes_a_number(tmp_path: Path) -> None:
    assert load_team_file(write(tmp_path, MINIMAL), {}).drain_timeout_s == 30.0
    assert load_team_file(write(tmp_path, {**MINIMAL, "drain_timeout": 2.5}), {}).drain_timeout_s == 2.5
    yaml_text = "public_url: https://mcp.example.com/mcp\nidentity: {issuer: https://idp.example.com}\n"
    team = load_team_file(write(tmp_path, yaml_text + "drain_timeout: 120\n", "team.yaml"), {})
    assert team.drain_timeout_s == 120.0


def test_limits_load_in_order_and_the_first_matching_glob_limits_a_tool(tmp_path: Path) -> None:
    limits = {"per_user": 600, "per_tool": {"github/create_*": 10, "github/*": 60}}
    team = load_team_file(write(tmp_path, {**MINIMAL, "limits": limits}), {})
    assert team.limits.per_user == 600
    assert team.limits.tool_limit("github", "create_issue") == ("github/create_*", 10)
    assert team.limits.tool_limit("github", "get_issue") == ("github/*", 60)
    assert team.limits.tool_limit("jira", "get_issue") is None
    unlimited = load_team_file(write(tmp_path, MINIMAL), {}).limits
    assert unlimited.per_user is None and unlimited.per_tool == ()


def test_an_http_issuer_and_url_are_accepted_on_loopback(tmp_path: Path) -> None:
    document = {"public_url": "http://127.0.0.1:8080/mcp", "identity": {"issuer": "http://localhost:9000"}}
    team = load_team_file(write(tmp_path, document), {})
    assert team.identity.issuer == "http://localhost:9000"


def test_a_file_that_does_not_parse_or_does_not_exist(tmp_path: Path) -> None:
    assert "invalid YAML" in error_of(write(tmp_path, "public_url: [unclosed\n", "team.yaml"))
    assert "no such file" in error_of(tmp_path / "missing.yaml")
    assert "mapping" in error_of(write(tmp_path, "[1, 2]"))


def run_check(
    path: Path, *options: str, environ: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(MCPFLEET), "team", "check", str(path), *options],
        capture_output=True,
        text=True,
        env=environ,
        timeout=60,
    )


def test_team_check_says_ok_with_a_summary_or_names_the_key_with_exit_2(tmp_path: Path) -> None:
    good = write(tmp_path, GOOD_YAML, "team.yaml")
    done = run_check(good, environ={"GITHUB_TOKEN": "t0ken-value", "PATH": "/usr/bin:/bin"})
    assert done.returncode == 0, done.stderr
    assert (
        done.stdout.startswith(f"{good}: ok")
        and "3 server(s)" in done.stdout
        and "per-user: jira" in done.stdout
        and "no state.redis: one replica only" in done.stdout
    )

    as_json = run_check(good, "--json", environ={"GITHUB_TOKEN": "t0ken-value"})
    document = json.loads(as_json.stdout)
    assert document["policies"] == 3 and document["state"] == "sqlite" and document["shared"] is None
    assert document["limits"] == {"per_user": None, "per_tool": {}}
    assert {"name": "jira", "credentials": "per-user"} in document["servers"]

    unset = run_check(good, environ={"PATH": "/usr/bin:/bin"})
    assert unset.returncode == 2 and unset.stdout == ""
    lines = unset.stderr.strip().splitlines()
    assert len(lines) == 1 and str(good) in lines[0] and "GITHUB_TOKEN" in lines[0]


def test_audit_sync_in_the_background_is_a_choice_of_the_team_file(tmp_path: Path) -> None:
    team = load_team_file(write(tmp_path, BACKGROUND_SYNC, "team.yaml"), {"GITHUB_TOKEN": "x"})
    assert team.audit.sync == "background"
