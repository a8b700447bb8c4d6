"""A control connection to the user's daemon: a fleet's status, its tools, one call.

``mcpfleet status``, ``tools`` and ``call`` ask a running daemon first (``connect_if_running``,
which never starts one) and serve in-process when it cannot answer: no daemon, a refused hello,
a connection lost. The connection opens with a ``control`` hello (``wire.Hello``); then each
request ``{"id", "op", ...}`` is answered by a line with the same id, and the daemon may push
events (``{"event": ...}``) in between, which are kept for whoever watches.

The daemon is checked as much as the daemon checks its clients: the process listening on
the socket must run as this user (``SO_PEERCRED``), or nothing is sent to it.

Standard library only: the CLI's daemon path must not load the SDK, anyio or pydantic.
The async flavour for the library is ``agent.remote_client``; both share the parsing here.
"""

from __future__ import annotations

import itertools
import os
import socket
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any, BinaryIO

from mcpfleet.contract import wire
from mcpfleet.contract.exit_codes import EXIT_FAILED
from mcpfleet.daemon_client import paths
from mcpfleet.daemon_client.launch import no_daemon_listens
from mcpfleet.daemon_client.peer import ForeignDaemon, require_same_user
from mcpfleet.errors import DaemonError

HELLO_TIMEOUT_S = 10.0
"""How long a client waits for the daemon's answer to its hello."""


class DaemonUnavailable(DaemonError):
    """The daemon cannot answer: none runs, it refused the hello, or the connection broke.

    Whoever asked serves in-process instead; the message says why, for ``-v``.
    """


class DaemonRefused(DaemonUnavailable):
    """The daemon answered the hello with a refusal (``wire.REFUSAL_CODES``)."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(f"the daemon refused the connection ({code}): {message}")
        self.code = code
        self.message = message


class DaemonLost(DaemonUnavailable):
    """The connection ended (or sent something unreadable) while a request waited.

    ``request_sent`` says whether the request had been written to the socket: if it had,
    the daemon may have acted on it (a tool may have run), so repeating it is not harmless.
    """

    def __init__(self, message: str, *, request_sent: bool) -> None:
        super().__init__(message)
        self.request_sent = request_sent


class OperationFailed(DaemonError):
    """The daemon answered a request with an error: what to say, and the exit code it means."""

    def __init__(self, message: str, exit_code: int) -> None:
        super().__init__(message)
        self.message = message
        self.exit_code = exit_code


@dataclass(frozen=True)
class Welcome:
    """The daemon's acceptance of a hello."""

    pid: int
    version: str
    session: str


@dataclass(frozen=True)
class Answer:
    """The answer to request ``id``: its result, or its failure."""

    id: int
    result: dict[str, Any] | None = None
    failure: OperationFailed | None = None

    def unwrap(self) -> dict[str, Any]:
        if self.failure is not None:
            raise self.failure
        assert self.result is not None, "an answer holds a result or a failure"
        return self.result


@dataclass(frozen=True)
class Event:
    """Something the daemon pushed unasked (``{"event": "tools_changed"}``)."""

    name: str
    document: dict[str, Any] = field(default_factory=dict)


def control_hello(*, host: str | None) -> wire.Hello:
    """The hello of a control connection from this process."""
    from mcpfleet import __version__

    return wire.Hello(
        kind="control",
        version=__version__,
        fleet=None,
        env=wire.hello_environment(),
        host=host,
        pid=os.getpid(),
    )


def needs_in(line: bytes) -> list[str] | None:
    """The variables the daemon asks for before its answer (``wire.needs``), when ``line``
    is that question; None when it is the answer (or unreadable: ``parse_welcome`` says so)."""
    try:
        return wire.needed_names(wire.decode_line(line, limit=wire.MAX_HELLO_BYTES))
    except wire.WireError:
        return None


def parse_welcome(line: bytes) -> Welcome:
    """The daemon's answer to a hello; ``DaemonRefused`` for a refusal, ``DaemonLost`` for nonsense."""
    if not line.endswith(b"\n"):
        raise DaemonLost("the daemon closed the connection before answering the hello", request_sent=True)
    try:
        document = wire.decode_line(line, limit=wire.MAX_HELLO_BYTES)
    except wire.WireError as error:
        raise DaemonLost(
            f"the daemon's answer to the hello is unreadable: {error}", request_sent=True
        ) from None
    if document.get("ok") is True:
        pid, version, session = document.get("pid"), document.get("version"), document.get("session")
        if isinstance(pid, int) and isinstance(version, str) and isinstance(session, str):
            return Welcome(pid=pid, version=version, session=session)
        raise DaemonLost(
            'the daemon accepted the hello without its "pid", "version" and "session"', request_sent=True
        )
    code, message = document.get("code"), document.get("message")
    raise DaemonRefused(str(code), str(message))


def parse_control_line(line: bytes) -> Answer | Event:
    """One line of a control connection after the hello; ``wire.WireError`` when it is neither."""
    document = wire.decode_line(line)
    event = document.get("event")
    if isinstance(event, str):
        return Event(event, document)
    request_id = document.get("id")
    if not isinstance(request_id, int) or isinstance(request_id, bool):
        raise wire.WireError('a control answer needs an integer "id", an event an "event" name')
    result, error = document.get("result"), document.get("error")
    if isinstance(result, dict):
        return Answer(request_id, result=result)
    if isinstance(error, dict):
        message, exit_code = error.get("message"), error.get("exit")
        if not isinstance(exit_code, int) or isinstance(exit_code, bool):
            exit_code = EXIT_FAILED
        return Answer(request_id, failure=OperationFailed(str(message), exit_code))
    raise wire.WireError(f'answer {request_id} has neither a "result" object nor an "error" object')


