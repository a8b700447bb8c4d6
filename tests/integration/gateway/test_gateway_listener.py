"""The listener of ``mcpfleet serve --http`` against other users and hostile clients, end to end.

A real gateway process in front of a real stdio backend (``fake_server.py``), on 127.0.0.1:

- another Unix user (the suite runs as root: a forked child that drops to ``nobody``) gets
  401 for everything, and cannot read the token where it is kept;
- no command line on the machine holds the token while the gateway, its backend and a host
  (an SDK client in its own process) run, and the backend's environment does not either;
- 50 slow-loris sockets are answered 408 and closed after the header deadline while a
  well-behaved client is served; a flood of connections, with the gateway's descriptor limit
  lowered below the flood, gets 503 past the caps, never exhausts the gateway's descriptors,
  and a well-behaved client from another address is served throughout.
"""

from __future__ import annotations

import contextlib
import encodings.idna  # noqa: F401  (loaded before the fork: nobody cannot read the stdlib here)
import http.client
import json
import os
import resource
import secrets
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import httpx2
import pytest
from tests.integration.gateway.hostile_clients import HostileClient
from tests.integration.gateway.test_gateway_http import (
    INITIALIZE,
    MCP_HEADERS,
    MCPFLEET,
    RunningGateway,
    backend_config,
    start_gateway,
)
from tests.integration.other_user import as_nobody

from mcpfleet.gateway.connections import HEADER_DEADLINE_S

SLOW_LORIS_SOCKETS = 50
FLOOD_DESCRIPTOR_LIMIT = 256
FLOOD_SOCKETS = 600
"""More connections than the gateway may open files: every one admitted would exhaust it."""
CALL_TIMEOUT_S = 30.0
NEEDS_ROOT = pytest.mark.skipif(os.geteuid() != 0, reason="needs root, to run a client as another user")


def served_by(gateway: RunningGateway, token: str) -> list[str]:
    """A well-behaved client's round: initialize, then call the backend's echo tool; its tools."""
    authorized = {**MCP_HEADERS, "Authorization": f"Bearer {token}"}
    with httpx2.Client(timeout=CALL_TIMEOUT_S) as client:
        opened = client.post(gateway.local_url(), json=INITIALIZE, headers=authorized)
        assert opened.status_code == 200, opened.text
        session = {**authorized, "Mcp-Session-Id": opened.headers["mcp-session-id"]}
        session["MCP-Protocol-Version"] = "2025-06-18"
        client.post(
            gateway.local_url(),
            json={"jsonrpc": "2.0", "method": "notifications/initialized"},
            headers=session,
        )
        listed = client.post(
            gateway.local_url(), json={"jsonrpc": "2.0", "id": 2, "method": "tools/list"}, headers=session
        )
        assert listed.status_code == 200, listed.text
    tools = _result(listed.text)["tools"]
    assert isinstance(tools, list)
    return [tool["name"] for tool in tools]


def _result(body: str) -> dict[str, object]:
    """The ``result`` of the one JSON-RPC answer in a JSON or SSE body."""
    for line in body.splitlines():
        text = line.removeprefix("data:").strip()
        if text.startswith("{"):
            message = json.loads(text)
            if "result" in message:
                result: dict[str, object] = message["result"]
                return result
    raise AssertionError(f"no result in {body!r}")


def _as_nobody(port: int, token_file: Path, gateway_pid: int) -> dict[str, object]:
    """What ``nobody`` gets from the gateway and the token's places, from a forked child."""

    def probe(outcome: dict[str, object]) -> None:
        for name, path in (
            ("token_file", token_file),
            ("gateway_environ", f"/proc/{gateway_pid}/environ"),
        ):
            try:
                with open(path, "rb") as handle:
                    outcome[name] = f"read {len(handle.read())} bytes"
            except OSError as error:
                outcome[name] = type(error).__name__
        statuses = []
        calls = [
            ({}, INITIALIZE),
            ({}, {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}),
            (
                {},
                {
                    "jsonrpc": "2.0",
                    "id": 3,
                    "method": "tools/call",
                    "params": {"name": "fake_echo", "arguments": {}},
                },
            ),
            ({"Authorization": "Bearer guessed"}, INITIALIZE),
        ]
        for extra, message in calls:
            connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
            connection.request("POST", "/mcp", json.dumps(message), {**MCP_HEADERS, **extra})
            answer = connection.getresponse()
            statuses.append(answer.status)
            answer.read()
            connection.close()
        outcome["statuses"] = statuses

    return as_nobody(probe)


