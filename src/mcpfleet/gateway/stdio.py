"""Serving the gateway on this process's stdin and stdout: JSON-RPC, one message per line.

The SDK's ``stdio_server`` reads lines of any length and drops a line that does not parse
without a word. A host must get an answer to everything it sends, and a gateway must not be
made to hold an unbounded line, so this transport:

* frames stdin with the fleet's own ``LineFramer``: a line longer than
  ``MAX_MESSAGE_BYTES`` (16 MiB) is never held, and if it was a request its id is read from
  either end and the request gets an ``Invalid Request`` error naming the limit;
* answers a line that is not JSON with ``Parse error`` (id ``null``) and a JSON value that
  is not a JSON-RPC message with ``Invalid Request`` (with the id when it has a usable one),
  and carries on with the next line;
* owns the two descriptors while it serves: fd 0 then reads ``/dev/null`` and fd 1 writes
  to stderr, so a stray ``print`` or a child process that inherits them can never write into
  the protocol (both are put back on exit);
* ends the session when stdin ends (the host went away or closed the pipe).

Pipes and sockets are read and written without blocking the event loop; anything else (a
regular file given as stdin) is read in a worker thread.
"""

from __future__ import annotations

import contextlib
import errno
import json
import logging
import os
import stat
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

import anyio
import anyio.lowlevel
import anyio.to_thread

from mcpfleet.client._streams import ClosingStream
from mcpfleet.contract.defaults import MAX_HOST_MESSAGE_BYTES
from mcpfleet.contract.framing import LineFramer, OversizedLine, oversized_refusal, oversized_request_id
from mcpfleet.gateway.core import Gateway
from mcpfleet.transport.pipe import PipeReader

if TYPE_CHECKING:
    from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
    from mcp.shared.message import SessionMessage

    from mcpfleet.gateway.fast_path import FastPath

logger = logging.getLogger(__name__)

MAX_MESSAGE_BYTES = MAX_HOST_MESSAGE_BYTES
"""The largest message a client may send the gateway on stdin (the shim holds a host to it too)."""
READ_BYTES = 256 * 1024
"""The most one read of stdin takes."""
BACKLOG_BYTES = 1024 * 1024
"""Past this much written but not yet taken by the client, the SDK's writes wait for it."""
FORGET_BOUND_S = 2.0
"""How long giving up the fast path's calls of a client that went away may take."""


async def serve_stdio(gateway: Gateway, *, max_message_bytes: int = MAX_MESSAGE_BYTES) -> None:
    """Serve ``gateway`` on stdin/stdout until stdin ends."""
    from mcpfleet.client.opening import import_off_loop

    # Off the loop and after any SDK import the fleet has under way (see ``import_off_loop``).
    serving = await import_off_loop("mcpfleet.gateway.handlers")
    from mcpfleet.gateway.fast_path import FastPath

    server = serving.build_server(gateway)
    with claimed_standard_streams() as (wire_in, wire_out):
        async with wire_streams(
            wire_in, wire_out, max_message_bytes=max_message_bytes, fast_path=FastPath(gateway)
        ) as (reads, writes):
            await server.run(reads, writes, serving.initialization_options(server))


@contextlib.contextmanager
def claimed_standard_streams() -> Iterator[tuple[int, int]]:
    """Private copies of fd 0 and fd 1 for the protocol; meanwhile fd 0 reads ``/dev/null``
    and fd 1 writes to stderr. Both are restored on exit."""
    import fcntl

    wire_in = fcntl.fcntl(0, fcntl.F_DUPFD_CLOEXEC, 3)
    wire_out = fcntl.fcntl(1, fcntl.F_DUPFD_CLOEXEC, 3)
    null = os.open(os.devnull, os.O_RDONLY)
    try:
        os.dup2(null, 0)
        os.dup2(2, 1)
    finally:
        os.close(null)
    try:
        yield wire_in, wire_out
    finally:
        os.dup2(wire_in, 0)
        os.dup2(wire_out, 1)
        os.close(wire_in)
        os.close(wire_out)


