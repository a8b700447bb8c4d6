"""The shim: ``mcpfleet serve`` as a relay between the host's stdio and the user's daemon.

The host launches ``mcpfleet serve`` and speaks MCP on its stdin and stdout; the daemon serves
the session over its socket (``contract.wire``). The shim connects (starting the daemon when none
runs, ``daemon_client.launch``), says which fleet the session sees in its hello, and from then on
copies lines unchanged: host stdin to the socket, socket to host stdout. It imports neither the
SDK nor anyio and starts in a few tens of milliseconds.

It reads each line only to remember what a new daemon needs to carry the session on:

* the host's ``initialize`` request and its ``notifications/initialized``, and which lists
  the first answer said may change;
* the ids of the host's requests still waiting for an answer;
* the ids of the daemon's requests to the host still waiting for the host's answer.

When the daemon goes away while the host is still there (killed, crashed, stopped), the shim
answers each host request in flight with an error (``DAEMON_STOPPED``: the host may retry it),
reconnects (starting a new daemon), replays ``initialize`` under an id of its own (swallowing
the answer) and ``notifications/initialized``, drops the host's late answers to the old
daemon's requests, and tells the host that its tool, resource and prompt lists changed: the
host sees a list change, not a dead server. A daemon that goes away ``launch.RECONNECT_LIMIT``
times within ``launch.RECONNECT_WINDOW_S`` ends the shim with exit 1 and a line on stderr.

A daemon that stops answering (SIGSTOP, wedged) keeps its socket open, so the shim watches
its liveness, not the length of a request: when a host request has waited ``PROBE_AFTER_S``
with nothing from the daemon, it asks the daemon whether it runs (``daemon_answers``, a
control hello on a second connection); with no answer within ``LIVENESS_TIMEOUT_S`` the
waiting requests get an error and the session goes on in a ``serve --no-daemon`` process of
its own (``open_own_fleet``), replayed like a new daemon. When the daemon cannot be used at
all (it cannot start, its folders cannot be trusted), the session is served in this process,
with one line saying why (``without_daemon_line``).

A host line is held up to ``MAX_HOST_LINE_BYTES`` (the in-process gateway's limit); a longer
one is dropped and, when it was a request, answered with ``Invalid Request``. The daemon's
lines are copied as they arrive, never held: only the start and end of a long one are kept,
enough to find its ``id``.

Two threads copy (one per direction, each blocking on its own source, so a host that is slow
to read never stops the other direction), a third watches the daemon's liveness; the main
thread waits for the end: host stdin at its end (exit 0, once the answers to the requests
already sent reached the host, at most ``EOF_DRAIN_S``), SIGTERM or SIGINT (exit 0, socket
closed), or a daemon that cannot be reached again (exit 1).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from types import FrameType
from typing import TYPE_CHECKING, Any

from mcpfleet import __version__
from mcpfleet.contract import notifications, wire
from mcpfleet.contract.defaults import MAX_HOST_MESSAGE_BYTES
from mcpfleet.contract.exit_codes import EXIT_FAILED, EXIT_OK, EXIT_USAGE
from mcpfleet.contract.framing import (
    LineFramer,
    OversizedLine,
    edge_members,
    oversized_refusal,
    oversized_request_id,
)
from mcpfleet.daemon_client import launch, paths
from mcpfleet.daemon_client.peer import peer_credentials
from mcpfleet.errors import DaemonError

if TYPE_CHECKING:
    import subprocess

MAX_HOST_LINE_BYTES = MAX_HOST_MESSAGE_BYTES
"""The longest line the host may send: the in-process gateway's limit too."""
PARSED_LINE_BYTES = 64 * 1024
"""A line up to this size is parsed whole; a longer one only at its two ends (its id)."""
READ_BYTES = 64 * 1024
"""The most one read takes (a pipe holds 64 KiB). Not more: a read allocates this much and
shrinks it to what came, and above glibc's mmap threshold (128 KiB) that is an mmap, an mremap
and an munmap, with their page faults, for every message of the session."""
ANSWER_TIMEOUT_S = 10.0
"""How long the daemon has to answer a replayed ``initialize``, and the hello beyond the
session's start-up gate: the daemon answers once the session's fleet has passed its gate,
as the in-process gateway starts reading stdin then (``--startup-timeout 0``, wait for every
server, waits for the daemon as long as it takes: it answers, or closes the connection)."""
PROBE_AFTER_S = 3.0
"""A host request unanswered while the daemon has sent nothing for this long makes the shim
ask whether the daemon still runs (``daemon_answers``): a tool call may run for minutes, so
what is judged is the daemon's liveness, never how long a request takes."""
LIVENESS_TIMEOUT_S = 7.0
"""How long the daemon's event loop has to answer that question before the shim gives the
daemon up (a stopped or wedged daemon): a request waits at most about ``PROBE_AFTER_S`` plus
this for its error."""
EOF_DRAIN_S = 60.0
"""After the host's stdin ends, how long the answers to the requests it sent still have to
reach its stdout before the shim ends (``printf '...' | mcpfleet serve``)."""
OWN_FLEET_ANSWER_S = 60.0
"""Beyond the session's start-up gate, how long a ``serve --no-daemon`` child started for
the session has to answer the replayed ``initialize``: it starts the session's servers first."""
DAEMON_STOPPED = -32603
"""The error a host request in flight gets when the daemon goes away (JSON-RPC internal error)."""
INVALID_REQUEST = -32600
REPLAY_ID_PREFIX = "mcpfleet-shim-initialize-"


