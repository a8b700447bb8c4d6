"""The persistent tool cache: what each server listed last time.

With it, the start-up gate can hand out deferred tools for a server that is still
starting, and a reconnect or the next start can skip protocol probing: each row also holds
the server's era verdict (``EraVerdict``: "legacy", or its ``DiscoverResult``), which is
what the next connection uses instead of a ``server/discover`` probe. A row without one
(written before verdicts were kept) reads as "probe again". It is one SQLite file in the user
cache dir, shared by every mcpfleet process of the user:

- WAL mode, a busy timeout and short transactions, so readers never block and writers
  from several processes queue instead of failing; every write is ``BEGIN IMMEDIATE``
  and holds the write lock for one compare-and-set.
- One row per server name, valid for one config fingerprint (SHA-256 of the unresolved
  entry, computed by the caller). A row for another fingerprint, another format version,
  or one that does not parse is a miss with a warning; so is a row older than the TTL.
- A ``tools/list`` answer obtained earlier (``listed_at``, wall-clock time shared by all
  processes) never overwrites one obtained later, whichever config it was for: the row
  always holds the freshest catalog any process saw.
- An empty tool list is never stored (a server that answered nothing is more likely
  broken than empty), and it leaves an existing row alone.
- The cache is best effort: SQLite errors are logged warnings, never exceptions, and a
  corrupt file is moved aside (``<name>.corrupt-<timestamp>``) and recreated.

Thread safety: one connection per cache object, opened with ``check_same_thread=False``
and guarded by a lock, so any thread (or ``anyio.to_thread``) may call any method. Each
operation takes well under a millisecond on a local disk.

Only the standard library is imported here: the cache is read before any server is
contacted, so it must not pull in the SDK.
"""

from __future__ import annotations

import contextlib
import datetime
import json
import logging
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any, TypeVar

from mcpfleet import paths
from mcpfleet.client.definitions import LEGACY_ERA, EraVerdict, ServerInfo, ToolDefinition
from mcpfleet.errors import CacheUnavailableError

logger = logging.getLogger(__name__)

_Result = TypeVar("_Result")

DEFAULT_TTL_SECONDS = 30 * 24 * 3600
FILE_NAME = "tools.sqlite3"
FORMAT_VERSION = 1
"""Version of one row's payload; a row written with another version is a miss."""
SCHEMA_VERSION = 1
"""Version of the table layout, kept in ``PRAGMA user_version``."""
BUSY_TIMEOUT_SECONDS = 5.0

_BUSY_CODES = frozenset({sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED})
_CORRUPTION_CODES = frozenset({sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB})

_CREATE_TABLE = """
CREATE TABLE IF NOT EXISTS server_tools (
    server_name TEXT PRIMARY KEY,
    fingerprint TEXT NOT NULL,
    format_version INTEGER NOT NULL,
    payload TEXT NOT NULL,
    protocol_version TEXT,
    listed_at REAL NOT NULL,
    written_at REAL NOT NULL
)
"""


_CREATE_LISTINGS_TABLE = """
CREATE TABLE IF NOT EXISTS server_listings (
    server_name TEXT PRIMARY KEY,
    fingerprint TEXT NOT NULL,
    payload TEXT NOT NULL,
    written_at REAL NOT NULL
)
"""
"""What a server listed beside its tools (resources, resource templates, prompts), as JSON by
kind, so the gateway serves those lists too before the server is up. A table of its own: a
catalog that changes without the tools changing never rewrites the tools' row."""


@dataclass(frozen=True)
class CachedServer:
    """What one server listed the last time any process connected to it."""

    tools: tuple[ToolDefinition, ...]
    server_info: ServerInfo | None
    protocol_version: str | None
    """The negotiated protocol version."""
    written_at: float
    """Unix time of the write."""
    listed_at: float
    """Unix time the ``tools/list`` answer was obtained; orders writes across processes."""
    era: EraVerdict | None = None
    """What the last contact showed about the server's era, so the next connection skips the
    ``server/discover`` probe; ``None`` when unknown (probe again)."""


