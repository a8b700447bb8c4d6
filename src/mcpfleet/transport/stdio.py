"""The stdio transport: one MCP server as a child process speaking JSON-RPC lines.

mcpfleet uses its own transport instead of the SDK's ``stdio_client`` because that one gives
the child only six environment variables (editors pass the whole environment), needs a
real file descriptor for stderr (no capture), and turns a non-JSON stdout line (a banner)
into an error item. This one:

* runs the server as a ``ServerProcess`` (``process.py``): the caller's whole environment
  (the parent's plus the config's, secrets already resolved), its own process group, a
  mark its descendants inherit, the host's watchdog, a stdout pipe of its own, the stderr
  ring and the kill ladder;
* parses each stdout line as JSON-RPC and skips (counts, debug-logs) anything else, in
  linear time, holding no message over the server's limit (``MessageReader``), after
  folding notification floods on the raw line (``folding.py``). That stdout pipe
  (``ServerProcess.stdout_fd``) is read directly: while a server floods, the reader
  pauses ``FLOOD_READ_PAUSE_S`` between reads so that one wake-up takes many lines (the
  event loop's pipe reader would wake for every line the server writes), and it wakes when
  a held notification is due even if the server has gone quiet; at the end of stdout what
  folding still holds is delivered, and the pipe is closed only once the reading task has
  ended;
* on exit, stops the process in bounded steps (``ServerProcess.stop``).
"""

from __future__ import annotations

import json
import logging
import os
import re
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

import anyio
import anyio.abc
import anyio.lowlevel

from mcpfleet.config.model import DEFAULT_MAX_MESSAGE_BYTES
from mcpfleet.transport.folding import NotificationFolder
from mcpfleet.transport.process import ServerProcess

if TYPE_CHECKING:
    from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
    from mcp.client._transport import TransportStreams
    from mcp.shared.message import SessionMessage

logger = logging.getLogger(__name__)

STDOUT_DRAIN_S = 0.5
"""After the process exits, how long buffered stdout may still be delivered."""
STDOUT_READ_BYTES = 256 * 1024
"""The most one read of stdout takes."""
FLOOD_READ_PAUSE_S = 0.02
"""After a read in which notifications were folded, how long the reader lets the pipe fill
before it reads again: what bounds the wake-ups a flood costs, and what a message that
arrives meanwhile waits (only from a server that is flooding)."""
MESSAGE_TOO_LARGE = -32019
"""Error code of the answer mcpfleet gives a request whose real answer was over the limit
(the last code of JSON-RPC's implementation-defined band; the SDK uses the first ones)."""
OVERSIZED_KEPT_BYTES = 4096
"""Of a message over the limit, how many of its first and of its last bytes are kept to
find the id of the request it answered."""


class LineFramer:
    """Splits a byte stream into newline-terminated lines, in linear time and bounded memory.

    Each byte is searched for a newline once and copied at most once into the line being
    assembled (growing a ``bytes`` and re-splitting it at each chunk made a 50 MB message
    cost 28 s). A line longer than ``max_line_bytes`` is never held: from the moment it
    outgrows the limit only its size and its first and last ``OVERSIZED_KEPT_BYTES`` are
    kept, and it comes out as an ``OversizedLine``. Bytes after the last newline at the end
    of the stream are an incomplete message and never come out.
    """

    def __init__(self, max_line_bytes: int) -> None:
        self.max_line_bytes = max_line_bytes
        self._partial = bytearray()
        self._oversized: OversizedLine | None = None

    @property
    def buffered_bytes(self) -> int:
        """Bytes held for the line in progress (never more than ``max_line_bytes``)."""
        return len(self._partial)

    def feed(self, chunk: bytes) -> list[bytearray | OversizedLine]:
        """The lines that ``chunk`` completes, without their newline."""
        lines: list[bytearray | OversizedLine] = []
        view = memoryview(chunk)
        position = 0
        while position < len(chunk):
            newline = chunk.find(b"\n", position)
            end = len(chunk) if newline < 0 else newline
            self._take(view[position:end])
            if newline < 0:
                break
            lines.append(self._finish_line())
            position = newline + 1
        return lines

    def _take(self, piece: memoryview) -> None:
        if self._oversized is not None:
            self._oversized.add(piece)
        elif len(self._partial) + len(piece) > self.max_line_bytes:
            self._oversized = OversizedLine()
            self._oversized.add(memoryview(self._partial))
            self._oversized.add(piece)
            self._partial = bytearray()
        else:
            self._partial += piece

    def _finish_line(self) -> bytearray | OversizedLine:
        if self._oversized is not None:
            line, self._oversized = self._oversized, None
            return line
        # Handed over, not copied: the next line starts in a fresh buffer.
        completed, self._partial = self._partial, bytearray()
        return completed


