"""The state store's schema migrations: SQL files versioned in the repository, applied in order.

Each dialect has a folder under ``team/migrations/`` of files named ``NNNN_what.sql``; a file's
number is the schema version it brings, from 1 with no gap (a gap or a duplicate is a packaging
mistake, refused on load). A store records each version it applied in ``schema_migrations``
(``version``, ``name``, ``applied_at``), in the same transaction as the migration itself, so a
version is either applied and recorded or neither. Opening a store applies the versions above the
highest recorded one, under a lock that makes replicas starting at once apply each version once
(SQLite: the write lock ``BEGIN IMMEDIATE`` takes; PostgreSQL: a transaction-scoped advisory
lock), so applying twice is a no-op. A store recorded at a version newer than the newest file was
migrated by a newer mcpfleet, and is refused rather than used half-understood.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from importlib import resources
from typing import Literal

from mcpfleet.team.state import TeamStateError

Dialect = Literal["sqlite", "postgres"]

VERSIONS_TABLE = "schema_migrations"
_FILE_NAME = re.compile(r"(?P<version>\d{4})_(?P<name>[a-z0-9_]+)\.sql")


@dataclass(frozen=True, slots=True)
class Migration:
    """One file of ``team/migrations/<dialect>/``."""

    version: int
    name: str
    """The file's name without its number and ``.sql``: what it does."""
    sql: str


def migrations(dialect: Dialect) -> tuple[Migration, ...]:
    """The dialect's migrations, oldest first."""
    folder = resources.files("mcpfleet.team.migrations").joinpath(dialect)
    found: list[Migration] = []
    for entry in folder.iterdir():
        matched = _FILE_NAME.fullmatch(entry.name)
        if matched is None:
            continue
        found.append(
            Migration(
                version=int(matched["version"]),
                name=matched["name"],
                sql=entry.read_text(encoding="utf-8"),
            )
        )
    found.sort(key=lambda migration: migration.version)
    versions = [migration.version for migration in found]
    if versions != list(range(1, len(found) + 1)):
        raise TeamStateError(
            f"the {dialect} migrations of this mcpfleet are numbered {versions}, not 1 to {len(found)}: "
            "the package is damaged; reinstall mcpfleet"
        )
    return tuple(found)


def pending(known: tuple[Migration, ...], applied_version: int, *, store: str) -> tuple[Migration, ...]:
    """The migrations to apply to a store recorded at ``applied_version`` (0: a new store)."""
    newest = known[-1].version if known else 0
    if applied_version > newest:
        raise TeamStateError(
            f"{store} has schema version {applied_version}, newer than this mcpfleet knows ({newest}): "
            "a newer mcpfleet migrated it; upgrade this one (every replica runs the same version)"
        )
    return tuple(migration for migration in known if migration.version > applied_version)
