"""``serve_http`` around any SDK lowlevel ``Server``: real HTTP on this machine, the SDK's own client.

The server is a small one of this file's own (one ``echo`` tool that names the session it
ran in), served in the test's task group as ``mcpfleet serve --http`` serves the gateway's
(``test_gateway_http.py`` runs that command itself); the security checks are read from the
HTTP status codes the SDK client received. ``sdk_client`` is shared with that file.
"""

from __future__ import annotations

import socket
import stat
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from functools import partial
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
    """A fresh ``echo_server()`` served at ``bind`` in this task group, as the CLI does; yields its URL."""
    told = notices if notices is not None else []
    listener = HttpListener.open(parse_bind(bind))
    token = resolve_auth_token(auth_token, loopback=listener.loopback, notice=told.append)
    async with anyio.create_task_group() as task_group:
        url = await task_group.start(
            partial(serve_http, echo_server(), listener, auth_token=token, notice=told.append, **options)
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


async def test_a_loopback_bind_needs_no_token_unless_one_is_given() -> None:
    notices: list[str] = []
    async with serving(notices=notices) as url, sdk_client(url, "legacy") as client:
        await client.list_tools()
    assert not gateway_token_file().exists()
    assert notices == [f"serving on {url}"]


async def test_a_non_loopback_bind_generates_a_private_token_once_and_reuses_it() -> None:
    first: list[str] = []
    async with serving("0.0.0.0:0", notices=first) as url:
        port = url.rsplit(":", 1)[1].split("/")[0]
        local_url = f"http://127.0.0.1:{port}/mcp"
        token_file = gateway_token_file()
        assert stat.S_IMODE(token_file.stat().st_mode) == 0o600
        assert stat.S_IMODE(token_file.parent.stat().st_mode) == 0o700
        token = token_file.read_text()
        generated = [line for line in first if "generated a bearer token" in line]
        assert len(generated) == 1 and str(token_file) in generated[0]
        stored = generated[0].rsplit(": ", 1)[1]
        assert f'"{stored}"' in token
        statuses: list[int] = []
        with pytest.raises(Exception):  # noqa: B017
            async with sdk_client(local_url, "legacy", statuses=statuses) as client:
                await client.list_tools()
        assert set(statuses) == {401}
        async with sdk_client(local_url, "legacy", headers={"Authorization": f"Bearer {stored}"}) as client:
            assert [tool.name for tool in (await client.list_tools()).tools] == ["echo"]

    second: list[str] = []
    async with serving("0.0.0.0:0", notices=second):
        pass
    assert gateway_token_file().read_text() == token
    assert not any(stored in line for line in second), "a stored token is printed once, when generated"
    assert any(str(token_file) in line for line in second)


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
                url = await gateway.start(
                    partial(serve_http, echo_server(), listener, auth_token=None, notice=[].append)
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
