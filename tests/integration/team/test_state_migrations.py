"""The team state's schema migrations (``team.schema``) on both stores.

Applied in order and recorded once each, whether a store is opened twice or by several replicas
at the same moment; a store migrated by a newer mcpfleet is refused; on PostgreSQL, a replica
that finds another migrating waits for its advisory lock rather than racing it.
"""

from __future__ import annotations

import sqlite3
import time
from typing import Any

import anyio
import psycopg
import pytest

from mcpfleet.team.model import StateSettings
from mcpfleet.team.postgres_state import MIGRATION_LOCK_KEY
from mcpfleet.team.schema import Dialect, migrations
from mcpfleet.team.state import TeamState, TeamStateError
from mcpfleet.team.stores import open_team_state

pytestmark = pytest.mark.anyio

REPLICAS = 4


def recorded_versions(settings: StateSettings) -> list[tuple[int, str]]:
    """What the store's ``schema_migrations`` says, read beside mcpfleet."""
    query = "SELECT version, name FROM schema_migrations ORDER BY version"
    if settings.postgres is not None:
        with psycopg.connect(settings.postgres) as connection:
            rows: list[Any] = connection.execute(query).fetchall()
    else:
        with sqlite3.connect(settings.sqlite_path) as connection:
            rows = connection.execute(query).fetchall()
    return [(int(version), str(name)) for version, name in rows]


def every_version(settings: StateSettings) -> list[tuple[int, str]]:
    dialect: Dialect = "postgres" if settings.postgres is not None else "sqlite"
    return [(migration.version, migration.name) for migration in migrations(dialect)]


def run_sql(settings: StateSettings, statement: str) -> None:
    if settings.postgres is not None:
        with psycopg.connect(settings.postgres, autocommit=True) as connection:
            connection.execute(statement.encode())
    else:
        with sqlite3.connect(settings.sqlite_path) as connection:
            connection.execute(statement)


async def test_migrations_applied_twice_are_recorded_once(state_settings: StateSettings) -> None:
    for _ in range(2):
        state = await open_team_state(state_settings)
        await state.check()
        await state.aclose()

    assert recorded_versions(state_settings) == every_version(state_settings)


async def test_replicas_migrating_at_once_apply_each_version_once(state_settings: StateSettings) -> None:
    opened: list[TeamState] = []

    async def open_one() -> None:
        opened.append(await open_team_state(state_settings))

    async with anyio.create_task_group() as replicas:
        for _ in range(REPLICAS):
            replicas.start_soon(open_one)
    try:
        assert len(opened) == REPLICAS
        assert recorded_versions(state_settings) == every_version(state_settings)
        await opened[0].put_credential("alice", "github", b"one")
        assert await opened[-1].get_credential("alice", "github") == b"one"
    finally:
        for state in opened:
            await state.aclose()


async def test_a_store_migrated_by_a_newer_mcpfleet_is_refused(state_settings: StateSettings) -> None:
    state = await open_team_state(state_settings)
    await state.aclose()
    newest = every_version(state_settings)[-1][0]
    run_sql(
        state_settings,
        "INSERT INTO schema_migrations (version, name, applied_at) "
        f"VALUES ({newest + 1}, 'future', '2030-01-01')",
    )

    with pytest.raises(TeamStateError) as refused:
        await open_team_state(state_settings)
    message = str(refused.value)
    assert f"schema version {newest + 1}, newer than this mcpfleet knows ({newest})" in message
    assert "upgrade" in message
    assert "team state" in message


async def test_a_replica_waits_for_the_one_migrating(postgres_dsn: str, tmp_path: Any) -> None:
    """Another session holds the migration lock: opening waits on it (seen in pg_stat_activity),
    and goes on once it is released, with each version recorded once."""
    settings = StateSettings(sqlite_path=tmp_path / "unused.sqlite3", postgres=postgres_dsn)
    opened: list[TeamState] = []
    with psycopg.connect(postgres_dsn) as holder:
        holder.execute("SELECT pg_advisory_xact_lock(%s)", (MIGRATION_LOCK_KEY,))

        async def open_one() -> None:
            opened.append(await open_team_state(settings))

        async with anyio.create_task_group() as group:
            group.start_soon(open_one)
            await anyio.to_thread.run_sync(_until_waiting_for_advisory_lock, postgres_dsn)
            assert opened == []
            holder.commit()
    try:
        assert len(opened) == 1
        assert recorded_versions(settings) == every_version(settings)
    finally:
        await opened[0].aclose()


def _until_waiting_for_advisory_lock(dsn: str) -> None:
    """Returns once a session of mcpfleet's waits for an advisory lock (the test's timeout bounds it)."""
    with psycopg.connect(dsn, autocommit=True) as observer:
        while True:
            row = observer.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'mcpfleet' "
                "AND wait_event_type = 'Lock' AND wait_event = 'advisory' AND datname = current_database()"
            ).fetchone()
            if row is not None and int(row[0]) > 0:
                return
            time.sleep(0.01)