class OversizedLine:
    """A line over the limit: its size and the two ends where a JSON-RPC id can sit."""

    def __init__(self) -> None:
        self.size = 0
        self.head = bytearray()
        self.tail = bytearray()

    def add(self, piece: memoryview) -> None:
        self.size += len(piece)
        if len(self.head) < OVERSIZED_KEPT_BYTES:
            self.head += piece[: OVERSIZED_KEPT_BYTES - len(self.head)]
        self.tail += piece[-OVERSIZED_KEPT_BYTES:]
        del self.tail[:-OVERSIZED_KEPT_BYTES]


_JSON_STRING = rb'"(?:[^"\\]|\\.)*"'
_JSON_SCALAR = rb"(?:" + _JSON_STRING + rb"|-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?|true|false|null)"
_MEMBER_KEY = re.compile(rb"\s*(" + _JSON_STRING + rb")\s*:\s*")
_SCALAR = re.compile(_JSON_SCALAR)
_MEMBER_END = re.compile(rb"\s*([,}])")
_OBJECT_START = re.compile(rb"\s*\{")
_SCALAR_MEMBER = re.compile(rb"(" + _JSON_STRING + rb")\s*:\s*(" + _JSON_SCALAR + rb")")
# The run starts right after the large value (an object or an array): runs are then
# disjoint, and the search stays linear whatever the tail holds.
_TRAILING_MEMBERS = re.compile(
    rb"(?<=[\]}])\s*((?:,\s*" + _JSON_STRING + rb"\s*:\s*" + _JSON_SCALAR + rb"\s*)+)\}\s*$"
)


def _leading_members(head: bytes) -> tuple[dict[str, Any], str | None]:
    """The scalar top-level members at the start of a JSON object, and the key of the first
    member that is not a scalar (the large one), read from the object's first bytes."""
    members: dict[str, Any] = {}
    start = _OBJECT_START.match(head)
    if start is None:
        return members, None
    position = start.end()
    while True:
        key = _MEMBER_KEY.match(head, position)
        if key is None:
            return members, None
        name = json.loads(key.group(1))
        value = _SCALAR.match(head, key.end())
        end = _MEMBER_END.match(head, value.end()) if value is not None else None
        if value is None or end is None:
            return members, name
        members[name] = json.loads(value.group(0))
        if end.group(1) == b"}":
            return members, None
        position = end.end()


def _trailing_members(tail: bytes) -> dict[str, Any]:
    """The scalar top-level members that end a JSON object, read from its last bytes.

    Only members after the last non-scalar value match: the run must follow an object or an
    array and end the message with a single ``}``, so members of a nested object (closed by
    two or more) never do.
    """
    run = _TRAILING_MEMBERS.search(tail)
    if run is None:
        return {}
    return {
        json.loads(member.group(1)): json.loads(member.group(2))
        for member in _SCALAR_MEMBER.finditer(run.group(1))
    }


def oversized_response_id(line: OversizedLine) -> int | str | None:
    """The id of the response a line over the limit carried, if it is a response and its id
    is at either end of it (every JSON-RPC library writes ``jsonrpc`` and ``id`` before or
    after the large ``result``); ``None`` for a request, a notification or anything else."""
    try:
        members, large_member = _leading_members(bytes(line.head))
        members.update(_trailing_members(bytes(line.tail)))
    except (ValueError, RecursionError):
        return None
    if "method" in members or large_member == "params":
        return None
    request_id = members.get("id")
    if isinstance(request_id, bool) or not isinstance(request_id, int | str):
        return None
    return request_id


def oversized_request_id(line: OversizedLine) -> int | str | None:
    """The id of the request a line over the limit carried, if its ``method`` and ``id`` are
    at either end of it (a client writes them around its large ``params``); ``None`` for a
    response, a notification or anything else."""
    try:
        members, _ = _leading_members(bytes(line.head))
        members.update(_trailing_members(bytes(line.tail)))
    except (ValueError, RecursionError):
        return None
    request_id = members.get("id")
    if "method" not in members or isinstance(request_id, bool) or not isinstance(request_id, int | str):
        return None
    return request_id


def describe_size(size: int) -> str:
    """``64 MiB``, ``512 KiB`` or ``1000 bytes``."""
    for unit, factor in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if size >= factor and size % factor == 0:
            return f"{size // factor} {unit}"
    return f"{size} bytes"


