"""Connections to real HTTP servers on 127.0.0.1 (tests/servers/http_server.py)."""

from __future__ import annotations

import socket
from collections.abc import Callable
from pathlib import Path

import pytest
from tests.servers.fixtures import HttpServer, completed, first_text

from mcpfleet.client import connect_to_server
from mcpfleet.config.model import ServerConfig
from mcpfleet.errors import AuthRequiredError, ConnectError, ConnectionClosedError

pytestmark = pytest.mark.anyio

StartServer = Callable[..., HttpServer]


def http_config(name: str, url: str, transport: str = "http", **fields: object) -> ServerConfig:
    return ServerConfig(name=name, transport=transport, url=url, **fields)  # type: ignore[arg-type]


@pytest.mark.parametrize("transport", ["streamable-http", "sse"])
async def test_handshake_and_calls_over_http(
    tmp_path: Path, http_server_factory: StartServer, transport: str
) -> None:
    server = http_server_factory(transport=transport)
    kind = "sse" if transport == "sse" else "http"
    async with connect_to_server("web", http_config("web", server.url, kind), cwd=tmp_path) as connection:
        assert connection.server_info.name == "http-test"
        assert connection.instructions == "http test server http-test"
        assert connection.pid is None
        assert "handshake" in connection.timings_ms
        names = {tool.name for tool in await connection.list_tools()}
        assert {"echo", "add", "sleep"} <= names
        echoed = completed(await connection.call_tool("echo", {"message": "over http"}))
        assert echoed.structured_content == {"message": "over http"}
        progress: list[float] = []
        slept = await connection.call_tool(
            "sleep",
            {"seconds": 0.8},
            timeout_ms=300,
            on_progress=lambda value, total, message: progress.append(value),
        )
        assert first_text(slept) == "slept 0.8"
        assert len(progress) >= 4
        await connection.ping()
    with pytest.raises(ConnectionClosedError):
        await connection.ping()


async def test_401_without_token_asks_for_a_login(tmp_path: Path, http_server_factory: StartServer) -> None:
    server = http_server_factory("--require-bearer", "sekrit")
    with pytest.raises(AuthRequiredError) as caught:
        async with connect_to_server("guarded", http_config("guarded", server.url), cwd=tmp_path):
            pass
    assert "run: mcpfleet login guarded" in str(caught.value)
    assert "sekrit" not in str(caught.value)


async def test_bearer_header_resolved_from_an_environment_variable_name(
    tmp_path: Path, http_server_factory: StartServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    server = http_server_factory("--require-bearer", "sekrit")
    monkeypatch.setenv("MCPFLEET_TEST_BEARER", "Bearer sekrit")
    config = http_config("guarded", server.url, headers={"Authorization": "MCPFLEET_TEST_BEARER"})
    async with connect_to_server("guarded", config, cwd=tmp_path) as connection:
        assert first_text(await connection.call_tool("add", {"a": 1, "b": 2})) == "3.0"
    # An unapproved entry never resolves the name: the literal is sent and refused.
    with pytest.raises(AuthRequiredError):
        async with connect_to_server("guarded", config, cwd=tmp_path, resolve_secrets=False):
            pass


async def test_bearer_header_from_a_command(tmp_path: Path, http_server_factory: StartServer) -> None:
    server = http_server_factory("--require-bearer", "from-cmd", transport="sse")
    config = http_config("cmd", server.url, "sse", headers={"Authorization": "!printf 'Bearer from-cmd'"})
    async with connect_to_server("cmd", config, cwd=tmp_path) as connection:
        assert connection.server_info.name == "http-test"


async def test_connection_refused_names_server_and_url(tmp_path: Path) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    url = f"http://127.0.0.1:{port}/mcp"
    with pytest.raises(ConnectError) as caught:
        async with connect_to_server("nowhere", http_config("nowhere", url), cwd=tmp_path, timeout_ms=5000):
            pass
    assert '"nowhere"' in str(caught.value) and url in str(caught.value)


@pytest.mark.parametrize("transport", ["http", "sse"])
async def test_wrong_path_reports_the_http_status(
    tmp_path: Path, http_server_factory: StartServer, transport: str
) -> None:
    server = http_server_factory(transport="sse" if transport == "sse" else "streamable-http")
    url = f"http://127.0.0.1:{server.port}/nope"
    with pytest.raises(ConnectError) as caught:
        async with connect_to_server(
            "lost", http_config("lost", url, transport), cwd=tmp_path, timeout_ms=5000
        ):
            pass
    assert f'MCP server "lost" answered HTTP 404 at {url}' in str(caught.value)


async def test_a_failed_oauth_flow_is_reported_as_auth_not_as_a_wrong_url(
    tmp_path: Path, http_server_factory: StartServer
) -> None:
    from mcpfleet.auth.provider import oauth_auth_for

    # The server wants a bearer token but publishes no OAuth metadata: every discovery probe
    # answers 404, which must not be reported as a wrong "url".
    server = http_server_factory("--require-bearer", "sekrit")
    config = http_config(
        "guarded",
        server.url,
        oauth={
            "grant_type": "client_credentials",
            "client_id": "mcpfleet",
            "client_secret": "s3",
            "issuer": server.url.rsplit("/", 1)[0],
        },
    )
    with pytest.raises(AuthRequiredError) as caught:
        async with connect_to_server("guarded", config, cwd=tmp_path, auth=oauth_auth_for("guarded", config)):
            pass
    message = str(caught.value)
    assert "OAuth" in message
    assert "run: mcpfleet login guarded" in message
    assert 'check the "url" field' not in message
