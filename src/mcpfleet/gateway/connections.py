"""What one connection may hold of the HTTP gateway: read deadlines, and caps below the fd limit.

Every connection costs a file descriptor, and a process has ``RLIMIT_NOFILE`` of them for
everything: its backends' pipes, its sockets, its files. Without bounds, 50 sockets that send
their headers a byte at a time hold 50 descriptors forever, and some thousands of idle
connections take them all: the gateway then cannot accept a client, spawn a backend or open
its cache. So, around uvicorn's HTTP protocol (httptools):

- **read deadlines.** From the moment a connection may send a request (it was accepted, or
  its previous answer was sent) its headers must be in within ``header_deadline_s``, and from
  the end of the headers its body within ``body_deadline_s``. Past either it gets ``408`` and
  is closed. An idle keep-alive connection is closed sooner, by uvicorn's own keep-alive timer.
- **connection caps.** ``max_connections`` in all and ``max_connections_per_peer`` per remote
  address, both computed from the descriptor limit (``ListenerBounds.for_this_process``). A
  connection past a cap gets ``503`` at once and is closed; one peer cannot take every slot.

A refused or timed-out connection is answered, then half-closed (its reads still drained) so
the answer is not lost to a reset, and closed for good after ``CLOSE_LINGER_S`` at most.
How many refusals may linger at once is capped too; past that they are closed at once.
"""

from __future__ import annotations

import asyncio
import logging
import os
import resource
import time
from collections import Counter
from dataclasses import dataclass
from typing import Any, ClassVar, Literal

from uvicorn.config import Config
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol
from uvicorn.server import ServerState

from mcpfleet.errors import ServeAddressError

logger = logging.getLogger(__name__)

HEADER_DEADLINE_S = 10.0
"""How long a request's headers may take: a client sends them at once; 10 s is far above any."""
BODY_DEADLINE_S = 30.0
"""How long a request's body may take once its headers are in (bodies are 4 MB at most)."""
MAX_CONNECTIONS = 512
"""The total cap when the descriptor limit allows more: far above what local hosts open."""
ACCEPT_BURST = 32
"""Connections asyncio may accept in one go before any of them reaches a cap (uvicorn's
``backlog``, which is also the socket's listen queue)."""
BURSTS_IN_FLIGHT = 4
"""Accept bursts whose descriptors may be open at once before a cap closes them: asyncio accepts
a burst in one turn of its loop, makes each transport in the next, calls ``connection_made``
(where a cap refuses) in the one after and releases a refused descriptor in the next, while a
flood keeps the listener ready every turn. So much room is kept free of the caps."""
MIN_CONNECTIONS = 8
"""Fewer than this left by the descriptor limit: refuse to start rather than serve badly."""
CLOSE_LINGER_S = 2.0
"""How long an answered (408/503) connection may stay half-closed before it is closed for good."""
REFUSAL_WARNING_INTERVAL_S = 30.0
MAX_HEADER_BYTES = 16 * 1024
"""A request's line and headers together, at most (431 past it): an MCP request's are some
hundreds of bytes; 16 KiB is what uvicorn's h11 parser allowed before."""

Phase = Literal["headers", "body"]