class ShimError(DaemonError):
    """The shim cannot serve this session; ``exit_code`` says how it ends."""

    def __init__(self, message: str, exit_code: int = EXIT_FAILED) -> None:
        super().__init__(message)
        self.exit_code = exit_code


class Refused(ShimError):
    """The daemon refused the hello (``code`` from ``wire.REFUSAL_CODES``)."""

    def __init__(self, code: str, message: str) -> None:
        # A refusal about what the session asked for (a profile, a name length) is a usage error.
        super().__init__(f"the mcpfleet daemon refused the session: {message}", _refusal_exit(code))
        self.code = code


class _Stopped(BaseException):
    """SIGTERM or SIGINT reached the main thread."""


@dataclass(frozen=True)
class ShimSettings:
    """Everything ``mcpfleet serve`` passes the shim."""

    fleet: wire.FleetSpec
    verbose: bool = False


@dataclass
class Session:
    """An accepted session: its socket, the daemon's answer, and any bytes already read after it."""

    connection: socket.socket
    answer: dict[str, Any]
    leftover: bytes = b""
    own_fleet: subprocess.Popen[bytes] | None = None
    """The ``serve --no-daemon`` child serving this session instead of the daemon
    (``open_own_fleet``), or None when the daemon serves it."""
    answer_timeout_s: float | None = ANSWER_TIMEOUT_S
    """How long a replayed ``initialize`` may take to be answered."""


def run_shim(settings: ShimSettings, *, in_process: Callable[[], int]) -> int:
    """Serve the host's stdio through the daemon until the host goes; the exit code.

    ``in_process`` serves the session in this process instead: what a daemon that reads other
    config files than this session (``environment-mismatch``) leaves.
    """
    with _stop_signals():
        try:
            outcome = _serve(settings)
        except _Stopped:
            return EXIT_OK
    return in_process() if outcome is None else outcome


def _serve(settings: ShimSettings) -> int | None:
    """The exit code, or None when the session is to be served in this process."""
    try:
        session = open_session(settings)
    except Refused as refusal:
        if refusal.code != "environment-mismatch":
            _say(str(refusal))
            return refusal.exit_code
        _say(
            "the running mcpfleet daemon reads other config files than this session (its HOME or "
            "XDG folders differ), so this session runs its own servers in this process; "
            "`mcpfleet daemon stop` lets the next session start a daemon that reads this one's files"
        )
        return None
    except (ShimError, OSError) as error:
        # OSError: launch.DaemonStartError, paths.RuntimeFolderError, peer.ForeignDaemon.
        _say(without_daemon_line(error))
        return None
    if settings.verbose:
        _say(f"serving through the mcpfleet daemon (pid {session.answer.get('pid')})")
    return _Relay(settings, session).run()


def without_daemon_line(error: BaseException) -> str:
    """The one line a session says when it cannot use the daemon and is served in its own
    process instead: what went wrong (the error names the file and the fix) and what it means."""
    return (
        f"cannot use the mcpfleet daemon ({error}), so this session runs its own servers in this "
        "process (nothing is shared with other sessions); `mcpfleet serve --no-daemon` does so at "
        "once, without trying the daemon"
    )


def open_session(settings: ShimSettings) -> Session:
    """Connect to the daemon (starting it when needed) and have the session accepted.

    A daemon of another version drains and exits when refused; a new one is started, once.
    """
    for attempt in range(2):
        connection = launch.connect_or_start()
        try:
            return _hello(connection, settings.fleet)
        except Refused as refusal:
            connection.close()
            if refusal.code not in wire.RESTART_CODES or attempt == 1:
                raise
        except BaseException:
            connection.close()
            raise
    raise AssertionError("unreachable: the second refusal is raised")


