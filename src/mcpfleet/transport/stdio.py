"""The stdio transport: one MCP server as a child process speaking JSON-RPC lines.

mcpfleet uses its own transport instead of the SDK's ``stdio_client`` because that one gives
the child only six environment variables (editors pass the whole environment), needs a
real file descriptor for stderr (no capture), and turns a non-JSON stdout line (a banner)
into an error item. This one:

* runs ``[command, *args]`` with ``os.environ`` + the config's resolved ``env``, in its own
  session and process group, so closing can signal the whole group (grandchildren too);
* gives the child a mark of its own in its environment, which every descendant inherits
  even when it leaves the group (``setsid()``, a double fork): closing ends the marked
  processes after the group (``descendants.py``);
* announces its process group and its mark to the host's watchdog (``watchdog.py``), which
  ends both if the host dies; so a crashed host leaves no server behind. Only if that
  helper cannot run does a Linux child get the kernel's parent-death signal
  (``PR_SET_PDEATHSIG``) instead: it covers the direct child alone and needs a
  ``preexec_fn``, which turns the spawn into a full fork of the host (measured: 30 servers
  spawn in 0.43 s without it, 0.76 s with it). The hook only calls an already-resolved
  ``prctl`` and ``getppid``, which take no Python-level locks (CPython documents
  ``preexec_fn`` as unsafe when other threads hold locks at fork time), and anyio's public
  ``open_process`` has no ``preexec_fn`` argument, so the backend's ``open_process``
  (which forwards extra options to the platform call) is used;
* keeps the last lines of stderr in a bounded ring buffer for error messages;
* parses each stdout line as JSON-RPC and skips (counts, debug-logs) anything else, in
  linear time, holding no message over the server's limit (``MessageReader``), after
  folding notification floods on the raw line (``folding.py``). stdout is a pipe of its
  own, read directly: while a server floods, the reader pauses ``FLOOD_READ_PAUSE_S``
  between reads so that one wake-up takes many lines (the event loop's pipe reader would
  wake for every line the server writes), and it wakes when a held notification is due
  even if the server has gone quiet;
* closes in bounded steps: close stdin, wait, SIGTERM the group, wait, SIGKILL the group,
  then the same for the marked descendants that left it.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import logging
import os
import re
import signal
import sys
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any

import anyio
import anyio.abc
import anyio.lowlevel
from anyio._core._eventloop import get_async_backend

from mcpfleet.client.secrets import resolve_secrets_off_loop
from mcpfleet.config.model import DEFAULT_MAX_MESSAGE_BYTES
from mcpfleet.errors import CommandNotFoundError, ConnectError
from mcpfleet.transport.descendants import end_marked_processes, marked_environment, new_mark
from mcpfleet.transport.folding import NotificationFolder
from mcpfleet.transport.watchdog import host_watchdog

if TYPE_CHECKING:
    from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
    from mcp.client._transport import TransportStreams
    from mcp.shared.message import SessionMessage

    from mcpfleet.config.model import ServerConfig

logger = logging.getLogger(__name__)

STDIN_CLOSE_GRACE_S = 1.0
"""How long a server may take to exit on its own once its stdin is closed."""
SIGTERM_GRACE_S = 1.0
"""How long the process group gets between SIGTERM and SIGKILL."""
SIGKILL_REAP_S = 1.0
"""How long to wait for the kernel to report the SIGKILLed leader gone."""
STDOUT_DRAIN_S = 0.5
"""After the process exits, how long buffered stdout may still be delivered."""
STDOUT_READ_BYTES = 256 * 1024
FLOOD_READ_PAUSE_S = 0.02
"""After a read in which notifications were folded, how long the reader lets the pipe fill
before it reads again: what bounds the wake-ups a flood costs, and what a message that
arrives meanwhile waits (only from a server that is flooding)."""
STDERR_MAX_LINES = 200
STDERR_MAX_BYTES = 64 * 1024
STDERR_MAX_LINE_CHARS = 2000
MESSAGE_TOO_LARGE = -32019
"""Error code of the answer mcpfleet gives a request whose real answer was over the limit
(the last code of JSON-RPC's implementation-defined band; the SDK uses the first ones)."""
OVERSIZED_KEPT_BYTES = 4096
"""Of a message over the limit, how many of its first and of its last bytes are kept to
find the id of the request it answered."""
_POLL_S = 0.02
_PR_SET_PDEATHSIG = 1


def _parent_death_hook() -> Callable[[], None] | None:
    """A ``preexec_fn`` that makes the child die with its parent (Linux only), or ``None``."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    parent_pid = os.getpid()

    def set_parent_death_signal() -> None:
        prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        # The parent may have died between fork and prctl: then nobody would signal us.
        if os.getppid() != parent_pid:
            os._exit(1)

    return set_parent_death_signal


class StderrRing:
    """The last lines a server wrote on stderr, bounded in lines and bytes."""

    def __init__(self, max_lines: int = STDERR_MAX_LINES, max_bytes: int = STDERR_MAX_BYTES) -> None:
        self._lines: deque[str] = deque()
        self._max_lines = max_lines
        self._max_bytes = max_bytes
        self._bytes = 0

    def append(self, line: str) -> None:
        line = line[:STDERR_MAX_LINE_CHARS]
        self._lines.append(line)
        self._bytes += len(line)
        while self._lines and (len(self._lines) > self._max_lines or self._bytes > self._max_bytes):
            self._bytes -= len(self._lines.popleft())

    def tail(self, lines: int = 20) -> list[str]:
        if lines <= 0:
            return []
        return list(self._lines)[-lines:]


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


async def prepare_stdio_transport(
    name: str, config: ServerConfig, *, cwd: Path, resolve_secrets: bool
) -> StdioTransport:
    """The transport of a stdio server: the parent's environment plus the config's (secrets
    resolved), in the config's ``cwd`` (relative to ``cwd``), else in ``cwd`` itself.

    Discovery gives every stdio entry its working folder (see ``config/discovery.py``); a
    config built by hand has no level to decide from, so it runs where its builder says: its
    own ``cwd``, else the folder the caller passed.
    """
    if not config.command:
        raise ConnectError(f'MCP server "{name}" has no "command"', server=name)
    env = await resolve_secrets_off_loop(
        name, config.env, enabled=resolve_secrets, literal_keys=config.literal_env_keys
    )
    folder = cwd / config.cwd if config.cwd else cwd
    return StdioTransport(
        name,
        config.command,
        config.args,
        env={**os.environ, **env},
        cwd=str(folder),
        max_message_bytes=config.effective_max_message_bytes,
    )


class StdioTransport:
    """An SDK ``Transport`` (async context manager yielding the two message streams).

    Enter and exit it in the same task (the connection's owner task does).
    """

    def __init__(
        self,
        server_name: str,
        command: str,
        args: Sequence[str],
        *,
        env: Mapping[str, str],
        cwd: str,
        max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
    ) -> None:
        self.server_name = server_name
        self.command = command
        self.args = list(args)
        self.env = dict(env)
        self.cwd = cwd
        self.max_message_bytes = max_message_bytes
        self.mark = new_mark()
        """Carried in the environment of the server and of everything it starts."""
        self.stderr = StderrRing()
        self.reader: MessageReader | None = None
        """Set once the transport is entered; its counters say what the server wrote."""
        self.pid: int | None = None
        self.returncode: int | None = None
        self.spawn_ms: float | None = None
        self.exited = anyio.Event()
        self.signalled = False
        """Whether shutdown had to signal the leader (its exit status is then ours, not its own)."""
        self.answered = False
        """Whether the server ever sent a message: one that never did has no work to wind down."""
        self._process: anyio.abc.Process | None = None
        self._stdout_fd: int | None = None
        self._task_group: anyio.abc.TaskGroup | None = None
        self._streams: list[Any] = []
        self._read_writer: MemoryObjectSendStream[SessionMessage | Exception] | None = None

    # -- lifecycle -------------------------------------------------------------------------------------
    async def spawn(self) -> None:
        """Start the process now (idempotent), before the transport is entered.

        Lets the child boot while the caller still loads the SDK; ``discard`` ends a process
        that was spawned but never handed to a session.
        """
        if self._process is None:
            await self._spawn()

    async def discard(self) -> None:
        """End a spawned process that will never be entered (bounded, whole group)."""
        with anyio.CancelScope(shield=True):
            await self._stop_process()
        self._close_stdout()

    async def __aenter__(self) -> TransportStreams:
        from mcp.shared.message import SessionMessage

        process = self._process or await self._spawn()
        read_writer, read_stream = anyio.create_memory_object_stream[SessionMessage | Exception](0)
        write_stream, write_reader = anyio.create_memory_object_stream[SessionMessage](0)
        self._read_writer = read_writer
        self._streams = [read_writer, read_stream, write_stream, write_reader]
        task_group = anyio.create_task_group()
        await task_group.__aenter__()
        self._task_group = task_group
        task_group.start_soon(self._read_stdout, read_writer)
        task_group.start_soon(self._write_stdin, process, write_reader)
        task_group.start_soon(self._read_stderr, process)
        task_group.start_soon(self._watch_exit, process)
        return read_stream, write_stream

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        # Shielded so a cancelled owner still reaps the server; the task group is exited outside
        # the shield because a scope opened after it cannot wrap its exit.
        with anyio.CancelScope(shield=True):
            await self._stop_process()
            for stream in self._streams:
                await stream.aclose()
        if self._task_group is not None:
            task_group, self._task_group = self._task_group, None
            task_group.cancel_scope.cancel()
            await task_group.__aexit__(None, None, None)
        # Only now: no task waits on the descriptor any more, so its number cannot be reused under one.
        self._close_stdout()

    def describe_command(self) -> str:
        import shlex

        text = shlex.join([self.command, *self.args])
        return text if len(text) <= 200 else text[:197] + "..."

    # -- spawning --------------------------------------------------------------------------------------
    async def _spawn(self) -> anyio.abc.Process:
        if not await anyio.Path(self.cwd).is_dir():
            raise ConnectError(
                f'MCP server "{self.server_name}": working directory {self.cwd} does not exist; '
                'fix the "cwd" field of its config',
                server=self.server_name,
            )
        env = marked_environment(self.env, self.mark)
        options: dict[str, Any] = {"cwd": self.cwd, "env": env, "start_new_session": True}
        hook = None if host_watchdog().ensure_running() else _parent_death_hook()
        if hook is not None:
            options["preexec_fn"] = hook
        started = time.perf_counter()
        stdout_fd, child_stdout_fd = os.pipe()
        try:
            process = await self._open_process(child_stdout_fd, options)
        except BaseException:
            os.close(stdout_fd)
            raise
        finally:
            # The child has its own copy; ours would keep the pipe from ever reporting its end.
            os.close(child_stdout_fd)
        os.set_blocking(stdout_fd, False)
        self._stdout_fd = stdout_fd
        self.spawn_ms = (time.perf_counter() - started) * 1000
        self._process = process
        self.pid = process.pid
        host_watchdog().watch(process.pid, self.mark)
        return process

    async def _open_process(self, stdout_fd: int, options: dict[str, Any]) -> anyio.abc.Process:
        import subprocess

        try:
            return await get_async_backend().open_process(
                [self.command, *self.args],
                stdin=subprocess.PIPE,
                stdout=stdout_fd,
                stderr=subprocess.PIPE,
                **options,
            )
        except FileNotFoundError:
            raise CommandNotFoundError(
                f'MCP server "{self.server_name}": command not found: {self.command} '
                '(install it or fix the "command" field; PATH is searched)',
                server=self.server_name,
            ) from None
        except PermissionError:
            raise CommandNotFoundError(
                f'MCP server "{self.server_name}": permission denied running {self.command} '
                "(make it executable or point the config at an interpreter)",
                server=self.server_name,
            ) from None
        except OSError as error:
            raise CommandNotFoundError(
                f'MCP server "{self.server_name}": cannot run {self.command}: {error.strerror or error}',
                server=self.server_name,
            ) from None

    def _close_stdout(self) -> None:
        if self._stdout_fd is not None:
            fd, self._stdout_fd = self._stdout_fd, None
            os.close(fd)

    # -- pumps -----------------------------------------------------------------------------------------
    async def _read_stdout(self, read_writer: MemoryObjectSendStream[SessionMessage | Exception]) -> None:
        stdout_fd = self._stdout_fd
        assert stdout_fd is not None
        reader = self.reader = MessageReader(self.server_name, self.max_message_bytes)
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
            logger.debug("%s: reading stdout failed: %r", self.server_name, error)
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
            logger.debug("%s: writing to stdin failed: %r", self.server_name, error)
            if self._read_writer is not None:
                await self._read_writer.aclose()

    async def _read_stderr(self, process: anyio.abc.Process) -> None:
        assert process.stderr is not None
        buffer = b""
        try:
            async for chunk in process.stderr:
                buffer += chunk
                *lines, buffer = buffer.split(b"\n")
                for raw in lines:
                    self.stderr.append(raw.decode(errors="replace").rstrip())
                if len(buffer) > STDERR_MAX_LINE_CHARS:
                    self.stderr.append(buffer.decode(errors="replace"))
                    buffer = b""
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, anyio.EndOfStream):
            pass
        if buffer.strip():
            self.stderr.append(buffer.decode(errors="replace").rstrip())

    async def _watch_exit(self, process: anyio.abc.Process) -> None:
        self._record_exit(await process.wait())
        # Let buffered stdout reach the session, then end it even if a grandchild keeps the pipe open.
        await anyio.sleep(STDOUT_DRAIN_S)
        if self._read_writer is not None:
            await self._read_writer.aclose()

    # -- shutdown --------------------------------------------------------------------------------------
    async def _stop_process(self) -> None:
        process = self._process
        if process is None:
            return
        if process.stdin is not None:
            with contextlib.suppress(OSError, anyio.BrokenResourceError, anyio.ClosedResourceError):
                await process.stdin.aclose()
        # A server still starting (it never answered) is not reading its stdin yet: waiting for
        # it to notice the close would only delay the SIGTERM.
        if not await self._wait_exit(STDIN_CLOSE_GRACE_S if self.answered else 0):
            self.signalled = True
            self._signal_group(signal.SIGTERM)
            if not await self._wait_exit(SIGTERM_GRACE_S):
                self._signal_group(signal.SIGKILL)
                await self._wait_exit(SIGKILL_REAP_S)
        # The leader is gone; helpers it left in the group get the same two-step treatment.
        if self._group_alive():
            self._signal_group(signal.SIGTERM)
            for _ in range(round(SIGTERM_GRACE_S / _POLL_S)):
                if not self._group_alive():
                    break
                await anyio.sleep(_POLL_S)
            self._signal_group(signal.SIGKILL)
        # Descendants that left the group (setsid, a double fork) still carry the mark.
        await end_marked_processes(self.mark, SIGTERM_GRACE_S)
        if self.pid is not None:
            host_watchdog().release(self.pid)

    async def _wait_exit(self, seconds: float) -> bool:
        # Polls the exit status rather than waiting on ``_watch_exit``: during a cancelled
        # teardown that task is already cancelled, and the status is still updated.
        process = self._process
        assert process is not None
        for _ in range(max(1, round(seconds / _POLL_S))):
            if process.returncode is not None:
                self._record_exit(process.returncode)
                return True
            await anyio.sleep(_POLL_S)
        if process.returncode is None:
            return False
        self._record_exit(process.returncode)
        return True

    def _record_exit(self, returncode: int) -> None:
        if self.returncode is None:
            self.returncode = returncode
        self.exited.set()

    def _group_alive(self) -> bool:
        if self.pid is None:
            return False
        try:
            os.killpg(self.pid, 0)
        except (ProcessLookupError, PermissionError):
            return False
        return True

    def _signal_group(self, signum: int) -> None:
        if self.pid is None:
            return
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.pid, signum)


def exit_description(returncode: int) -> str:
    """``exited with code 3`` or ``was killed by SIGKILL``."""
    if returncode < 0:
        try:
            return f"was killed by {signal.Signals(-returncode).name}"
        except ValueError:
            return f"was killed by signal {-returncode}"
    return f"exited with code {returncode}"


__all__ = [
    "MESSAGE_TOO_LARGE",
    "LineFramer",
    "MessageReader",
    "OversizedLine",
    "StderrRing",
    "StdioTransport",
    "exit_description",
]
