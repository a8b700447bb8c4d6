"""What the team state's tests share: a store's settings by kind, and audit records to write."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from mcpfleet.team.model import StateSettings
from mcpfleet.team.state import AuditRecord, Outcome

BASE_TIME = datetime(2026, 12, 2, 8, 0, 0, 123456, tzinfo=UTC)


def settings_for(store: str, tmp_path: Path, request: pytest.FixtureRequest) -> StateSettings:
    """A fresh store of kind ``store``: PostgreSQL's is a database of this test's own."""
    sqlite_path = tmp_path / "state.sqlite3"
    if store == "sqlite":
        return StateSettings(sqlite_path=sqlite_path)
    dsn: str = request.getfixturevalue("postgres_dsn")
    return StateSettings(sqlite_path=sqlite_path, postgres=dsn)


def a_record(
    *,
    user: str = "alice",
    seconds: float = 0.0,
    server: str = "github",
    tool: str = "create_issue",
    outcome: Outcome = "ok",
    client: str | None = "claude-code",
    arguments: dict[str, object] | None = None,
) -> AuditRecord:
    """A record ``seconds`` after ``BASE_TIME``."""
    return AuditRecord(
        time=BASE_TIME + timedelta(seconds=seconds),
        user=user,
        client=client,
        server=server,
        tool=tool,
        outcome=outcome,
        duration_ms=12.5,
        arguments_digest="0" * 64,
        arguments=arguments,
    )
