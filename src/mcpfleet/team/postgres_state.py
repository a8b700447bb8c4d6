"""The team state in PostgreSQL (``state.postgres``): shared by any number of replicas.

psycopg 3 in its asyncio mode, through a small pool of connections in autocommit mode: each
write is one statement, its own transaction, durable once it returns (the server's
``synchronous_commit``, on by default). Every wait is bounded:

- connecting: ``CONNECT_TIMEOUT_S`` (libpq's ``connect_timeout``, unless the DSN sets one);
- a free connection from the pool: ``POOL_WAIT_S`` by default;
- a statement: ``STATEMENT_TIMEOUT_MS`` (the session's ``statement_timeout``), and the
  migrations ``MIGRATION_TIMEOUT_MS``, which covers waiting for another replica's.

A connection is checked as it leaves the pool, so a server restarted meanwhile costs a
reconnection, not a failed call. Migrations (``team.schema``) run in one transaction under a
transaction-scoped advisory lock: replicas starting at once apply each version once.

Errors name the store by its user, host, port and database, never its password: the password is
remembered for redaction (``mcpfleet.redaction``) and masked in every message, and a DSN libpq
cannot parse is not quoted at all. psycopg is the extra ``mcpfleet[team]``; nothing else imports
this module (``team.stores`` does, when ``state.postgres`` is set).
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, TypeVar, cast
from urllib.parse import parse_qsl, unquote

import psycopg
from psycopg.conninfo import conninfo_to_dict
from psycopg_pool import AsyncConnectionPool

from mcpfleet.redaction import REDACTED, redact_text, remember_secret
from mcpfleet.team.schema import VERSIONS_TABLE, migrations, pending
from mcpfleet.team.state import AuditQuery, AuditRecord, Outcome, TeamStateError
from mcpfleet.team.state_encoding import arguments_from_text, audit_values, storable_text, utc

logger = logging.getLogger(__name__)

_Result = TypeVar("_Result")
_Connection = psycopg.AsyncConnection[tuple[Any, ...]]

CONNECT_TIMEOUT_S = 10
POOL_WAIT_S = 10.0
STATEMENT_TIMEOUT_MS = 10_000
MIGRATION_TIMEOUT_MS = 120_000
POOL_MIN_SIZE = 1
POOL_MAX_SIZE = 8
MIGRATION_LOCK_KEY = int.from_bytes(b"mcpfleet", "big")
"""The advisory lock replicas take to migrate, one key per database: ``mcpfleet`` as a bigint."""

_AUDIT_COLUMNS = "time, user_subject, client, server, tool, outcome, duration_ms, arguments_digest, arguments"


@dataclass(frozen=True, slots=True)
class _Target:
    """Where the store is, as messages may say it, and what they must never say."""

    store_name: str
    secrets: tuple[str, ...]
    connect_options: dict[str, Any]

    @classmethod
    def of(cls, dsn: str) -> _Target:
        secrets = _url_passwords(dsn)
        try:
            parts = conninfo_to_dict(dsn)
        except psycopg.Error:
            # libpq's complaint quotes the string, password and all.
            raise TeamStateError(
                "the team state (PostgreSQL): state.postgres is not a connection string libpq reads; "
                "write it as postgresql://USER:PASSWORD@HOST:PORT/DATABASE (the password from ${VAR})"
            ) from None
        if parts.get("password"):
            secrets.add(str(parts["password"]))
        for secret in secrets:
            remember_secret(secret)
        ordered = tuple(sorted(secrets, key=len, reverse=True))
        where = f"{parts.get('host') or 'localhost'}:{parts.get('port') or 5432}"
        user = f"{parts['user']}@" if parts.get("user") else ""
        options: dict[str, Any] = {"autocommit": True}
        if "connect_timeout" not in parts:
            options["connect_timeout"] = CONNECT_TIMEOUT_S
        if "application_name" not in parts:
            options["application_name"] = "mcpfleet"
        # A URL whose password holds a raw "/" or "@" is read with the password in the host or
        # the database's name: the name is masked too.
        store_name = _masked(
            f"the team state (PostgreSQL, {user}{where}/{parts.get('dbname') or ''})", ordered
        )
        return cls(store_name=store_name, secrets=ordered, connect_options=options)

    def message(self, action: str, error: BaseException) -> str:
        reason = _masked(redact_text(str(error).strip()), self.secrets) or type(error).__name__
        return (
            f"{self.store_name}: {action} failed: {reason}; check that the server runs, is reachable "
            "from this machine, and takes these credentials (state.postgres in the team file)"
        )


def _url_passwords(dsn: str) -> set[str]:
    """The password of a ``postgresql://`` DSN as a person wrote it, read more leniently than a
    URL parser does (the userinfo ends at the last ``@``), as written and percent-decoded, and a
    ``password`` query parameter's."""
    if "://" not in dsn:
        return set()
    found: set[str] = set()
    authority, _, query = dsn.split("://", 1)[1].partition("?")
    userinfo, at, _ = authority.rpartition("@")
    if at and ":" in userinfo:
        password = userinfo.split(":", 1)[1]
        found.update({password, unquote(password)})
    found.update(value for name, value in parse_qsl(query) if name == "password")
    return {secret for secret in found if secret}