class MessageReader:
    """A stdio server's stdout turned into JSON-RPC messages, one line at a time.

    Lines that are not JSON-RPC (banners, invalid UTF-8, broken JSON) are counted and
    skipped. A line over the server's message limit is dropped whole; when it was the
    answer to a request, that request gets an error answer instead (code
    ``MESSAGE_TOO_LARGE``, naming the server and the limit), so the one call fails at once
    and the connection stays usable. Nothing here raises for anything the server writes.

    Repeated notifications are folded before they are parsed (``NotificationFolder``); the
    ones it holds come out of ``release_due`` once their time has come, and ahead of the
    next message delivered, so the order the server wrote is kept.
    """

    def __init__(self, server_name: str, max_message_bytes: int) -> None:
        self.server_name = server_name
        self.max_message_bytes = max_message_bytes
        self.framer = LineFramer(max_message_bytes)
        self.folder = NotificationFolder(server_name)
        self.non_json_lines = 0
        self.oversized_messages = 0

    @property
    def next_release_at(self) -> float | None:
        """When ``release_due`` may have a held notification to deliver (monotonic seconds)."""
        return self.folder.next_release_at

    def feed(self, chunk: bytes, now: float | None = None) -> list[SessionMessage]:
        """The messages that ``chunk``, arriving at ``now`` (monotonic seconds), completes,
        after the held notifications due by then, in order."""
        now = time.monotonic() if now is None else now
        messages = self.release_due(now)
        for line in self.framer.feed(chunk):
            if isinstance(line, OversizedLine):
                message = self._oversized(line)
            elif self.folder.admit(line, now):
                message = self._parse(line)
            else:
                continue
            # Only a line that is really delivered releases the held ones: junk between
            # repeats (blank lines, banners) must not defeat the folding.
            if message is not None:
                messages += self._parse_all(self.folder.release_all(now))
                messages.append(message)
        return messages

    def release_due(self, now: float) -> list[SessionMessage]:
        """The held notifications whose time has come by ``now``."""
        return self._parse_all(self.folder.release_due(now))

    def release_all(self, now: float) -> list[SessionMessage]:
        """Every held notification (the server's stdout has ended)."""
        return self._parse_all(self.folder.release_all(now))

    def _parse_all(self, lines: list[bytes | bytearray]) -> list[SessionMessage]:
        return [message for line in lines if (message := self._parse(line)) is not None]

    def _parse(self, line: bytes | bytearray) -> SessionMessage | None:
        from mcp.shared.message import SessionMessage
        from mcp_types import jsonrpc_message_adapter
        from pydantic import ValidationError

        if not line or line.isspace():
            return None
        try:
            return SessionMessage(jsonrpc_message_adapter.validate_json(line, by_name=False))
        except (ValidationError, ValueError, RecursionError):
            self.non_json_lines += 1
            logger.debug(
                "%s: skipped a non-JSON-RPC stdout line: %.200r", self.server_name, bytes(line[:200])
            )
            return None

    def _oversized(self, line: OversizedLine) -> SessionMessage | None:
        from mcp.shared.message import SessionMessage
        from mcp_types import jsonrpc_message_adapter

        self.oversized_messages += 1
        problem = (
            f'MCP server "{self.server_name}" sent a message of {line.size} bytes, over its limit of '
            f'{describe_size(self.max_message_bytes)}; raise "maxMessageBytes" in its config if '
            "messages this large are expected"
        )
        request_id = oversized_response_id(line)
        if request_id is None:
            # Nobody waits for it, so nobody else would report it.
            logger.warning("%s (the message was dropped)", problem)
            return None
        answer = {
            "jsonrpc": "2.0",
            "id": request_id,
            "error": {"code": MESSAGE_TOO_LARGE, "message": problem},
        }
        return SessionMessage(jsonrpc_message_adapter.validate_python(answer, by_name=False))