def encode_request(request_id: int, op: str, params: Mapping[str, Any]) -> bytes:
    if op not in wire.CONTROL_OPS:
        raise ValueError(f"unknown control op {op!r}")
    return wire.encode_line({**params, "id": request_id, "op": op})


def check_peer(sock: socket.socket, socket_file: Path) -> None:
    """``DaemonUnavailable`` when the socket's listening process runs as another user."""
    try:
        require_same_user(sock, socket_file)
    except ForeignDaemon as error:
        raise DaemonUnavailable(str(error)) from error


class ControlClient:
    """A blocking control connection: one request at a time, answers matched by id.

    Events pushed while a request waits are kept in ``events``, in order.
    """

    def __init__(self, sock: socket.socket, reader: BinaryIO, welcome: Welcome) -> None:
        self.welcome = welcome
        self.events: list[Event] = []
        self._socket = sock
        self._reader = reader
        self._ids = itertools.count(1)

    @classmethod
    def connect(cls, path: Path | None = None, *, host: str | None = None) -> ControlClient:
        """Connect and say hello; ``DaemonUnavailable`` (or a subclass) when that fails."""
        target = paths.socket_path() if path is None else path
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.settimeout(HELLO_TIMEOUT_S)
            try:
                sock.connect(os.fspath(target))
            except OSError as error:
                raise DaemonUnavailable(
                    f"cannot connect to the daemon at {target}: {error.strerror or error}"
                ) from error
            check_peer(sock, target)
            reader = sock.makefile("rb")
            try:
                sock.sendall(control_hello(host=host).encode())
                line = reader.readline(wire.MAX_HELLO_BYTES + 1)
                asked = needs_in(line)
                if asked is not None:
                    sock.sendall(wire.env_values(asked))
                    line = reader.readline(wire.MAX_HELLO_BYTES + 1)
            except OSError as error:
                reader.close()
                raise DaemonLost(
                    f"the daemon did not answer the hello: {error}", request_sent=True
                ) from error
            try:
                welcome = parse_welcome(line)
            except DaemonUnavailable:
                reader.close()
                raise
            # A request may wait as long as the daemon's own bounds (a tool's timeout) allow.
            sock.settimeout(None)
        except BaseException:
            sock.close()
            raise
        return cls(sock, reader, welcome)

    def request(
        self, op: str, params: Mapping[str, Any] | None = None, *, timeout_s: float | None = None
    ) -> dict[str, Any]:
        """Send one request and wait for its answer's result, at most ``timeout_s`` (None: as
        long as the daemon's own bounds, a tool's timeout, allow).

        ``OperationFailed`` when the daemon answers with an error; ``DaemonLost`` when the
        connection ends first or the time is up (``request_sent`` tells whether the daemon may
        have acted). After the time is up the connection is of no more use: close it.
        """
        request_id = next(self._ids)
        line = encode_request(request_id, op, params or {})
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        try:
            self._socket.settimeout(timeout_s)
            self._socket.sendall(line)
        except OSError as error:  # a timeout too: the line did not go whole, nothing can act on it
            raise DaemonLost(
                f"the daemon went away before request {op!r} was sent: {error}", request_sent=False
            ) from error
        try:
            while True:
                if deadline is not None:
                    # A per-read timeout; events arriving meanwhile must not stretch the wait.
                    self._socket.settimeout(max(deadline - time.monotonic(), 0.001))
                message = self._read_message(op, timeout_s)
                if isinstance(message, Event):
                    self.events.append(message)
                elif message.id == request_id:
                    return message.unwrap()
        finally:
            self._socket.settimeout(None)

    def _read_message(self, op: str, timeout_s: float | None) -> Answer | Event:
        try:
            line = self._reader.readline(wire.MAX_CONTROL_LINE_BYTES + 1)
        except TimeoutError as error:
            raise DaemonLost(
                f"the daemon did not answer {op!r} within {timeout_s:g} s", request_sent=True
            ) from error
        except OSError as error:
            raise DaemonLost(
                f"the connection to the daemon broke during {op!r}: {error}", request_sent=True
            ) from error
        if not line.endswith(b"\n"):
            what = (
                "closed the connection"
                if len(line) <= wire.MAX_CONTROL_LINE_BYTES
                else "sent a line over the limit"
            )
            raise DaemonLost(f"the daemon {what} during {op!r}", request_sent=True)
        try:
            return parse_control_line(line)
        except wire.WireError as error:
            raise DaemonLost(
                f"the daemon sent an unreadable line during {op!r}: {error}", request_sent=True
            ) from None

    def close(self) -> None:
        self._reader.close()
        self._socket.close()

    def __enter__(self) -> ControlClient:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()


def connect_if_running(path: Path | None = None, *, host: str | None = None) -> ControlClient | None:
    """A control connection to the daemon when one runs; None, at once, when none does.

    "None runs" is no socket file, or a socket nobody listens on (a daemon that died). It
    never starts a daemon. Any other failure (a refusal, a socket of another user) raises
    ``DaemonUnavailable`` with the reason.
    """
    try:
        return ControlClient.connect(path, host=host)
    except DaemonUnavailable as error:
        if no_daemon_listens(error.__cause__):
            return None
        raise
