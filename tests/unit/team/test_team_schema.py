"""The migrations shipped in the package (``team/migrations/``) and how they are chosen."""

from __future__ import annotations

import pytest

from mcpfleet.team.schema import Migration, migrations, pending
from mcpfleet.team.state import TeamStateError


def test_both_dialects_ship_the_same_versions_numbered_from_one() -> None:
    sqlite = migrations("sqlite")
    postgres = migrations("postgres")

    assert [migration.version for migration in sqlite] == list(range(1, len(sqlite) + 1))
    assert [(m.version, m.name) for m in sqlite] == [(m.version, m.name) for m in postgres]
    assert all(migration.sql.strip() for migration in (*sqlite, *postgres))


def test_pending_are_those_above_the_recorded_version() -> None:
    known = tuple(Migration(version, f"step_{version}", "SELECT 1;") for version in (1, 2, 3))

    assert pending(known, 0, store="the store") == known
    assert pending(known, 2, store="the store") == known[2:]
    assert pending(known, 3, store="the store") == ()


def test_a_store_ahead_of_the_code_is_refused_with_the_fix() -> None:
    known = (Migration(1, "first", "SELECT 1;"),)

    with pytest.raises(TeamStateError, match=r"the store has schema version 2, newer than .* \(1\).*upgrade"):
        pending(known, 2, store="the store")
