"""``serve_http`` around any SDK lowlevel ``Server``: real HTTP on this machine, the SDK's own client.

The server is a small one of this file's own (one ``echo`` tool that names the session it
ran in), served in the test's task group as ``mcpfleet serve --http`` serves the gateway's
(``test_gateway_http.py`` runs that command itself); the security checks are read from the
HTTP status codes the SDK client received. ``sdk_client`` is shared with that file.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import socket
import stat
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from functools import partial
from pathlib import Path
from typing import Any

import anyio
import httpx2
import mcp_types
import pytest
from mcp.client import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.server.lowlevel.server import Server
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS

from mcpfleet.errors import ServeAddressError
from mcpfleet.gateway.connections import ACCEPT_BURST, BURSTS_IN_FLIGHT, MAX_HEADER_BYTES, ListenerBounds
from mcpfleet.gateway.http import (
    SHUTDOWN_GRACE_S,
    HttpListener,
    gateway_token_file,
    parse_bind,
    resolve_auth_token,
    serve_http,
)

pytestmark = pytest.mark.anyio

MODERN = "2026-07-28"
ERAS = ["legacy", MODERN]


def echo_server() -> Server[Any]:
    """An SDK lowlevel server with one tool, ``echo``, that answers ``<message> from <session>``."""

    async def list_tools(ctx: Any, params: Any) -> mcp_types.ListToolsResult:
        schema = {"type": "object", "properties": {"message": {"type": "string"}}, "required": ["message"]}
        return mcp_types.ListToolsResult(
            tools=[mcp_types.Tool(name="echo", description="Echo a message.", input_schema=schema)]
        )

    async def call_tool(ctx: Any, params: mcp_types.CallToolRequestParams) -> mcp_types.CallToolResult:
        arguments = params.arguments or {}
        await anyio.sleep(float(arguments.get("delay_s", 0)))
        text = f"{arguments['message']} from {id(ctx.session)}"
        return mcp_types.CallToolResult(content=[mcp_types.TextContent(type="text", text=text)])

    return Server("echo-gateway", on_list_tools=list_tools, on_call_tool=call_tool)


@asynccontextmanager
async def serving(
    bind: str = "127.0.0.1:0",
    *,
    notices: list[str] | None = None,
    auth_token: str | None = None,
    **options: Any,
) -> AsyncIterator[str]:
    """A fresh ``echo_server()`` served at ``bind`` in this task group, as the CLI does; yields its URL.

    ``auth_token`` is what requests must carry; ``None`` serves without one, as
    ``--insecure-no-auth`` does (where the token comes from is ``resolve_auth_token``'s, tested
    on its own below).
    """
    told = notices if notices is not None else []
    listener = HttpListener.open(parse_bind(bind))
    async with anyio.create_task_group() as task_group:
        url = await task_group.start(
            partial(serve_http, echo_server(), listener, auth_token=auth_token, notice=told.append, **options)
        )
        yield url
        task_group.cancel_scope.cancel()


def http_client(statuses: list[int], headers: dict[str, str] | None = None) -> httpx2.AsyncClient:
    """An HTTP client for the SDK's transport that records every response status."""

    async def record(response: httpx2.Response) -> None:
        statuses.append(response.status_code)

    return httpx2.AsyncClient(
        headers=headers or {}, timeout=httpx2.Timeout(20.0), event_hooks={"response": [record]}
    )


def sdk_client(
    url: str, era: str, *, headers: dict[str, str] | None = None, statuses: list[int] | None = None
) -> Client:
    client = http_client(statuses if statuses is not None else [], headers)
    return Client(streamable_http_client(url, http_client=client), mode=era)


def text_of(result: mcp_types.CallToolResult) -> str:
    block = result.content[0]
    assert isinstance(block, mcp_types.TextContent)
    return block.text


