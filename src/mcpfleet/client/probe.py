"""First contact's ``server/discover`` probe, cut short after a bound of mcpfleet's choosing.

The SDK's ``auto`` mode probes ``server/discover`` with a 10 s timeout of its own and falls
back to ``initialize`` on any error, a timeout included. ``ProbeBound`` wraps the transport
so the timeout comes sooner: once the bound passes without an answer, the request-timeout
error the SDK would have produced is delivered in its place, and the SDK's own fallback
logic carries on unchanged. A late answer finds no waiter and is dropped by the SDK; a late
``DiscoverResult`` is kept (``late_discover``): the server was only slow (still booting),
and speaks 2026-07-28.

The read side must be able to deliver that error while the SDK's reader already waits for
the server, so until the handshake is over (``settle()``) a pump task moves the server's
messages into a buffer the reader drains, and the timer writes into the same buffer. After
that the pump hands over: the reader drains the buffer, then reads the transport directly.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

import anyio
import anyio.abc
import mcp_types
from mcp.shared.message import SessionMessage

from mcpfleet.client._streams import ClosingStream, ReceivingStream

if TYPE_CHECKING:
    import contextvars

    from mcpfleet.client._sdk import ReadStream, TransportStreams, WriteStream


class ProbeBound(anyio.AsyncContextManagerMixin):
    """A transport wrapper that answers an unanswered ``server/discover`` after ``bound_s``."""

    def __init__(self, inner: Any, bound_s: float) -> None:
        self._inner = inner
        self._bound_s = bound_s
        self._settled = False
        self._unanswered: set[Any] = set()
        self._expired: set[Any] = set()
        self.timed_out = False
        self.late_discover: dict[str, Any] | None = None
        self._task_group: anyio.abc.TaskGroup | None = None
        self._buffer_in: Any = None

    def settle(self) -> None:
        """The handshake is over: no probe will be sent again, the pump may retire."""
        self._settled = True

    @asynccontextmanager
    async def __asynccontextmanager__(self) -> AsyncIterator[TransportStreams]:
        async with self._inner as (read_stream, write_stream):
            buffer_in, buffer_out = anyio.create_memory_object_stream[
                "tuple[SessionMessage | Exception, contextvars.Context | None]"
            ](math.inf)
            self._buffer_in = buffer_in
            async with anyio.create_task_group() as task_group:
                self._task_group = task_group
                task_group.start_soon(self._pump, read_stream, buffer_in)
                try:
                    yield (
                        _BufferedReadStream(buffer_out, read_stream),
                        _ProbeWatchingWriteStream(write_stream, self),
                    )
                finally:
                    self._task_group = None
                    task_group.cancel_scope.cancel()

    def probe_sent(self, request_id: Any) -> None:
        if self._settled or self._task_group is None:
            return
        self._unanswered.add(request_id)
        self._task_group.start_soon(self._expire, request_id)

    async def _expire(self, request_id: Any) -> None:
        await anyio.sleep(self._bound_s)
        if request_id not in self._unanswered:
            return
        self._unanswered.discard(request_id)
        self._expired.add(request_id)
        self.timed_out = True
        error = mcp_types.JSONRPCError(
            jsonrpc="2.0",
            id=request_id,
            error=mcp_types.ErrorData(
                code=mcp_types.REQUEST_TIMEOUT,
                message=f"server/discover not answered within {self._bound_s * 1000:.0f}ms",
            ),
        )
        with contextlib.suppress(anyio.ClosedResourceError, anyio.BrokenResourceError):
            self._buffer_in.send_nowait((SessionMessage(error), None))

    async def _pump(self, read_stream: Any, buffer_in: Any) -> None:
        async with buffer_in:
            while not self._settled:
                try:
                    message = await read_stream.receive()
                except (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError):
                    return  # the reader meets the same end when it reads the transport itself
                if isinstance(message, SessionMessage) and isinstance(
                    message.message, mcp_types.JSONRPCResponse | mcp_types.JSONRPCError
                ):
                    self._unanswered.discard(message.message.id)
                    if message.message.id in self._expired and isinstance(
                        message.message, mcp_types.JSONRPCResponse
                    ):
                        self.late_discover = message.message.result
                try:
                    buffer_in.send_nowait((message, getattr(read_stream, "last_context", None)))
                except (anyio.ClosedResourceError, anyio.BrokenResourceError):
                    return  # the reader is gone: the connection is closing


class _ProbeWatchingWriteStream(ClosingStream):
    """Tells the ``ProbeBound`` when a ``server/discover`` request leaves."""

    def __init__(self, inner: WriteStream[SessionMessage], probe: ProbeBound) -> None:
        self._inner = inner
        self._probe = probe

    async def send(self, item: SessionMessage, /) -> None:
        message = item.message
        if isinstance(message, mcp_types.JSONRPCRequest) and message.method == "server/discover":
            self._probe.probe_sent(message.id)
        await self._inner.send(item)

    async def aclose(self) -> None:
        await self._inner.aclose()


class _BufferedReadStream(ReceivingStream):
    """Reads what the ``ProbeBound`` pump buffered, then (once it retired) the transport itself."""

    def __init__(self, buffer_out: Any, transport_stream: ReadStream[SessionMessage | Exception]) -> None:
        self._buffer_out = buffer_out
        self._transport_stream = transport_stream
        self._direct = False
        self._last_context: contextvars.Context | None = None

    @property
    def last_context(self) -> Any:
        if self._direct:
            return getattr(self._transport_stream, "last_context", None)
        return self._last_context

    async def receive(self) -> SessionMessage | Exception:
        if not self._direct:
            try:
                message, self._last_context = await self._buffer_out.receive()
                return message  # type: ignore[no-any-return]
            except anyio.EndOfStream:
                self._direct = True
        return await self._transport_stream.receive()

    async def aclose(self) -> None:
        self._buffer_out.close()
        await self._transport_stream.aclose()


__all__ = ["ProbeBound"]