def _hello(connection: socket.socket, fleet: wire.FleetSpec) -> Session:
    hello = wire.Hello(
        kind="session",
        version=__version__,
        fleet=fleet,
        env=wire.hello_environment(),
        host=_parent_name(),
        pid=os.getpid(),
    )
    timeout_s = None if fleet.startup_timeout_ms == 0 else fleet.startup_timeout_ms / 1000 + ANSWER_TIMEOUT_S
    connection.settimeout(timeout_s)
    try:
        connection.sendall(hello.encode())
        line, leftover = _read_answer_while_alive(connection, timeout_s)
        answer = wire.decode_line(line, limit=wire.MAX_HELLO_BYTES)
        answer, leftover = _give_values(connection, answer, leftover, timeout_s)
    except TimeoutError:
        raise ShimError(f"the mcpfleet daemon did not answer within {timeout_s:.0f} s") from None
    except (OSError, wire.WireError) as error:
        raise ShimError(f"the mcpfleet daemon's answer to the hello: {error}") from error
    connection.settimeout(None)
    if answer.get("ok") is True:
        return Session(connection, answer, leftover)
    code, message = answer.get("code"), answer.get("message")
    raise Refused(code if isinstance(code, str) else "refused", str(message))


def _give_values(
    connection: socket.socket, answer: dict[str, Any], leftover: bytes, timeout_s: float | None
) -> tuple[dict[str, Any], bytes]:
    """The daemon's answer to the hello, after sending it the values of the variables it
    asked for (``wire.needs``: those this session's configs reference), if it asked."""
    asked = wire.needed_names(answer)
    if asked is None:
        return answer, leftover
    connection.sendall(wire.env_values(asked))
    line, leftover = _read_answer_while_alive(connection, timeout_s, leftover)
    return wire.decode_line(line, limit=wire.MAX_HELLO_BYTES), leftover


def _read_answer_while_alive(
    connection: socket.socket, timeout_s: float | None, received_before: bytes = b""
) -> tuple[bytes, bytes]:
    """The hello's answer line and what came after it, within ``timeout_s`` (None: as long as
    the daemon takes). The answer waits for the session's start-up gate, so silence alone says
    nothing: after each ``PROBE_AFTER_S`` of it the daemon is asked whether it runs, and one
    that does not say so (stopped, wedged) is a ``ShimError``, even with no time limit.
    ``received_before``: bytes already read where the line starts."""
    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    received = bytearray(received_before)
    while b"\n" not in received:
        if len(received) > wire.MAX_HELLO_BYTES:
            raise wire.WireError(f"no line within {wire.MAX_HELLO_BYTES} bytes")
        left = None if deadline is None else deadline - time.monotonic()
        if left is not None and left <= 0:
            raise TimeoutError
        connection.settimeout(PROBE_AFTER_S if left is None else min(left, PROBE_AFTER_S))
        try:
            chunk = connection.recv(READ_BYTES)
        except TimeoutError:
            if not daemon_answers(LIVENESS_TIMEOUT_S):
                pid = peer_credentials(connection).pid
                raise ShimError(
                    f"the mcpfleet daemon (pid {pid}) did not answer for "
                    f"{PROBE_AFTER_S + LIVENESS_TIMEOUT_S:.0f} s (stopped, or stuck); resume it with "
                    f"`kill -CONT {pid}`, or end it with `kill -KILL {pid}` so that a fresh one starts"
                ) from None
            continue
        if not chunk:
            raise wire.WireError("the daemon closed the connection")
        received += chunk
    line, _, rest = bytes(received).partition(b"\n")
    return line, rest


def daemon_answers(timeout_s: float) -> bool:
    """Whether the daemon's event loop still runs: a second connection's ``control`` hello is
    answered within ``timeout_s`` (any answer, a refusal too, says the loop runs).

    Only an accepted connection left unanswered says no: a daemon stopped with SIGSTOP (the
    kernel still queues connections for it) or stuck. Nothing listening on the socket cannot
    tell (a draining daemon has closed it, and still serves its sessions), so it says yes:
    a daemon that is really gone closes the session's socket itself.
    """
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM | socket.SOCK_CLOEXEC)
    deadline = time.monotonic() + timeout_s
    try:
        probe.settimeout(timeout_s)
        try:
            probe.connect(os.fspath(paths.socket_path()))
        except OSError:
            return True
        hello = wire.Hello(
            kind="control",
            version=__version__,
            fleet=None,
            env=wire.config_environment(),
            host="mcpfleet serve (liveness probe)",
            pid=os.getpid(),
        )
        probe.sendall(hello.encode())
        received = b""
        while b"\n" not in received:
            probe.settimeout(max(deadline - time.monotonic(), 0.001))
            chunk = probe.recv(READ_BYTES)
            if not chunk:
                return True  # closed, so it ran: a daemon that refuses closes after its answer
            received += chunk
        return True
    except OSError:  # TimeoutError among them
        return False
    finally:
        probe.close()