@pytest.mark.parametrize("era", ERAS)
async def test_a_client_of_either_era_lists_and_calls_over_http(era: str) -> None:
    notices: list[str] = []
    async with serving(notices=notices) as url, sdk_client(url, era) as client:
        tools = await client.list_tools()
        assert [tool.name for tool in tools.tools] == ["echo"]
        result = await client.call_tool("echo", {"message": "hello"})
        assert text_of(result).startswith("hello from ")
        negotiated = client.session.protocol_version
        assert negotiated == MODERN if era == MODERN else negotiated in HANDSHAKE_PROTOCOL_VERSIONS
    assert notices == [f"serving on {url}"]
    assert url.startswith("http://127.0.0.1:") and url.endswith("/mcp")


async def test_two_concurrent_sessions_are_served_side_by_side() -> None:
    answers: dict[str, str] = {}
    async with serving() as url:

        async def one_session(name: str) -> None:
            async with sdk_client(url, "legacy") as client:
                # Both calls are in flight together: each waits before answering.
                result = await client.call_tool("echo", {"message": name, "delay_s": 0.3})
                answers[name] = text_of(result)

        with anyio.fail_after(20):
            async with anyio.create_task_group() as sessions:
                sessions.start_soon(one_session, "first")
                sessions.start_soon(one_session, "second")
    assert answers["first"].startswith("first from ") and answers["second"].startswith("second from ")
    assert answers["first"].split()[-1] != answers["second"].split()[-1], "both calls ran in one session"


@pytest.mark.parametrize("era", ERAS)
async def test_a_request_without_the_right_bearer_token_gets_401(era: str) -> None:
    async with serving(auth_token="s3cret-token") as url:
        for headers in ({}, {"Authorization": "Bearer wrong-token"}, {"Authorization": "Basic s3cret-token"}):
            statuses: list[int] = []
            with pytest.raises(Exception):  # noqa: B017  (the SDK's error type is not the point: the status is)
                async with sdk_client(url, era, headers=headers, statuses=statuses) as client:
                    await client.list_tools()
            assert statuses and set(statuses) == {401}, (headers, statuses)
        async with sdk_client(url, era, headers={"Authorization": "Bearer s3cret-token"}) as client:
            assert [tool.name for tool in (await client.list_tools()).tools] == ["echo"]


def resolved_token(
    notices: list[str],
    *,
    environment: dict[str, str] | None = None,
    token_file: Path | None = None,
    loopback: bool = True,
    insecure_no_auth: bool = False,
) -> str | None:
    return resolve_auth_token(
        token_file=token_file,
        insecure_no_auth=insecure_no_auth,
        loopback=loopback,
        environment=environment if environment is not None else {},
        notice=notices.append,
    )


@pytest.mark.parametrize("bind", ["127.0.0.1:0", "0.0.0.0:0"])
async def test_without_a_token_given_one_is_generated_privately_once_and_reused(bind: str) -> None:
    """Loopback too: every local user can reach 127.0.0.1. Under umask 000, the file is 0600 in
    a 0700 folder; stderr says where the token is, never what it is; the next start reuses it."""
    previous = os.umask(0)
    try:
        first: list[str] = []
        token = resolved_token(first, loopback=bind.startswith("127."))
    finally:
        os.umask(previous)
    assert token is not None
    token_file = gateway_token_file()
    assert stat.S_IMODE(token_file.stat().st_mode) == 0o600
    assert stat.S_IMODE(token_file.parent.stat().st_mode) == 0o700
    assert json.loads(token_file.read_text()) == {"bearer_token": token}
    assert len(first) == 1 and "generated a bearer token" in first[0] and str(token_file) in first[0]
    assert token not in first[0]

    async with serving(bind, auth_token=token) as url:
        port = url.rsplit(":", 1)[1].split("/")[0]
        local_url = f"http://127.0.0.1:{port}/mcp"
        statuses: list[int] = []
        with pytest.raises(Exception):  # noqa: B017
            async with sdk_client(local_url, "legacy", statuses=statuses) as client:
                await client.list_tools()
        assert set(statuses) == {401}
        async with sdk_client(local_url, "legacy", headers={"Authorization": f"Bearer {token}"}) as client:
            assert [tool.name for tool in (await client.list_tools()).tools] == ["echo"]

    second: list[str] = []
    assert resolved_token(second) == token
    assert gateway_token_file().read_text() == token_file.read_text()
    assert len(second) == 1 and str(token_file) in second[0] and "generated" not in second[0]
    assert token not in second[0]