def _masked(text: str, secrets: tuple[str, ...]) -> str:
    for secret in secrets:
        text = text.replace(secret, REDACTED)
    return text


class PostgresTeamState:
    """``TeamState`` in a PostgreSQL database; see the module docstring for its guarantees."""

    def __init__(self, pool: AsyncConnectionPool[_Connection], target: _Target) -> None:
        """Use ``await PostgresTeamState.open(dsn)``: it migrates the database and fills the pool."""
        self._pool = pool
        self._target = target

    @property
    def store_name(self) -> str:
        return self._target.store_name

    @classmethod
    async def open(
        cls, dsn: str, *, pool_wait_s: float = POOL_WAIT_S, sync_each_write: bool = True
    ) -> PostgresTeamState:
        """Connect, apply the pending migrations, and open the pool; ``pool_wait_s`` bounds each
        wait for a free (or, when the server went away, a new) connection. ``sync_each_write``
        off: the pool's connections commit with ``synchronous_commit`` off (the server flushes
        its log within three ``wal_writer_delay``; a crash of the server may lose what came since)."""
        target = _Target.of(dsn)
        async with _errors_named(target, "connecting"):
            connection = await psycopg.AsyncConnection.connect(dsn, **target.connect_options)
        try:
            async with _errors_named(target, "migrating the schema"):
                await _migrate(connection, target.store_name)
        finally:
            await connection.close()
        pool: AsyncConnectionPool[_Connection] = AsyncConnectionPool(
            dsn,
            kwargs=target.connect_options,
            min_size=POOL_MIN_SIZE,
            max_size=POOL_MAX_SIZE,
            configure=_configure if sync_each_write else _configure_background_sync,
            check=AsyncConnectionPool.check_connection,
            timeout=pool_wait_s,
            name="mcpfleet-team-state",
            open=False,
        )
        async with _errors_named(target, "opening the connection pool"):
            await pool.open(wait=True, timeout=max(pool_wait_s, CONNECT_TIMEOUT_S))
        return cls(pool, target)

    async def append_audit(self, record: AuditRecord) -> None:
        row = (utc(record.time), *audit_values(record))

        async def insert(connection: _Connection) -> None:
            await connection.execute(
                f"INSERT INTO audit_records ({_AUDIT_COLUMNS}) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s)",
                row,
            )

        await self._run("writing an audit record", insert)

    async def audit_records(
        self, *, user: str | None = None, since: datetime | None = None, limit: int | None = None
    ) -> list[AuditRecord]:
        """The first ``limit`` records (all by default) from ``since`` on, oldest first."""
        conditions: list[str] = []
        parameters: list[Any] = []
        if user is not None:
            conditions.append("user_subject = %s")
            parameters.append(storable_text(user))
        if since is not None:
            conditions.append("time >= %s")
            parameters.append(utc(since))
        where = f" WHERE {' AND '.join(conditions)}" if conditions else ""
        bound = ""
        if limit is not None:
            bound = " LIMIT %s"
            parameters.append(max(limit, 0))
        query = f"SELECT {_AUDIT_COLUMNS} FROM audit_records{where} ORDER BY time, id{bound}"

        async def select(connection: _Connection) -> list[tuple[Any, ...]]:
            cursor = await connection.execute(query, parameters)
            return await cursor.fetchall()

        rows = await self._run("reading the audit log", select)
        return [_audit_record(row) for row in rows]

    async def audit_page(self, query: AuditQuery) -> list[AuditRecord]:
        conditions, parameters = query.conditions("%s", "time")
        parameters = [storable_text(value) for value in parameters]
        parameters += [utc(bound) for bound in (query.since, query.until) if bound is not None]
        where = f" WHERE {' AND '.join(conditions)}" if conditions else ""
        parameters += [query.bounded_limit, max(query.offset, 0)]
        order = "ORDER BY time DESC, id DESC LIMIT %s OFFSET %s"
        statement = f"SELECT {_AUDIT_COLUMNS} FROM audit_records{where} {order}"

        async def select(connection: _Connection) -> list[tuple[Any, ...]]:
            cursor = await connection.execute(statement, parameters)
            return await cursor.fetchall()

        rows = await self._run("reading the audit log", select)
        return [_audit_record(row) for row in rows]

    async def put_credential(self, user: str, server: str, sealed: bytes) -> None:
        async def upsert(connection: _Connection) -> None:
            await connection.execute(
                "INSERT INTO credentials (user_subject, server, sealed, updated_at) "
                "VALUES (%s, %s, %s, now()) ON CONFLICT (user_subject, server) "
                "DO UPDATE SET sealed = excluded.sealed, updated_at = excluded.updated_at",
                (storable_text(user), storable_text(server), bytes(sealed)),
            )

        await self._run(f"storing the credentials of {user!r} for server {server!r}", upsert)

    async def get_credential(self, user: str, server: str) -> bytes | None:
        async def select(connection: _Connection) -> tuple[Any, ...] | None:
            cursor = await connection.execute(
                "SELECT sealed FROM credentials WHERE user_subject = %s AND server = %s",
                (storable_text(user), storable_text(server)),
            )
            return await cursor.fetchone()

        row = await self._run(f"reading the credentials of {user!r} for server {server!r}", select)
        return None if row is None else bytes(row[0])

    async def delete_credential(self, user: str, server: str) -> bool:
        async def delete(connection: _Connection) -> int:
            cursor = await connection.execute(
                "DELETE FROM credentials WHERE user_subject = %s AND server = %s",
                (storable_text(user), storable_text(server)),
            )
            return cursor.rowcount

        return await self._run(f"deleting the credentials of {user!r} for server {server!r}", delete) > 0

    async def credential_servers(self, user: str) -> list[str]:
        async def select(connection: _Connection) -> list[tuple[Any, ...]]:
            cursor = await connection.execute(
                "SELECT server FROM credentials WHERE user_subject = %s ORDER BY server",
                (storable_text(user),),
            )
            return await cursor.fetchall()

        return [str(row[0]) for row in await self._run(f"listing the credentials of {user!r}", select)]

    async def check(self) -> None:
        async def select(connection: _Connection) -> None:
            await connection.execute(f"SELECT 1 FROM {VERSIONS_TABLE} LIMIT 1")

        await self._run("checking", select)

    async def aclose(self) -> None:
        await self._pool.close()

    async def _run(self, action: str, operation: Callable[[_Connection], Awaitable[_Result]]) -> _Result:
        async with _errors_named(self._target, action), self._pool.connection() as connection:
            return await operation(connection)


