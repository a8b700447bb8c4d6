"""The audit log of a team gateway: one record per call, written before the call answers.

``AuditLog.record`` is given a call once it is decided (``denied``) or answered (``ok``,
``error``): who made it, from which client, to which server and tool, with which arguments, and
how long it took. It returns once the record is written to every place ``audit:`` names:

- the state store (``audit.store``, the default): SQLite or PostgreSQL, durable when the write
  returns; what ``mcpfleet audit`` reads;
- the JSON-lines file (``audit.file``), for log shippers: one object per line, appended with a
  single ``write`` on a descriptor opened for appending (so records of concurrent calls, and of
  replicas sharing the file, never interleave), created private to its owner (0600), reopened
  for each record so that a rotated file is followed. It is synced to disk when it is the only
  place the record goes (``store: false``); beside the store it is the store's copy.

A record that cannot be written fails the call (``AuditWriteError``) unless the team file says
``audit: {on_failure: open}`` (``AuditSettings.fail_closed`` false), when a warning is logged
and the call goes on unrecorded. The arguments' values are kept only with ``arguments: true``;
their digest always is: SHA-256 of their canonical JSON (keys sorted, no spaces, UTF-8), so a
record can be matched against a client's own log without holding what the call carried.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import anyio.to_thread

from mcpfleet.errors import MCPFleetError
from mcpfleet.team.model import AuditSettings
from mcpfleet.team.state import AuditRecord, Outcome, TeamState, TeamStateError

logger = logging.getLogger(__name__)

FILE_MODE = 0o600


class AuditWriteError(MCPFleetError):
    """A call's audit record could not be written and the audit log fails closed: the call fails."""


def arguments_digest(arguments: Mapping[str, Any] | None) -> str:
    """SHA-256 (hex) of the arguments' canonical JSON; no arguments digest as ``{}``."""
    canonical = json.dumps(
        {} if arguments is None else arguments, sort_keys=True, separators=(",", ":"), ensure_ascii=False
    )
    # A lone surrogate (JSON's "\ud800") has no UTF-8 form; it is digested as its code unit.
    return hashlib.sha256(canonical.encode("utf-8", "surrogatepass")).hexdigest()


def record_document(record: AuditRecord) -> dict[str, Any]:
    """A record as ``audit --json`` and the audit file show it (the contract's fields)."""
    document: dict[str, Any] = {
        "time": record.time.astimezone(UTC).isoformat(timespec="microseconds"),
        "user": record.user,
        "client": record.client,
        "server": record.server,
        "tool": record.tool,
        "outcome": record.outcome,
        "duration_ms": round(record.duration_ms, 3),
        "arguments_digest": record.arguments_digest,
    }
    if record.arguments is not None:
        document["arguments"] = record.arguments
    return document


class AuditLog:
    """Where a team gateway's calls are recorded; see the module docstring."""

    def __init__(self, settings: AuditSettings, state: TeamState | None) -> None:
        """``state`` is the team state; it may be ``None`` only when ``settings.store`` is off."""
        if settings.store and state is None:
            raise ValueError("audit.store is on: the audit log needs the team state")
        self.settings = settings
        self._state = state if settings.store else None

    async def record(
        self,
        *,
        user: str,
        client: str | None,
        server: str,
        tool: str,
        arguments: Mapping[str, Any] | None,
        outcome: Outcome,
        duration_ms: float,
        arrived: datetime | None = None,
    ) -> AuditRecord:
        """Record one call once it is decided (``denied``) or answered (``ok``, ``error``); returns
        once the record is written (``AuditWriteError`` when it could not be and the log fails
        closed). ``arrived`` is when the call came in: by default, ``duration_ms`` ago."""
        values = None if arguments is None else dict(arguments)
        record = AuditRecord(
            time=arrived if arrived is not None else datetime.now(UTC) - timedelta(milliseconds=duration_ms),
            user=user,
            client=client,
            server=server,
            tool=tool,
            outcome=outcome,
            duration_ms=duration_ms,
            arguments_digest=arguments_digest(values),
            arguments=values if self.settings.arguments else None,
        )
        await self.write(record)
        return record

    async def write(self, record: AuditRecord) -> None:
        """Write ``record`` to the store and the file; see ``record``."""
        failures: list[str] = []
        if self._state is not None:
            try:
                await self._state.append_audit(record)
            except TeamStateError as error:
                failures.append(str(error))
        if self.settings.file is not None:
            line = json.dumps(record_document(record), ensure_ascii=True, separators=(",", ":")) + "\n"
            try:
                await anyio.to_thread.run_sync(
                    _append_line,
                    self.settings.file,
                    line.encode("ascii"),
                    self._state is None and self.settings.sync == "each",
                )
            except OSError as error:
                failures.append(f"the audit file {self.settings.file}: {error.strerror or error}")
        if not failures:
            return
        reason = "; ".join(failures)
        about = f"{record.server}/{record.tool} by {record.user!r}"
        if self.settings.fail_closed:
            raise AuditWriteError(
                f"the audit record of {about} could not be written, so the call is refused: {reason} "
                "(the team file's audit: {on_failure: open} lets calls through unrecorded instead)"
            )
        logger.warning("the audit record of %s could not be written (audit fails open): %s", about, reason)


def _append_line(path: Path, line: bytes, sync: bool) -> None:
    descriptor = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, FILE_MODE)
    try:
        written = os.write(descriptor, line)
        if written != len(line):
            raise OSError(f"wrote {written} of the record's {len(line)} bytes")
        if sync:
            os.fsync(descriptor)
    finally:
        os.close(descriptor)