def test_a_token_file_wins_and_the_variable_leaves_the_environment_anyway(tmp_path: Path) -> None:
    plain = tmp_path / "token"
    plain.write_text("from-the-file\n")
    environment = {"MCPFLEET_GATEWAY_TOKEN": "from-the-variable", "PATH": "/bin"}
    notices: list[str] = []
    assert resolved_token(notices, environment=environment, token_file=plain) == "from-the-file"
    # Backends inherit this environment: the variable is gone from it whichever token won.
    assert environment == {"PATH": "/bin"}
    assert notices == [f"clients must send the gateway's bearer token, the one in {plain}"]
    # The generated file may be given as it is.
    stored = tmp_path / "gateway-token.json"
    stored.write_text(json.dumps({"bearer_token": "from-json"}))
    assert resolved_token([], token_file=stored) == "from-json"
    assert not gateway_token_file().exists()


def test_the_variable_is_used_without_a_file_and_taken_out_of_the_environment() -> None:
    environment = {"MCPFLEET_GATEWAY_TOKEN": " from-the-variable\n"}
    notices: list[str] = []
    assert resolved_token(notices, environment=environment) == "from-the-variable"
    assert environment == {}
    assert notices == ["clients must send the gateway's bearer token, the one in MCPFLEET_GATEWAY_TOKEN"]
    assert not gateway_token_file().exists()


@pytest.mark.parametrize(
    ("content", "complaint"),
    [
        (None, "cannot read it"),
        (b"", "visible ASCII"),
        (b"two words", "visible ASCII"),
        (b"\xff\xfe", "not UTF-8"),
        (b"x" * 5000, "larger than 4096 bytes"),
    ],
    ids=["missing", "empty", "spaces", "binary", "huge"],
)
def test_a_token_file_that_cannot_give_a_token_is_one_line_naming_it(
    tmp_path: Path, content: bytes | None, complaint: str
) -> None:
    token_file = tmp_path / "token"
    if content is not None:
        token_file.write_bytes(content)
    with pytest.raises(ServeAddressError, match=complaint) as raised:
        resolved_token([], token_file=token_file)
    assert str(raised.value).startswith(f"--auth-token-file {token_file}: ")
    assert "\n" not in str(raised.value)


def test_insecure_no_auth_serves_loopback_only_and_says_so() -> None:
    notices: list[str] = []
    environment = {"MCPFLEET_GATEWAY_TOKEN": "ignored"}
    assert resolved_token(notices, environment=environment, insecure_no_auth=True) is None
    assert environment == {}
    assert len(notices) == 1 and "WITHOUT a bearer token" in notices[0] and "throw-away" in notices[0]
    with pytest.raises(ServeAddressError, match="loopback binds only"):
        resolved_token([], insecure_no_auth=True, loopback=False)
    with pytest.raises(ServeAddressError, match="contradict"):
        resolved_token([], insecure_no_auth=True, token_file=Path("/dev/null"))
    assert not gateway_token_file().exists()