class MCPToolCache:
    """The tool cache file; see the module docstring for its guarantees."""

    def __init__(
        self,
        path: Path | None = None,
        *,
        ttl_seconds: float = DEFAULT_TTL_SECONDS,
        clock: Callable[[], float] = time.time,
    ) -> None:
        """Open (creating if needed) the cache at ``path``, by default in the user cache dir.

        A corrupt file is moved aside and recreated. Raises ``CacheUnavailableError`` when
        the file cannot be opened at all; ``open_default()`` turns that into a warning.
        """
        self.path = path if path is not None else paths.user_cache_dir() / FILE_NAME
        self.ttl_seconds = ttl_seconds
        self._clock = clock
        self._lock = threading.Lock()
        self._connection: sqlite3.Connection | None = None
        try:
            paths.make_private_folder(self.path.parent)
            try:
                self._connection = self._connect()
            except sqlite3.DatabaseError as error:
                if not _is_corruption(error):
                    raise
                self._connection = self._recover_from_corruption(error)
        except (OSError, sqlite3.Error) as error:
            raise CacheUnavailableError(
                f"MCP tool cache unavailable at {self.path}: {error}; "
                "check that the folder is writable or run with --no-cache",
                path=str(self.path),
            ) from error

    @classmethod
    def open_default(cls) -> MCPToolCache | None:
        """The user's cache, or ``None`` (with a warning) when it cannot be opened."""
        try:
            return cls()
        except CacheUnavailableError as error:
            logger.warning("%s; continuing without a tool cache", error)
            return None

    def get(self, server_name: str, fingerprint: str) -> CachedServer | None:
        """The cached catalog of ``server_name`` for this config fingerprint, or ``None``."""
        with self._lock:
            row = self._run(
                "read",
                server_name,
                lambda connection: connection.execute(
                    "SELECT fingerprint, format_version, payload, protocol_version, listed_at, written_at "
                    "FROM server_tools WHERE server_name = ?",
                    (server_name,),
                ).fetchone(),
            )
        if row is None:
            return None
        stored_fingerprint, format_version, payload, protocol_version, listed_at, written_at = row
        if format_version != FORMAT_VERSION:
            logger.warning(
                "MCP tool cache entry of server %r has format version %r (expected %d); ignoring it",
                server_name,
                format_version,
                FORMAT_VERSION,
            )
            return None
        if stored_fingerprint != fingerprint:
            logger.warning(
                "MCP tool cache entry of server %r was written for another config; ignoring it "
                "until the server is listed again",
                server_name,
            )
            return None
        try:
            cached = _parse_row(payload, protocol_version, listed_at, written_at)
        except (ValueError, TypeError, KeyError, AttributeError) as error:
            logger.warning(
                "MCP tool cache entry of server %r failed to parse (%s); ignoring it", server_name, error
            )
            return None
        if not cached.tools:
            return None
        if self._clock() - cached.written_at >= self.ttl_seconds:
            return None
        return cached

    def put(
        self,
        server_name: str,
        fingerprint: str,
        tools: Sequence[ToolDefinition],
        *,
        server_info: ServerInfo | None = None,
        protocol_version: str | None = None,
        era: EraVerdict | None = None,
        listed_at: float | None = None,
    ) -> bool:
        """Store a server's catalog and ``era`` verdict; ``False`` when skipped (empty, or older
        than the row) or failed.

        ``listed_at`` is when the ``tools/list`` answer was obtained (default: now); the
        compare with the stored row happens inside the write transaction, so concurrent
        writers from any process keep the freshest answer.
        """
        if not tools:
            return False
        if protocol_version is None and server_info is not None:
            protocol_version = server_info.protocol_version
        now = self._clock()
        listed_at = now if listed_at is None else listed_at
        try:
            payload = json.dumps(
                {
                    "tools": [tool.to_dict() for tool in tools],
                    "server_info": server_info.to_dict() if server_info is not None else None,
                    "era": era,
                },
                separators=(",", ":"),
            )
        except (TypeError, ValueError) as error:
            logger.warning("MCP tool cache cannot store the tools of server %r: %s", server_name, error)
            return False

        def compare_and_set(connection: sqlite3.Connection) -> bool:
            with _write_transaction(connection):
                # A stored time that is not a number (a damaged row) never blocks a fresh answer.
                newer_row = connection.execute(
                    "SELECT 1 FROM server_tools WHERE server_name = ? "
                    "AND typeof(listed_at) IN ('real', 'integer') AND listed_at > ?",
                    (server_name, listed_at),
                ).fetchone()
                if newer_row is not None:
                    return False
                connection.execute(
                    "INSERT OR REPLACE INTO server_tools (server_name, fingerprint, format_version, payload, "
                    "protocol_version, listed_at, written_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
                    (server_name, fingerprint, FORMAT_VERSION, payload, protocol_version, listed_at, now),
                )
                # Rows of servers that left every config would otherwise stay forever.
                connection.execute(
                    "DELETE FROM server_tools WHERE written_at <= ?", (now - self.ttl_seconds,)
                )
                return True

        with self._lock:
            return self._run("write", server_name, compare_and_set) is True

    def get_listings(self, server_name: str, fingerprint: str) -> dict[str, list[dict[str, Any]]] | None:
        """What ``server_name`` last listed beside its tools, by kind (``resources``,
        ``resource_templates``, ``prompts``), for this config fingerprint; ``None`` if unknown."""
        with self._lock:
            row = self._run(
                "read",
                server_name,
                lambda connection: connection.execute(
                    "SELECT fingerprint, payload, written_at FROM server_listings WHERE server_name = ?",
                    (server_name,),
                ).fetchone(),
            )
        if row is None or row[0] != fingerprint:
            return None
        try:
            if self._clock() - float(row[2]) >= self.ttl_seconds:
                return None
            data = json.loads(row[1])
        except (ValueError, TypeError):
            logger.warning("MCP tool cache listings of server %r failed to parse; ignoring them", server_name)
            return None
        if not isinstance(data, dict):
            return None
        return {
            kind: [item for item in items if isinstance(item, dict)]
            for kind, items in data.items()
            if isinstance(kind, str) and isinstance(items, list)
        }

    def put_listings(
        self, server_name: str, fingerprint: str, listings: dict[str, list[dict[str, Any]]]
    ) -> bool:
        """Store what ``server_name`` listed beside its tools; ``False`` when it failed."""
        now = self._clock()
        try:
            payload = json.dumps(listings, separators=(",", ":"))
        except (TypeError, ValueError) as error:
            logger.warning("MCP tool cache cannot store the listings of server %r: %s", server_name, error)
            return False

        def replace_row(connection: sqlite3.Connection) -> bool:
            with _write_transaction(connection):
                connection.execute(
                    "INSERT OR REPLACE INTO server_listings (server_name, fingerprint, payload, written_at) "
                    "VALUES (?, ?, ?, ?)",
                    (server_name, fingerprint, payload, now),
                )
                connection.execute(
                    "DELETE FROM server_listings WHERE written_at <= ?", (now - self.ttl_seconds,)
                )
            return True

        with self._lock:
            return self._run("write", server_name, replace_row) is True

    def delete(self, server_name: str) -> None:
        """Forget one server (best effort)."""

        def delete_row(connection: sqlite3.Connection) -> None:
            with _write_transaction(connection):
                connection.execute("DELETE FROM server_tools WHERE server_name = ?", (server_name,))
                connection.execute("DELETE FROM server_listings WHERE server_name = ?", (server_name,))

        with self._lock:
            self._run("delete", server_name, delete_row)

    def clear(self) -> None:
        """Forget every server (best effort)."""

        def delete_rows(connection: sqlite3.Connection) -> None:
            with _write_transaction(connection):
                connection.execute("DELETE FROM server_tools")
                connection.execute("DELETE FROM server_listings")

        with self._lock:
            self._run("clear", None, delete_rows)

    def close(self) -> None:
        """Close the file; later calls behave as an empty, read-only cache."""
        with self._lock:
            if self._connection is not None:
                self._connection.close()
                self._connection = None

    def __enter__(self) -> MCPToolCache:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    def _run(
        self, action: str, server_name: str | None, operation: Callable[[sqlite3.Connection], _Result]
    ) -> _Result | None:
        """Run one operation (lock held); errors become warnings and ``None``."""
        if self._connection is None:
            return None
        about = f" for server {server_name!r}" if server_name is not None else ""
        try:
            return operation(self._connection)
        except sqlite3.Error as error:
            if isinstance(error, sqlite3.DatabaseError) and _is_corruption(error):
                self._connection.close()
                self._connection = None
                try:
                    self._connection = self._recover_from_corruption(error)
                except (OSError, sqlite3.Error) as recovery_error:
                    logger.warning(
                        "MCP tool cache at %s could not be recreated (%s); continuing without it",
                        self.path,
                        recovery_error,
                    )
                return None
            logger.warning("MCP tool cache %s failed%s at %s: %s", action, about, self.path, error)
            return None

    def _connect(self) -> sqlite3.Connection:
        # isolation_level=None: no implicit transactions; writes open their own BEGIN IMMEDIATE.
        connection = sqlite3.connect(
            self.path, timeout=BUSY_TIMEOUT_SECONDS, isolation_level=None, check_same_thread=False
        )
        try:
            journal_mode = _enable_write_ahead_log(connection)
            if journal_mode != "wal":
                logger.debug("MCP tool cache at %s runs in %s journal mode", self.path, journal_mode)
            # In WAL mode NORMAL cannot corrupt the file; at worst the last write is lost on power loss.
            connection.execute("PRAGMA synchronous=NORMAL")
            with _write_transaction(connection):
                schema_version = connection.execute("PRAGMA user_version").fetchone()[0]
                if schema_version not in (0, SCHEMA_VERSION):
                    logger.warning(
                        "MCP tool cache at %s has table layout %s (expected %d); starting it afresh",
                        self.path,
                        schema_version,
                        SCHEMA_VERSION,
                    )
                    connection.execute("DROP TABLE IF EXISTS server_tools")
                    connection.execute("DROP TABLE IF EXISTS server_listings")
                connection.execute(_CREATE_TABLE)
                connection.execute(_CREATE_LISTINGS_TABLE)
                connection.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
        except BaseException:
            connection.close()
            raise
        return connection

    def _recover_from_corruption(self, error: sqlite3.DatabaseError) -> sqlite3.Connection:
        """Move the corrupt file aside and open a fresh one.

        Under an inter-process lock, and only if the file is still corrupt: another
        process may have recreated it already, and its fresh file must not be moved.
        """
        with _interprocess_lock(self.path.with_name(self.path.name + ".lock")):
            if _is_still_corrupt(self.path):
                stamp = datetime.datetime.now().strftime("%Y%m%dT%H%M%S%f")
                aside = self.path.with_name(f"{self.path.name}.corrupt-{stamp}")
                logger.warning(
                    "MCP tool cache at %s is corrupt (%s); moved it to %s and starting afresh",
                    self.path,
                    error,
                    aside,
                )
                os.replace(self.path, aside)
                # The journal files belong to the corrupt file: left in place, the new file would replay them.
                for suffix in ("-wal", "-shm"):
                    with contextlib.suppress(FileNotFoundError):
                        os.replace(f"{self.path}{suffix}", f"{aside}{suffix}")
            return self._connect()


