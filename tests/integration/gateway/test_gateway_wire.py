"""``mcpfleet serve`` at the byte level: what a host that writes garbage, huge lines or unknown
methods gets back, and that ending the session (stdin EOF, SIGTERM, SIGINT) leaves no
process behind."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any

import pytest
from tests.integration.gateway.gateway_harness import fake, serve_command, write_config

EXIT_BOUND_S = 30.0
"""Generous: the fleet's own shutdown deadline is 5 s; a loaded machine may add to it."""


class WireSession:
    """A gateway process spoken to line by line."""

    def __init__(self, process: subprocess.Popen[bytes]) -> None:
        self.process = process
        assert process.stdin is not None and process.stdout is not None
        self.stdin: IO[bytes] = process.stdin
        self.stdout: IO[bytes] = process.stdout

    def send_line(self, line: bytes) -> None:
        self.stdin.write(line + b"\n")
        self.stdin.flush()

    def send(self, message: dict[str, Any]) -> None:
        self.send_line(json.dumps(message).encode())

    def receive(self) -> dict[str, Any]:
        line = self.stdout.readline()
        assert line, "the gateway closed stdout"
        answer: dict[str, Any] = json.loads(line)
        return answer

    def request(self, request_id: int, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        self.send(
            {"jsonrpc": "2.0", "id": request_id, "method": method, **({"params": params} if params else {})}
        )
        while True:
            answer = self.receive()
            if answer.get("id") == request_id:
                return answer

    def initialize(self) -> dict[str, Any]:
        answer = self.request(
            1,
            "initialize",
            {
                "protocolVersion": "2025-11-25",
                "capabilities": {},
                "clientInfo": {"name": "wire", "version": "1"},
            },
        )
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        return answer


@contextmanager
def wire_gateway(home: Path, servers: dict[str, dict[str, Any]], *args: str) -> Iterator[WireSession]:
    config = write_config(home, servers)
    process = subprocess.Popen(
        serve_command(config, *args, global_args=("--startup-timeout", "0")),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        cwd=home,
    )
    try:
        yield WireSession(process)
    finally:
        if process.poll() is None:
            process.kill()
        process.wait(timeout=EXIT_BOUND_S)
        for stream in (process.stdin, process.stdout):
            if stream is not None:
                stream.close()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie is gone for every purpose but the process table: its parent has exited.
    try:
        return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
    except (FileNotFoundError, IndexError):
        return False


def _wait_gone(pids: list[int]) -> list[int]:
    deadline = time.monotonic() + EXIT_BOUND_S
    while time.monotonic() < deadline:
        left = [pid for pid in pids if _alive(pid)]
        if not left:
            return []
        time.sleep(0.05)
    return [pid for pid in pids if _alive(pid)]


def test_garbage_huge_lines_and_unknown_methods_get_jsonrpc_errors(isolated_home: Path) -> None:
    with wire_gateway(isolated_home, {"alpha": fake("alpha", "--tool", "echo")}) as wire:
        wire.send_line(b"{this is not json")
        assert wire.receive() == {
            "jsonrpc": "2.0",
            "id": None,
            "error": {"code": -32700, "message": "Parse error: the line is not JSON"},
        }
        wire.send_line(b'["a", "batch"]')
        assert wire.receive()["error"]["code"] == -32600
        wire.send_line(b'{"jsonrpc": "2.0", "id": 7, "method": 12}')
        answer = wire.receive()
        assert answer["id"] == 7 and answer["error"]["code"] == -32600

        huge = (
            b'{"jsonrpc": "2.0", "id": 8, "method": "tools/list", "params": {"pad": "'
            + b"x" * (17 << 20)
            + b'"}}'
        )
        wire.send_line(huge)
        answer = wire.receive()
        assert answer["id"] == 8 and answer["error"]["code"] == -32600
        assert "16 MiB" in answer["error"]["message"]

        # The session is intact after all of that.
        assert wire.initialize()["result"]["serverInfo"]["name"] == "mcpfleet"
        unknown = wire.request(2, "tools/frobnicate")
        assert unknown["error"]["code"] == -32601
        no_tool = wire.request(3, "tools/call", {"name": "nobody_home", "arguments": {}})
        assert no_tool["error"]["code"] == -32602 and "nobody_home" in no_tool["error"]["message"]
        assert wire.request(4, "ping") == {"jsonrpc": "2.0", "id": 4, "result": {}}
        echoed = wire.request(5, "tools/call", {"name": "alpha_echo", "arguments": {"message": "ok"}})
        assert echoed["result"]["structuredContent"] == {"message": "ok"}


@pytest.mark.parametrize("ending", ["stdin EOF", "SIGTERM", "SIGINT"])
def test_ending_the_session_closes_every_backend(isolated_home: Path, ending: str) -> None:
    pid_files = [isolated_home / f"{name}.pids" for name in ("one", "two")]
    servers = {
        "one": fake("one", "--tool", "echo", "--pid-file", str(pid_files[0]), "--spawn-grandchild"),
        # Ignores SIGTERM: only the kill ladder's SIGKILL ends it, still within the deadline.
        "two": fake("two", "--tool", "echo", "--pid-file", str(pid_files[1]), "--ignore-sigterm"),
    }
    with wire_gateway(isolated_home, servers) as wire:
        wire.initialize()
        listed = wire.request(2, "tools/list")
        assert {tool["name"] for tool in listed["result"]["tools"]} == {"one_echo", "two_echo"}
        backend_pids = [int(pid) for path in pid_files for pid in path.read_text().split()]
        assert len(backend_pids) == 3

        started = time.monotonic()
        if ending == "stdin EOF":
            wire.stdin.close()
        else:
            wire.process.send_signal(signal.SIGTERM if ending == "SIGTERM" else signal.SIGINT)
        returncode = wire.process.wait(timeout=EXIT_BOUND_S)
        took_s = time.monotonic() - started

    assert returncode == 0
    assert took_s < EXIT_BOUND_S
    assert _wait_gone(backend_pids) == []
