"""A control connection to the daemon in an async program (``open_agent_session(daemon=True)``).

The wire and its parsing are ``daemon_client.control``'s; here requests run concurrently, each answer
reaches the request of its id, and events the daemon pushes go to ``events``, a stream that
ends when the connection does. The connection is an ``async with``: the task reading it lives
in the connection's own task group. A request cancelled while it waits tells the daemon
(``cancel``), so a tool call stops in the daemon as it would in-process.
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
from anyio.abc import SocketAttribute, SocketStream
from anyio.streams.buffered import BufferedByteReceiveStream
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from mcpfleet.contract import wire
from mcpfleet.daemon_client import paths
from mcpfleet.daemon_client.control import (
    HELLO_TIMEOUT_S,
    Answer,
    DaemonLost,
    DaemonUnavailable,
    Event,
    Welcome,
    check_peer,
    control_hello,
    encode_request,
    needs_in,
    parse_control_line,
    parse_welcome,
)

logger = logging.getLogger(__name__)

EVENT_BUFFER = 16
"""Events waiting to be read. The daemon's events say "look again", so when this many wait
already, one more adds nothing and is dropped."""
CANCEL_SEND_TIMEOUT_S = 1.0
"""How long a cancelled request spends telling the daemon so."""

_CONNECTION_ERRORS = (
    OSError,
    anyio.BrokenResourceError,
    anyio.ClosedResourceError,
    anyio.EndOfStream,
    anyio.IncompleteRead,
    anyio.DelimiterNotFound,
    wire.WireError,
)


async def _receive_line(receive: BufferedByteReceiveStream, limit: int) -> bytes:
    """One line of at most ``limit`` bytes (without its newline); ``DelimiterNotFound`` past it.

    ``receive_until`` only stops reading at its limit: a longer line that came whole in one
    read is returned as it is, so the limit is checked here as well.
    """
    line = await receive.receive_until(b"\n", limit)
    if len(line) > limit:
        raise anyio.DelimiterNotFound(limit)
    return line


@dataclass
class _Waiter:
    done: anyio.Event = field(default_factory=anyio.Event)
    answer: Answer | None = None


class AsyncControlClient:
    """One control connection: concurrent requests, answers by id, pushed events in ``events``."""

    def __init__(
        self,
        stream: SocketStream,
        receive: BufferedByteReceiveStream,
        welcome: Welcome,
        events: MemoryObjectReceiveStream[Event],
        event_sink: MemoryObjectSendStream[Event],
    ) -> None:
        self.welcome = welcome
        self.events = events
        """Every event pushed on this connection, in order; the iteration ends with the connection."""
        self._stream = stream
        self._receive = receive
        self._event_sink = event_sink
        self._send_lock = anyio.Lock()
        self._ids = itertools.count(1)
        self._waiting: dict[int, _Waiter] = {}
        self._lost: DaemonLost | None = None

    @classmethod
    @asynccontextmanager
    async def connect(
        cls, path: Path | None = None, *, host: str | None = None
    ) -> AsyncIterator[AsyncControlClient]:
        """Connect and say hello, for the life of the block.

        ``DaemonUnavailable`` when that fails; its ``__cause__`` is the failed connect's
        ``OSError``, for which ``launch.no_daemon_listens`` says whether no daemon runs at all.
        """
        target = paths.socket_path() if path is None else path
        try:
            stream = await anyio.connect_unix(target)
        except OSError as error:
            raise DaemonUnavailable(
                f"cannot connect to the daemon at {target}: {error.strerror or error}"
            ) from error
        async with stream:
            check_peer(stream.extra(SocketAttribute.raw_socket), target)
            receive = BufferedByteReceiveStream(stream)
            try:
                with anyio.fail_after(HELLO_TIMEOUT_S):
                    await stream.send(control_hello(host=host).encode())
                    line = await _receive_line(receive, wire.MAX_HELLO_BYTES) + b"\n"
                    asked = needs_in(line)
                    if asked is not None:
                        await stream.send(wire.env_values(asked))
                        line = await _receive_line(receive, wire.MAX_HELLO_BYTES) + b"\n"
            except (TimeoutError, *_CONNECTION_ERRORS) as error:
                raise DaemonLost(
                    f"the daemon did not answer the hello: {error!r}", request_sent=True
                ) from error
            welcome = parse_welcome(line)
            event_sink, events = anyio.create_memory_object_stream[Event](EVENT_BUFFER)
            client = cls(stream, receive, welcome, events, event_sink)
            try:
                async with events, anyio.create_task_group() as group:
                    group.start_soon(client._read_answers)
                    try:
                        yield client
                    finally:
                        group.cancel_scope.cancel()
            except BaseExceptionGroup as failures:
                # The reader records a broken connection instead of raising: an error here is
                # the block's own (a request's ``DaemonLost``, say), given back as it was raised.
                if len(failures.exceptions) != 1:
                    raise
                raise failures.exceptions[0] from None

    @property
    def closed(self) -> bool:
        """The connection ended: every request from now on raises ``DaemonLost``."""
        return self._lost is not None

    async def request(self, op: str, params: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """Send one request and wait for its result.

        ``OperationFailed`` for the daemon's error answer, ``DaemonLost`` when the connection
        ends first. Cancelled while it waits, it sends ``cancel`` for it before it gives up.
        """
        if self._lost is not None:
            raise DaemonLost(str(self._lost), request_sent=False)
        request_id = next(self._ids)
        line = encode_request(request_id, op, params or {})
        waiter = self._waiting[request_id] = _Waiter()
        try:
            try:
                async with self._send_lock:
                    await self._stream.send(line)
            except _CONNECTION_ERRORS as error:
                raise DaemonLost(
                    f"the daemon went away before {op!r} was sent: {error!r}", request_sent=False
                ) from error
            try:
                await waiter.done.wait()
            except anyio.get_cancelled_exc_class():
                await self._send_cancel(request_id)
                raise
        finally:
            self._waiting.pop(request_id, None)
        if waiter.answer is None:
            assert self._lost is not None, "a waiter is woken by its answer or by the connection's end"
            raise DaemonLost(f"{self._lost} (during {op!r})", request_sent=True)
        return waiter.answer.unwrap()

    async def _send_cancel(self, request_id: int) -> None:
        line = encode_request(next(self._ids), "cancel", {"request": request_id})
        with anyio.CancelScope(shield=True), anyio.move_on_after(CANCEL_SEND_TIMEOUT_S):
            try:
                async with self._send_lock:
                    await self._stream.send(line)
            except _CONNECTION_ERRORS:
                pass  # the connection is gone, and the daemon cancels what a gone connection asked

    async def _read_answers(self) -> None:
        try:
            while True:
                line = await _receive_line(self._receive, wire.MAX_CONTROL_LINE_BYTES)
                message = parse_control_line(line)
                if isinstance(message, Event):
                    try:
                        self._event_sink.send_nowait(message)
                    except anyio.WouldBlock:
                        logger.debug("daemon event %s dropped: %d wait already", message.name, EVENT_BUFFER)
                    continue
                waiter = self._waiting.get(message.id)
                if waiter is not None:
                    waiter.answer = message
                    waiter.done.set()
        except anyio.DelimiterNotFound:
            self._lost = DaemonLost("the daemon sent a line over the limit", request_sent=True)
        except wire.WireError as error:
            self._lost = DaemonLost(f"the daemon sent an unreadable line: {error}", request_sent=True)
        except _CONNECTION_ERRORS as error:
            reason = (
                "the daemon closed the connection"
                if isinstance(error, anyio.IncompleteRead | anyio.EndOfStream)
                else f"the connection to the daemon broke: {error!r}"
            )
            self._lost = DaemonLost(reason, request_sent=True)
        finally:
            if self._lost is None:
                self._lost = DaemonLost("the connection to the daemon was closed", request_sent=True)
            for waiter in self._waiting.values():
                waiter.done.set()
            self._event_sink.close()
