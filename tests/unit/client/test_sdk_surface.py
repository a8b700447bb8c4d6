"""The canary of the SDK's private parts that mcpfleet reaches into (``client/_sdk.py``).

Each test drives one accessor against real SDK objects, in memory, without a process. When
an SDK release moves one of them, the accessor raises ``PrivateApiMovedError`` and the test
fails with its message, which names the attribute: fix that accessor before anything else.
"""

from __future__ import annotations

import json
from typing import Any

import anyio
import httpx2
import mcp_types
import pytest
from mcp.client.auth import OAuthClientProvider
from mcp.client.session import ClientSession
from mcp.shared.auth import OAuthClientInformationFull, OAuthClientMetadata, OAuthToken
from mcp.shared.message import SessionMessage
from pydantic import AnyUrl

from mcpfleet.auth.provider import FleetOAuthProvider
from mcpfleet.client._sdk import (
    OAUTH_PROVIDER_OVERRIDES,
    PrivateApiMovedError,
    adopt_http_session,
    check_oauth_provider_overrides,
    knows_output_schema,
    oauth_add_bearer,
    oauth_apply_refresh,
    oauth_is_initialized,
    oauth_refresh_request,
    open_http_sessions,
    pending_request_ids,
    received_tool_result,
    server_connection_of,
    use_event_store,
    wire_result,
)

pytestmark = pytest.mark.anyio

SERVER_URL = "https://mcp.example.com/mcp"


async def test_pending_request_ids_hold_a_request_until_it_is_answered() -> None:
    to_server, from_client = anyio.create_memory_object_stream[SessionMessage](8)
    to_client, from_server = anyio.create_memory_object_stream[SessionMessage | Exception](8)
    session = ClientSession(from_server, to_server)
    async with session, anyio.create_task_group() as group:
        group.start_soon(session.send_ping)
        with anyio.fail_after(5):
            sent = (await from_client.receive()).message
        assert isinstance(sent, mcp_types.JSONRPCRequest)
        request_id = sent.id
        assert request_id in pending_request_ids(session)
        await to_client.send(
            SessionMessage(mcp_types.JSONRPCResponse(jsonrpc="2.0", id=request_id, result={}))
        )
    assert request_id not in pending_request_ids(session)


def test_a_moved_attribute_is_reported_by_name() -> None:
    with pytest.raises(PrivateApiMovedError, match=r"the mcp SDK no longer has ClientSession\._dispatcher"):
        pending_request_ids(object())  # type: ignore[arg-type]


async def test_every_request_of_one_client_reaches_the_gateway_on_one_connection() -> None:
    from mcp.server.connection import Connection
    from mcp.server.lowlevel import Server

    seen: list[Connection] = []

    async def list_tools(ctx: Any, params: Any) -> mcp_types.ListToolsResult:
        seen.append(server_connection_of(ctx.session))
        return mcp_types.ListToolsResult(tools=[])

    server: Server[Any] = Server("canary", on_list_tools=list_tools)
    to_server, server_reads = anyio.create_memory_object_stream[SessionMessage | Exception](8)
    server_writes, from_server = anyio.create_memory_object_stream[SessionMessage | Exception](8)
    async with anyio.create_task_group() as group:
        group.start_soon(server.run, server_reads, server_writes, server.create_initialization_options())
        async with ClientSession(from_server, to_server) as session:
            with anyio.fail_after(5):
                await session.initialize()
                await session.list_tools()
                await session.list_tools()
        group.cancel_scope.cancel()
    assert len(seen) == 2 and seen[0] is seen[1]


def test_a_moved_server_session_attribute_is_reported_by_name() -> None:
    with pytest.raises(PrivateApiMovedError, match=r"the mcp SDK no longer has ServerSession\._connection"):
        server_connection_of(object())  # type: ignore[arg-type]


def test_the_http_session_manager_lists_its_sessions() -> None:
    from mcp.server.lowlevel import Server

    server: Server[Any] = Server("canary")
    server.streamable_http_app()
    assert open_http_sessions(server.session_manager) == []
    with pytest.raises(
        PrivateApiMovedError,
        match=r"the mcp SDK no longer has StreamableHTTPSessionManager\._server_instances",
    ):
        open_http_sessions(object())  # type: ignore[arg-type]


async def test_a_session_opened_elsewhere_is_adopted_under_its_own_id() -> None:
    from mcp.server.lowlevel import Server

    from mcpfleet.gateway.resumption import BoundedEventStore

    server: Server[Any] = Server("canary")
    server.streamable_http_app()
    manager = server.session_manager
    client = {"name": "c", "version": "1"}
    params = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": client}
    async with manager.run():
        store = BoundedEventStore()
        assert await adopt_http_session(manager, "abc123", params, None, store)
        (transport,) = open_http_sessions(manager)
        assert transport.mcp_session_id == "abc123"
        assert await adopt_http_session(manager, "abc123", params, None, store)  # already here: kept
        assert len(open_http_sessions(manager)) == 1
        use_event_store(transport, store)
        await transport.terminate()
    with pytest.raises(PrivateApiMovedError, match=r"StreamableHTTPSessionManager\._server_instances"):
        await adopt_http_session(object(), "x", params, None, store)  # type: ignore[arg-type]
    with pytest.raises(PrivateApiMovedError, match=r"StreamableHTTPServerTransport\._event_store"):
        use_event_store(object(), store)  # type: ignore[arg-type]