def open_own_fleet(settings: ShimSettings) -> Session:
    """The session served by a process of its own, ``mcpfleet serve`` with the shim's command
    line and ``MCPFLEET_NO_DAEMON=1``, on a socket pair: what a session does once its daemon
    stopped answering (that daemon still holds the socket, so no new daemon can start).

    The child reads the socket as its stdin and writes its stdout there; its stderr is the
    shim's (the host's log). It ends when the shim closes its end, or dies with the shim.
    """
    import subprocess  # the rare path only

    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        process = subprocess.Popen(
            [sys.executable, "-P", "-m", "mcpfleet", *sys.argv[1:]],
            stdin=theirs.fileno(),
            stdout=theirs.fileno(),
            env={**os.environ, launch.NO_DAEMON_ENV: "1"},
            close_fds=True,
        )
    except OSError as error:
        ours.close()
        raise ShimError(f"cannot start `mcpfleet serve --no-daemon` for this session: {error}") from error
    finally:
        theirs.close()
    return Session(
        ours,
        {"pid": process.pid},
        own_fleet=process,
        answer_timeout_s=_own_fleet_answer_timeout_s(settings.fleet),
    )


def _own_fleet_answer_timeout_s(fleet: wire.FleetSpec) -> float | None:
    """The session's start-up gate and ``OWN_FLEET_ANSWER_S``; None when the session waits
    for every server (``--startup-timeout 0``): the child answers once they all answered."""
    if fleet.startup_timeout_ms == 0:
        return None
    return fleet.startup_timeout_ms / 1000 + OWN_FLEET_ANSWER_S


def _end_own_fleet(process: subprocess.Popen[bytes]) -> None:
    """Wait a little for the session's own ``serve`` to close its servers (its stdin ended);
    a child that takes longer ends on its own, as it would with the host gone."""
    with contextlib.suppress(Exception):
        process.wait(OWN_FLEET_ANSWER_S / 4)


def _parent_name() -> str | None:
    """The host's process name (``claude``, ``cursor``…), for ``daemon status``."""
    try:
        with open(f"/proc/{os.getppid()}/comm", encoding="utf-8", errors="replace") as comm:
            return comm.read().strip() or None
    except OSError:
        return None


def _refusal_exit(code: str) -> int:
    return EXIT_USAGE if code == "refused" else EXIT_FAILED


def _say(message: str) -> None:
    """One line on stderr (the host logs it); text from the daemon shown as text."""
    # Imported when there is something to say: a session that says nothing skips its patterns.
    from mcpfleet.contract.text import safe_text

    sys.stderr.write(f"mcpfleet: {safe_text(' '.join(message.split()))}\n")
    sys.stderr.flush()


@contextlib.contextmanager
def _stop_signals() -> Iterator[None]:
    """SIGTERM and SIGINT raise ``_Stopped`` in the main thread while the block runs."""

    def stop(signal_number: int, frame: FrameType | None) -> None:
        raise _Stopped

    previous = {number: signal.signal(number, stop) for number in (signal.SIGTERM, signal.SIGINT)}
    try:
        yield
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)


# --- what the shim remembers of the session ----------------------------------------------------

_NO_ID = object()


@dataclass(frozen=True)
class _Message:
    """What the shim reads of one line: its method and id, and the whole of a short one."""

    method: str | None
    id: Any
    document: dict[str, Any] | None

    @property
    def is_request(self) -> bool:
        return self.method is not None and self.id is not _NO_ID

    @property
    def is_response(self) -> bool:
        return self.method is None and self.id is not _NO_ID


def read_message(line: bytearray | OversizedLine) -> _Message | None:
    """The method and id of a JSON-RPC line, or None when it is not a JSON object."""
    if isinstance(line, OversizedLine):
        members, _ = edge_members(line)
        document = None
    elif len(line) > PARSED_LINE_BYTES:
        ends = OversizedLine()
        ends.add(memoryview(line))
        members, _ = edge_members(ends)
        document = None
    else:
        try:
            parsed = json.loads(line)
        except (ValueError, RecursionError):
            return None
        if not isinstance(parsed, dict):
            return None
        members = document = parsed
    if not members:
        return None
    method = members.get("method")
    return _Message(
        method=method if isinstance(method, str) else None, id=members.get("id", _NO_ID), document=document
    )


def _key(request_id: Any) -> str:
    """Ids as they were written: ``1`` and ``"1"`` are two requests."""
    if type(request_id) is int:
        return str(request_id)  # what json.dumps writes, at a fraction of its cost on every line
    return json.dumps(request_id)


