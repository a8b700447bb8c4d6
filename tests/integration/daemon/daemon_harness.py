"""Speaking to a real ``mcpfleet daemon run`` process over its real socket, for the daemon tests.

``DaemonProcess.start`` runs this checkout's daemon (the ``mcpfleet`` console script) in the
runtime folder the test's environment names and waits until its socket accepts. ``connect``
opens a connection and does the hello; a ``Connection`` then carries JSON lines both ways:
MCP messages on a session (``initialize``, ``request``), requests and events on a control
connection (``control``). ``processes_of_home`` finds every process started under a test's
home folder (the daemon, its servers, their watchdog), which is how a test proves none is left.
``user_config`` and ``project_config`` write the ``mcpServers`` files a daemon's fleet reads.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.servers.fixtures import FAKE_SERVER

from mcpfleet import __version__
from mcpfleet.contract import wire
from mcpfleet.daemon_client import paths

MCPFLEET = Path(sys.executable).parent / "mcpfleet"
READY_TIMEOUT_S = 30.0
"""Generous: a daemon imports the SDK before its socket accepts, on a loaded machine."""
ANSWER_TIMEOUT_S = 60.0
"""The longest a test waits for one line from the daemon."""
WATCHDOG_MARK = "# mcpfleet watchdog"
"""How the watchdog's command line starts (``transport/watchdog.py``)."""
GONE_TIMEOUT_S = 30.0
"""The fleet's shutdown deadline is 5 s, the watchdog's grace 1 s; a loaded machine adds to both."""


def fake(name: str, *flags: str) -> dict[str, Any]:
    """The config entry of one ``tests/servers/fake_server.py``."""
    return {"command": sys.executable, "args": [str(FAKE_SERVER), "--name", name, *flags]}


def user_config(servers: Mapping[str, Mapping[str, Any]]) -> Path:
    """mcpfleet's user config (under the test's home) with these servers."""
    from mcpfleet.paths import user_config_file

    path = user_config_file()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"mcpServers": servers}))
    return path


def project_config(root: Path, servers: Mapping[str, Mapping[str, Any]]) -> Path:
    """mcpfleet's project config of ``root`` with these servers (approved by ``trust_project``),
    unconfined unless an entry says otherwise: they run from ``tests/servers`` and write into
    the test's folder, and the daemon's sandboxed servers have their own test
    (``test_daemon_sandbox.py``)."""
    from mcpfleet.paths import project_config_file

    path = project_config_file(root)
    path.parent.mkdir(parents=True, exist_ok=True)
    unconfined = {name: {"sandbox": False, **entry} for name, entry in servers.items()}
    path.write_text(json.dumps({"mcpServers": unconfined}))
    return path


def fleet_spec(cwd: Path, **options: Any) -> wire.FleetSpec:
    return wire.FleetSpec(cwd=str(cwd.resolve()), **options)


class DaemonGone(AssertionError):
    """The daemon closed the connection where a line was expected."""


