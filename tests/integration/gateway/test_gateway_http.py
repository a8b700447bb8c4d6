"""``mcpfleet serve --http`` end to end: the command run as a subprocess in front of a real
stdio backend (``fake_server.py``), reached by the SDK's ``Client`` over streamable HTTP in
both protocol eras, and by raw HTTP where a status code is the point.

One gateway (loopback, ``--auth-token-file``) serves the tests that only talk to it; the tests
about starting and stopping run their own, with their token in ``MCPFLEET_GATEWAY_TOKEN``.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import stat
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import httpx2
import mcp_types
import pytest
from mcp.client import Client
from mcp.client.streamable_http import streamable_http_client
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS
from tests.integration.gateway.test_http_serving import ERAS, MODERN, http_client, sdk_client, text_of
from tests.servers.fixtures import FAKE_SERVER

pytestmark = pytest.mark.anyio

MCPFLEET = Path(sys.executable).parent / "mcpfleet"
TOKEN = "test-token-0123456789"
AUTHORIZED = {"Authorization": f"Bearer {TOKEN}"}
START_TIMEOUT_S = 60.0
EXIT_TIMEOUT_S = 30.0
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "t", "version": "1"},
    },
}
MCP_HEADERS = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}


@dataclass
class RunningGateway:
    process: subprocess.Popen[str]
    backend_pid_file: Path
    stderr_lines: list[str] = field(default_factory=list)
    url: str = ""

    @property
    def port(self) -> int:
        return int(self.url.rsplit(":", 1)[1].split("/")[0])

    def local_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/mcp"

    def backend_pid(self) -> int:
        return int(self.backend_pid_file.read_text().split()[0])

    def stop(self, signal_number: int = signal.SIGTERM) -> int:
        if self.process.poll() is None:
            self.process.send_signal(signal_number)
        return self.process.wait(timeout=EXIT_TIMEOUT_S)


def backend_config(folder: Path, *backend_flags: str) -> tuple[Path, Path]:
    """An mcpServers file with one stdio backend, ``fake``, that writes its pid to a file."""
    pid_file = folder / "backend.pid"
    config = folder / "fleet.json"
    server = {
        "command": sys.executable,
        "args": [str(FAKE_SERVER), "--name", "fake", "--pid-file", str(pid_file), *backend_flags],
    }
    config.write_text(json.dumps({"mcpServers": {"fake": server}}))
    return config, pid_file


def start_gateway(
    folder: Path,
    home: Path,
    *serve_args: str,
    wait: bool = True,
    backend_flags: tuple[str, ...] = (),
    global_args: tuple[str, ...] = (),
    token: str | None = TOKEN,
    preexec_fn: Callable[[], None] | None = None,
) -> RunningGateway:
    """``mcpfleet --config <fleet.json> <global_args> serve <serve_args>``, ``token`` in
    ``MCPFLEET_GATEWAY_TOKEN`` (``None``: not set); with ``wait``, until it says where it serves."""
    config, pid_file = backend_config(folder, *backend_flags)
    environment = {**os.environ, "HOME": str(home), "XDG_STATE_HOME": str(home / ".local" / "state")}
    environment.pop("MCPFLEET_HOME", None)
    if token is not None:
        environment["MCPFLEET_GATEWAY_TOKEN"] = token
    process = subprocess.Popen(
        [str(MCPFLEET), "--config", str(config), *global_args, "serve", *serve_args],
        cwd=folder,
        env=environment,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=preexec_fn,
    )
    gateway = RunningGateway(process, pid_file)
    serving = threading.Event()

    def read_stderr() -> None:
        assert process.stderr is not None
        for line in process.stderr:
            gateway.stderr_lines.append(line.rstrip("\n"))
            if line.startswith("mcpfleet: serving on "):
                gateway.url = line.split()[-1]
                serving.set()

    threading.Thread(target=read_stderr, daemon=True).start()
    if wait and not serving.wait(START_TIMEOUT_S):
        process.kill()
        raise AssertionError(f"the gateway never said where it serves: {gateway.stderr_lines}")
    return gateway


def wait_until_gone(pid: int) -> bool:
    deadline = time.monotonic() + EXIT_TIMEOUT_S
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.05)
    return False


@pytest.fixture(scope="module")
def shared_gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningGateway]:
    """One gateway on 127.0.0.1 with ``--auth-token-file``, for the tests that only talk to it."""
    folder = tmp_path_factory.mktemp("gateway")
    token_file = folder / "token"
    token_file.write_text(TOKEN + "\n")
    gateway = start_gateway(
        folder, folder / "home", "--http", "127.0.0.1:0", "--auth-token-file", str(token_file), token=None
    )
    yield gateway
    gateway.stop()


@pytest.mark.parametrize("era", ERAS)
async def test_a_client_of_either_era_lists_and_calls_a_backends_tool(
    shared_gateway: RunningGateway, era: str
) -> None:
    async with sdk_client(shared_gateway.url, era, headers=AUTHORIZED) as client:
        names = [tool.name for tool in (await client.list_tools()).tools]
        assert "fake_echo" in names and "fake_add" in names
        result = await client.call_tool("fake_echo", {"message": "through the gateway"})
        assert not result.is_error and "through the gateway" in text_of(result)
        if era == MODERN:
            assert client.session.protocol_version == MODERN
        else:
            assert client.session.protocol_version in HANDSHAKE_PROTOCOL_VERSIONS
            # Over HTTP too, the handshake says every list may change (as over stdio).
            capabilities = client.server_capabilities
            assert capabilities.tools is not None and capabilities.tools.list_changed


async def test_two_clients_are_served_concurrently_by_one_backend(shared_gateway: RunningGateway) -> None:
    answers: dict[str, str] = {}

    async def one_client(name: str, era: str) -> None:
        async with sdk_client(shared_gateway.url, era, headers=AUTHORIZED) as client:
            # Both calls are in flight at once: the backend sleeps before answering.
            slept = await client.call_tool("fake_sleep", {"seconds": 0.5})
            assert not slept.is_error
            answers[name] = text_of(await client.call_tool("fake_echo", {"message": name}))

    with anyio.fail_after(30):
        async with anyio.create_task_group() as clients:
            clients.start_soon(one_client, "first", "legacy")
            clients.start_soon(one_client, "second", "legacy")
            clients.start_soon(one_client, "third", MODERN)
    assert {name: name in text for name, text in answers.items()} == {
        "first": True,
        "second": True,
        "third": True,
    }
    assert len(shared_gateway.backend_pid_file.read_text().split()) == 1, (
        "one backend process for every client"
    )


async def test_clients_of_both_eras_hear_that_the_tool_list_changed(tmp_path: Path) -> None:
    """A backend that joins after the clients connected: each era is told, in its own way."""
    joined = tmp_path / "backend-may-start"
    gateway = start_gateway(
        tmp_path,
        tmp_path / "home",
        "--http",
        "127.0.0.1:0",
        backend_flags=("--start-when-exists", str(joined)),
        # The first lists wait for a backend with nothing cached; a chosen gate caps that, so
        # the clients list before it joins.
        global_args=("--startup-timeout", "1000"),
    )
    legacy_heard = anyio.Event()

    async def on_message(message: Any) -> None:
        if isinstance(message, mcp_types.ToolListChangedNotification):
            legacy_heard.set()

    try:
        statuses: list[int] = []
        legacy = Client(
            streamable_http_client(gateway.url, http_client=http_client(statuses, AUTHORIZED)),
            mode="legacy",
            message_handler=on_message,
        )
        async with legacy, sdk_client(gateway.url, MODERN, headers=AUTHORIZED) as modern:
            assert "fake_echo" not in [tool.name for tool in (await legacy.list_tools()).tools]
            async with modern.listen(tools_list_changed=True) as changes:
                joined.touch()
                with anyio.fail_after(30):
                    await legacy_heard.wait()
                    events = []
                    async for event in changes:
                        events.append(event)
                        break
                    assert events, "the listen stream ended without an event"
            assert "fake_echo" in [tool.name for tool in (await legacy.list_tools()).tools]
            assert "fake_echo" in [tool.name for tool in (await modern.list_tools()).tools]
    finally:
        gateway.stop()


@pytest.mark.parametrize(
    "headers",
    [
        {},
        {"Authorization": "Bearer wrong-token"},
        {"Authorization": f"Basic {TOKEN}"},
        {"Authorization": TOKEN},
    ],
    ids=["missing", "wrong", "other-scheme", "no-scheme"],
)
def test_a_request_without_the_right_bearer_token_gets_401(
    shared_gateway: RunningGateway, headers: dict[str, str]
) -> None:
    refused = httpx2.post(shared_gateway.url, json=INITIALIZE, headers={**MCP_HEADERS, **headers}, timeout=20)
    assert refused.status_code == 401
    assert refused.headers["www-authenticate"].startswith("Bearer")
    accepted = httpx2.post(
        shared_gateway.url, json=INITIALIZE, headers={**MCP_HEADERS, **AUTHORIZED}, timeout=20
    )
    assert accepted.status_code == 200


@pytest.mark.parametrize("era", ERAS)
@pytest.mark.parametrize(
    ("header", "value", "status"),
    [("Host", "rebound.example:{port}", 421), ("Origin", "http://rebound.example:{port}", 403)],
    ids=["host", "origin"],
)
async def test_a_foreign_host_or_origin_is_refused(
    shared_gateway: RunningGateway, era: str, header: str, value: str, status: int
) -> None:
    statuses: list[int] = []
    headers = {**AUTHORIZED, header: value.format(port=shared_gateway.port)}
    with pytest.raises(Exception):  # noqa: B017  (the SDK's error type is not the point: the status is)
        async with sdk_client(shared_gateway.url, era, headers=headers, statuses=statuses) as client:
            await client.list_tools()
    assert status in statuses, statuses


@pytest.mark.parametrize("era", ERAS)
async def test_an_oversized_body_gets_413_and_the_gateway_serves_on(
    shared_gateway: RunningGateway, era: str
) -> None:
    statuses: list[int] = []
    async with sdk_client(shared_gateway.url, era, headers=AUTHORIZED, statuses=statuses) as client:
        with pytest.raises(Exception):  # noqa: B017
            await client.call_tool("fake_echo", {"message": "x" * (5 * 1024 * 1024)})
        assert 413 in statuses, statuses
        after = await client.call_tool("fake_echo", {"message": "still serving"})
        assert "still serving" in text_of(after)
    assert shared_gateway.process.poll() is None


async def test_a_non_loopback_bind_without_a_token_generates_one_stored_privately(tmp_path: Path) -> None:
    home = tmp_path / "home"
    gateway = start_gateway(tmp_path, home, "--http", "0.0.0.0:0", token=None)
    try:
        token_file = home / ".local" / "state" / "mcpfleet" / "gateway-token.json"
        generated = [line for line in gateway.stderr_lines if "generated a bearer token" in line]
        assert len(generated) == 1 and str(token_file) in generated[0], gateway.stderr_lines
        assert stat.S_IMODE(token_file.stat().st_mode) == 0o600
        token = json.loads(token_file.read_text())["bearer_token"]
        assert not any(token in line for line in gateway.stderr_lines), "the token itself is never printed"
        # Bound on every interface; reached here through loopback, which still needs the token.
        assert gateway.url.startswith("http://0.0.0.0:")
        refused = httpx2.post(gateway.local_url(), json=INITIALIZE, headers=MCP_HEADERS, timeout=20)
        assert refused.status_code == 401
        async with sdk_client(
            gateway.local_url(), "legacy", headers={"Authorization": f"Bearer {token}"}
        ) as client:
            assert "fake_echo" in [tool.name for tool in (await client.list_tools()).tools]
    finally:
        gateway.stop()


@pytest.mark.parametrize(("stop_signal", "exit_code"), [(signal.SIGTERM, 0), (signal.SIGINT, 130)])
async def test_a_stop_signal_closes_every_backend_before_the_gateway_exits(
    tmp_path: Path, stop_signal: signal.Signals, exit_code: int
) -> None:
    gateway = start_gateway(tmp_path, tmp_path / "home", "--http", "127.0.0.1:0")
    async with sdk_client(gateway.url, "legacy", headers=AUTHORIZED) as client:
        assert "through" in text_of(await client.call_tool("fake_echo", {"message": "through"}))
        backend = gateway.backend_pid()
        # The session (and its event stream) is still open when the signal comes.
        assert gateway.stop(stop_signal) == exit_code, gateway.stderr_lines
    assert wait_until_gone(backend), "the backend outlived the gateway"
    assert not any("Traceback" in line for line in gateway.stderr_lines), gateway.stderr_lines


def test_a_port_in_use_is_one_line_exit_2_and_starts_no_backend(tmp_path: Path) -> None:
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        gateway = start_gateway(tmp_path, tmp_path / "home", "--http", f"127.0.0.1:{port}", wait=False)
        assert gateway.process.wait(timeout=EXIT_TIMEOUT_S) == 2
    time.sleep(0.1)  # the stderr reader thread drains the pipe
    assert gateway.stderr_lines == [
        f"mcpfleet: --http 127.0.0.1:{port}: port {port} is already in use; "
        "pick another one (or 0 for a free port)"
    ]
    assert not gateway.backend_pid_file.exists()


@pytest.mark.parametrize(
    "serve_args",
    [("--http", "127.0.0.1:0", "--auth-token", TOKEN), (f"--auth-token={TOKEN}",)],
    ids=["with-http", "without-http"],
)
def test_a_token_on_the_command_line_is_refused_with_a_pointer_to_the_file_or_the_variable(
    tmp_path: Path, serve_args: tuple[str, ...]
) -> None:
    """``ps`` shows every user every command line: a token there is no secret."""
    gateway = start_gateway(tmp_path, tmp_path / "home", *serve_args, wait=False, token=None)
    assert gateway.process.wait(timeout=EXIT_TIMEOUT_S) == 2
    time.sleep(0.1)  # the stderr reader thread drains the pipe
    assert gateway.stderr_lines == [
        "mcpfleet: --auth-token shows the token to every user of this machine (ps): put it in a "
        "file for --auth-token-file FILE, or in MCPFLEET_GATEWAY_TOKEN"
    ]
    assert not gateway.backend_pid_file.exists()
    assert not (tmp_path / "home" / ".local" / "state" / "mcpfleet" / "gateway-token.json").exists()


@pytest.mark.parametrize("option", [("--auth-token-file", "token"), ("--insecure-no-auth",)])
def test_a_listener_option_without_http_is_a_usage_error(tmp_path: Path, option: tuple[str, ...]) -> None:
    gateway = start_gateway(tmp_path, tmp_path / "home", *option, wait=False)
    assert gateway.process.wait(timeout=EXIT_TIMEOUT_S) == 2
    time.sleep(0.1)
    assert gateway.stderr_lines == [
        f"mcpfleet: {option[0]} applies to --http only: add --http [HOST:]PORT, or drop it"
    ]


def _session_headers(url: str) -> dict[str, str]:
    """The headers of a handshake-era session opened on ``url`` over raw HTTP."""
    opened = httpx2.post(url, json=INITIALIZE, headers={**MCP_HEADERS, **AUTHORIZED}, timeout=20)
    assert opened.status_code == 200, opened.text
    headers = {
        **MCP_HEADERS,
        **AUTHORIZED,
        "Mcp-Session-Id": opened.headers["mcp-session-id"],
        "MCP-Protocol-Version": "2025-06-18",
    }
    initialized = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    assert httpx2.post(url, json=initialized, headers=headers, timeout=20).status_code == 202
    return headers


@pytest.mark.parametrize(
    "request_id",
    [{"an": "object"}, 1.5, None, [1], True],
    ids=["object", "float", "null", "array", "boolean"],
)
def test_a_request_whose_id_is_not_a_string_or_an_integer_gets_minus_32600(
    shared_gateway: RunningGateway, request_id: Any
) -> None:
    """The SDK took these for notifications: 202 and no answer, ever, to a client that waits."""
    headers = _session_headers(shared_gateway.url)
    for with_session in (headers, {**MCP_HEADERS, **AUTHORIZED}):
        answer = httpx2.post(
            shared_gateway.url,
            json={"jsonrpc": "2.0", "id": request_id, "method": "tools/list"},
            headers=with_session,
            timeout=20,
        )
        assert answer.status_code == 400, answer.text
        assert answer.json() == {
            "jsonrpc": "2.0",
            "id": None,
            "error": {
                "code": -32600,
                "message": "Invalid Request: a request's id must be a string or an integer",
            },
        }
    # The same session goes on: a valid id is answered.
    valid = httpx2.post(
        shared_gateway.url,
        json={"jsonrpc": "2.0", "id": 7, "method": "tools/list"},
        headers=headers,
        timeout=20,
    )
    assert valid.status_code == 200 and '"id":7' in valid.text.replace(" ", "")


async def test_sigterm_with_calls_in_flight_exits_0_without_a_warning(tmp_path: Path) -> None:
    """Each call in flight at SIGTERM used to cost a second and a 'transport write blocked' line."""
    request_log = tmp_path / "requests.log"
    gateway = start_gateway(
        tmp_path,
        tmp_path / "home",
        "--http",
        "127.0.0.1:0",
        backend_flags=("--request-log", str(request_log)),
    )

    def wait_for_three_calls_at_the_backend() -> None:
        deadline = time.monotonic() + START_TIMEOUT_S
        while not (request_log.exists() and request_log.read_text().count("tools/call") >= 3):
            assert time.monotonic() < deadline, "the calls never reached the backend"
            time.sleep(0.05)

    async def call_and_wait(client: Client) -> None:
        with contextlib.suppress(Exception):
            await client.call_tool("fake_sleep", {"seconds": 60})

    exit_code: int | None = None
    async with (
        anyio.create_task_group() as clients,
        sdk_client(gateway.url, "legacy", headers=AUTHORIZED) as legacy,
    ):
        for _ in range(3):
            clients.start_soon(call_and_wait, legacy)
        await anyio.to_thread.run_sync(wait_for_three_calls_at_the_backend)
        exit_code = await anyio.to_thread.run_sync(gateway.stop)
        clients.cancel_scope.cancel()
    assert exit_code == 0, gateway.stderr_lines
    await anyio.sleep(0.1)  # the stderr reader thread drains the pipe
    assert not [line for line in gateway.stderr_lines if "write blocked" in line], gateway.stderr_lines
    assert not any("Traceback" in line for line in gateway.stderr_lines), gateway.stderr_lines