@pytest.mark.parametrize("era", ERAS)
@pytest.mark.parametrize(
    ("header", "value", "status"),
    [("Host", "evil.example:{port}", 421), ("Origin", "http://evil.example:{port}", 403)],
)
async def test_a_foreign_host_or_origin_is_refused(era: str, header: str, value: str, status: int) -> None:
    async with serving() as url:
        port = url.rsplit(":", 1)[1].split("/")[0]
        statuses: list[int] = []
        with pytest.raises(Exception):  # noqa: B017
            async with sdk_client(
                url, era, headers={header: value.format(port=port)}, statuses=statuses
            ) as client:
                await client.list_tools()
        assert status in statuses, statuses
        # The names that lead here are accepted, in either header.
        own = {"Host": f"localhost:{port}", "Origin": f"http://localhost:{port}"}
        async with sdk_client(url, era, headers={header: own[header]}) as client:
            await client.list_tools()


@pytest.mark.parametrize("era", ERAS)
async def test_an_oversized_body_gets_413_and_the_gateway_serves_on(era: str) -> None:
    async with serving(max_request_body_bytes=64 * 1024) as url, sdk_client(url, era) as client:
        statuses: list[int] = []
        async with sdk_client(url, era, statuses=statuses) as big:
            with pytest.raises(Exception):  # noqa: B017
                await big.call_tool("echo", {"message": "x" * 200_000})
        assert 413 in statuses, statuses
        assert text_of(await client.call_tool("echo", {"message": "still here"})).startswith("still here")


async def test_a_port_in_use_is_one_clear_error() -> None:
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen(1)
    port = taken.getsockname()[1]
    try:
        with pytest.raises(ServeAddressError, match=f"port {port} is already in use; pick another one"):
            HttpListener.open(parse_bind(f"127.0.0.1:{port}"))
    finally:
        taken.close()


async def test_cancelling_ends_open_sessions_promptly_and_closes_the_port() -> None:
    """A client that keeps its session (and its event stream) open does not hold the gateway up."""
    opened = anyio.Event()

    async def hold_a_session(url: str) -> None:
        async with sdk_client(url, "legacy") as client:
            await client.list_tools()
            opened.set()
            await anyio.sleep_forever()

    async with anyio.create_task_group() as clients:
        with anyio.fail_after(20):
            async with anyio.create_task_group() as gateway:
                listener = HttpListener.open(parse_bind("127.0.0.1:0"))
                notices: list[str] = []
                url = await gateway.start(
                    partial(serve_http, echo_server(), listener, auth_token=None, notice=notices.append)
                )
                clients.start_soon(hold_a_session, url)
                await opened.wait()
                started = anyio.current_time()
                gateway.cancel_scope.cancel()
        stopped_after_s = anyio.current_time() - started
        clients.cancel_scope.cancel()
    assert stopped_after_s < SHUTDOWN_GRACE_S, stopped_after_s
    port = int(url.rsplit(":", 1)[1].split("/")[0])
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", port), timeout=5).close()


SHORT_BOUNDS = ListenerBounds(
    max_connections=6,
    max_connections_per_peer=3,
    max_lingering_refusals=4,
    header_deadline_s=1.0,
    body_deadline_s=1.0,
)
"""Small caps and short deadlines, so the in-process tests below need few sockets and little time."""


def _raw_exchange(port: int, sent: bytes, *, source: str = "127.0.0.1", timeout_s: float = 30.0) -> bytes:
    """Send ``sent`` on a new connection and read until the gateway closes it (bounded)."""
    with socket.socket() as client:
        client.bind((source, 0))
        client.settimeout(timeout_s)
        client.connect(("127.0.0.1", port))
        client.sendall(sent)
        received = b""
        with contextlib.suppress(ConnectionResetError):
            while chunk := client.recv(65536):
                received += chunk
        return received


async def test_a_body_that_never_completes_gets_408_and_the_connection_is_closed() -> None:
    async with serving(bounds=SHORT_BOUNDS) as url:
        port = int(url.rsplit(":", 1)[1].split("/")[0])
        head = (
            f"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\n"
            'Accept: application/json, text/event-stream\r\nContent-Length: 100\r\n\r\n{"jsonrpc":'
        ).encode()
        answer = await anyio.to_thread.run_sync(_raw_exchange, port, head)
        assert answer.startswith(b"HTTP/1.1 408 "), answer
        assert answer.endswith(b"the request's body did not arrive within 1 s")
        # The gateway serves on.
        async with sdk_client(url, "legacy") as client:
            assert [tool.name for tool in (await client.list_tools()).tools] == ["echo"]


