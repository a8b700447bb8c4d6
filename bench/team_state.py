"""The team state benchmark: what one audit record costs a call, per store, in one run.

    python -m bench.team_state            # ~30 s on 2 cores; prints the figures
    python -m bench.team_state --smoke    # a few seconds: fewer appends

**Append** is the latency of ``TeamState.append_audit`` (one record, durable when it returns),
the median (and 90th percentile) of ``APPENDS`` appends after ``WARMUP`` unmeasured ones, the
stores interleaved call by call:

- SQLite as the team gateway runs it (WAL, ``synchronous=FULL``: each commit synced to disk), in
  a folder beside the bench's other temporary files;
- the same file with ``synchronous=NORMAL`` (commits survive a crash of the process, not of the
  machine), for comparison only: not what mcpfleet runs;
- PostgreSQL on loopback: a server of the bench's own from the distribution's package
  (``tests/postgres.py``, ``fsync`` on, as a deployment runs it), reached over TCP through the
  store's pool (each connection checked as it leaves the pool);
- the disk's own floor: a 200-byte append and ``fsync`` to a file beside SQLite's, through the
  same worker thread: what a durable write costs here before any database.

**Record** is ``AuditLog.record`` on top of the SQLite and PostgreSQL appends: the arguments'
digest, the record, the write. Not part of ``make test``: its figures go to the issue's closing
note and, with the rest of team mode's, to BENCHMARKS.md.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

import anyio
import anyio.to_thread

if TYPE_CHECKING:
    from mcpfleet.team.audit import AuditLog

APPENDS = 2000
WARMUP = 200
SMOKE_APPENDS = 200
Operation = Callable[[int], Awaitable[object]]
ARGUMENTS = {"repo": "acme/api", "title": "Crash on start", "labels": ["bug", "p1"], "body": "x" * 200}


def _record(number: int):  # type: ignore[no-untyped-def]
    from mcpfleet.team.state import AuditRecord

    return AuditRecord(
        time=datetime.now(UTC),
        user=f"user-{number % 7}@example.com",
        client="claude-code",
        server="github",
        tool="create_issue",
        outcome="ok",
        duration_ms=3.2,
        arguments_digest="ab" * 32,
    )


async def _timed(appends: int, operations: dict[str, Operation]) -> dict[str, list[float]]:
    """Each operation ``appends`` times, interleaved call by call (each first in turn), so that a
    disk or a neighbour slowing down for a while weighs on every store alike."""
    for number in range(WARMUP):
        for operation in operations.values():
            await operation(number)
    latencies_ms: dict[str, list[float]] = {name: [] for name in operations}
    names = list(operations)
    for number in range(appends):
        shift = number % len(names)
        for name in names[shift:] + names[:shift]:
            started = time.perf_counter()
            await operations[name](number)
            latencies_ms[name].append((time.perf_counter() - started) * 1000.0)
    return latencies_ms


def _summary(name: str, latencies_ms: list[float]) -> str:
    ordered = sorted(latencies_ms)
    p90 = ordered[int(len(ordered) * 0.9)]
    return f"{name:<44} p50 {statistics.median(ordered):7.3f} ms   p90 {p90:7.3f} ms   (n={len(ordered)})"


async def _measure(appends: int, folder: Path, postgres_dsn: str) -> list[str]:
    from mcpfleet.team.audit import AuditLog
    from mcpfleet.team.model import AuditSettings, StateSettings
    from mcpfleet.team.sqlite_state import SQLiteTeamState
    from mcpfleet.team.stores import open_team_state

    sqlite = await SQLiteTeamState.open(folder / "state.sqlite3")
    relaxed = await SQLiteTeamState.open(folder / "relaxed.sqlite3")
    # The comparison the module docstring describes: the same store, its commits not synced.
    await relaxed._run("relaxing", lambda connection: connection.execute("PRAGMA synchronous=NORMAL"))
    postgres = await open_team_state(StateSettings(sqlite_path=folder / "unused", postgres=postgres_dsn))
    floor_file = folder / "floor"
    try:
        sqlite_log = AuditLog(AuditSettings(), sqlite)
        postgres_log = AuditLog(AuditSettings(), postgres)
        operations: dict[str, Operation] = {
            "append, SQLite (synchronous=FULL)": lambda n: sqlite.append_audit(_record(n)),
            "append, PostgreSQL": lambda n: postgres.append_audit(_record(n)),
            "record (AuditLog), SQLite": lambda n: _audited_call(sqlite_log, n),
            "record (AuditLog), PostgreSQL": lambda n: _audited_call(postgres_log, n),
            "append, SQLite (synchronous=NORMAL, comparison)": lambda n: relaxed.append_audit(_record(n)),
            "the disk: one 200-byte append and fsync (floor)": lambda n: _synced_append(floor_file),
        }
        latencies = await _timed(appends, operations)
    finally:
        for state in (postgres, relaxed, sqlite):
            await state.aclose()
    return [_summary(name, values) for name, values in latencies.items()]


async def _synced_append(path: Path) -> None:
    await anyio.to_thread.run_sync(_append_and_sync, path)


def _append_and_sync(path: Path) -> None:
    descriptor = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        os.write(descriptor, b"x" * 200)
        os.fsync(descriptor)
    finally:
        os.close(descriptor)


async def _audited_call(log: AuditLog, number: int) -> object:
    return await log.record(
        user=f"user-{number % 7}@example.com",
        client="claude-code",
        server="github",
        tool="create_issue",
        arguments=ARGUMENTS,
        outcome="ok",
        duration_ms=3.2,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--smoke", action="store_true", help="fewer appends: a few seconds")
    arguments = parser.parse_args()
    from tests.postgres import start_postgres

    server = start_postgres(durable=True)
    try:
        with tempfile.TemporaryDirectory(prefix="mcpfleet-bench-team-state-") as folder:
            appends = SMOKE_APPENDS if arguments.smoke else APPENDS
            for line in anyio.run(_measure, appends, Path(folder), server.dsn()):
                print(line)
    finally:
        server.stop()


if __name__ == "__main__":
    main()
