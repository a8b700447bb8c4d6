"""The team state in one SQLite file: the default, for a gateway of one replica.

The file (``state.sqlite``, beside the team file unless set) is the store of record of the audit
log, so what it promises is durability, not speed:

- WAL mode with ``synchronous=FULL``: a statement returns once its commit is in the log on disk,
  so an audit record written before a call's result is sent survives a crash of the process or
  of the machine. Each write is one statement in autocommit mode, its own transaction, but for
  audit records that arrive together, which share one (``team.grouped_writes``). With
  ``sync_each_write=False`` (``audit.sync: background``), ``synchronous=NORMAL``: the commit is
  in the log, through the OS, when the statement returns (a crash of the process loses nothing),
  and on disk at the next checkpoint (a crash of the machine may lose what came since).
- Readers never block the writer (``mcpfleet audit`` while the gateway serves); a second writer
  waits up to ``BUSY_TIMEOUT_S`` for the lock instead of failing.
- The file and its WAL and shared-memory files are private to their owner (0600): the audit log
  can hold arguments, and the credentials, though sealed, are nobody else's business.
- Migrations (``team.schema``) run in one ``BEGIN IMMEDIATE`` transaction: two processes opening
  a new file at once apply them once.

``sqlite3`` blocks, so every operation runs in a worker thread (``anyio.to_thread``) on the one
connection, under a lock, as the tool cache (``fleet/cache.py``) does: the event loop never waits
on the disk. Any ``sqlite3`` error becomes a ``TeamStateError`` naming the file and the fix.
"""

from __future__ import annotations

import logging
import os
import sqlite3
import stat
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar, cast

import anyio.to_thread

from mcpfleet.team.grouped_writes import GroupedWrites
from mcpfleet.team.schema import VERSIONS_TABLE, migrations, pending
from mcpfleet.team.state import AuditQuery, AuditRecord, Outcome, TeamStateError
from mcpfleet.team.state_encoding import (
    arguments_from_text,
    audit_values,
    from_epoch_us,
    storable_text,
    to_epoch_us,
)

logger = logging.getLogger(__name__)

_Result = TypeVar("_Result")

BUSY_TIMEOUT_S = 5.0
PRIVATE_FILE_MODE = 0o600
_BUSY_CODES = frozenset({sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED})
_BUSY_RETRY_S = 0.005

_AUDIT_COLUMNS = (
    "time_us, user_subject, client, server, tool, outcome, duration_ms, arguments_digest, arguments"
)


