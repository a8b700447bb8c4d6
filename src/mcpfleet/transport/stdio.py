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
  (``ServerProcess.stdout_fd``) is read through a ``PipeReader`` (``pipe.py``), which reads
  a reply to a waiting reader at no cost beyond the ``read``: while a server floods, the
  reader stops watching the pipe for ``FLOOD_READ_PAUSE_S`` between reads so that one
  wake-up takes many lines (the event loop's pipe transport would wake for every line the
  server writes), and it wakes when a held notification is due even if the server has gone
  quiet; at the end of stdout what folding still holds is delivered, and the pipe is
  closed only once the reading task has ended;
* on exit, stops the process in bounded steps (``ServerProcess.stop``).
"""

from __future__ import annotations

import json
import logging
import re
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

import anyio
import anyio.abc

from mcpfleet.config.model import DEFAULT_MAX_MESSAGE_BYTES
from mcpfleet.contract.framing import LineFramer, OversizedLine, describe_size, oversized_response_id
from mcpfleet.transport.folding import NotificationFolder
from mcpfleet.transport.listing import LARGE_LINE_BYTES, read_tool_listing
from mcpfleet.transport.pipe import PipeReader
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
LONE_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")
"""What a line holding a lone surrogate escape (``\\ud800``) has, and other lines seldom do:
only those are parsed a second time, the strict parser having refused them."""
LONE_SURROGATE = re.compile("[\ud800-\udfff]")
MESSAGE_TOO_LARGE = -32019
"""Error code of the answer mcpfleet gives a request whose real answer was over the limit
(the last code of JSON-RPC's implementation-defined band; the SDK uses the first ones)."""


class MessageReader:
    """A stdio server's stdout turned into JSON-RPC messages, one line at a time.

    Lines that are not JSON-RPC (banners, invalid UTF-8, broken JSON) are counted and
    skipped. A line whose JSON escapes a lone surrogate (``"\\ud800"``: valid JSON, which the
    SDK's parser refuses, and which no UTF-8 text can carry) is read anyway, each lone
    surrogate becoming U+FFFD, except inside the tools of a ``tools/list`` answer: a tool's
    name must not be silently changed, so such a tool is left as it is for the client to
    leave out (``client/screening.py``). A line over the server's message limit is dropped
    whole; when it was the answer to a request, that request gets an error answer instead (code
    ``MESSAGE_TOO_LARGE``, naming the server and the limit), so the one call fails at once
    and the connection stays usable. Nothing here raises for anything the server writes.

    Repeated notifications are folded before they are parsed (``NotificationFolder``); the
    ones it holds come out of ``release_due`` once their time has come, and ahead of the
    next message delivered, so the order the server wrote is kept.
    """

    def __init__(self, server_name: str, max_message_bytes: int, max_tools: int | None = None) -> None:
        # The SDK is imported once the first server is contacted (never by ``import
        # mcpfleet``), and looked up once per reader rather than once per line.
        from mcp.shared.message import SessionMessage
        from mcp_types import jsonrpc_message_adapter

        self.server_name = server_name
        self.max_message_bytes = max_message_bytes
        self.max_tools = max_tools
        self.framer = LineFramer(max_message_bytes)
        self.folder = NotificationFolder(server_name)
        self.non_json_lines = 0
        self.oversized_messages = 0
        self._session_message = SessionMessage
        self._validate_json = jsonrpc_message_adapter.validate_json

    @property
    def next_release_at(self) -> float | None:
        """When ``release_due`` may have a held notification to deliver (monotonic seconds)."""
        return self.folder.next_release_at

    def feed(self, chunk: bytes, now: float | None = None) -> list[SessionMessage]:
        """The messages that ``chunk``, arriving at ``now`` (monotonic seconds), completes,
        after the held notifications due by then, in order."""
        now = time.monotonic() if now is None else now
        folder = self.folder
        messages = self.release_due(now)
        for line in self.framer.feed(chunk):
            if isinstance(line, OversizedLine):
                message = self._oversized(line)
            elif folder.admit(line, now):
                message = self._parse(line)
            else:
                continue
            # Only a line that is really delivered releases the held ones: junk between
            # repeats (blank lines, banners) must not defeat the folding.
            if message is not None:
                if folder.holds:
                    messages += self._parse_all(folder.release_all(now))
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
        if not line or line.isspace():
            return None
        if self.max_tools is not None and len(line) > LARGE_LINE_BYTES and b'"tools"' in line:
            # One more than the cap, so that the client sees the listing was cut and says so.
            listing = read_tool_listing(line, self.max_tools + 1)
            if listing is not None:
                message = self._from_value(listing)
                if message is not None:
                    return message
        try:
            return self._session_message(self._validate_json(line, by_name=False))
        except (ValueError, RecursionError):  # pydantic's ValidationError is a ValueError
            if LONE_SURROGATE_ESCAPE.search(line) is not None:
                message = self._parse_lone_surrogates(line)
                if message is not None:
                    return message
            self.non_json_lines += 1
            logger.debug(
                "%s: skipped a non-JSON-RPC stdout line: %.200r", self.server_name, bytes(line[:200])
            )
            return None

    def _parse_lone_surrogates(self, line: bytes | bytearray) -> SessionMessage | None:
        try:
            value = json.loads(bytes(line).decode("utf-8"), parse_constant=_refuse_constant)
        except (ValueError, RecursionError):
            return None
        return self._from_value(value)

    def _from_value(self, value: Any) -> SessionMessage | None:
        """The message of a parsed line, its lone surrogates made U+FFFD outside a tool listing."""
        from mcp_types import jsonrpc_message_adapter

        try:
            if isinstance(value, dict) and isinstance(value.get("result"), dict):
                result = value["result"]
                tools = result.pop("tools", None)
                value = _without_lone_surrogates(value)
                if tools is not None:
                    value["result"]["tools"] = tools
            else:
                value = _without_lone_surrogates(value)
            return self._session_message(jsonrpc_message_adapter.validate_python(value, by_name=False))
        except (ValueError, RecursionError):
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


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _without_lone_surrogates(value: Any) -> Any:
    """``value`` with every lone surrogate of its strings (keys included) replaced by U+FFFD."""
    if isinstance(value, str):
        return LONE_SURROGATE.sub("\ufffd", value)
    if isinstance(value, dict):
        return {_without_lone_surrogates(key): _without_lone_surrogates(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_without_lone_surrogates(item) for item in value]
    return value


class StdioTransport(anyio.AsyncContextManagerMixin):
    """An SDK ``Transport`` (an async context manager yielding the two message streams) over
    a ``ServerProcess``: spawned on entry unless the caller spawned it earlier, stopped on
    exit, its stdout pipe closed once the task reading it has ended.

    Enter and exit it in the same task (the connection's owner task does).
    """

    def __init__(
        self,
        process: ServerProcess,
        *,
        max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
        max_tools: int | None = None,
    ) -> None:
        """``max_tools``: the server's tool cap, so that a huge listing is read only that far
        (``listing.py``)."""
        self.process = process
        self.max_message_bytes = max_message_bytes
        self.max_tools = max_tools
        self.reader: MessageReader | None = None
        """Set once the transport is entered; its counters say what the server wrote."""
        self.answered = False
        """Whether the server ever sent a message: one that never did has no work to wind down."""
        self._read_writer: MemoryObjectSendStream[SessionMessage | Exception] | None = None
        self._stdin: anyio.abc.ByteSendStream | None = None
        self.intercept: Callable[[SessionMessage], bool] | None = None
        """Offered each message the server sends, in order, before the SDK's session reads
        it; ``True``: taken, the session never sees it (the answers to the requests the
        connection sends below the SDK, ``client.raw``). It runs in the reading task: it must
        not block."""
        self.on_read_end: Callable[[], None] | None = None
        """Called when the reading task ends (the server's stdout ended, or the transport is
        being left), before the SDK's session hears of it."""

    async def send_lines(self, data: bytes) -> None:
        """Write ``data``, whole JSON-RPC lines, to the server's stdin beside the SDK's messages.

        For the requests mcpfleet sends below the SDK (``client.raw``): each write lands whole
        (the pipe's writer takes a buffer at a time), so these lines never split the SDK's.
        While the pipe takes what it is given, nothing waits (``buffered_write``).
        ``anyio.ClosedResourceError`` before the transport is entered or once it is left.
        """
        stdin = self._stdin
        if stdin is None:
            raise anyio.ClosedResourceError
        if not buffered_write(stdin, data):
            await stdin.send(data)

    @asynccontextmanager
    async def __asynccontextmanager__(self) -> AsyncIterator[TransportStreams]:
        from mcp.shared.message import SessionMessage

        process = await self.process.spawn()
        read_writer, read_stream = anyio.create_memory_object_stream[SessionMessage | Exception](0)
        write_stream, write_reader = anyio.create_memory_object_stream[SessionMessage](0)
        self._read_writer = read_writer
        stdout_fd = self.process.stdout_fd
        assert stdout_fd is not None
        self._stdin = process.stdin
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
                        self._stdin = None
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
        reader = self.reader = MessageReader(self.process.server_name, self.max_message_bytes, self.max_tools)
        pipe = PipeReader(stdout_fd, read_bytes=STDOUT_READ_BYTES, owner=self.process.server_name)
        try:
            while True:
                try:
                    chunk = await self._next_chunk(pipe, reader.next_release_at)
                except anyio.EndOfStream:
                    # The server's last words: what folding still holds is delivered too.
                    await self._deliver(reader.release_all(time.monotonic()), read_writer)
                    return
                now = time.monotonic()
                if chunk is None:
                    await self._deliver(reader.release_due(now), read_writer)
                    continue
                withheld = reader.folder.withheld
                await self._deliver(reader.feed(chunk, now), read_writer)
                if reader.folder.withheld != withheld:
                    # A flood: let the pipe fill, so the next read takes many lines at once.
                    pipe.pause()
                    await anyio.sleep(FLOOD_READ_PAUSE_S)
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            pass
        finally:
            if self.on_read_end is not None:
                self.on_read_end()
            pipe.close()
            # End of stdout is the end of the session: the dispatcher sees EOF.
            await read_writer.aclose()

    @staticmethod
    async def _next_chunk(pipe: PipeReader, release_at: float | None) -> bytes | None:
        """The next chunk of stdout, or ``None`` if ``release_at`` (monotonic seconds) passes
        first: a held notification is then due, and must not wait for the server to write again."""
        if release_at is None:
            return await pipe.read()
        with anyio.move_on_after(release_at - time.monotonic()):
            return await pipe.read()
        return None

    async def _deliver(
        self, messages: list[SessionMessage], read_writer: MemoryObjectSendStream[SessionMessage | Exception]
    ) -> None:
        for message in messages:
            self.answered = True
            intercept = self.intercept
            if intercept is not None and intercept(message):
                continue
            await read_writer.send(message)

    async def _write_stdin(
        self, process: anyio.abc.Process, write_reader: MemoryObjectReceiveStream[SessionMessage]
    ) -> None:
        assert process.stdin is not None
        try:
            async for session_message in write_reader:
                # Every message already waiting goes out in the same write: concurrent callers
                # then cost the server one read and one wake-up, not one per request.
                lines = [_line(session_message)]
                ended = False
                while True:
                    try:
                        lines.append(_line(write_reader.receive_nowait()))
                    except anyio.WouldBlock:
                        break
                    except anyio.EndOfStream:
                        ended = True
                        break
                await process.stdin.send(b"".join(lines))
                if ended:
                    return
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


WRITE_BUFFER_LIMIT = 64 * 1024
"""Past this much waiting in the event loop's buffer for a server's stdin, a write waits for it."""


def buffered_write(stdin: anyio.abc.ByteSendStream, data: bytes) -> bool:
    """Hand ``data`` to the event loop's pipe transport without a checkpoint, when that costs
    no waiting: ``True`` if done. anyio's ``send`` yields to the loop after every write (a turn
    of the loop per message); the asyncio stream underneath (``_stream``, a private attribute
    of anyio's wrapper, read here only) writes at once while its buffer is short. ``False``
    (the caller sends the anyio way) when the buffer is full, the stream is closing, or anyio
    no longer has that attribute."""
    import asyncio

    stream = getattr(stdin, "_stream", None)
    if not isinstance(stream, asyncio.StreamWriter) or stream.is_closing():
        return False
    if stream.transport.get_write_buffer_size() > WRITE_BUFFER_LIMIT:
        return False
    stream.write(data)
    return True


def _line(session_message: SessionMessage) -> bytes:
    """One message as the line the server reads."""
    return session_message.message.model_dump_json(by_alias=True, exclude_unset=True).encode() + b"\n"


__all__ = ["MESSAGE_TOO_LARGE", "MessageReader", "StdioTransport", "buffered_write"]