def _parse_row(payload: str, protocol_version: Any, listed_at: Any, written_at: Any) -> CachedServer:
    data = json.loads(payload)
    tools = tuple(ToolDefinition.from_dict(tool) for tool in data["tools"])
    info = data.get("server_info")
    server_info = None
    if info is not None:
        fields = {key: info.get(key) for key in ("name", "version", "protocol_version")}
        if not all(isinstance(value, str) for value in fields.values()):
            raise ValueError("server info without name, version or protocol version")
        instructions = info.get("instructions")
        server_info = ServerInfo(
            **fields, instructions=instructions if isinstance(instructions, str) else None
        )
    if protocol_version is not None and not isinstance(protocol_version, str):
        raise ValueError("protocol version is not text")
    era = data.get("era")
    if era is not None and era != LEGACY_ERA and not isinstance(era, dict):
        raise ValueError("era verdict is neither 'legacy' nor a DiscoverResult")
    return CachedServer(
        tools=tools,
        server_info=server_info,
        protocol_version=protocol_version,
        era=era,
        written_at=float(written_at),
        listed_at=float(listed_at),
    )


def _is_corruption(error: sqlite3.DatabaseError) -> bool:
    code = getattr(error, "sqlite_errorcode", None)
    # Extended result codes carry the primary code in their low byte.
    return isinstance(code, int) and (code & 0xFF) in _CORRUPTION_CODES