class SQLiteTeamState:
    """``TeamState`` in one SQLite file; see the module docstring for its guarantees."""

    def __init__(self, path: Path, connection: sqlite3.Connection) -> None:
        """Use ``await SQLiteTeamState.open(path)``: it creates and migrates the file first."""
        self.path = path
        self._connection: sqlite3.Connection | None = connection
        self._lock = threading.Lock()
        self._audit_writes = GroupedWrites(self._insert_audit_rows)
        """Records of concurrent calls share one commit (and one disk flush)."""

    @property
    def store_name(self) -> str:
        """How messages name this store."""
        return f"the team state (SQLite, {self.path})"

    @classmethod
    async def open(cls, path: Path, *, sync_each_write: bool = True) -> SQLiteTeamState:
        """Open (creating and migrating when needed) the file at ``path``."""
        return await anyio.to_thread.run_sync(cls._open_sync, path, sync_each_write)

    @classmethod
    def _open_sync(cls, path: Path, sync_each_write: bool) -> SQLiteTeamState:
        store_name = f"the team state (SQLite, {path})"
        try:
            _prepare_private_file(path)
            connection = sqlite3.connect(
                path, timeout=BUSY_TIMEOUT_S, isolation_level=None, check_same_thread=False
            )
        except (OSError, sqlite3.Error) as error:
            raise TeamStateError(
                f"{store_name} cannot be opened: {error}; check that its folder exists and is writable "
                "(state.sqlite in the team file chooses another file)"
            ) from error
        try:
            _enable_write_ahead_log(connection)
            # FULL: in WAL mode, each commit is synced to disk before the statement returns;
            # NORMAL: at checkpoints only.
            connection.execute(f"PRAGMA synchronous={'FULL' if sync_each_write else 'NORMAL'}")
            _migrate(connection, store_name)
        except sqlite3.Error as error:
            connection.close()
            raise TeamStateError(
                f"{store_name} cannot be used: {error}; if the file is not a database mcpfleet made, "
                "move it away or choose another file (state.sqlite in the team file)"
            ) from error
        except BaseException:
            connection.close()
            raise
        return cls(path, connection)

    async def append_audit(self, record: AuditRecord) -> None:
        row = (to_epoch_us(record.time), *audit_values(record))
        await self._audit_writes.write(row)

    async def _insert_audit_rows(self, rows: Sequence[tuple[Any, ...]]) -> None:
        action = "writing an audit record" if len(rows) == 1 else f"writing {len(rows)} audit records"
        await self._run(action, lambda connection: _insert_audit_rows(connection, rows))

    async def audit_records(
        self, *, user: str | None = None, since: datetime | None = None, limit: int | None = None
    ) -> list[AuditRecord]:
        """The first ``limit`` records (all by default) from ``since`` on, oldest first."""
        conditions: list[str] = []
        parameters: list[Any] = []
        if user is not None:
            conditions.append("user_subject = ?")
            parameters.append(storable_text(user))
        if since is not None:
            conditions.append("time_us >= ?")
            parameters.append(to_epoch_us(since))
        where = f"WHERE {' AND '.join(conditions)} " if conditions else ""
        # SQLite reads a negative LIMIT as none.
        parameters.append(-1 if limit is None else max(limit, 0))
        query = f"SELECT {_AUDIT_COLUMNS} FROM audit_records {where}ORDER BY time_us, id LIMIT ?"
        rows = await self._run(
            "reading the audit log", lambda connection: connection.execute(query, parameters).fetchall()
        )
        return [_audit_record(row) for row in rows]

    async def audit_page(self, query: AuditQuery) -> list[AuditRecord]:
        conditions, parameters = query.conditions("?", "time_us")
        parameters = [storable_text(value) for value in parameters]
        parameters += [to_epoch_us(bound) for bound in (query.since, query.until) if bound is not None]
        where = f"WHERE {' AND '.join(conditions)} " if conditions else ""
        parameters += [query.bounded_limit, max(query.offset, 0)]
        order = "ORDER BY time_us DESC, id DESC LIMIT ? OFFSET ?"
        statement = f"SELECT {_AUDIT_COLUMNS} FROM audit_records {where}{order}"
        rows = await self._run(
            "reading the audit log", lambda connection: connection.execute(statement, parameters).fetchall()
        )
        return [_audit_record(row) for row in rows]

    async def put_credential(self, user: str, server: str, sealed: bytes) -> None:
        now_us = to_epoch_us(datetime.now(UTC))
        await self._run(
            f"storing the credentials of {user!r} for server {server!r}",
            lambda connection: connection.execute(
                "INSERT INTO credentials (user_subject, server, sealed, updated_at_us) VALUES (?, ?, ?, ?) "
                "ON CONFLICT (user_subject, server) DO UPDATE SET sealed = excluded.sealed, "
                "updated_at_us = excluded.updated_at_us",
                (storable_text(user), storable_text(server), bytes(sealed), now_us),
            ),
        )

    async def get_credential(self, user: str, server: str) -> bytes | None:
        row = await self._run(
            f"reading the credentials of {user!r} for server {server!r}",
            lambda connection: connection.execute(
                "SELECT sealed FROM credentials WHERE user_subject = ? AND server = ?",
                (storable_text(user), storable_text(server)),
            ).fetchone(),
        )
        return None if row is None else bytes(row[0])

    async def delete_credential(self, user: str, server: str) -> bool:
        deleted = await self._run(
            f"deleting the credentials of {user!r} for server {server!r}",
            lambda connection: (
                connection.execute(
                    "DELETE FROM credentials WHERE user_subject = ? AND server = ?",
                    (storable_text(user), storable_text(server)),
                ).rowcount
            ),
        )
        return deleted > 0

    async def credential_servers(self, user: str) -> list[str]:
        rows = await self._run(
            f"listing the credentials of {user!r}",
            lambda connection: connection.execute(
                "SELECT server FROM credentials WHERE user_subject = ? ORDER BY server",
                (storable_text(user),),
            ).fetchall(),
        )
        return [str(row[0]) for row in rows]

    async def check(self) -> None:
        await self._run(
            "checking", lambda connection: connection.execute(f"SELECT 1 FROM {VERSIONS_TABLE} LIMIT 1")
        )

    async def aclose(self) -> None:
        await anyio.to_thread.run_sync(self._close_sync)

    def _close_sync(self) -> None:
        with self._lock:
            if self._connection is not None:
                self._connection.close()
                self._connection = None

    async def _run(self, action: str, operation: Callable[[sqlite3.Connection], _Result]) -> _Result:
        return await anyio.to_thread.run_sync(self._run_sync, action, operation)

    def _run_sync(self, action: str, operation: Callable[[sqlite3.Connection], _Result]) -> _Result:
        with self._lock:
            if self._connection is None:
                raise TeamStateError(f"{self.store_name} is closed ({action})")
            try:
                return operation(self._connection)
            except sqlite3.Error as error:
                raise TeamStateError(
                    f"{self.store_name}: {action} failed: {error}; check that the disk has room and the "
                    "file is writable by this user"
                ) from error