@asynccontextmanager
async def _errors_named(target: _Target, action: str) -> AsyncIterator[None]:
    """Any driver or pool error (the pool's timeout is one) as a ``TeamStateError`` naming the
    store; the original is not chained: its text may quote what the message masks."""
    try:
        yield
    except (psycopg.Error, OSError) as error:
        raise TeamStateError(target.message(action, error)) from None


async def _configure(connection: _Connection) -> None:
    """Each new connection of the pool: no statement waits forever."""
    await connection.execute(f"SET statement_timeout = {STATEMENT_TIMEOUT_MS}")


async def _configure_background_sync(connection: _Connection) -> None:
    """``_configure``, and commits that return before the server's log is on disk."""
    await _configure(connection)
    await connection.execute("SET synchronous_commit = off")


async def _migrate(connection: _Connection, store_name: str) -> None:
    """Apply the pending migrations in one transaction under the advisory lock (``team.schema``)."""
    known = migrations("postgres")
    async with connection.transaction():
        await connection.execute(f"SET LOCAL statement_timeout = {MIGRATION_TIMEOUT_MS}")
        # Taken before anything is read: a replica that waited here sees what the other applied.
        await connection.execute("SELECT pg_advisory_xact_lock(%s)", (MIGRATION_LOCK_KEY,))
        await connection.execute(
            f"CREATE TABLE IF NOT EXISTS {VERSIONS_TABLE} (version INTEGER PRIMARY KEY, "
            "name TEXT NOT NULL, applied_at TIMESTAMPTZ NOT NULL DEFAULT now())"
        )
        cursor = await connection.execute(f"SELECT COALESCE(MAX(version), 0) FROM {VERSIONS_TABLE}")
        row = await cursor.fetchone()
        applied = int(row[0]) if row is not None else 0
        for migration in pending(known, applied, store=store_name):
            # No parameters: psycopg sends the file as one simple query, every statement in it.
            await connection.execute(migration.sql.encode("utf-8"))
            await connection.execute(
                f"INSERT INTO {VERSIONS_TABLE} (version, name) VALUES (%s, %s)",
                (migration.version, migration.name),
            )
            logger.info("%s: applied schema version %d (%s)", store_name, migration.version, migration.name)


def _audit_record(row: tuple[Any, ...]) -> AuditRecord:
    time, user, client, server, tool, outcome, duration_ms, digest, arguments = row
    return AuditRecord(
        time=cast(datetime, time).astimezone(UTC),
        user=str(user),
        client=None if client is None else str(client),
        server=str(server),
        tool=str(tool),
        outcome=cast(Outcome, outcome),
        duration_ms=float(duration_ms),
        arguments_digest=str(digest),
        arguments=arguments_from_text(arguments),
    )