@dataclass(frozen=True)
class ListenerBounds:
    """The read deadlines and connection caps of one HTTP listener."""

    max_connections: int
    max_connections_per_peer: int
    max_lingering_refusals: int
    header_deadline_s: float = HEADER_DEADLINE_S
    body_deadline_s: float = BODY_DEADLINE_S

    @classmethod
    def for_this_process(
        cls, *, header_deadline_s: float = HEADER_DEADLINE_S, body_deadline_s: float = BODY_DEADLINE_S
    ) -> ListenerBounds:
        """Caps that leave this process's descriptors room for everything else.

        Of the descriptors neither open now nor kept for ``BURSTS_IN_FLIGHT`` accept bursts, half may be
        connections (at most ``MAX_CONNECTIONS``); the other half stays for backends started
        later, their pipes, HTTP backends' sockets and files. One peer may hold half the
        connections; refusals lingering at once, an eighth of the room.
        """
        limit = _descriptor_limit()
        room = limit - _open_descriptors() - BURSTS_IN_FLIGHT * ACCEPT_BURST
        total = min(MAX_CONNECTIONS, room // 2)
        if total < MIN_CONNECTIONS:
            raise ServeAddressError(
                f"--http: this process may open {limit} files (ulimit -n), which leaves room for "
                f"{max(total, 0)} connections; raise it (ulimit -n 1024) and start again"
            )
        return cls(
            max_connections=total,
            max_connections_per_peer=max(1, total // 2),
            max_lingering_refusals=max(1, min(ACCEPT_BURST, room // 8)),
            header_deadline_s=header_deadline_s,
            body_deadline_s=body_deadline_s,
        )


def _descriptor_limit() -> int:
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    # "Unlimited" is not: the kernel still has its own ceiling (fs.nr_open, often 2**20).
    return 1 << 20 if soft == resource.RLIM_INFINITY else soft


def _open_descriptors() -> int:
    for folder in ("/proc/self/fd", "/dev/fd"):
        try:
            return len(os.listdir(folder))
        except OSError:
            continue
    return 0


class ConnectionGuard:
    """The open connections of one listener, counted in all and per peer, against its bounds."""

    def __init__(self, bounds: ListenerBounds) -> None:
        self.bounds = bounds
        self.open = 0
        self.by_peer: Counter[str] = Counter()
        self.lingering_refusals = 0
        self._refused_unreported = 0
        self._last_warning: float | None = None

    def admit(self, peer: str) -> bool:
        """Count a new connection from ``peer`` in, unless that passes a cap."""
        if self.open >= self.bounds.max_connections or (
            self.by_peer[peer] >= self.bounds.max_connections_per_peer
        ):
            self._report_refusal(peer)
            return False
        self.open += 1
        self.by_peer[peer] += 1
        return True

    def release(self, peer: str) -> None:
        self.open -= 1
        self.by_peer[peer] -= 1
        if self.by_peer[peer] <= 0:
            del self.by_peer[peer]

    def _report_refusal(self, peer: str) -> None:
        """One warning per interval, however many connections a flood brings."""
        self._refused_unreported += 1
        now = time.monotonic()
        if self._last_warning is not None and now - self._last_warning < REFUSAL_WARNING_INTERVAL_S:
            return
        self._last_warning = now
        logger.warning(
            "HTTP gateway: refused %d connection(s) with 503 (last from %s): %d open, at most %d "
            "in all and %d per peer",
            self._refused_unreported,
            peer,
            self.open,
            self.bounds.max_connections,
            self.bounds.max_connections_per_peer,
        )
        self._refused_unreported = 0


def bounded_protocol(guard: ConnectionGuard) -> type[asyncio.Protocol]:
    """uvicorn's httptools protocol with ``guard``'s caps and deadlines, as ``uvicorn.Config(http=…)``."""

    class GuardedProtocol(BoundedHttpToolsProtocol):
        connection_guard = guard

    return GuardedProtocol


class BoundedHttpToolsProtocol(HttpToolsProtocol):
    """One HTTP connection: admitted by the guard or refused with 503, its reads on deadlines.

    uvicorn's httptools protocol (llhttp, in C) rather than its h11 one: h11 parses and
    validates in Python, about half of the CPU time an HTTP request cost the gateway before its
    own work began. The phase follows the parser's callbacks: from the moment a request may
    come (the connection is made, or the previous answer is complete) until its headers are
    in, ``headers``; until its body is in, ``body``; then none (the request is in, the answer
    streams for as long as it takes). A request's line and headers are capped at
    ``MAX_HEADER_BYTES`` (431 past it), as h11 capped them: llhttp alone has no cap; and each
    header's value is stripped of surrounding whitespace, as h11 strips it.
    """

    connection_guard: ClassVar[ConnectionGuard]

    def __init__(
        self,
        config: Config,
        server_state: ServerState,
        app_state: dict[str, Any],
        _loop: asyncio.AbstractEventLoop | None = None,
    ) -> None:
        super().__init__(config, server_state, app_state, _loop)
        self._peer: str | None = None
        self._phase: Phase | None = None
        self._deadline: asyncio.TimerHandle | None = None
        self._answered_early = False
        self._receiving = False
        """Between a request's first byte and its last: its phase is the parser's to move."""
        self._header_bytes = 0

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        peer = _peer_of(transport)
        if not self.connection_guard.admit(peer):
            refusal = _RefusedConnection(self.connection_guard)
            transport.set_protocol(refusal)
            refusal.connection_made(transport)
            return
        self._peer = peer
        super().connection_made(transport)
        self._set_phase("headers")

    def connection_lost(self, exc: Exception | None) -> None:
        self._set_phase(None)
        if self._peer is not None:
            self.connection_guard.release(self._peer)
            self._peer = None
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        if self._answered_early:
            return  # drained: the connection was answered and is closing
        super().data_received(data)

    # -- the parser's callbacks, which move the phase ------------------------------------------

    def on_message_begin(self) -> None:
        if self._answered_early:
            return  # the rest of a chunk already answered: parsed, and dropped
        super().on_message_begin()
        self._receiving = True
        self._header_bytes = 0
        self._set_phase("headers")  # a pipelined request gets its deadline here

    def on_url(self, url: bytes) -> None:
        if self._within_header_cap(len(url)):
            super().on_url(url)

    def on_header(self, name: bytes, value: bytes) -> None:
        if self._within_header_cap(len(name) + len(value) + 4):
            # The whitespace around a field's value is not part of it (RFC 9110, 5.5): h11 strips
            # it, llhttp keeps what trails, and the SDK compares Mcp-Name with the body as given.
            super().on_header(name, value.strip(b" \t"))

    def on_headers_complete(self) -> None:
        if self._answered_early:
            return
        super().on_headers_complete()
        self.cycle.transport = _OneSegmentAnswers(self.transport, self.loop)  # type: ignore[assignment]
        self._set_phase("body")

    def on_body(self, body: bytes) -> None:
        if not self._answered_early:
            super().on_body(body)

    def on_message_complete(self) -> None:
        if self._answered_early:
            return
        super().on_message_complete()
        self._receiving = False
        self._set_phase(None)

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if self.transport.is_closing():
            self._set_phase(None)
        elif not self._receiving and not self.pipeline:
            self._set_phase("headers")

    def _within_header_cap(self, size: int) -> bool:
        """Count ``size`` more bytes of the request's head; past the cap, answer 431 and close
        (the parser goes on through the chunk it holds, and every callback drops what it gives)."""
        if self._answered_early:
            return False
        self._header_bytes += size
        if self._header_bytes <= MAX_HEADER_BYTES:
            return True
        self._set_phase(None)
        self._answered_early = True
        _answer_and_close(
            self.transport, 431, f"the request's line and headers are over {MAX_HEADER_BYTES} bytes"
        )
        return False

    def _set_phase(self, phase: Phase | None) -> None:
        if phase == self._phase and (phase is None or self._deadline is not None):
            return
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None
        self._phase = phase
        if phase is not None:
            bounds = self.connection_guard.bounds
            delay = bounds.header_deadline_s if phase == "headers" else bounds.body_deadline_s
            self._deadline = self.loop.call_later(delay, self._deadline_passed, phase, delay)

    def _deadline_passed(self, phase: Phase, delay: float) -> None:
        self._deadline = None
        self._phase = None
        if self.transport.is_closing():
            return
        cycle = self.cycle
        answer_started = cycle is not None and cycle.response_started and phase == "body"
        if cycle is not None and phase == "body":
            # The application waits in receive(): it now hears a disconnect, and its sends
            # are dropped, so it never writes into the answer given here.
            cycle.disconnected = True
            cycle.message_event.set()
        logger.debug("HTTP gateway: %s from %s not in within %g s: 408", phase, self._peer, delay)
        if answer_started:
            self.transport.close()  # an answer is on its way already: a 408 cannot follow it
            return
        self._answered_early = True
        _answer_and_close(self.transport, 408, f"the request's {phase} did not arrive within {delay:g} s")


class _OneSegmentAnswers:
    """A connection's transport as one request's cycle writes to it: the head of the answer
    waits for its body until the end of this turn of the event loop, so that a whole JSON
    answer leaves in one write (one segment, one wake-up of the client) rather than two.

    uvicorn writes an answer's status line and headers as soon as the application starts it,
    and its body with the next message; the fast path sends both in one turn. A streamed
    answer's head still goes out in the turn it was started (the held bytes are flushed by a
    callback), so nothing waits on this."""

    def __init__(self, transport: asyncio.Transport, loop: asyncio.AbstractEventLoop) -> None:
        self._transport = transport
        self._loop = loop
        self._held: bytes | None = None

    def write(self, data: bytes) -> None:
        if self._transport.is_closing():
            self._held = None
            self._transport.write(data)  # asyncio's own handling of a write to a closing transport
        elif self._held is not None:
            data, self._held = self._held + data, None
            self._transport.write(data)
        else:
            self._held = data
            self._loop.call_soon(self._flush)

    def _flush(self) -> None:
        data, self._held = self._held, None
        # Closed meanwhile (a deadline's 408 went out instead, the client left): nothing to add.
        if data is not None and not self._transport.is_closing():
            self._transport.write(data)

    def close(self) -> None:
        self._flush()
        self._transport.close()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._transport, name)


class _RefusedConnection(asyncio.Protocol):
    """A connection past a cap: answered 503 at once, drained, closed within the linger."""

    def __init__(self, guard: ConnectionGuard) -> None:
        self.guard = guard
        self.lingering = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        if self.guard.lingering_refusals >= self.guard.bounds.max_lingering_refusals:
            transport.close()  # too many refusals still draining: no answer, no descriptor held
            return
        self.guard.lingering_refusals += 1
        self.lingering = True
        _answer_and_close(transport, 503, "the gateway has as many connections as it takes; retry shortly")

    def data_received(self, data: bytes) -> None:
        pass  # drained, never read: the answer is already given

    def connection_lost(self, exc: Exception | None) -> None:
        if self.lingering:
            self.guard.lingering_refusals -= 1
            self.lingering = False


_REASONS = {408: "Request Timeout", 431: "Request Header Fields Too Large", 503: "Service Unavailable"}


def _answer_and_close(transport: asyncio.Transport, status: int, text: str) -> None:
    """Write a whole ``status`` answer, half-close, and close for good after ``CLOSE_LINGER_S``.

    Closing at once, with the client's bytes still unread, would reset the connection and the
    client could lose the answer; the half-close lets it read the answer and end cleanly
    (the transport closes itself on the client's end of stream).
    """
    body = text.encode()
    head = (
        f"HTTP/1.1 {status} {_REASONS[status]}\r\ncontent-type: text/plain; charset=utf-8\r\n"
        f"content-length: {len(body)}\r\nconnection: close\r\n"
        + ("retry-after: 1\r\n" if status == 503 else "")
        + "\r\n"
    )
    transport.write(head.encode() + body)
    if transport.can_write_eof():
        transport.write_eof()
    asyncio.get_running_loop().call_later(CLOSE_LINGER_S, transport.abort)


def _peer_of(transport: asyncio.BaseTransport) -> str:
    peer = transport.get_extra_info("peername")
    return str(peer[0]) if isinstance(peer, tuple) and peer else "unknown"
