"""A scripted daemon for the control clients under test: a real Unix socket speaking the wire.

It accepts connections on the socket path it is given, reads the client's hello, answers it
(accepts, or refuses with a code), then hands every request to a script: a function of the
request that returns what to send back (``Reply``). It records the hellos and requests it
read, so a test can check what the client sent. Each connection is served by its own thread;
``close()`` stops them all.
"""

from __future__ import annotations

import json
import os
import socket
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mcpfleet import __version__


@dataclass(frozen=True)
class Reply:
    """What the peer does with one request: send these lines, then maybe drop the connection."""

    lines: tuple[dict[str, Any], ...] = ()
    close: bool = False


def result(request: dict[str, Any], document: dict[str, Any]) -> Reply:
    return Reply(({"id": request["id"], "result": document},))


def failure(request: dict[str, Any], message: str, exit_code: int) -> Reply:
    return Reply(({"id": request["id"], "error": {"message": message, "exit": exit_code}},))


Script = Callable[[dict[str, Any]], Reply | None]
"""A request in, what to send back; None sends nothing (the answer comes later, or never)."""


@dataclass
class ControlPeer:
    path: Path
    script: Script
    refusal: tuple[str, str] | None = None
    hellos: list[dict[str, Any]] = field(default_factory=list)
    requests: list[dict[str, Any]] = field(default_factory=list)
    connections: list[socket.socket] = field(default_factory=list)
    _listener: socket.socket | None = None
    _threads: list[threading.Thread] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def start(self) -> None:
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        listener.bind(os.fspath(self.path))
        listener.listen(16)
        self._listener = listener
        self._spawn(self._accept_loop)

    def _spawn(self, target: Callable[..., None], *args: Any) -> None:
        thread = threading.Thread(target=target, args=args, daemon=True)
        self._threads.append(thread)
        thread.start()

    def _accept_loop(self) -> None:
        assert self._listener is not None
        while True:
            try:
                connection, _ = self._listener.accept()
            except OSError:
                return
            with self._lock:
                self.connections.append(connection)
            self._spawn(self._serve, connection)

    def _serve(self, connection: socket.socket) -> None:
        with suppress(OSError), connection, connection.makefile("rb") as reader:
            hello = json.loads(reader.readline())
            with self._lock:
                self.hellos.append(hello)
            if self.refusal is not None:
                code, message = self.refusal
                self.send(connection, {"ok": False, "code": code, "message": message})
                return
            self.send(connection, {"ok": True, "pid": os.getpid(), "version": __version__, "session": "c1"})
            for line in reader:
                request = json.loads(line)
                with self._lock:
                    self.requests.append(request)
                reply = self.script(request)
                if reply is None:
                    continue
                for document in reply.lines:
                    self.send(connection, document)
                if reply.close:
                    connection.shutdown(socket.SHUT_RDWR)
                    return

    def send(self, connection: socket.socket, document: dict[str, Any]) -> None:
        with self._lock:
            connection.sendall(json.dumps(document).encode() + b"\n")

    def push_event(self, name: str) -> None:
        """Send an event on every open connection."""
        for connection in list(self.connections):
            with suppress(OSError):
                self.send(connection, {"event": name})

    def close(self) -> None:
        if self._listener is not None:
            with suppress(OSError):
                self._listener.shutdown(socket.SHUT_RDWR)
            self._listener.close()
        for connection in self.connections:
            with suppress(OSError):
                connection.shutdown(socket.SHUT_RDWR)
        for thread in self._threads:
            thread.join(timeout=5)
        with suppress(FileNotFoundError):
            self.path.unlink()


@contextmanager
def control_peer(
    path: Path, script: Script, *, refusal: tuple[str, str] | None = None
) -> Iterator[ControlPeer]:
    peer = ControlPeer(path, script, refusal=refusal)
    peer.start()
    try:
        yield peer
    finally:
        peer.close()
