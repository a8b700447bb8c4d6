"""What the shim's tests run it against: a scripted daemon, and a host on the shim's stdio.

``ScriptedDaemon`` is a real Unix socket server on the daemon's socket path, in a thread of the
test: it reads the hello, answers it (or refuses it, as told), and then answers a handful of
MCP requests the way the daemon's gateway would, recording every line it receives. It can drop
its sessions (what a daemon that dies does to its shims) and keep listening, so the shim's
reconnection finds it again as "the new daemon". The shim is what is under test; this peer
only speaks the wire.

``ShimHost`` runs the real console script (``mcpfleet serve``) as a host does, and reads its
stdout line by line with bounded waits.
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mcpfleet.daemon_client.shim import REPLAY_ID_PREFIX

MCPFLEET = Path(sys.executable).parent / "mcpfleet"
WAIT_S = 20.0
"""Bound of every wait for a line or a state: generous, the machine is shared."""
CAPABILITIES = {
    "tools": {"listChanged": True},
    "resources": {"listChanged": True, "subscribe": True},
    "prompts": {"listChanged": True},
}
ECHO_TOOL = {"name": "scripted_echo", "inputSchema": {"type": "object"}}


@dataclass
class ScriptedSession:
    """One accepted connection: the hello it opened with and every line after it."""

    connection: socket.socket
    hello: dict[str, Any]
    index: int
    lines: list[dict[str, Any]] = field(default_factory=list)
    requests_sent: int = 0

    def send(self, document: dict[str, Any]) -> None:
        self.connection.sendall(json.dumps(document).encode() + b"\n")


class ScriptedDaemon:
    """A stand-in daemon on ``socket_path`` (see the module)."""

    def __init__(
        self,
        socket_path: Path,
        *,
        refusals: tuple[str, ...] = (),
        capabilities: dict[str, Any] | None = None,
        silent_initialize: int = 0,
        failed_replays: int = 0,
        answer_delay_s: float = 0.0,
        needs: tuple[str, ...] = (),
    ) -> None:
        self.socket_path = socket_path
        self.needs = needs
        """The variables asked for before the answer (``wire.needs``), as the daemon asks for
        those its configs reference; the shim's answers go to ``values``."""
        self.values: list[dict[str, Any]] = []
        self.answer_delay_s = answer_delay_s
        """How long the hello's answer waits (a daemon whose session waits for every server)."""
        self.silent_initialize = silent_initialize
        """How many sessions, the first ones, never answer ``initialize``."""
        self.failed_replays = failed_replays
        """How many ``initialize`` requests the shim replays under its own id, the first ones,
        are answered with an error."""
        self.refusals = list(refusals)
        self.capabilities = CAPABILITIES if capabilities is None else capabilities
        self.sessions: list[ScriptedSession] = []
        self.hellos: list[dict[str, Any]] = []
        self.probes = 0
        """Control hellos: the shim's liveness probes (answered, then closed)."""
        self.timeline: list[str] = []
        """``hello`` when a hello arrives, ``end N`` when session N (from 0) reads its end."""
        self.changed = threading.Condition()
        self._listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._threads: list[threading.Thread] = []
        self._accepted = 0
        self._closed = False

    def __enter__(self) -> ScriptedDaemon:
        self.socket_path.parent.mkdir(mode=0o700, exist_ok=True)
        self._listener.bind(os.fspath(self.socket_path))
        self._listener.listen(16)
        self._start(self._accept)
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._closed = True
        with contextlib.suppress(OSError):
            self._listener.shutdown(socket.SHUT_RDWR)
        self._listener.close()
        self.drop_sessions()
        for thread in self._threads:
            thread.join(WAIT_S)
        with contextlib.suppress(FileNotFoundError):
            self.socket_path.unlink()

    def drop_sessions(self) -> None:
        """Close every session's socket, as a daemon that dies does."""
        for session in list(self.sessions):
            with contextlib.suppress(OSError):
                session.connection.shutdown(socket.SHUT_RDWR)
            session.connection.close()

    def wait_until(self, predicate: Any, what: str) -> None:
        with self.changed:
            if not self.changed.wait_for(predicate, WAIT_S):
                raise AssertionError(f"the scripted daemon never saw {what}")

    def wait_for_lines(self, session: ScriptedSession, count: int) -> None:
        self.wait_until(lambda: len(session.lines) >= count, f"{count} lines in session {session.index + 1}")

    def session(self, index: int) -> ScriptedSession:
        self.wait_until(lambda: len(self.sessions) > index, f"session {index + 1}")
        return self.sessions[index]

    def _start(self, target: Any, *args: Any) -> None:
        thread = threading.Thread(target=target, args=args, daemon=True)
        self._threads.append(thread)
        thread.start()

    def _accept(self) -> None:
        while not self._closed:
            try:
                connection, _ = self._listener.accept()
            except OSError:
                return
            self._start(self._serve, connection)

    def _serve(self, connection: socket.socket) -> None:
        reader = connection.makefile("rb")
        hello = json.loads(reader.readline())
        if hello.get("kind") == "control":
            # A shim asking whether the daemon runs (its liveness probe): answered, not a session.
            with self.changed:
                self.probes += 1
                self.changed.notify_all()
            with contextlib.suppress(OSError):
                connection.sendall(
                    json.dumps(
                        {"ok": True, "pid": 1000, "version": hello["version"], "session": "c0"}
                    ).encode()
                    + b"\n"
                )
            connection.close()
            return
        with self.changed:
            self.hellos.append(hello)
            self.timeline.append("hello")
            self.changed.notify_all()
        if self.needs:
            connection.sendall(json.dumps({"need": list(self.needs)}).encode() + b"\n")
            self.values.append(json.loads(reader.readline()))
        if self.refusals:
            code = self.refusals.pop(0)
            connection.sendall(
                json.dumps({"ok": False, "code": code, "message": f"scripted {code}"}).encode() + b"\n"
            )
            connection.close()
            return
        with self.changed:
            session = ScriptedSession(connection, hello, index=self._accepted)
            self._accepted += 1
        pid = 1001 + session.index
        time.sleep(self.answer_delay_s)
        try:
            session.send({"ok": True, "pid": pid, "version": hello["version"], "session": f"s{pid}"})
        except OSError:
            return
        with self.changed:
            self.sessions.append(session)
            self.changed.notify_all()
        try:
            for raw in reader:
                message = json.loads(raw)
                with self.changed:
                    session.lines.append(message)
                    self.changed.notify_all()
                self._answer(session, message)
        except (OSError, ValueError):
            return
        with self.changed:
            self.timeline.append(f"end {session.index}")
            self.changed.notify_all()

    def _answer(self, session: ScriptedSession, message: dict[str, Any]) -> None:
        method, request_id = message.get("method"), message.get("id")
        if method is None or request_id is None:
            return
        result: dict[str, Any]
        if method == "initialize":
            if session.index < self.silent_initialize:
                return
            if str(request_id).startswith(REPLAY_ID_PREFIX) and self.failed_replays > 0:
                self.failed_replays -= 1
                session.send({"jsonrpc": "2.0", "id": request_id, "error": {"code": -32603, "message": "no"}})
                return
            result = {
                "protocolVersion": message["params"]["protocolVersion"],
                "capabilities": self.capabilities,
                "serverInfo": {"name": "scripted-daemon", "version": "1"},
            }
        elif method == "tools/list":
            result = {"tools": [ECHO_TOOL]}
        elif method == "tools/call":
            arguments = message["params"].get("arguments", {})
            action = arguments.get("action")
            if action == "hang":
                return  # in flight until the daemon goes
            if action == "ask":
                session.requests_sent += 1
                session.send({"jsonrpc": "2.0", "id": session.requests_sent, "method": "roots/list"})
                return
            if action == "cut":
                # Half an answer, then the daemon is gone.
                session.connection.sendall(
                    b'{"jsonrpc": "2.0", "id": ' + json.dumps(request_id).encode() + b", "
                )
                session.connection.shutdown(socket.SHUT_RDWR)
                return
            text = "x" * arguments["size"] if action == "big" else str(arguments.get("text", ""))
            result = {"content": [{"type": "text", "text": text}]}
        else:
            result = {}
        session.send({"jsonrpc": "2.0", "id": request_id, "result": result})


