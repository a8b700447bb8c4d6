"""The team gateway's durable state behind one small interface.

Two implementations keep it: SQLite (the default, one replica) and PostgreSQL (``state.postgres``,
any number of replicas), each with its schema migrations versioned in the repository. What is
kept: audit records, and per-user upstream credentials, sealed (encrypted) before they arrive
here — the store never sees a token in clear.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal, Protocol

from mcpfleet.errors import MCPFleetError

Outcome = Literal["ok", "error", "denied"]


@dataclass(frozen=True, slots=True)
class AuditRecord:
    """One call, as the contract lists it (``audit --json`` prints these fields)."""

    time: datetime
    """When the call arrived (UTC, aware)."""
    user: str
    """The principal's ``subject``."""
    client: str | None
    """The client's name (its ``clientInfo``), when it gave one."""
    server: str
    tool: str
    outcome: Outcome
    duration_ms: float
    arguments_digest: str
    """SHA-256 of the arguments' canonical JSON (sorted keys, no spaces), hex."""
    arguments: dict[str, Any] | None = None
    """The values themselves, only when ``audit: {arguments: true}``."""


class TeamStateError(MCPFleetError):
    """The state store could not be reached, read or written (the message names the store)."""


class TeamState(Protocol):
    """What a team gateway keeps across restarts (and, with PostgreSQL, shares between replicas).

    Every method may raise ``TeamStateError`` when the store cannot be reached or written.
    """

    async def append_audit(self, record: AuditRecord) -> None:
        """Write one record; returns once it is durable (before the call's result is sent)."""

    async def audit_records(
        self, *, user: str | None = None, since: datetime | None = None, limit: int | None = None
    ) -> list[AuditRecord]:
        """Records, oldest first, of one user (or all) from ``since`` on."""

    async def put_credential(self, user: str, server: str, sealed: bytes) -> None:
        """Keep (or replace) the sealed upstream credentials of ``user`` for ``server``."""

    async def get_credential(self, user: str, server: str) -> bytes | None:
        """The sealed credentials of ``user`` for ``server``, if any."""

    async def delete_credential(self, user: str, server: str) -> bool:
        """Forget them; ``True`` when there were some."""

    async def credential_servers(self, user: str) -> list[str]:
        """The servers ``user`` holds credentials for, sorted."""

    async def check(self) -> None:
        """Raise unless the store answers now (``/readyz``)."""

    async def aclose(self) -> None:
        """Release connections and files."""
