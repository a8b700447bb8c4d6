"""How an audit record's values become a row's, the same way in both stores.

A record's text comes from clients (a tool's name, a client's name) and is kept whatever it
holds: a NUL character or a lone surrogate, which neither SQLite's driver nor PostgreSQL take
as text, is kept as a visible escape (``\\x00``, ``\\udc80``) rather than failing the write and,
with the audit log failing closed, the call. Arguments are kept as JSON text (ASCII, keys
sorted): it holds any value a client can send, ``\\u0000`` included, and reads back equal.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mcpfleet.team.state import AuditRecord

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def storable_text(text: str) -> str:
    """``text``, unchanged unless it holds what a database refuses as text."""
    if "\x00" not in text and text.isascii():
        return text
    escaped = text.encode("utf-8", "backslashreplace").decode("utf-8")
    return escaped.replace("\x00", "\\x00")


def arguments_text(arguments: dict[str, Any] | None) -> str | None:
    """The arguments as the stores keep them, or ``None`` when not recorded."""
    if arguments is None:
        return None
    return json.dumps(arguments, sort_keys=True, separators=(",", ":"), ensure_ascii=True)


def arguments_from_text(text: str | None) -> dict[str, Any] | None:
    if text is None:
        return None
    value = json.loads(text)
    # Only objects are written; anything else is a row edited by hand, read as "not recorded".
    return value if isinstance(value, dict) else None


def audit_values(record: AuditRecord) -> tuple[Any, ...]:
    """A record's columns after its time (each store writes the time its own way), as stored."""
    return (
        storable_text(record.user),
        None if record.client is None else storable_text(record.client),
        storable_text(record.server),
        storable_text(record.tool),
        record.outcome,
        float(record.duration_ms),
        record.arguments_digest,
        arguments_text(record.arguments),
    )


def utc(moment: datetime) -> datetime:
    """An aware time in UTC; a naive one is taken as UTC already (what ``utcnow`` gives)."""
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


def to_epoch_us(moment: datetime) -> int:
    """Microseconds since the Unix epoch: exact, and ordered as the times are."""
    return (utc(moment) - _EPOCH) // timedelta(microseconds=1)


def from_epoch_us(value: int) -> datetime:
    return _EPOCH + timedelta(microseconds=value)