class ShimHost:
    """``mcpfleet serve`` run as a host runs it: its stdin and stdout are the session."""

    def __init__(
        self,
        *arguments: str,
        env: dict[str, str] | None = None,
        cwd: Path | None = None,
        wrapper: tuple[str, ...] = (),
    ) -> None:
        """``wrapper``: a command that runs ``mcpfleet`` with its arguments appended (a
        private mount namespace, say)."""
        self.process = subprocess.Popen(
            [*wrapper, str(MCPFLEET), *arguments],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
            cwd=cwd,
        )
        self._lines: queue.Queue[bytes] = queue.Queue()
        self._stderr: list[bytes] = []
        threading.Thread(target=self._read_stdout, daemon=True).start()
        self._stderr_reader = threading.Thread(target=self._read_stderr, daemon=True)
        self._stderr_reader.start()
        self._next_id = 0

    def __enter__(self) -> ShimHost:
        return self

    def __exit__(self, *exc_info: object) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.wait_exit()

    @property
    def stderr(self) -> str:
        return b"".join(self._stderr).decode(errors="replace")

    def send(self, document: dict[str, Any]) -> None:
        self.send_raw(json.dumps(document).encode() + b"\n")

    def send_raw(self, data: bytes) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(data)
        self.process.stdin.flush()

    def close_stdin(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.close()

    def request(self, method: str, params: dict[str, Any] | None = None) -> int:
        """Send a request; its id."""
        self._next_id += 1
        self.send({"jsonrpc": "2.0", "id": self._next_id, "method": method, "params": params or {}})
        return self._next_id

    def receive_line(self, timeout_s: float = WAIT_S) -> bytes:
        try:
            return self._lines.get(timeout=timeout_s)
        except queue.Empty:
            raise AssertionError(
                f"no line from the shim within {timeout_s} s; stderr:\n{self.stderr}"
            ) from None

    def receive(self, timeout_s: float = WAIT_S) -> dict[str, Any]:
        document: dict[str, Any] = json.loads(self.receive_line(timeout_s))
        return document

    def answer_skipping_notifications(self, request_id: int, timeout_s: float = WAIT_S) -> dict[str, Any]:
        """The answer to ``request_id``; notifications before it (``list_changed``) are skipped."""
        while True:
            document = self.receive(timeout_s)
            if "method" not in document:
                assert document.get("id") == request_id, document
                return document

    def answer(self, request_id: int) -> dict[str, Any]:
        """The next line, which must be the answer to ``request_id``."""
        document = self.receive()
        assert document.get("id") == request_id, document
        return document

    def call(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        return self.answer(self.request(method, params))

    def initialize(self) -> dict[str, Any]:
        answer = self.call(
            "initialize",
            {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "test-host", "version": "1"},
            },
        )
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        return answer

    def wait_exit(self) -> int:
        """The exit code, once the shim has ended and all it wrote on stderr is read."""
        code = self.process.wait(WAIT_S)
        self._stderr_reader.join(WAIT_S)
        return code

    def _read_stdout(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self._lines.put(line)

    def _read_stderr(self) -> None:
        assert self.process.stderr is not None
        for line in self.process.stderr:
            self._stderr.append(line)
