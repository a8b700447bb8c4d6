"""A throwaway redis-server on loopback, from the distribution's package (``make redis-server``).

The team gateway's shared state (``team.shared``) is tested against a real server. A test run
starts at most one shared server and every pytest-xdist worker uses it, as with PostgreSQL
(``tests/postgres.py``): the first worker that needs it starts it under a lock file in the run's
shared temporary folder and leaves its address there; the process that ran the session stops it
(``stop_shared_server``, from ``tests/conftest.py``'s ``pytest_sessionfinish``). Each test keeps
its keys under a namespace of its own. A test that stops Redis on purpose (the cluster's) starts
a server of its own with ``start_redis`` and restarts it on the same port (``RedisServer.start``).

The server listens on 127.0.0.1 only, on a free port, with no Unix socket, keeps nothing on disk,
and asks for a password (``requirepass``): the tests' URLs carry a real one, which no error
message may show. Standard library only, so the bench can start one too.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from tests import shared_servers

START_ATTEMPTS = 3
"""Ports are picked free and then bound by the server: another process may take one meanwhile."""
READY_TIMEOUT_S = 30.0
"""How long a starting server gets to answer PING (a loaded machine)."""
SHARED_FOLDER_NAME = "redis"
INSTALL_HINT = "Redis's server is not installed: run `make redis-server` as root (Debian's package)"


class RedisUnavailable(RuntimeError):
    """No server could be started here; the message says why and what to do."""


@dataclass
class RedisServer:
    """A server: where it listens, its password, and the process serving now (0: stopped)."""

    root: str
    port: int
    password: str
    pid: int = 0

    @property
    def url(self) -> str:
        return f"redis://:{self.password}@127.0.0.1:{self.port}/0"

    def start(self) -> None:
        """Start it (again) on its port; ``RedisUnavailable`` if it does not answer."""
        binary = shutil.which("redis-server", path=f"{os.environ.get('PATH', '')}:/usr/sbin:/usr/bin")
        if binary is None:
            raise RedisUnavailable(INSTALL_HINT)
        arguments = {
            "bind": "127.0.0.1",
            "port": str(self.port),
            "unixsocket": "",
            "save": "",
            "appendonly": "no",
            "requirepass": self.password,
            "dir": self.root,
            "logfile": str(Path(self.root) / "log"),
            "daemonize": "no",
            "protected-mode": "yes",
        }
        command = [binary, *(part for name, value in arguments.items() for part in (f"--{name}", value))]
        process = subprocess.Popen(
            command,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        self.pid = process.pid
        deadline = time.monotonic() + READY_TIMEOUT_S
        while time.monotonic() < deadline:
            if process.poll() is not None:
                break
            if self.answers():
                return
            time.sleep(0.05)
        self.stop(remove=False)
        raise RedisUnavailable(f"redis-server did not start on port {self.port}; its log ends:\n{self.log()}")

    def answers(self) -> bool:
        """Whether it answers an authenticated PING now (RESP over a plain socket)."""
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=2) as connection:
                password = self.password.encode()
                connection.sendall(
                    b"*2\r\n$4\r\nAUTH\r\n$%d\r\n%s\r\n*1\r\n$4\r\nPING\r\n" % (len(password), password)
                )
                answer = b""
                while b"PONG" not in answer and len(answer) < 512:
                    chunk = connection.recv(512)
                    if not chunk:
                        break
                    answer += chunk
                return b"PONG" in answer
        except OSError:
            return False

    def stop(self, *, remove: bool = True) -> None:
        """Stop it now (SIGKILL: nothing of a test's data is kept), and remove its folder."""
        if self.pid:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, signal.SIGKILL)
            with contextlib.suppress(ChildProcessError):
                os.waitpid(self.pid, 0)
            self.pid = 0
        if remove:
            shutil.rmtree(self.root, ignore_errors=True)

    def log(self) -> str:
        path = Path(self.root) / "log"
        return path.read_text(errors="replace")[-2000:] if path.exists() else ""


def start_redis() -> RedisServer:
    """A new server in a folder of its own, on a free loopback port."""
    if shutil.which("redis-server", path=f"{os.environ.get('PATH', '')}:/usr/sbin:/usr/bin") is None:
        raise RedisUnavailable(INSTALL_HINT)
    root = tempfile.mkdtemp(prefix="mcpfleet-redis-")
    password = secrets.token_urlsafe(18)
    failure: RedisUnavailable | None = None
    for _ in range(START_ATTEMPTS):
        server = RedisServer(root=root, port=_free_port(), password=password)
        try:
            server.start()
            return server
        except RedisUnavailable as error:
            failure = error
    shutil.rmtree(root, ignore_errors=True)
    assert failure is not None
    raise failure


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def shared_server(shared_root: Path) -> RedisServer:
    """The run's server: started by the first caller (of any worker), read by the others."""
    return shared_servers.shared_server(shared_root / SHARED_FOLDER_NAME, start_redis, RedisServer)


def stop_shared_server(shared_root: Path) -> None:
    """Stop the run's server if a worker started one (called once, when the whole run ends)."""
    shared_servers.stop_shared_server(shared_root / SHARED_FOLDER_NAME, RedisServer)


def namespace(test_name: str) -> str:
    """A key namespace of this test's own: a random prefix under the test's name."""
    return f"test:{test_name[:40]}:{secrets.token_hex(4)}"