async def test_a_kept_alive_connection_gets_the_header_deadline_again_for_its_next_request() -> None:
    """A first request answered does not buy the connection unbounded time for the next one."""
    async with serving(bounds=SHORT_BOUNDS) as url:
        port = int(url.rsplit(":", 1)[1].split("/")[0])
        first = f"GET /elsewhere HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n".encode()
        second_half = f"GET /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n".encode()
        answer = await anyio.to_thread.run_sync(_raw_exchange, port, first + second_half)
        statuses = re.findall(rb"HTTP/1\.1 (\d{3}) ", answer)
        assert statuses == [b"404", b"408"], answer


async def test_a_request_head_over_the_cap_gets_431_and_the_gateway_serves_on() -> None:
    """The C parser has no cap of its own on a request's headers: the protocol keeps one."""
    async with serving() as url:
        port = int(url.rsplit(":", 1)[1].split("/")[0])
        padding = "x" * (MAX_HEADER_BYTES + 1)
        head = f"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nX-Padding: {padding}\r\n\r\n".encode()
        answer = await anyio.to_thread.run_sync(_raw_exchange, port, head)
        assert answer.startswith(b"HTTP/1.1 431 "), answer[:200]
        async with sdk_client(url, "legacy") as client:
            assert [tool.name for tool in (await client.list_tools()).tools] == ["echo"]


async def test_the_whitespace_around_a_header_value_is_not_part_of_it() -> None:
    """RFC 9110 5.5, which h11 follows and llhttp does not for what trails: a Host sent with
    spaces and a tab after it names this gateway (no 421), as it does for the SDK's own check."""
    async with serving() as url:
        port = int(url.rsplit(":", 1)[1].split("/")[0])
        head = (
            f"GET /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port} \t \r\nAccept: text/event-stream\r\n"
            "Connection: close\r\n\r\n"
        ).encode()
        answer = await anyio.to_thread.run_sync(_raw_exchange, port, head)
        assert answer.startswith(b"HTTP/1.1 400 "), answer[:300]  # past the Host check: no session


async def test_connections_past_the_per_peer_cap_get_503_and_another_peer_is_served() -> None:
    async with serving(bounds=SHORT_BOUNDS) as url:
        port = int(url.rsplit(":", 1)[1].split("/")[0])
        held: list[socket.socket] = []
        try:
            for _ in range(SHORT_BOUNDS.max_connections_per_peer):
                idle = socket.create_connection(
                    ("127.0.0.1", port), timeout=30, source_address=("127.0.0.2", 0)
                )
                held.append(idle)
            await anyio.sleep(0.2)  # the gateway accepts them (they send nothing)
            past_the_cap = await anyio.to_thread.run_sync(
                partial(_raw_exchange, port, b"GET /mcp HTTP/1.1\r\n\r\n", source="127.0.0.2")
            )
            assert past_the_cap.startswith(b"HTTP/1.1 503 "), past_the_cap
            async with sdk_client(url, "legacy") as client:  # from 127.0.0.1
                assert [tool.name for tool in (await client.list_tools()).tools] == ["echo"]
        finally:
            for idle in held:
                idle.close()


def test_the_caps_stay_below_the_descriptor_limit() -> None:
    import resource

    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    bounds = ListenerBounds.for_this_process()
    assert 0 < bounds.max_connections_per_peer < bounds.max_connections
    assert bounds.max_connections + bounds.max_lingering_refusals + BURSTS_IN_FLIGHT * ACCEPT_BURST < soft
