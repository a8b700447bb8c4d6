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


MAX_AUDIT_PAGE = 200
"""The most records one ``audit_page`` returns: a page is read whole into memory."""


@dataclass(frozen=True, slots=True)
class AuditQuery:
    """Which records the dashboard's audit page asks for: each filter set narrows them, newest
    first, ``limit`` of them (at most ``MAX_AUDIT_PAGE``) after skipping ``offset``."""

    user: str | None = None
    server: str | None = None
    tool: str | None = None
    outcome: Outcome | None = None
    since: datetime | None = None
    """From this time on (included)."""
    until: datetime | None = None
    """Before this time (excluded)."""
    limit: int = 50
    offset: int = 0

    def conditions(self, placeholder: str, time_column: str) -> tuple[list[str], list[Any]]:
        """The SQL conditions and their parameters in order, without the time bounds' values
        (each store encodes a time its own way: ``since`` then ``until`` come last, when set)."""
        columns = (("user_subject", self.user), ("server", self.server), ("tool", self.tool))
        conditions: list[str] = []
        parameters: list[Any] = []
        for column, value in (*columns, ("outcome", self.outcome)):
            if value is not None:
                conditions.append(f"{column} = {placeholder}")
                parameters.append(value)
        if self.since is not None:
            conditions.append(f"{time_column} >= {placeholder}")
        if self.until is not None:
            conditions.append(f"{time_column} < {placeholder}")
        return conditions, parameters

    @property
    def bounded_limit(self) -> int:
        return min(max(self.limit, 0), MAX_AUDIT_PAGE)


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

    async def audit_page(self, query: AuditQuery) -> list[AuditRecord]:
        """The records ``query`` selects, newest first (the dashboard's audit log)."""

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
