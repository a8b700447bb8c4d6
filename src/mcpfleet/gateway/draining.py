"""A gateway told to stop drains first: it takes no new work, and what it took finishes.

A replica behind a load balancer is stopped by a signal (Kubernetes sends SIGTERM, then SIGKILL
after its grace period). Stopping at once would cut every call in flight; ``Drain`` lets them
finish, within a deadline:

- ``start()`` (the SIGTERM handler's, synchronous) begins the drain; ``draining`` is true from
  then on, so the readiness check fails at once and the balancer stops sending work here;
- while draining, the gate (``gateway.http.BearerGate``) refuses new work on the MCP endpoint
  with 503 (``Retry-After``, ``Connection: close``): a POST that opens a session (``initialize``)
  or is a 2026-07-28 request of its own (no ``Mcp-Session-Id``). Neither has started, so a
  balancer or the client can send it again, to another replica. What belongs to work already
  here passes: requests of a session this replica holds (a backend's question being answered,
  a call's ``notifications/cancelled``, the session's own calls) and a 2026-07-28 round that
  continues a call in flight (its ``requestState``);
- every request being answered is held (``tracking``) for as long as its response runs: a POST
  carrying a JSON-RPC request, and a GET that resumes a request's stream (``Last-Event-ID``
  naming an event of one: ``resumes_a_request``, which the server sets from its event store),
  which ends with that request's answer. A session's own event stream (a GET without
  ``Last-Event-ID``, or resuming that stream) waits for nothing and is not held: it would keep
  every drain to its deadline;
- ``drained()`` returns once the drain started and nothing is held, or at the deadline
  (``timeout_s``) with the number of requests still running; ``cut()`` then cancels their work,
  and the gate answers each that had no response yet with a JSON-RPC error saying the replica
  stopped before it finished (HTTP 200, not 503: the call may have run, so no balancer may send
  it again by itself); a stream already open is ended. The gateway then stops.

No SDK here.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

import anyio

if TYPE_CHECKING:
    from starlette.types import Scope

SESSION_HEADER = b"mcp-session-id"
RESUMPTION_HEADER = b"last-event-id"
REFUSAL_TEXT = (
    b"this gateway replica is draining (shutting down): it opens no new session and takes no new "
    b"request; send it again, to another replica"
)
REFUSAL_HEADERS = [(b"retry-after", b"1"), (b"connection", b"close")]
"""Try again at once, elsewhere: this connection is closed, so a balancer's next pick is a new one."""
CUT_ERROR_CODE = -32603


def cut_message(timeout_s: float) -> str:
    """What a request cut at the deadline is answered with."""
    return (
        f"the gateway replica stopped before this request finished: it was still running "
        f"drain_timeout ({timeout_s:g} s) after the replica was told to stop; the call may have "
        "run, so send it again only if running it twice is safe"
    )


class Drain:
    """One gateway's drain (see the module): started once, then waited for."""

    def __init__(self, timeout_s: float) -> None:
        self.timeout_s = timeout_s
        self._started = anyio.Event()
        self._idle = anyio.Event()
        self._idle.set()
        self._held: set[anyio.CancelScope] = set()
        self.resumes_a_request: Callable[[str], bool] = lambda event_id: False
        """Whether a ``Last-Event-ID`` names an event of a request's stream (held while resumed)."""

    @property
    def draining(self) -> bool:
        return self._started.is_set()

    @property
    def in_flight(self) -> int:
        """Requests being answered now (held by ``tracking``)."""
        return len(self._held)

    def start(self) -> None:
        """Begin the drain (again: nothing more); safe from a signal handler on the event loop."""
        self._started.set()

    async def started(self) -> None:
        """Return once ``start`` was called."""
        await self._started.wait()

    def refuses(self, scope: Scope, message: Any) -> bool:
        """Whether this MCP-endpoint request is new work a draining gateway turns away (see the
        module); ``message`` is a POST's decoded body (``None`` for other methods)."""
        if not self.draining or scope["method"] != "POST" or _header(scope, SESSION_HEADER) is not None:
            return False
        return not _continues_a_call(message)

    def holds(self, scope: Scope, message: Any) -> bool:
        """Whether this MCP-endpoint request is one whose answer a drain waits for."""
        if scope["method"] == "POST":
            return _is_request(message) or (
                isinstance(message, list) and any(_is_request(item) for item in message)
            )
        resumed = _header(scope, RESUMPTION_HEADER) if scope["method"] == "GET" else None
        return resumed is not None and self.resumes_a_request(resumed.decode("latin-1"))

    @contextlib.contextmanager
    def tracking(self) -> Iterator[anyio.CancelScope]:
        """Hold one request for the block (its response being written); the scope yielded is
        what ``cut`` cancels, for the holder to enter around the request's work."""
        scope = anyio.CancelScope()
        if not self._held:
            self._idle = anyio.Event()
        self._held.add(scope)
        try:
            yield scope
        finally:
            self._held.discard(scope)
            if not self._held:
                self._idle.set()

    async def drained(self) -> int:
        """Wait for ``start``, then for every held request to end, at most ``timeout_s``: the
        number of requests still running at the deadline (0: every one was answered)."""
        await self._started.wait()
        await self._wait_idle(self.timeout_s)
        return self.in_flight

    async def cut(self, within_s: float) -> None:
        """Cancel the work of every request still held, and wait (at most ``within_s``) for their
        holders to answer them as cut."""
        for scope in list(self._held):
            scope.cancel()
        await self._wait_idle(within_s)

    async def _wait_idle(self, within_s: float) -> None:
        with anyio.move_on_after(within_s):
            while self._held:
                await self._idle.wait()


def _header(scope: Scope, name: bytes) -> bytes | None:
    return next((value for key, value in scope["headers"] if key == name), None)


def _is_request(message: Any) -> bool:
    return isinstance(message, dict) and "method" in message and "id" in message


def _continues_a_call(message: Any) -> bool:
    """A 2026-07-28 round of a call in flight: the request sent again with the ``requestState``
    the gateway handed out (``gateway.relay``), which this replica holds."""
    if not isinstance(message, dict):
        return False
    params = message.get("params")
    return isinstance(params, dict) and isinstance(params.get("requestState"), str)
