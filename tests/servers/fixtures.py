"""Helpers and pytest fixtures to run the test servers (importable from any test folder).

``fake_server_config(name, *flags)`` builds a stdio ``ServerConfig`` for ``fake_server.py``.
``start_http_server(*flags)`` runs ``http_server.py`` (or, with ``script=``, another server that
speaks its ``--transport``/``READY <port>`` protocol, such as ``conformance_backend.py``) and
returns a handle with its URL; the
``http_server_factory`` fixture does that and kills every started server after the test.
Use it from a conftest with ``from tests.servers.fixtures import http_server_factory  # noqa: F401``.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from mcpfleet.config.model import ServerConfig

SERVERS_DIR = Path(__file__).parent
FAKE_SERVER = SERVERS_DIR / "fake_server.py"
HTTP_SERVER = SERVERS_DIR / "http_server.py"
CONFORMANCE_BACKEND = SERVERS_DIR / "conformance_backend.py"
READS_TEST_SERVERS = {"readOnlyPaths": [str(SERVERS_DIR)]}
"""The ``"sandbox"`` of a project entry that runs one of these servers: project servers run in
a sandbox (docs/sandbox.md), and this folder is outside every test's project."""
READY_TIMEOUT_S = 20.0

if TYPE_CHECKING:
    from mcp_types import CallToolResult, InputRequiredResult


def fake_server_config(name: str, *flags: str, **fields: object) -> ServerConfig:
    """A stdio config that runs ``fake_server.py --name <name> <flags>`` with this interpreter."""
    return ServerConfig(
        name=name,
        transport="stdio",
        command=sys.executable,
        args=(str(FAKE_SERVER), "--name", name, *flags),
        **fields,  # type: ignore[arg-type]
    )


def completed(result: CallToolResult | InputRequiredResult) -> CallToolResult:
    """A tool call's final result (the test servers never ask for input in the middle of a call)."""
    from mcp_types import CallToolResult

    assert isinstance(result, CallToolResult), f"the call asked for input: {result!r}"
    return result


def first_text(result: Any) -> str:
    """The text of a tool result's first content block."""
    text = getattr(result.content[0], "text", None)
    assert isinstance(text, str), f"first content block has no text: {result.content[0]!r}"
    return text


@dataclass
class HttpServer:
    process: subprocess.Popen[str]
    port: int
    transport: str

    @property
    def url(self) -> str:
        path = "/sse" if self.transport == "sse" else "/mcp"
        return f"http://127.0.0.1:{self.port}{path}"

    def stop(self) -> None:
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait(timeout=10)
        if self.process.stdout is not None:
            self.process.stdout.close()


def start_http_server(
    *flags: str, transport: str = "streamable-http", script: Path = HTTP_SERVER
) -> HttpServer:
    """Start ``script`` (``http_server.py`` by default) on a free port and wait until it listens."""
    process = subprocess.Popen(
        [sys.executable, str(script), "--transport", transport, *flags],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        start_new_session=True,
    )
    assert process.stdout is not None
    deadline = time.monotonic() + READY_TIMEOUT_S
    line = process.stdout.readline()
    if not line.startswith("READY "):
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()
        raise RuntimeError(f"{script.name} did not start (first line {line!r})")
    server = HttpServer(process, int(line.split()[1]), transport)
    _wait_for_port(server.port, deadline)
    return server


def _wait_for_port(port: int, deadline: float) -> None:
    import socket

    while True:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


@pytest.fixture
def http_server_factory() -> Iterator[Callable[..., HttpServer]]:
    """``start(*flags, transport=...)`` → a running ``HttpServer``; all are killed after the test."""
    started: list[HttpServer] = []

    def start(*flags: str, transport: str = "streamable-http") -> HttpServer:
        server = start_http_server(*flags, transport=transport)
        started.append(server)
        return server

    yield start
    for server in started:
        server.stop()