_INSERT_AUDIT = f"INSERT INTO audit_records ({_AUDIT_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)"


def _insert_audit_rows(connection: sqlite3.Connection, rows: Sequence[tuple[Any, ...]]) -> None:
    """``rows`` in one transaction (autocommit mode: a lone row is a transaction of its own)."""
    if len(rows) == 1:
        connection.execute(_INSERT_AUDIT, rows[0])
        return
    connection.execute("BEGIN IMMEDIATE")
    try:
        connection.executemany(_INSERT_AUDIT, rows)
        connection.execute("COMMIT")
    except BaseException:
        connection.execute("ROLLBACK")
        raise


def _audit_record(row: tuple[Any, ...]) -> AuditRecord:
    time_us, user, client, server, tool, outcome, duration_ms, digest, arguments = row
    return AuditRecord(
        time=from_epoch_us(int(time_us)),
        user=str(user),
        client=None if client is None else str(client),
        server=str(server),
        tool=str(tool),
        outcome=cast(Outcome, outcome),
        duration_ms=float(duration_ms),
        arguments_digest=str(digest),
        arguments=arguments_from_text(arguments),
    )


def _prepare_private_file(path: Path) -> None:
    """Create the file private to its owner, or make an existing one so (with a warning)."""
    descriptor = os.open(path, os.O_RDWR | os.O_CREAT, PRIVATE_FILE_MODE)
    try:
        mode = stat.S_IMODE(os.fstat(descriptor).st_mode)
        if mode & 0o077:
            logger.warning(
                "team state %s was readable by others (mode %o); made it private (600)", path, mode
            )
            os.fchmod(descriptor, PRIVATE_FILE_MODE)
    finally:
        os.close(descriptor)
    # SQLite gives its WAL and shared-memory files the database's mode; older ones keep theirs.
    for suffix in ("-wal", "-shm"):
        companion = Path(f"{path}{suffix}")
        if companion.exists() and stat.S_IMODE(companion.stat().st_mode) & 0o077:
            companion.chmod(PRIVATE_FILE_MODE)


def _enable_write_ahead_log(connection: sqlite3.Connection) -> None:
    """Switch to WAL. The switch takes a lock SQLite does not wait for through its busy handler,
    so processes opening a new file together retry here, up to the busy timeout."""
    deadline = time.monotonic() + BUSY_TIMEOUT_S
    while True:
        try:
            connection.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as error:
            code = getattr(error, "sqlite_errorcode", None)
            busy = isinstance(code, int) and (code & 0xFF) in _BUSY_CODES
            if not busy or time.monotonic() >= deadline:
                raise
            time.sleep(_BUSY_RETRY_S)


def _migrate(connection: sqlite3.Connection, store_name: str) -> None:
    """Apply the pending migrations in one write transaction (see ``team.schema``)."""
    known = migrations("sqlite")
    connection.execute("BEGIN IMMEDIATE")
    try:
        connection.execute(
            f"CREATE TABLE IF NOT EXISTS {VERSIONS_TABLE} "
            "(version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at TEXT NOT NULL)"
        )
        applied = int(
            connection.execute(f"SELECT COALESCE(MAX(version), 0) FROM {VERSIONS_TABLE}").fetchone()[0]
        )
        for migration in pending(known, applied, store=store_name):
            for statement in _statements(migration.sql):
                connection.execute(statement)
            connection.execute(
                f"INSERT INTO {VERSIONS_TABLE} (version, name, applied_at) VALUES (?, ?, ?)",
                (migration.version, migration.name, datetime.now(UTC).isoformat()),
            )
            logger.info("%s: applied schema version %d (%s)", store_name, migration.version, migration.name)
        connection.execute("COMMIT")
    except BaseException:
        if connection.in_transaction:
            connection.execute("ROLLBACK")
        raise


def _statements(script: str) -> Iterator[str]:
    """The statements of a migration file, one by one: ``executescript`` would commit the
    transaction the migration must run in."""
    statement = ""
    for line in script.splitlines(keepends=True):
        statement += line
        if sqlite3.complete_statement(statement):
            yield statement
            statement = ""
    if any(line.strip() and not line.lstrip().startswith("--") for line in statement.splitlines()):
        raise TeamStateError(
            "an SQLite migration of this mcpfleet ends in an unterminated statement: the package is "
            "damaged; reinstall mcpfleet"
        )