class StdioTransport(anyio.AsyncContextManagerMixin):
    """An SDK ``Transport`` (an async context manager yielding the two message streams) over
    a ``ServerProcess``: spawned on entry unless the caller spawned it earlier, stopped on
    exit, its stdout pipe closed once the task reading it has ended.

    Enter and exit it in the same task (the connection's owner task does).
    """

    def __init__(self, process: ServerProcess, *, max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES) -> None:
        self.process = process
        self.max_message_bytes = max_message_bytes
        self.reader: MessageReader | None = None
        """Set once the transport is entered; its counters say what the server wrote."""
        self.answered = False
        """Whether the server ever sent a message: one that never did has no work to wind down."""
        self._read_writer: MemoryObjectSendStream[SessionMessage | Exception] | None = None

    @asynccontextmanager
    async def __asynccontextmanager__(self) -> AsyncIterator[TransportStreams]:
        from mcp.shared.message import SessionMessage

        process = await self.process.spawn()
        read_writer, read_stream = anyio.create_memory_object_stream[SessionMessage | Exception](0)
        write_stream, write_reader = anyio.create_memory_object_stream[SessionMessage](0)
        self._read_writer = read_writer
        stdout_fd = self.process.stdout_fd
        assert stdout_fd is not None
        try:
            async with anyio.create_task_group() as task_group:
                task_group.start_soon(self._read_stdout, stdout_fd, read_writer)
                task_group.start_soon(self._write_stdin, process, write_reader)
                task_group.start_soon(self.process.read_stderr)
                task_group.start_soon(self._watch_exit)
                try:
                    yield read_stream, write_stream
                finally:
                    # Shielded so a cancelled owner still reaps the server.
                    with anyio.CancelScope(shield=True):
                        await self.process.stop(answered=self.answered)
                        for stream in (read_writer, read_stream, write_stream, write_reader):
                            await stream.aclose()
                    task_group.cancel_scope.cancel()
        finally:
            # Only now: no task waits on the descriptor any more, so its number cannot be reused under one.
            self.process.close_stdout()

    # -- pumps -----------------------------------------------------------------------------------------
    async def _read_stdout(
        self, stdout_fd: int, read_writer: MemoryObjectSendStream[SessionMessage | Exception]
    ) -> None:
        reader = self.reader = MessageReader(self.process.server_name, self.max_message_bytes)
        try:
            while True:
                try:
                    chunk = self._read_now(stdout_fd)
                    if chunk is None:
                        chunk = await self._wait_and_read(stdout_fd, reader.next_release_at)
                    else:
                        # The pipe refills as fast as the server writes: other tasks still run
                        # between two chunks of a large message.
                        await anyio.lowlevel.checkpoint()
                except anyio.EndOfStream:
                    # The server's last words: what folding still holds is delivered too.
                    await self._deliver(reader.release_all(anyio.current_time()), read_writer)
                    return
                now = anyio.current_time()
                if chunk is None:
                    await self._deliver(reader.release_due(now), read_writer)
                    continue
                withheld = reader.folder.withheld
                await self._deliver(reader.feed(chunk, now), read_writer)
                if reader.folder.withheld != withheld:
                    # A flood: let the pipe fill, so the next read takes many lines at once.
                    await anyio.sleep(FLOOD_READ_PAUSE_S)
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            pass
        finally:
            # End of stdout is the end of the session: the dispatcher sees EOF.
            await read_writer.aclose()

    def _read_now(self, stdout_fd: int) -> bytes | None:
        """What the server has written so far, ``None`` if nothing; ``EndOfStream`` once every
        writer of the pipe has closed it."""
        try:
            chunk = os.read(stdout_fd, STDOUT_READ_BYTES)
        except BlockingIOError:
            return None
        except OSError as error:
            logger.debug("%s: reading stdout failed: %r", self.process.server_name, error)
            raise anyio.EndOfStream from None
        if not chunk:
            raise anyio.EndOfStream
        return chunk

    async def _wait_and_read(self, stdout_fd: int, deadline: float | None) -> bytes | None:
        """The next chunk of stdout, or ``None`` if ``deadline`` passes first: a held
        notification is then due, and must not wait for the server to write again."""
        if deadline is None:
            await anyio.wait_readable(stdout_fd)
            return self._read_now(stdout_fd)
        with anyio.move_on_after(deadline - anyio.current_time()):
            await anyio.wait_readable(stdout_fd)
            return self._read_now(stdout_fd)
        return None

    async def _deliver(
        self, messages: list[SessionMessage], read_writer: MemoryObjectSendStream[SessionMessage | Exception]
    ) -> None:
        for message in messages:
            self.answered = True
            await read_writer.send(message)

    async def _write_stdin(
        self, process: anyio.abc.Process, write_reader: MemoryObjectReceiveStream[SessionMessage]
    ) -> None:
        assert process.stdin is not None
        try:
            async for session_message in write_reader:
                data = session_message.message.model_dump_json(by_alias=True, exclude_unset=True) + "\n"
                await process.stdin.send(data.encode())
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, OSError) as error:
            logger.debug("%s: writing to stdin failed: %r", self.process.server_name, error)
            if self._read_writer is not None:
                await self._read_writer.aclose()

    async def _watch_exit(self) -> None:
        await self.process.wait()
        # Let buffered stdout reach the session, then end it even if a grandchild keeps the pipe open.
        await anyio.sleep(STDOUT_DRAIN_S)
        if self._read_writer is not None:
            await self._read_writer.aclose()


__all__ = [
    "MESSAGE_TOO_LARGE",
    "LineFramer",
    "MessageReader",
    "OversizedLine",
    "StdioTransport",
    "describe_size",
    "oversized_request_id",
    "oversized_response_id",
]
