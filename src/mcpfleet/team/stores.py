"""Which store keeps the team state: PostgreSQL when ``state.postgres`` is set, else SQLite.

PostgreSQL's driver is the extra ``mcpfleet[team]``, imported only when it is the one chosen.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

from mcpfleet.team.model import StateSettings
from mcpfleet.team.state import TeamState, TeamStateError

DEFAULT_SQLITE_NAME = "team-state.sqlite3"
"""The SQLite file's name, beside the team file, when ``state`` names no other (``team.loading``)."""


def default_sqlite_path(team_file: Path) -> Path:
    """Where a team file's SQLite state lives by default: beside it."""
    return team_file.parent / DEFAULT_SQLITE_NAME


async def open_team_state(settings: StateSettings, *, sync_each_write: bool = True) -> TeamState:
    """The store ``settings`` name, opened and migrated; raises ``TeamStateError`` naming it.
    ``sync_each_write``: each write is on disk before it returns (``audit.sync: each``), else
    the store flushes in the background (``background``)."""
    if settings.postgres is None:
        from mcpfleet.team.sqlite_state import SQLiteTeamState

        return await SQLiteTeamState.open(settings.sqlite_path, sync_each_write=sync_each_write)
    try:
        from mcpfleet.team.postgres_state import PostgresTeamState
    except ImportError as error:
        raise TeamStateError(
            f"the team state (PostgreSQL) needs psycopg, which is not installed ({error}); "
            "install team mode's extra: pip install 'mcpfleet[team]'"
        ) from error
    return await PostgresTeamState.open(settings.postgres, sync_each_write=sync_each_write)


@asynccontextmanager
async def opened_team_state(settings: StateSettings) -> AsyncIterator[TeamState]:
    """``open_team_state`` for the length of a ``with``: closed however it ends."""
    state = await open_team_state(settings)
    try:
        yield state
    finally:
        await state.aclose()