@NEEDS_ROOT
def test_another_user_gets_401_from_a_loopback_gateway_and_can_call_nothing(tmp_path: Path) -> None:
    home = tmp_path / "home"
    gateway = start_gateway(tmp_path, home, "--http", "127.0.0.1:0", token=None)
    try:
        token_file = home / ".local" / "state" / "mcpfleet" / "gateway-token.json"
        outcome = _as_nobody(gateway.port, token_file, gateway.process.pid)
        assert outcome == {
            "token_file": "PermissionError",
            "gateway_environ": "PermissionError",
            "statuses": [401, 401, 401, 401],
        }
        # The owner, with the token from the file, is served.
        token = json.loads(token_file.read_text())["bearer_token"]
        assert "fake_echo" in served_by(gateway, token)
    finally:
        gateway.stop()


HOST_SCRIPT = textwrap.dedent(
    """
    import os, sys, anyio, httpx2
    from mcp.client import Client
    from mcp.client.streamable_http import streamable_http_client

    async def main():
        headers = {"Authorization": "Bearer " + os.environ["HOST_GATEWAY_TOKEN"]}
        http = httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30.0))
        async with Client(streamable_http_client(sys.argv[1], http_client=http), mode="legacy") as client:
            await client.call_tool("fake_echo", {"message": "host"})
            print("connected", flush=True)
            await anyio.to_thread.run_sync(sys.stdin.read)

    anyio.run(main)
    """
)


def _command_lines() -> dict[int, bytes]:
    lines: dict[int, bytes] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            with contextlib.suppress(OSError):
                lines[int(entry)] = Path(f"/proc/{entry}/cmdline").read_bytes()
    return lines