@dataclass
class SessionMemory:
    """What a new daemon needs to carry the host's session on (see the module)."""

    initialize: bytes | None = None
    initialize_key: str | None = None
    initialize_answered: bool = False
    initialized: bytes | None = None
    list_changed: tuple[str, ...] = ()
    host_requests: dict[str, Any] = field(default_factory=dict)
    daemon_requests: set[str] = field(default_factory=set)
    stale_daemon_requests: set[str] = field(default_factory=set)

    def from_host(self, message: _Message | None, line: bytes | bytearray) -> bool:
        """Note a host line; whether it goes to the daemon."""
        if message is None:
            return True  # the daemon tells the host what is wrong with it
        if message.is_request:
            key = _key(message.id)
            self.host_requests[key] = message.id
            if message.method == "initialize":
                self.initialize, self.initialize_key = bytes(line), key
                self.initialize_answered, self.list_changed = False, ()
        elif message.method == notifications.INITIALIZED:
            self.initialized = bytes(line)
        elif message.method == notifications.CANCELLED:
            # A cancelled request may never be answered: no error for it after a reconnection.
            request_id = _cancelled_id(message)
            if request_id is not _NO_ID:
                self.host_requests.pop(_key(request_id), None)
        elif message.is_response:
            key = _key(message.id)
            if key in self.daemon_requests:
                self.daemon_requests.discard(key)
            elif key in self.stale_daemon_requests:
                # The answer to a daemon that is gone: the new one never asked.
                self.stale_daemon_requests.discard(key)
                return False
        return True

    def from_daemon(self, message: _Message | None) -> None:
        """Note a daemon line before the host sees it."""
        if message is None:
            return
        if message.is_request:
            key = _key(message.id)
            self.daemon_requests.add(key)
            self.stale_daemon_requests.discard(key)  # the id is the new daemon's now
        elif message.method == notifications.CANCELLED:
            request_id = _cancelled_id(message)
            if request_id is not _NO_ID:
                self.daemon_requests.discard(_key(request_id))
        elif message.is_response:
            key = _key(message.id)
            self.host_requests.pop(key, None)
            if key == self.initialize_key and not self.initialize_answered:
                self.initialize_answered = True
                self.list_changed = _changing_lists(message.document)

    def connection_lost(self) -> list[Any]:
        """Forget what the lost daemon owed; the ids of the host requests to answer with an error.

        An ``initialize`` still unanswered is not among them: it is sent again as it came.
        """
        keep_initialize = self.initialize_key if not self.initialize_answered else None
        lost = [request_id for key, request_id in self.host_requests.items() if key != keep_initialize]
        self.host_requests = {
            key: request_id for key, request_id in self.host_requests.items() if key == keep_initialize
        }
        self.stale_daemon_requests |= self.daemon_requests
        self.daemon_requests = set()
        return lost


def _cancelled_id(message: _Message) -> Any:
    params = message.document.get("params") if message.document is not None else None
    return params.get("requestId", _NO_ID) if isinstance(params, dict) else _NO_ID


def _changing_lists(answer: dict[str, Any] | None) -> tuple[str, ...]:
    """The list-changed notifications an ``initialize`` answer's capabilities allow: what the
    host gets after a reconnection."""
    result = answer.get("result") if answer is not None else None
    capabilities = result.get("capabilities") if isinstance(result, dict) else None
    if not isinstance(capabilities, dict):
        return ()
    declared = [
        capability
        for capability, options in capabilities.items()
        if isinstance(options, dict) and options.get("listChanged") is True
    ]
    changes = notifications.LIST_CHANGED
    return tuple(method for capability, method in changes.items() if capability in declared)


def _error_line(request_id: Any, code: int, message: str) -> bytes:
    return wire.encode_line({"jsonrpc": "2.0", "id": request_id, "error": {"code": code, "message": message}})


# --- the two directions ------------------------------------------------------------------------


