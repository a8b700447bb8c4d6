"""One client request on its way to a backend: resolved once (``Forward``), then in flight
(``InFlight``, kept in the one ``InFlightRegistry``).

A ``tools/call``, ``prompts/get`` or ``resources/read`` is resolved once, when it arrives
(``Gateway.resolve_call``, ``Gateway.resolve``): which server serves the name and on which
connection, the backend's own name or URI behind the served one, the client who asked, and for a
call the tool budget's decision (forward these arguments, or answer with the budget's own
result). That ``Forward`` is then handed, unchanged, to the relay (who may be asked what by the
backend meanwhile) and to the gateway's core (which sends the request on).

While the backend answers, the request is ``InFlight``: the relay ties a backend's questions
to it (sampling, elicitation, roots), and the core ties the backend's log messages of that
time to it. Both read the same registry, which the relay owns.

No SDK here.
"""

from __future__ import annotations

import contextvars
import time
from collections.abc import Awaitable, Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import anyio

if TYPE_CHECKING:
    from mcp.server.session import ServerSession

    from mcpfleet.client.connection import ServerConnection
    from mcpfleet.gateway.guard import GuardedBackend, GuardedRequest
    from mcpfleet.gateway.relay import ParkedCall
    from mcpfleet.gateway.served_catalog import ListKind
    from mcpfleet.gateway.served_fleet import ServedFleet
    from mcpfleet.gateway.sessions import ClientSession

ProgressRelay = Callable[[float, float | None, str | None], Awaitable[None]]
"""Where a backend's progress of one request goes: ``(progress, total, message)``."""
LogRelay = Callable[[dict[str, Any]], Awaitable[None]]
"""Receives the params of a backend's ``notifications/message`` (its ``logger`` set to the server)."""


@dataclass(frozen=True, eq=False)
class Forward:
    """One client request, resolved once: where it goes, under which name, for whom."""

    fleet: ServedFleet
    """The fleet the request was resolved in: where a call that outlives its request (a parked
    one, ``gateway.relay``) runs, and where its backend's connection is read again when the
    backend asks something (a server still starting when the request came may have connected
    since)."""
    client: ClientSession
    kind: ListKind
    served_name: str
    """The tool or prompt name, or the resource URI, as the client sent it."""
    server: str | None = None
    """The server behind ``served_name``; ``None`` when the gateway serves no such name."""
    backend_name: str = ""
    """The backend's own name (or URI) for ``served_name``."""
    connection: ServerConnection | None = None
    """The server's connection when the request was resolved (``None`` while it starts)."""
    arguments: Mapping[str, Any] = field(default_factory=dict)
    """A call's arguments, as they go to the backend (``call_tool``'s inner ones)."""
    answer: dict[str, Any] | None = None
    """The tool budget's own answer (``find_tools``, a ``call_tool`` it cannot forward): set,
    nothing is forwarded."""
    guarded: GuardedRequest | None = None
    """The request as the gateway's guard permitted it (``gateway.views``): its ``after`` is told
    how it ended. ``None`` when the guard has no opinion (the local gateway)."""
    backend: GuardedBackend | None = None
    """Where the guard sends it instead of the fleet (a connection of the caller's own)."""

    @property
    def speaks_modern(self) -> bool:
        """Whether the server was connected in the 2026-07-28 era when the request was resolved."""
        return self.connection is not None and self.connection.era == "modern"


_current_flight: contextvars.ContextVar[InFlight | None] = contextvars.ContextVar(
    "mcpfleet_gateway_flight", default=None
)
"""The client request whose backend call runs in this task (and the tasks it starts)."""


@dataclass(eq=False)
class InFlight:
    """One client request being answered by one backend: who asked, and how to reach them."""

    server: str
    forward: Forward
    request_session: ServerSession
    """The SDK session of this very request (of its client, for a request the fast path
    answers): a question sent with ``request_id`` rides its channel."""
    request_id: Any
    on_log: LogRelay | None = None
    """Where the server's log messages go while the request runs: with the request, on its
    own stream (a 2026-07-28 client that opted in; a handshake-era client, whose HTTP
    transport may have no other stream open). ``None``: the client's session, if anywhere."""
    parked: ParkedCall | None = None
    """Set for a 2026-07-28 client, which is asked through ``input_required`` rounds."""
    done: bool = False
    local_errors: list[tuple[int, str]] = field(default_factory=list)
    """``(code, message)`` of each question of the backend that failed here (refused, or
    answered with an error by the client): the SDK turns such a failure of an ``input_required``
    round into the call's own JSON-RPC error, which is then not the backend's answer."""
    log_deliveries: list[anyio.Event] = field(default_factory=list)
    """One per log message being relayed with this request: its answer waits for them, or
    it would close the stream they ride on."""
    started: float = field(default_factory=time.monotonic)
    failed: bool = False
    """Its answer reported a failure (an error result, or the gateway's own error): set by
    whichever path answered, for the registry's ``observer``."""

    @property
    def client(self) -> ClientSession:
        return self.forward.client


class InFlightRegistry:
    """The client requests of one gateway being answered by backends, per server, oldest first."""

    def __init__(self) -> None:
        self._by_server: dict[str, list[InFlight]] = {}
        self.observer: Callable[[InFlight], None] | None = None
        """Told of each request as it leaves, answered (the daemon's record of calls for its
        dashboard's plots); ``None``: nobody."""

    @contextmanager
    def flying(self, flight: InFlight) -> Iterator[InFlight]:
        """Hold ``flight`` in the registry, and as this task's request, for the block."""
        self.enter(flight)
        token = _current_flight.set(flight)
        try:
            yield flight
        finally:
            _current_flight.reset(token)
            self.leave(flight)

    def enter(self, flight: InFlight) -> None:
        """Hold ``flight`` until ``leave``: for a request answered outside any one task (the
        fast path's, ``gateway.fast_path``), which is no task's current request."""
        self._by_server.setdefault(flight.server, []).append(flight)

    def leave(self, flight: InFlight) -> None:
        if not flight.done and self.observer is not None:
            self.observer(flight)
        flight.done = True
        flights = self._by_server.get(flight.server)
        if flights is None or flight not in flights:
            return
        flights.remove(flight)
        if not flights:
            self._by_server.pop(flight.server, None)

    def on(self, server: str) -> list[InFlight]:
        """The requests being answered by ``server`` now, oldest first."""
        return [flight for flight in self._by_server.get(server, ()) if not flight.done]

    def holds(self, flight: InFlight) -> bool:
        return any(flight in flights for flights in self._by_server.values())


def current_flight() -> InFlight | None:
    """The client request whose backend call runs in this task, if any (whichever gateway's)."""
    return _current_flight.get()


def asking_flight(server: str, connection: ServerConnection | None) -> InFlight | None:
    """The client request, whichever relay made it, whose call to ``server`` asks from this
    very task. Only a 2026-07-28 backend (``connection``'s era) asks from inside the call's
    task: a handshake-era backend's requests come from its connection's task, whose context
    may carry whichever call happened to start it."""
    current = _current_flight.get()
    if (
        current is not None
        and not current.done
        and current.server == server
        and connection is not None
        and connection.era == "modern"
    ):
        return current
    return None