@pytest.mark.parametrize("given", ["variable", "file", "generated"])
def test_no_command_line_holds_the_token_while_a_gateway_and_its_host_run(tmp_path: Path, given: str) -> None:
    home = tmp_path / "home"
    token = secrets.token_urlsafe(24)
    serve_args = ["--http", "127.0.0.1:0"]
    if given == "file":
        (tmp_path / "token").write_text(token)
        serve_args += ["--auth-token-file", str(tmp_path / "token")]
    gateway = start_gateway(tmp_path, home, *serve_args, token=token if given == "variable" else None)
    host: subprocess.Popen[str] | None = None
    try:
        if given == "generated":
            token = json.loads((home / ".local" / "state" / "mcpfleet" / "gateway-token.json").read_text())[
                "bearer_token"
            ]
        host = subprocess.Popen(
            [sys.executable, "-c", HOST_SCRIPT, gateway.url],
            env={**os.environ, "HOST_GATEWAY_TOKEN": token},
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert host.stdout is not None and host.stdout.readline().strip() == "connected"
        command_lines = _command_lines()
        assert gateway.process.pid in command_lines and host.pid in command_lines
        assert gateway.backend_pid() in command_lines
        holding = [pid for pid, line in command_lines.items() if token.encode() in line]
        assert holding == [], f"the token is on the command line of {holding}"
        # Every backend inherits the gateway's environment: MCPFLEET_GATEWAY_TOKEN is not in it.
        assert token.encode() not in Path(f"/proc/{gateway.backend_pid()}/environ").read_bytes()
        assert not any(token in line for line in gateway.stderr_lines), "stderr names the token's place only"
    finally:
        if host is not None:
            host.communicate("", timeout=CALL_TIMEOUT_S)
        gateway.stop()


def test_slow_loris_sockets_get_408_after_the_header_deadline_while_a_client_is_served(
    tmp_path: Path,
) -> None:
    token = secrets.token_urlsafe(16)
    gateway = start_gateway(tmp_path, tmp_path / "home", "--http", "127.0.0.1:0", token=token)
    try:
        assert "fake_echo" in served_by(gateway, token)
        with HostileClient(
            gateway.port, SLOW_LORIS_SOCKETS, trickle_every_s=0.5, bound_s=HEADER_DEADLINE_S * 6
        ) as loris:
            # While every slow socket is still trickling its headers, others are served.
            for _ in range(3):
                assert "fake_echo" in served_by(gateway, token)
            assert loris.wait_until_all_closed(), f"{loris.held_open} slow sockets still held"
        assert not any(fate.refused for fate in loris.fates)
        assert loris.statuses() == [408] * SLOW_LORIS_SOCKETS
        # Each was held for the deadline, not cut early (the client measured it, after connecting).
        assert all(
            fate.closed_after_s is not None and fate.closed_after_s >= HEADER_DEADLINE_S * 0.9
            for fate in loris.fates
        ), sorted(fate.closed_after_s or 0 for fate in loris.fates)[:3]
        assert "fake_echo" in served_by(gateway, token)
    finally:
        gateway.stop()


def _open_descriptors(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def test_a_connection_flood_gets_503_past_the_caps_and_never_exhausts_descriptors(tmp_path: Path) -> None:
    """The gateway may open 256 files here; the flood brings 600 connections from one address,
    then 600 from twelve: past the per-peer cap, then the total one, each gets 503 at once."""
    token = secrets.token_urlsafe(16)
    limit = FLOOD_DESCRIPTOR_LIMIT
    gateway = start_gateway(
        tmp_path,
        tmp_path / "home",
        "--http",
        "127.0.0.1:0",
        token=token,
        preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (limit, limit)),
    )
    try:
        assert "fake_echo" in served_by(gateway, token)
        with HostileClient(
            gateway.port, FLOOD_SOCKETS, source="127.0.0.2", bound_s=HEADER_DEADLINE_S * 6
        ) as flood:
            peak = _open_descriptors(gateway.process.pid)
            # Another address is served while the flood holds its share.
            for _ in range(3):
                assert "fake_echo" in served_by(gateway, token)
            peak = max(peak, _open_descriptors(gateway.process.pid))
            # Every flood socket is answered and closed: 503 at once past the cap, 408 at the
            # header deadline for those admitted (they never send a request).
            assert flood.wait_until_all_closed(), f"{flood.held_open} flood sockets still held"
        answered = [status for status in flood.statuses() if status is not None]
        assert 503 in answered and 408 in answered, sorted(set(answered))
        assert set(answered) <= {408, 503}
        assert len([s for s in answered if s == 408]) < limit // 2, "one peer held half the gateway"

        floods = [
            HostileClient(gateway.port, FLOOD_SOCKETS // 12, source=f"127.0.0.{10 + index}", bound_s=60)
            for index in range(12)
        ]
        with contextlib.ExitStack() as holding:
            for each in floods:
                holding.enter_context(each)
            peak = max(peak, _open_descriptors(gateway.process.pid))
            # The total cap is reached: a newcomer is answered at once, served or told 503.
            with httpx2.Client(timeout=CALL_TIMEOUT_S) as client:
                answer = client.post(
                    gateway.local_url(),
                    json=INITIALIZE,
                    headers={**MCP_HEADERS, "Authorization": f"Bearer {token}"},
                )
            assert answer.status_code in (200, 503)
            assert 503 in [status for each in floods for status in each.statuses()]
        # The flood is gone: the gateway serves as before.
        assert "fake_echo" in served_by(gateway, token)
        assert peak < limit, f"{peak} descriptors open, the limit is {limit}"
        assert gateway.process.poll() is None
        assert not [
            line for line in gateway.stderr_lines if "Too many open files" in line or "out of system" in line
        ], gateway.stderr_lines
    finally:
        gateway.stop()


def test_a_stdio_gateway_keeps_the_http_token_variable_from_its_backends(tmp_path: Path) -> None:
    """A user who exports MCPFLEET_GATEWAY_TOKEN for an HTTP gateway starts stdio ones too."""
    token = secrets.token_urlsafe(16)
    config, pid_file = backend_config(tmp_path)
    home = tmp_path / "home"
    environment = {**os.environ, "HOME": str(home), "MCPFLEET_GATEWAY_TOKEN": token}
    gateway = subprocess.Popen(
        [str(MCPFLEET), "--config", str(config), "serve", "--no-daemon"],
        cwd=tmp_path,
        env=environment,
        stdin=subprocess.PIPE,  # held open: the gateway serves until it ends
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + CALL_TIMEOUT_S
        while not (pid_file.exists() and pid_file.read_text().strip()):
            assert time.monotonic() < deadline and gateway.poll() is None, "the backend never started"
            time.sleep(0.05)
        backend = int(pid_file.read_text().split()[0])
        assert token.encode() not in Path(f"/proc/{backend}/environ").read_bytes()
    finally:
        gateway.communicate(timeout=CALL_TIMEOUT_S)