@asynccontextmanager
async def wire_streams(
    wire_in: int,
    wire_out: int,
    *,
    max_message_bytes: int = MAX_MESSAGE_BYTES,
    labels: tuple[str, str] = ("stdin", "stdout"),
    already_read: bytes = b"",
    fast_path: FastPath | None = None,
) -> AsyncIterator[tuple[MemoryObjectReceiveStream[SessionMessage | Exception], MessageSink]]:
    """The SDK's two message streams over two descriptors of JSON-RPC lines (see the module).

    The two may be one descriptor (a connected socket: the daemon serves a session on one);
    ``labels`` name them in log lines. Neither is closed here: they are the caller's.
    ``already_read`` is what the caller read from ``wire_in`` past its own first line (the
    daemon's hello): the start of the stream. Each message read is offered to ``fast_path``
    first (``gateway.fast_path``), which answers what it takes on the same wire, in order with
    the SDK's own messages.
    """
    from mcp.shared.message import SessionMessage

    read_send, read_receive = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    reader = _Wire(wire_in, labels[0])
    writer = WireWriter(_Wire(wire_out, labels[1]))
    async with anyio.create_task_group() as task_group:
        task_group.start_soon(writer.flush_backlog)
        task_group.start_soon(
            _read_messages, reader, read_send, writer, max_message_bytes, already_read, fast_path
        )
        try:
            yield read_receive, MessageSink(writer)
        finally:
            task_group.cancel_scope.cancel()
            reader.restore()
            writer.wire.restore()


class _Wire:
    """One descriptor of the protocol: without blocking when it is a pipe or a socket."""

    def __init__(self, fd: int, label: str) -> None:
        self.fd = fd
        self.label = label
        self._was_blocking = os.get_blocking(fd)
        mode = os.fstat(fd).st_mode
        self.pollable = stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)
        if self.pollable:
            os.set_blocking(fd, False)
        self._reader: PipeReader | None = None

    def restore(self) -> None:
        if self._reader is not None:
            self._reader.close()
        if self.pollable:
            with contextlib.suppress(OSError):
                os.set_blocking(self.fd, self._was_blocking)

    async def read(self) -> bytes:
        """The next bytes; empty at the end of the stream (or once reading fails)."""
        if not self.pollable:
            return await anyio.to_thread.run_sync(os.read, self.fd, READ_BYTES, abandon_on_cancel=True)
        if self._reader is None:
            # Watched while a read waits, read in the loop's callback: a message that arrives
            # costs its one read (``transport.pipe``), not a registration and a failed read.
            self._reader = PipeReader(self.fd, read_bytes=READ_BYTES, owner=self.label)
        try:
            return await self._reader.read()
        except anyio.EndOfStream:
            return b""

    async def write_all(self, data: bytes | memoryview) -> None:
        view = memoryview(data)
        while view:
            if not self.pollable:
                written = await anyio.to_thread.run_sync(os.write, self.fd, view)
            else:
                try:
                    written = os.write(self.fd, view)
                except BlockingIOError:
                    await anyio.wait_writable(self.fd)
                    continue
            view = view[written:]


async def _read_messages(
    wire: _Wire,
    messages: MemoryObjectSendStream[SessionMessage | Exception],
    writer: WireWriter,
    max_message_bytes: int,
    already_read: bytes,
    fast_path: FastPath | None,
) -> None:
    framer = LineFramer(max_message_bytes)
    reply = writer.write_message
    try:
        async with messages:
            chunk = already_read
            while True:
                for line in framer.feed(chunk):
                    message, refusal = _decode(line, max_message_bytes)
                    if message is not None:
                        if fast_path is None or not await fast_path.take(message.message, reply):
                            await messages.send(message)
                    elif refusal is not None:
                        writer.write_line(_dumped(refusal))
                try:
                    chunk = await wire.read()
                except OSError as error:
                    if error.errno not in (errno.EPIPE, errno.ECONNRESET, errno.EBADF):
                        logger.warning("reading %s failed: %s; the session ends", wire.label, error)
                    return
                if not chunk:
                    return
    finally:
        if fast_path is not None:
            # The client is gone: the calls it left on the fast path are given up at their backends.
            with anyio.CancelScope(shield=True), anyio.move_on_after(FORGET_BOUND_S):
                await fast_path.forget(reply)