@dataclass
class Connection:
    """One connection to the daemon after its hello: JSON lines both ways."""

    sock: socket.socket
    answer: dict[str, Any]
    _buffer: bytearray = field(default_factory=bytearray)
    _next_id: int = 100

    def close(self) -> None:
        self.sock.close()

    def send(self, message: Mapping[str, Any]) -> None:
        self.send_line(json.dumps(message).encode())

    def send_line(self, line: bytes) -> None:
        self.sock.sendall(line + b"\n")

    def receive(self, timeout_s: float = ANSWER_TIMEOUT_S) -> dict[str, Any]:
        line = self.receive_line(timeout_s)
        if line is None:
            raise DaemonGone("the daemon closed the connection")
        document: dict[str, Any] = json.loads(line)
        return document

    def receive_line(self, timeout_s: float = ANSWER_TIMEOUT_S) -> bytes | None:
        """The next line, or None at the end of the stream."""
        deadline = time.monotonic() + timeout_s
        while b"\n" not in self._buffer:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError(f"no line from the daemon within {timeout_s} s")
            self.sock.settimeout(remaining)
            try:
                chunk = self.sock.recv(65536)
            except ConnectionResetError:
                chunk = b""
            if not chunk:
                return None
            self._buffer += chunk
        line, _, rest = bytes(self._buffer).partition(b"\n")
        self._buffer = bytearray(rest)
        return line

    def at_end(self, timeout_s: float = ANSWER_TIMEOUT_S) -> bool:
        """True when the daemon closes the connection (within ``timeout_s``) with no line but
        notifications (a session's ``list_changed``) before its end."""
        while True:
            line = self.receive_line(timeout_s)
            if line is None:
                return True
            message = json.loads(line)
            if "method" not in message or "id" in message:
                return False

    # -- a session: MCP ---------------------------------------------------------------------

    def request(self, method: str, params: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """Send one JSON-RPC request and return its answer (notifications before it are skipped)."""
        self._next_id += 1
        request_id = self._next_id
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
        if params is not None:
            message["params"] = dict(params)
        self.send(message)
        while True:
            answer = self.receive()
            if answer.get("id") == request_id and "method" not in answer:
                return answer

    def initialize(self, client_name: str = "daemon-test") -> dict[str, Any]:
        answer = self.request(
            "initialize",
            {
                "protocolVersion": "2025-11-25",
                "capabilities": {},
                "clientInfo": {"name": client_name, "version": "1"},
            },
        )
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        return answer

    def tool_names(self) -> list[str]:
        answer = self.request("tools/list")
        return sorted(tool["name"] for tool in answer["result"]["tools"])

    def call_tool(self, name: str, arguments: Mapping[str, Any]) -> dict[str, Any]:
        return self.request("tools/call", {"name": name, "arguments": dict(arguments)})

    # -- a control connection ---------------------------------------------------------------

    def control(self, op: str, **params: Any) -> dict[str, Any]:
        """Send one control request and return its answer (events before it are skipped)."""
        self._next_id += 1
        request_id = self._next_id
        self.send({"id": request_id, "op": op, **params})
        while True:
            answer = self.receive()
            if answer.get("id") == request_id:
                return answer


def raw_connect(socket_file: Path | None = None) -> socket.socket:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.connect(str(socket_file or paths.socket_path()))
    except OSError:
        sock.close()
        raise
    return sock


def hello(
    kind: wire.ConnectionKind = "session",
    fleet: wire.FleetSpec | None = None,
    *,
    version: str = __version__,
    env: Mapping[str, str] | None = None,
    host: str | None = "pytest",
) -> bytes:
    return wire.Hello(
        kind=kind,
        version=version,
        fleet=fleet,
        env=wire.config_environment() if env is None else env,
        host=host,
        pid=os.getpid(),
    ).encode()


def connect(
    kind: wire.ConnectionKind = "session",
    fleet: wire.FleetSpec | None = None,
    *,
    version: str = __version__,
    env: Mapping[str, str] | None = None,
    host: str | None = "pytest",
    socket_file: Path | None = None,
    values: Mapping[str, str] | None = None,
) -> Connection:
    """A connection whose hello the daemon answered (``Connection.answer``, accepted or not).

    The variables the daemon asks for before its answer get their values from ``values``
    (this process's environment by default), as a shim's from its own."""
    sock = raw_connect(socket_file)
    connection = Connection(sock, {})
    sock.sendall(hello(kind, fleet, version=version, env=env, host=host))
    connection.answer = connection.receive()
    asked = wire.needed_names(connection.answer)
    if asked is not None:
        sock.sendall(wire.env_values(asked, os.environ if values is None else values))
        connection.answer = connection.receive()
    return connection


@contextmanager
def session(fleet: wire.FleetSpec, **options: Any) -> Iterator[Connection]:
    """A session the daemon accepted, initialized; closed on exit."""
    connection = connect("session", fleet, **options)
    try:
        assert connection.answer.get("ok") is True, connection.answer
        connection.initialize()
        yield connection
    finally:
        connection.close()


@contextmanager
def control() -> Iterator[Connection]:
    connection = connect("control")
    try:
        assert connection.answer.get("ok") is True, connection.answer
        yield connection
    finally:
        connection.close()


def ping() -> dict[str, Any] | None:
    """The running daemon's ``ping`` result, or None when none answers on the socket."""
    try:
        connection = connect("control")
    except (OSError, DaemonGone):
        return None
    try:
        answer = connection.control("ping")
    except (OSError, DaemonGone):
        return None
    finally:
        connection.close()
    result: dict[str, Any] | None = answer.get("result")
    return result


@dataclass
class DaemonProcess:
    """A ``mcpfleet daemon run`` started by the test."""

    process: subprocess.Popen[bytes]
    stderr_path: Path

    @classmethod
    def start(cls, *args: str, log_dir: Path, wait: bool = True) -> DaemonProcess:
        stderr_path = log_dir / f"daemon-stderr-{time.monotonic_ns()}.log"
        with stderr_path.open("wb") as stderr:
            process = subprocess.Popen(
                [str(MCPFLEET), "daemon", "run", *args],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=stderr,
                start_new_session=True,
            )
        daemon = cls(process, stderr_path)
        if wait:
            daemon.wait_ready()
        return daemon

    @property
    def pid(self) -> int:
        return self.process.pid

    @property
    def stderr(self) -> str:
        return self.stderr_path.read_text(errors="replace")

    def wait_ready(self) -> None:
        deadline = time.monotonic() + READY_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise AssertionError(f"the daemon exited with {self.process.returncode}: {self.stderr}")
            found = ping()
            if found is not None and found.get("pid") == self.pid:
                return
            time.sleep(0.05)
        raise AssertionError(f"the daemon did not accept within {READY_TIMEOUT_S} s: {self.stderr}")

    def wait_exit(self, timeout_s: float = GONE_TIMEOUT_S) -> int:
        return self.process.wait(timeout=timeout_s)

    def signal(self, signum: signal.Signals) -> None:
        os.kill(self.pid, signum)


def processes_of_home(home: Path) -> list[int]:
    """Every live process whose environment has ``HOME`` = ``home``: what a daemon started
    under the test's home, the daemon included. Not this process, nor its own watchdog (an
    in-process fleet's, which lives as long as this process does)."""
    mark = b"HOME=" + os.fsencode(home)
    found: list[int] = []
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == os.getpid():
            continue
        try:
            environ = Path("/proc", name, "environ").read_bytes()
            fields = Path("/proc", name, "stat").read_text().rpartition(")")[2].split()
        except OSError:
            continue
        state, parent = fields[0], int(fields[1])
        if state == "Z" or mark not in environ.split(b"\0"):
            continue
        if parent == os.getpid() and WATCHDOG_MARK in command_line(int(name)):
            continue
        found.append(int(name))
    return found


def command_line(pid: int) -> str:
    try:
        return Path("/proc", str(pid), "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return "(gone)"


def wait_until_gone(pids: Sequence[int], timeout_s: float = GONE_TIMEOUT_S) -> list[int]:
    """Wait for ``pids`` to end; the ones still alive after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    alive = list(pids)
    while alive and time.monotonic() < deadline:
        time.sleep(0.05)
        alive = [pid for pid in alive if _alive(pid)]
    return alive


def _alive(pid: int) -> bool:
    try:
        state = Path("/proc", str(pid), "stat").read_text().rpartition(")")[2].split()[0]
    except OSError:
        return False
    return state != "Z"


def server_processes(home: Path, name: str) -> list[int]:
    """The live ``fake_server.py --name <name>`` processes started under ``home``."""
    needle = f"{FAKE_SERVER} --name {name} "
    return [pid for pid in processes_of_home(home) if needle in command_line(pid) + " "]


def stop_daemon_of_runtime_dir(grace_s: float = 10.0) -> None:
    """SIGTERM the daemon answering on this runtime folder's socket; SIGKILL it after ``grace_s``."""
    found = ping()
    if found is None:
        return
    pid = int(found["pid"])
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    if wait_until_gone([pid], grace_s):
        os.kill(pid, signal.SIGKILL)
        wait_until_gone([pid], grace_s)


def signal_quietly(pids: Sequence[int], signum: signal.Signals) -> None:
    for pid in pids:
        with suppress(ProcessLookupError):
            os.kill(pid, signum)


def describe(pids: Sequence[int]) -> str:
    return "; ".join(f"{pid}: {command_line(pid)}" for pid in pids)
