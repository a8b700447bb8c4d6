"""What the dashboard shows and does, as a protocol its owner implements (the daemon's
``daemon.dashboard.DaemonFleet``; a team gateway's ``team.ui_fleet.TeamFleetSource``), and the
records it reads.

The pages only read these records and call these methods: what a fleet is, who shares which
backend, how an approval is written, stay their owner's, done by the same functions its
command line uses.
"""

from __future__ import annotations

from collections import deque
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from typing import Any, Protocol

CALL_RECORDS = 4096
"""Calls kept for the plots: the most recent ones, across every server."""


@dataclass(frozen=True)
class BackendRow:
    """One backend the fleet runs."""

    key: str
    """Stable while the backend runs as it is: what its page's URL names."""
    name: str
    state: str
    share: str
    project: str | None
    sessions: int
    pid: int | None
    rss_bytes: int | None
    tools: int
    last_error: str | None


@dataclass(frozen=True)
class SessionRow:
    """One host session the fleet serves: who is using it, from where."""

    id: str
    host: str | None
    project: str | None
    since: str


@dataclass(frozen=True)
class ToolInfo:
    name: str
    description: str
    input_schema: dict[str, Any]


@dataclass(frozen=True)
class ServerDetail:
    row: BackendRow
    log_tail: list[str]
    tools: list[ToolInfo]


@dataclass(frozen=True)
class PendingServer:
    """A project's server waiting for approval: what would run, and which variables it names."""

    project: str
    path: str
    name: str
    runs: str
    """Its command line or URL, secrets masked."""
    env_names: list[str]


@dataclass(frozen=True)
class WithheldChange:
    """A tool a server changed or added since its tools were approved, withheld until accepted."""

    key: str
    """The backend's key (approving accepts every withheld tool of it)."""
    server: str
    tool: str
    reason: str
    diff: list[str]
    warnings: list[str]


@dataclass(frozen=True)
class CallRecord:
    server: str
    tool: str
    at: float
    """Wall-clock time the call ended (``time.time()``)."""
    duration_s: float
    failed: bool


@dataclass
class CallLog:
    """The most recent calls (a ring of ``CALL_RECORDS``), for the plots."""

    records: deque[CallRecord] = field(default_factory=lambda: deque(maxlen=CALL_RECORDS))

    def add(self, record: CallRecord) -> None:
        self.records.append(record)


class FleetSource(Protocol):
    """The fleet behind a dashboard."""

    calls: CallLog

    def backends(self) -> list[BackendRow]: ...

    def sessions(self) -> list[SessionRow]: ...

    def hold(self) -> AbstractAsyncContextManager[None]:
        """Count as a connection of the fleet's owner while a live page is open."""
        ...

    def server(self, key: str) -> ServerDetail | None: ...

    def pending(self) -> list[PendingServer]: ...

    def withheld(self) -> list[WithheldChange]: ...

    async def approve_server(self, project: str, path: str, name: str) -> str:
        """Approve the entry; what to say (which file and name were approved)."""
        ...

    async def approve_tools(self, key: str) -> str: ...

    async def restart(self, key: str) -> str: ...

    async def disable(self, key: str) -> str: ...

    async def call(self, key: str, tool: str, arguments: dict[str, Any], session: object) -> dict[str, Any]:
        """The ``call --json`` document of one call of ``tool`` on that backend, made for the
        signed-in ``session`` (a team gateway calls as that admin: policy and audit apply)."""
        ...
