"""``mcpfleet audit``, run as a user runs it, against records an ``AuditLog`` wrote to each store."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import anyio
import pytest

from mcpfleet.team.audit import AuditLog, record_document
from mcpfleet.team.model import AuditSettings, StateSettings
from mcpfleet.team.state import AuditRecord, Outcome
from mcpfleet.team.stores import default_sqlite_path, open_team_state

CLI = [sys.executable, "-m", "mcpfleet.cli.main"]
TEAM_FILE_HEAD = (
    "public_url: https://mcp.example.com/mcp\nservers: {}\nidentity: {issuer: https://idp.example.com}\n"
    "policies: []\n"
)


def run(
    arguments: list[str], *, cwd: Path, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*CLI, *arguments],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=cwd,
        env={**os.environ, **(env or {})},
        check=False,
    )


def write_team_file(folder: Path, postgres: str | None) -> Path:
    team_file = folder / "team.yaml"
    state = "" if postgres is None else f"state:\n  postgres: {json.dumps(postgres)}\n"
    team_file.write_text(TEAM_FILE_HEAD + state)
    return team_file


def record_calls(settings: StateSettings) -> list[AuditRecord]:
    """Three calls, an hour apart, as the gateway would record them."""

    async def write() -> list[AuditRecord]:
        state = await open_team_state(settings)
        try:
            log = AuditLog(AuditSettings(), state)
            start = datetime(2026, 12, 2, 8, 0, tzinfo=UTC)
            calls: list[tuple[str, str, Outcome]] = [
                ("alice", "create_issue", "ok"),
                ("bob", "delete_repo", "denied"),
                ("alice", "merge", "error"),
            ]
            return [
                await log.record(
                    user=user,
                    client="claude-code",
                    server="github",
                    tool=tool,
                    arguments={"n": number},
                    outcome=outcome,
                    duration_ms=5.0,
                    arrived=start + timedelta(hours=number),
                )
                for number, (user, tool, outcome) in enumerate(calls)
            ]
        finally:
            await state.aclose()

    return anyio.run(write)


@pytest.fixture(params=["sqlite", "postgres"])
def team(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[Path, list[AuditRecord], dict[str, str]]:
    """A team file whose state holds three records; the environment its ``${VAR}`` needs."""
    if request.param == "sqlite":
        team_file = write_team_file(tmp_path, None)
        settings = StateSettings(sqlite_path=default_sqlite_path(team_file))
        env: dict[str, str] = {}
    else:
        dsn: str = request.getfixturevalue("postgres_dsn")
        team_file = write_team_file(tmp_path, "${TEAM_STATE_DSN}")
        settings = StateSettings(sqlite_path=default_sqlite_path(team_file), postgres=dsn)
        env = {"TEAM_STATE_DSN": dsn}
    return team_file, record_calls(settings), env


def documents(stdout: str) -> list[dict[str, Any]]:
    document = json.loads(stdout)
    assert set(document) == {"records"}
    records: list[dict[str, Any]] = document["records"]
    return records


def test_json_prints_every_record_with_the_contract_fields(
    team: tuple[Path, list[AuditRecord], dict[str, str]], tmp_path: Path
) -> None:
    team_file, records, env = team
    completed = run(["audit", "--team", str(team_file), "--json"], cwd=tmp_path, env=env)

    assert completed.returncode == 0, completed.stderr
    assert documents(completed.stdout) == [record_document(record) for record in records]


def test_user_and_since_filter_the_records(
    team: tuple[Path, list[AuditRecord], dict[str, str]], tmp_path: Path
) -> None:
    team_file, _records, env = team
    by_alice = run(["audit", "--team", str(team_file), "--user", "alice", "--json"], cwd=tmp_path, env=env)
    # A time without a zone is UTC: 09:00 UTC is the second record's.
    since = run(
        ["audit", "--team", str(team_file), "--since", "2026-12-02T09:00", "--json"], cwd=tmp_path, env=env
    )
    both = run(
        [
            "audit",
            "--team",
            str(team_file),
            "--user",
            "alice",
            "--since",
            "2026-12-02T10:00:00+01:00",
            "--json",
        ],
        cwd=tmp_path,
        env=env,
    )

    assert [record["tool"] for record in documents(by_alice.stdout)] == ["create_issue", "merge"]
    assert [record["tool"] for record in documents(since.stdout)] == ["delete_repo", "merge"]
    assert [record["tool"] for record in documents(both.stdout)] == ["merge"]


def test_the_table_shows_who_called_what(
    team: tuple[Path, list[AuditRecord], dict[str, str]], tmp_path: Path
) -> None:
    team_file, _records, env = team
    completed = run(["audit", "--team", str(team_file)], cwd=tmp_path, env=env)

    assert completed.returncode == 0, completed.stderr
    lines = completed.stdout.splitlines()
    assert "3 audit records" in completed.stdout
    assert any("bob" in line and "delete_repo" in line and "denied" in line for line in lines)


def test_the_team_file_of_the_current_folder_is_the_default(tmp_path: Path) -> None:
    team_file = write_team_file(tmp_path, None)
    record_calls(StateSettings(sqlite_path=default_sqlite_path(team_file)))

    completed = run(["audit", "--json"], cwd=tmp_path)

    assert completed.returncode == 0, completed.stderr
    assert len(documents(completed.stdout)) == 3


@pytest.mark.parametrize("json_flag", [[], ["--json"]])
def test_a_bad_since_is_a_usage_error_naming_the_flag_and_the_fix(
    tmp_path: Path, json_flag: list[str]
) -> None:
    team_file = write_team_file(tmp_path, None)
    completed = run(["audit", "--team", str(team_file), "--since", "yesterday", *json_flag], cwd=tmp_path)

    assert completed.returncode == 2
    assert "argument --since: 'yesterday' is not an ISO 8601 time" in completed.stderr
    assert "2026-12-02T08:00:00Z" in completed.stderr
    if json_flag:
        assert "--since" in json.loads(completed.stdout)["error"]


def test_no_state_yet_is_no_records_and_creates_nothing(tmp_path: Path) -> None:
    team_file = write_team_file(tmp_path, None)
    completed = run(["audit", "--team", str(team_file), "--json"], cwd=tmp_path)

    assert completed.returncode == 0, completed.stderr
    assert documents(completed.stdout) == []
    assert "no audit records yet" in completed.stderr
    assert not default_sqlite_path(team_file).exists()


def test_an_unset_variable_names_itself(tmp_path: Path) -> None:
    team_file = write_team_file(tmp_path, "postgresql://audit:${NOT_SET_ANYWHERE}@127.0.0.1/team")
    completed = run(["audit", "--team", str(team_file)], cwd=tmp_path)

    assert completed.returncode == 2
    assert "state.postgres: ${NOT_SET_ANYWHERE} is not set in the environment" in completed.stderr


def test_a_missing_team_file_is_a_usage_error(tmp_path: Path) -> None:
    completed = run(["audit", "--team", str(tmp_path / "nope.yaml")], cwd=tmp_path)

    assert completed.returncode == 2
    assert "nope.yaml: no such file" in completed.stderr


def test_an_unreachable_store_fails_naming_it_without_its_password(tmp_path: Path) -> None:
    with socket.socket() as bound:
        bound.bind(("127.0.0.1", 0))
        port = bound.getsockname()[1]
        password = "very-secret-audit-password"
        team_file = write_team_file(tmp_path, f"postgresql://audit:${{PASSWORD}}@127.0.0.1:{port}/team")
        completed = run(
            ["audit", "--team", str(team_file), "--json"], cwd=tmp_path, env={"PASSWORD": password}
        )

    assert completed.returncode == 1
    assert f"the team state (PostgreSQL, audit@127.0.0.1:{port}/team): connecting failed" in completed.stderr
    assert password not in completed.stderr + completed.stdout
    assert "connecting failed" in json.loads(completed.stdout)["error"]