class WireWriter:
    """The outgoing side of a wire: every message in the order it is given, written at once when
    the descriptor takes it (no task between the writer and the wire), else kept in order and
    written by ``flush_backlog`` as the descriptor drains."""

    def __init__(self, wire: _Wire) -> None:
        self.wire = wire
        self._backlog: list[bytes | memoryview] = []
        self.backlog_bytes = 0
        self._kick = anyio.Event()
        self._drained = anyio.Event()
        self.failed = False

    def write_message(self, data: bytes) -> None:
        """Write one JSON-RPC message (no line end): the fast path's ``Reply``."""
        self.write_line(data + b"\n")

    def write_line(self, data: bytes | memoryview) -> None:
        """Write ``data`` (whole lines) after everything written before, without waiting."""
        if self.failed:
            return
        if not self._backlog and self.wire.pollable:
            try:
                written = os.write(self.wire.fd, data)
            except BlockingIOError:
                written = 0
            except OSError as error:
                self._fail(error)
                return
            if written == len(data):
                return
            data = memoryview(data)[written:]
        self._backlog.append(data)
        self.backlog_bytes += len(data)
        self._kick.set()

    async def drained(self) -> None:
        """Return once what is kept is under ``BACKLOG_BYTES`` (a client that reads slowly
        holds the SDK's writes back, as a blocking pipe would)."""
        while self.backlog_bytes > BACKLOG_BYTES and not self.failed:
            await self._drained.wait()

    async def flush_backlog(self) -> None:
        """Write what ``write_line`` could not, in order, as the descriptor takes it."""
        while True:
            await self._kick.wait()
            self._kick = anyio.Event()
            while self._backlog and not self.failed:
                data = self._backlog[0]
                try:
                    await self.wire.write_all(data)
                except OSError as error:
                    self._fail(error)
                    break
                self._backlog.pop(0)
                self.backlog_bytes -= len(data)
                if self.backlog_bytes <= BACKLOG_BYTES:
                    self._drained.set()
                    self._drained = anyio.Event()

    def _fail(self, error: OSError) -> None:
        # The host closed its end: nothing more can reach it; stdin's end closes the session.
        logger.info("writing %s failed: %s", self.wire.label, error)
        self.failed = True
        self._backlog.clear()
        self.backlog_bytes = 0
        self._drained.set()


class MessageSink(ClosingStream):
    """The SDK's write stream over a ``WireWriter``: each message written as it is sent."""

    def __init__(self, writer: WireWriter) -> None:
        self._writer = writer

    async def send(self, item: SessionMessage) -> None:
        self._writer.write_line(_dumped(item))
        if self._writer.backlog_bytes > BACKLOG_BYTES:
            await self._writer.drained()
        else:
            await anyio.lowlevel.checkpoint()

    async def aclose(self) -> None:
        return None


def _dumped(item: SessionMessage) -> bytes:
    return (item.message.model_dump_json(by_alias=True, exclude_unset=True) + "\n").encode()


def _decode(
    line: bytearray | OversizedLine, max_message_bytes: int
) -> tuple[SessionMessage | None, SessionMessage | None]:
    """``(message, None)`` for a JSON-RPC message, ``(None, error reply)`` for anything a client
    must be told about, ``(None, None)`` for a blank line."""
    import mcp_types
    from mcp.shared.message import SessionMessage
    from pydantic import ValidationError

    if isinstance(line, OversizedLine):
        return None, _error_reply(
            oversized_request_id(line), mcp_types.INVALID_REQUEST, oversized_refusal(line, max_message_bytes)
        )
    if not line.strip():
        return None, None
    try:
        return SessionMessage(mcp_types.jsonrpc_message_adapter.validate_json(line, by_name=False)), None
    except (ValidationError, ValueError, RecursionError):
        pass
    # Only a line that is not a message pays for a second look, to say what is wrong with it.
    try:
        data = json.loads(line)
    except (ValueError, RecursionError):
        return None, _error_reply(None, mcp_types.PARSE_ERROR, "Parse error: the line is not JSON")
    return None, _error_reply(
        _request_id_of(data), mcp_types.INVALID_REQUEST, "Invalid Request: not a JSON-RPC 2.0 message"
    )


def _request_id_of(data: Any) -> int | str | None:
    """The id of something shaped like a request, when it is one a response can carry."""
    if not isinstance(data, dict) or "method" not in data:
        return None
    request_id = data.get("id")
    if isinstance(request_id, bool) or not isinstance(request_id, int | str):
        return None
    return request_id


def _error_reply(request_id: int | str | None, code: int, message: str) -> SessionMessage:
    import mcp_types
    from mcp.shared.message import SessionMessage

    error = mcp_types.JSONRPCError(
        jsonrpc="2.0", id=request_id, error=mcp_types.ErrorData(code=code, message=message)
    )
    return SessionMessage(error)