def _enable_write_ahead_log(connection: sqlite3.Connection) -> str:
    """Switch the file to WAL; returns the journal mode in force.

    The switch needs an exclusive lock that SQLite does not wait for through the busy
    handler, so processes opening a new file together would fail at once: retry until
    the busy timeout instead. On a file already in WAL mode this is a no-op.
    """
    deadline = time.monotonic() + BUSY_TIMEOUT_SECONDS
    while True:
        try:
            return str(connection.execute("PRAGMA journal_mode=WAL").fetchone()[0]).lower()
        except sqlite3.OperationalError as error:
            if not _is_busy(error) or time.monotonic() >= deadline:
                raise
            time.sleep(0.005)


def _is_busy(error: sqlite3.Error) -> bool:
    code = getattr(error, "sqlite_errorcode", None)
    return isinstance(code, int) and (code & 0xFF) in _BUSY_CODES


def _is_still_corrupt(path: Path) -> bool:
    if not path.exists():
        return False
    try:
        probe = sqlite3.connect(path, timeout=BUSY_TIMEOUT_SECONDS)
    except sqlite3.Error:
        return False
    try:
        return bool(probe.execute("PRAGMA quick_check").fetchone()[0] != "ok")
    except sqlite3.DatabaseError as error:
        return _is_corruption(error)
    finally:
        probe.close()


@contextlib.contextmanager
def _write_transaction(connection: sqlite3.Connection) -> Iterator[None]:
    """``BEGIN IMMEDIATE`` takes the write lock up front (waiting up to the busy timeout)."""
    connection.execute("BEGIN IMMEDIATE")
    try:
        yield
    except BaseException:
        with contextlib.suppress(sqlite3.Error):
            connection.execute("ROLLBACK")
        raise
    connection.execute("COMMIT")


@contextlib.contextmanager
def _interprocess_lock(lock_path: Path) -> Iterator[None]:
    """An exclusive lock across processes (POSIX); elsewhere only this process is serialised."""
    try:
        import fcntl
    except ImportError:
        yield
        return
    with open(lock_path, "a") as lock_file:
        fcntl.flock(lock_file, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock_file, fcntl.LOCK_UN)