class _HostOutput:
    """The host's stdout, written by both threads: whole lines only, except the daemon's copy.

    The daemon's bytes are copied as they come, so a line may be half written when the shim
    has a line of its own to send (an error answer, a list change): that line waits for the
    end of the daemon's, and never lands in the middle of it.
    """

    def __init__(self, fd: int) -> None:
        self._fd = fd
        self._lock = threading.Lock()
        self._mid_line = False
        self._waiting: list[bytes] = []

    def copy(self, chunk: bytes) -> None:
        if not chunk:
            return
        with self._lock:
            end = chunk.rfind(b"\n") + 1
            if self._waiting and end:
                # The waiting lines go right after the end of the daemon's line they waited for.
                self._write(chunk[:end] + b"".join(self._waiting) + chunk[end:])
                self._waiting.clear()
            else:
                self._write(chunk)
            self._mid_line = end != len(chunk)

    def send(self, line: bytes) -> None:
        with self._lock:
            if self._mid_line:
                self._waiting.append(line)
            else:
                self._write(line)

    def end_cut_line(self) -> None:
        """The daemon went away mid-line: end the line, so the host can read the next one."""
        with self._lock:
            if self._mid_line:
                self._write(b"\n" + b"".join(self._waiting))
                self._waiting.clear()
                self._mid_line = False

    def _write(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            view = view[os.write(self._fd, view) :]


class _Connection:
    """One socket to a daemon (or to the session's own ``serve --no-daemon`` child). Closing it
    wakes a send in progress before the descriptor goes."""

    def __init__(self, session: Session) -> None:
        self.socket = session.connection
        self.pid = session.answer.get("pid")
        self.own_fleet = session.own_fleet
        self._send_lock = threading.Lock()

    def send(self, data: bytes | bytearray) -> None:
        with self._send_lock:
            self.socket.sendall(data)

    def shutdown(self) -> None:
        with contextlib.suppress(OSError):
            self.socket.shutdown(socket.SHUT_RDWR)

    def close(self) -> None:
        self.shutdown()
        with self._send_lock:
            self.socket.close()


class _Relay:
    def __init__(self, settings: ShimSettings, session: Session) -> None:
        self._settings = settings
        self._output = _HostOutput(sys.stdout.fileno())
        self._memory = SessionMemory()
        self._lock = threading.Lock()
        self._connected = threading.Condition(self._lock)
        self._connection: _Connection | None = _Connection(session)
        self._leftover = session.leftover
        self._finished = threading.Event()
        self._exit_code = EXIT_OK
        self._reconnections: deque[float] = deque()
        self._last_problem = ""
        self._replays = 0
        self._activity = threading.Condition(self._lock)
        """Notified when the session ends or reconnects, and, once the host's input ended, when
        an answer reached the host: what the liveness watch and the end-of-input drain wait on.
        Not on each message: a wake-up of a third thread per call would cost more than the copy."""
        self._heard_at = time.monotonic()
        """When the daemon last showed it runs: a line from it, a probe it answered, or the
        moment a host request began to wait while none did."""
        self._copying = 0
        """Daemon chunks noted but not yet written to the host's stdout."""
        self._unresponsive: _Connection | None = None
        """The daemon connection given up for not answering a liveness probe."""
        self._own_fleet = False
        """Whether the session is served by a ``serve --no-daemon`` child from now on."""
        self._input_ended = False

    def run(self) -> int:
        for target, name in (
            (self._from_host, "host"),
            (self._from_daemon, "daemon"),
            (self._watch_daemon, "liveness"),
        ):
            threading.Thread(target=self._guarded(target), name=f"mcpfleet-shim-{name}", daemon=True).start()
        try:
            self._finished.wait()
        except _Stopped:
            self._finish(EXIT_OK)
        finally:
            with self._lock:
                connection, self._connection = self._connection, None
                self._connected.notify_all()
                self._activity.notify_all()
            if connection is not None:
                connection.close()
                if connection.own_fleet is not None:
                    _end_own_fleet(connection.own_fleet)
        return self._exit_code

    def _guarded(self, target: Callable[[], None]) -> Callable[[], None]:
        def run() -> None:
            try:
                target()
            except BaseException as error:
                self._finish(
                    EXIT_FAILED,
                    f"mcpfleet serve stopped on an internal error ({type(error).__name__}: {error}); "
                    "restart the session, and report the error if it comes back",
                )

        return run

    def _finish(self, code: int, message: str | None = None) -> None:
        with self._lock:
            if self._finished.is_set():
                return
            # Said before the main thread is let go: the process ends as soon as it returns.
            if message is not None:
                _say(message)
            self._exit_code = code
            self._finished.set()
            self._connected.notify_all()
            self._activity.notify_all()

    # host -> daemon

    def _from_host(self) -> None:
        framer = LineFramer(MAX_HOST_LINE_BYTES)
        while True:
            try:
                chunk = os.read(sys.stdin.fileno(), READ_BYTES)
            except OSError:
                chunk = b""
            if not chunk:
                # The host went away, or closed our stdin: the session ends once the answers
                # to what it already asked have reached it.
                self._drain_then_finish()
                return
            for line in framer.feed(chunk):
                if isinstance(line, OversizedLine):
                    self._refuse_oversized(line)
                else:
                    message = read_message(line)
                    line += b"\n"
                    self._to_daemon(message, line)

    def _to_daemon(self, message: _Message | None, line: bytearray) -> None:
        with self._lock:
            while self._connection is None and not self._finished.is_set():
                self._connected.wait()  # a reconnection is under way
            connection = self._connection
            was_waiting = bool(self._memory.host_requests)
            if connection is None or not self._memory.from_host(message, line):
                return
            if not was_waiting and self._memory.host_requests:
                # Silence of the daemon counts from here: before, it owed nothing. The liveness
                # watch is not woken: it looks again within PROBE_AFTER_S on its own, so a call
                # wakes no thread of the shim but the two that copy it.
                self._heard_at = time.monotonic()
        try:
            connection.send(line)
        except OSError:
            # The daemon is gone: the other thread reconnects, and answers this request (noted
            # above as in flight) with an error.
            connection.shutdown()

    def _refuse_oversized(self, line: OversizedLine) -> None:
        # Only a request is answered: nobody waits for a notification or a response.
        request_id = oversized_request_id(line)
        if request_id is not None:
            self._output.send(
                _error_line(request_id, INVALID_REQUEST, oversized_refusal(line, MAX_HOST_LINE_BYTES))
            )

    # daemon -> host

    def _from_daemon(self) -> None:
        framer = LineFramer(PARSED_LINE_BYTES)
        pending, self._leftover = self._leftover, b""
        while True:
            with self._lock:
                connection = self._connection
            if connection is None:
                return
            if pending:
                chunk, pending = pending, b""
            else:
                try:
                    chunk = connection.socket.recv(READ_BYTES)
                except OSError:
                    chunk = b""
            if not chunk:
                if self._finished.is_set():
                    return
                framer = LineFramer(PARSED_LINE_BYTES)
                resumed = self._reconnect(connection)
                if resumed is None:
                    return
                pending = resumed
                continue
            self._to_host(framer, chunk)

    def _to_host(self, framer: LineFramer, chunk: bytes) -> None:
        messages = [read_message(line) for line in framer.feed(chunk)]
        with self._lock:
            # Noted before the host can see them: an answer already given never gets an error too.
            for message in messages:
                self._memory.from_daemon(message)
            self._heard_at = time.monotonic()
            self._copying += 1
        try:
            self._output.copy(chunk)
        except OSError:
            self._finish(EXIT_OK)  # nobody reads our stdout any more: the host is gone
        finally:
            with self._lock:
                self._copying -= 1
                if self._input_ended:
                    self._activity.notify_all()  # the end-of-input drain waits for this answer

    def _drain_then_finish(self) -> None:
        """The host's input ended: wait (at most ``EOF_DRAIN_S``) until every request it sent
        is answered on its stdout, then end the session. A daemon that goes away meanwhile
        answers them with errors (``_reconnect``)."""
        deadline = time.monotonic() + EOF_DRAIN_S
        with self._lock:
            self._input_ended = True
            while (self._memory.host_requests or self._copying) and not self._finished.is_set():
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    break
                self._activity.wait(remaining)
        self._finish(EXIT_OK)

    # the daemon's liveness

    def _watch_daemon(self) -> None:
        """Give up a daemon that stops answering (stopped with SIGSTOP, wedged): after
        ``PROBE_AFTER_S`` of its silence while a host request waits, ask it whether it runs;
        a daemon that does not say so within ``LIVENESS_TIMEOUT_S`` is left, its requests
        answered with errors, and the session goes on in a process of its own."""
        while True:
            with self._lock:
                while True:
                    if self._finished.is_set():
                        return
                    connection = self._connection
                    owes = (
                        connection is not None and connection.own_fleet is None and self._memory.host_requests
                    )
                    if not owes:
                        # A host request that starts to wait is seen at the next look, within
                        # PROBE_AFTER_S of it: its silence is counted from its start
                        # (``_heard_at``), so the probe is not late for being seen late.
                        self._activity.wait(PROBE_AFTER_S)
                        continue
                    silent_for = time.monotonic() - self._heard_at
                    if silent_for >= PROBE_AFTER_S:
                        break
                    self._activity.wait(PROBE_AFTER_S - silent_for)
                asked_at = time.monotonic()
            assert connection is not None
            answered = daemon_answers(LIVENESS_TIMEOUT_S)
            with self._lock:
                if answered or self._heard_at >= asked_at:
                    self._heard_at = max(self._heard_at, asked_at)
                    continue
                if self._connection is not connection or self._finished.is_set():
                    continue
                self._unresponsive = connection
            # The daemon thread sees the end of the connection and carries the session on.
            connection.shutdown()

    def _reconnect(self, lost: _Connection) -> bytes | None:
        """Carry the session on with a new daemon; what it sent after the replay, or None when
        the shim ends."""
        with self._lock:
            if self._finished.is_set():
                return None
            self._connection = None
            unanswered = self._memory.connection_lost()
            unresponsive = self._unresponsive is lost
            if unresponsive:
                self._own_fleet = True
            input_ended = self._input_ended
        lost.close()
        if lost.own_fleet is not None:
            _end_own_fleet(lost.own_fleet)
        error_message = (
            f"the mcpfleet daemon (pid {lost.pid}) stopped answering while this request ran; retry it"
            if unresponsive
            else launch.stopped_while("request")
        )
        try:
            self._output.end_cut_line()
            for request_id in unanswered:
                self._output.send(_error_line(request_id, DAEMON_STOPPED, error_message))
        except OSError:
            self._finish(EXIT_OK)
            return None
        if input_ended:
            self._finish(EXIT_OK)  # nothing more will come from the host: no new daemon is needed
            return None
        if unresponsive:
            _say(
                f"the mcpfleet daemon (pid {lost.pid}) did not answer for "
                f"{PROBE_AFTER_S + LIVENESS_TIMEOUT_S:.0f} s, so this session now runs its own "
                "servers in a separate process, and its waiting requests got an error to retry. If "
                f"the daemon was stopped on purpose (Ctrl-Z, a debugger), resume it with `kill -CONT "
                f"{lost.pid}`, or end it with `kill -KILL {lost.pid}` so that new sessions start a "
                "fresh one"
            )
        elif self._settings.verbose:
            _say("the mcpfleet daemon closed the session; reconnecting")
        while True:
            problem = self._count_reconnection()
            if problem is not None:
                self._finish(EXIT_FAILED, problem)
                return None
            try:
                session = open_own_fleet(self._settings) if self._own_fleet else open_session(self._settings)
                try:
                    leftover = self._replay(session)
                except BaseException:
                    # Half open, the daemon's session would hold its servers for nobody.
                    session.connection.close()
                    raise
            except Refused as refusal:
                if refusal.code == "environment-mismatch":
                    self._finish(EXIT_FAILED, f"{refusal}; restart the session")
                    return None
                self._last_problem = str(refusal)
            except (ShimError, OSError) as error:
                self._last_problem = str(error)
            else:
                break
            time.sleep(launch.RECONNECT_PAUSE_S)
        with self._lock:
            if self._finished.is_set():
                session.connection.close()
                return None
            self._connection = _Connection(session)
            self._heard_at = time.monotonic()
            self._connected.notify_all()
            self._activity.notify_all()
            changed = self._memory.list_changed
        if session.own_fleet is None:
            _say(
                f"the mcpfleet daemon (pid {lost.pid}) went away (stopped, or crashed: "
                f"`mcpfleet daemon logs` says which); a new daemon (pid {session.answer.get('pid')}) "
                "now serves this session: the host was told to list its tools again, and a request "
                "that was running got an error to retry"
            )
        elif not unresponsive:
            _say(
                "the separate process serving this session's servers ended; a new one serves it "
                "now, and a request that was running got an error to retry"
            )
        try:
            for notification in changed:
                self._output.send(wire.encode_line({"jsonrpc": "2.0", "method": notification}))
        except OSError:
            self._finish(EXIT_OK)
            return None
        return leftover

    def _count_reconnection(self) -> str | None:
        """None while reconnections stay within the budget, else why the shim ends."""
        now = time.monotonic()
        while self._reconnections and now - self._reconnections[0] > launch.RECONNECT_WINDOW_S:
            self._reconnections.popleft()
        if len(self._reconnections) >= launch.RECONNECT_LIMIT:
            last = f" (last: {self._last_problem})" if self._last_problem else ""
            return (
                f"the mcpfleet daemon went away {launch.RECONNECT_LIMIT} times within "
                f"{launch.RECONNECT_WINDOW_S:.0f} s"
                f"{last}; see `mcpfleet daemon logs`, or serve with `mcpfleet serve --no-daemon`"
            )
        self._reconnections.append(now)
        return None

    def _replay(self, session: Session) -> bytes:
        """Bring the new daemon's session to where the host's was; what it sent after that."""
        with self._lock:
            initialize, answered = self._memory.initialize, self._memory.initialize_answered
            initialized = self._memory.initialized
        if initialize is None:
            return session.leftover
        connection = session.connection
        leftover = session.leftover
        if not answered:
            connection.sendall(initialize)  # the host still waits for this answer: it gets it
        else:
            self._replays += 1
            private_id = f"{REPLAY_ID_PREFIX}{self._replays}"
            request = json.loads(initialize)
            request["id"] = private_id
            connection.sendall(wire.encode_line(request))
            leftover = self._swallow_answer(connection, leftover, private_id, session.answer_timeout_s)
        if initialized is not None:
            connection.sendall(initialized)
        return leftover

    def _swallow_answer(
        self, connection: socket.socket, received: bytes, request_id: str, timeout_s: float | None
    ) -> bytes:
        """Read up to the answer to our own request, which the host must not see; lines
        before it go to the host as any would; what follows it is returned."""
        buffer = bytearray(received)
        framer = LineFramer(PARSED_LINE_BYTES)
        connection.settimeout(timeout_s)
        try:
            while True:
                newline = buffer.find(b"\n")
                while newline >= 0:
                    line = bytes(buffer[: newline + 1])
                    del buffer[: newline + 1]
                    message = read_message(bytearray(line[:-1]))
                    if message is not None and message.is_response and message.id == request_id:
                        error = (message.document or {}).get("error")
                        if error is not None:
                            raise ShimError(f"the new daemon refused the session's initialize: {error}")
                        return bytes(buffer)
                    self._to_host(framer, line)
                    newline = buffer.find(b"\n")
                if len(buffer) > wire.MAX_HELLO_BYTES:
                    raise ShimError("the new daemon did not answer the session's initialize")
                chunk = connection.recv(READ_BYTES)
                if not chunk:
                    raise ShimError("the new daemon closed the session during its initialize")
                buffer += chunk
        except TimeoutError:
            raise ShimError(
                f"the new daemon did not answer the session's initialize within {timeout_s:.0f} s"
            ) from None
        finally:
            connection.settimeout(None)
