"""Fixtures of the OAuth tests: the OAuth-protected test server as a real subprocess."""

from __future__ import annotations

import json
import selectors
import subprocess
import time
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from tests.conftest import PYTHON, SERVERS_DIR

READY_TIMEOUT_S = 20.0


@dataclass
class RunningOAuthServer:
    process: subprocess.Popen[str]
    port: int
    transport: str

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def mcp_url(self) -> str:
        return f"{self.base_url}/mcp" if self.transport == "streamable-http" else f"{self.base_url}/sse"

    def stats(self) -> dict[str, int]:
        with urllib.request.urlopen(f"{self.base_url}/test/stats", timeout=5) as response:
            stats: dict[str, int] = json.load(response)
        return stats

    def refresh_token_is_live(self, refresh_token: str) -> bool:
        query = urllib.parse.urlencode({"refresh_token": refresh_token})
        with urllib.request.urlopen(f"{self.base_url}/test/token-works?{query}", timeout=5) as response:
            live: bool = json.load(response)["live"]
        return live

    def expire_access_tokens(self) -> None:
        request = urllib.request.Request(f"{self.base_url}/test/expire-access-tokens", method="POST")
        with urllib.request.urlopen(request, timeout=5):
            pass

    def revoke_access_tokens(self) -> None:
        request = urllib.request.Request(f"{self.base_url}/test/revoke-access-tokens", method="POST")
        with urllib.request.urlopen(request, timeout=5):
            pass


def _start(access_token_ttl: int, transport: str) -> RunningOAuthServer:
    process = subprocess.Popen(
        [
            PYTHON,
            str(SERVERS_DIR / "oauth_server.py"),
            *("--access-token-ttl", str(access_token_ttl)),
            *("--transport", transport),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    assert process.stdout is not None
    selector = selectors.DefaultSelector()
    selector.register(process.stdout, selectors.EVENT_READ)
    deadline = time.monotonic() + READY_TIMEOUT_S
    line = ""
    while time.monotonic() < deadline and not line:
        if selector.select(timeout=deadline - time.monotonic()):
            line = process.stdout.readline()
            if not line:
                break
    selector.close()
    if not line.startswith("READY "):
        process.kill()
        process.wait()
        raise RuntimeError(f"the OAuth test server did not start (got {line!r})")
    return RunningOAuthServer(process=process, port=int(line.split()[1]), transport=transport)


def _stop(server: RunningOAuthServer) -> None:
    server.process.terminate()
    try:
        server.process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        server.process.kill()
        server.process.wait()
    if server.process.stdout is not None:
        server.process.stdout.close()


@pytest.fixture
def start_oauth_server() -> Iterator[Callable[..., RunningOAuthServer]]:
    """Start OAuth test servers (``access_token_ttl=``, ``transport=``); all stopped at the end."""
    started: list[RunningOAuthServer] = []

    def start(access_token_ttl: int = 3600, transport: str = "streamable-http") -> RunningOAuthServer:
        server = _start(access_token_ttl, transport)
        started.append(server)
        return server

    yield start
    for server in started:
        _stop(server)


@pytest.fixture
def oauth_server(start_oauth_server: Callable[..., Any]) -> RunningOAuthServer:
    server: RunningOAuthServer = start_oauth_server()
    return server