class MemoryTokens:
    """The SDK's ``TokenStorage`` in memory."""

    def __init__(self) -> None:
        self.tokens: OAuthToken | None = None
        self.client: OAuthClientInformationFull | None = None

    async def get_tokens(self) -> OAuthToken | None:
        return self.tokens

    async def set_tokens(self, tokens: OAuthToken) -> None:
        self.tokens = tokens

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        return self.client

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        self.client = client_info


def sdk_provider(storage: MemoryTokens) -> OAuthClientProvider:
    metadata = OAuthClientMetadata(redirect_uris=[AnyUrl("http://127.0.0.1/callback")])
    return OAuthClientProvider(SERVER_URL, metadata, storage)


async def test_the_provider_tells_whether_it_loaded_its_storage() -> None:
    provider = sdk_provider(MemoryTokens())
    assert oauth_is_initialized(provider) is False


def test_the_bearer_goes_on_the_request() -> None:
    provider = sdk_provider(MemoryTokens())
    provider.context.current_tokens = OAuthToken(access_token="access-1", token_type="Bearer")
    request = httpx2.Request("POST", SERVER_URL)
    oauth_add_bearer(provider, request)
    assert request.headers["Authorization"] == "Bearer access-1"


async def test_a_refresh_is_built_and_its_answer_stored() -> None:
    storage = MemoryTokens()
    provider = sdk_provider(storage)
    provider.context.current_tokens = OAuthToken(
        access_token="old", token_type="Bearer", refresh_token="refresh-1"
    )
    provider.context.client_info = OAuthClientInformationFull(
        client_id="client-1", redirect_uris=[AnyUrl("http://127.0.0.1/callback")]
    )
    request = await oauth_refresh_request(provider)
    form = dict(item.split("=", 1) for item in request.content.decode().split("&"))
    assert form["grant_type"] == "refresh_token" and form["refresh_token"] == "refresh-1"
    answer: dict[str, Any] = {"access_token": "new", "token_type": "Bearer", "expires_in": 60}
    response = httpx2.Response(200, content=json.dumps(answer).encode(), request=request)
    assert await oauth_apply_refresh(provider, response) is True
    assert storage.tokens is not None and storage.tokens.access_token == "new"


def test_every_overridden_provider_method_still_exists_in_the_sdk() -> None:
    check_oauth_provider_overrides(OAuthClientProvider)
    for name in OAUTH_PROVIDER_OVERRIDES:
        assert name in vars(FleetOAuthProvider), f"FleetOAuthProvider no longer overrides {name}"


def test_a_missing_override_target_is_reported_by_name() -> None:
    class Moved:
        pass

    with pytest.raises(PrivateApiMovedError, match=r"OAuthClientProvider\._initialize"):
        check_oauth_provider_overrides(Moved)  # type: ignore[arg-type]


def test_the_transport_stream_types_are_where_they_are_imported_from() -> None:
    from mcp.client import _transport

    for name in ("ReadStream", "TransportStreams", "WriteStream"):
        assert hasattr(_transport, name), f"the mcp SDK no longer has mcp.client._transport.{name}"


async def answered_call(raw: dict[str, Any]) -> tuple[Any, ClientSession]:
    """What a real ``ClientSession.call_tool`` returns for the server's answer ``raw``."""
    to_server, from_client = anyio.create_memory_object_stream[SessionMessage](8)
    to_client, from_server = anyio.create_memory_object_stream[SessionMessage | Exception](8)
    session = ClientSession(from_server, to_server)
    outcome: list[Any] = []

    async def call() -> None:
        outcome.append(await session.call_tool("t", {}))

    async with session, anyio.create_task_group() as group:
        session._tool_output_schemas["t"] = None  # listed, without an output schema
        group.start_soon(call)
        with anyio.fail_after(5):
            sent = (await from_client.receive()).message
        assert isinstance(sent, mcp_types.JSONRPCRequest)
        answer = mcp_types.JSONRPCResponse(jsonrpc="2.0", id=sent.id, result=json.loads(json.dumps(raw)))
        await to_client.send(SessionMessage(answer))
    return outcome[0], session


async def test_a_result_received_below_the_sdk_is_the_one_call_tool_returns() -> None:
    raw = {
        "content": [{"type": "text", "text": "hi", "annotations": {"priority": 0.5}}],
        "structuredContent": {"n": 1},
        "isError": False,
        "extra": "kept or not, as the SDK decides",
    }
    through_sdk, session = await answered_call(raw)
    assert knows_output_schema(session, "t") and not knows_output_schema(session, "other")
    below = received_tool_result(session, "t", json.loads(json.dumps(raw)))
    assert below == through_sdk
    assert wire_result("tools/call", "2025-11-25", below) == wire_result(
        "tools/call", "2025-11-25", through_sdk
    )


def test_the_servers_sieve_is_applied_to_a_result_written_below_the_sdk() -> None:
    result = mcp_types.CallToolResult(content=[mcp_types.TextContent(type="text", text="x")])
    wire = wire_result(
        "tools/call", "2025-11-25", {**result.model_dump(by_alias=True), "resultType": "complete"}
    )
    assert wire == {"content": [{"text": "x", "type": "text"}], "isError": False}
    with pytest.raises(ValueError, match="handshake era"):
        wire_result("tools/call", "2026-07-28", result)
