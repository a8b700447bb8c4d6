"""Every place mcpfleet reaches into the private parts of the ``mcp`` SDK, one named function each.

The SDK offers no public way to do these few things; each entry says why it is needed. When
an SDK release moves one of them, the function raises ``PrivateApiMovedError`` naming the
attribute, and ``tests/unit/client/test_sdk_surface.py`` fails with that name, instead of a
behaviour quietly changing.

The OAuth provider (``mcpfleet.auth.provider``) also overrides private methods of the SDK's
``OAuthClientProvider``; an override whose name the SDK drops would silently never run, so
their names are listed here (``OAUTH_PROVIDER_OVERRIDES``) for the same test to check.

The transport types are imported from the SDK's private ``mcp.client._transport`` for typing
only (the SDK exports the ``Transport`` protocol, not the stream types).
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Container
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from mcpfleet.transport.process import PrivateApiMovedError

if TYPE_CHECKING:
    import httpx2
    from mcp.client._transport import ReadStream as ReadStream
    from mcp.client._transport import TransportStreams as TransportStreams
    from mcp.client._transport import WriteStream as WriteStream
    from mcp.client.auth import OAuthClientProvider
    from mcp.client.session import ClientSession
    from mcp.server.connection import Connection
    from mcp.server.session import ServerSession
    from mcp.server.streamable_http import StreamableHTTPServerTransport
    from mcp.server.streamable_http_manager import StreamableHTTPSessionManager

OAUTH_PROVIDER_OVERRIDES = (
    "_initialize",
    "_handle_token_response",
    "_perform_authorization_code_grant",
    "_auth_flow",
)
"""Private methods of ``OAuthClientProvider`` that mcpfleet's provider overrides: loading the
stored server metadata with the tokens, storing it after a token exchange, applying the
configured scope and token endpoint authentication before the redirect, and the
non-interactive flow that never waits for a person."""


def _attribute(owner: object, name: str, where: str) -> Any:
    try:
        return getattr(owner, name)
    except AttributeError as error:
        raise PrivateApiMovedError(f"the mcp SDK no longer has {where}.{name}") from error


def pending_request_ids(session: ClientSession) -> Container[object]:
    """The ids of the session's requests still waiting for an answer.

    The SDK uses a request's id as its progress token and has no public table of in-flight
    requests; the connection reads this one to keep the progress of its own calls out of the
    notifications it hands to the host.
    """
    dispatcher = _attribute(session, "_dispatcher", "ClientSession")
    pending = _attribute(dispatcher, "_pending", type(dispatcher).__name__)
    if not isinstance(pending, dict):
        raise PrivateApiMovedError(
            f"the mcp SDK's {type(dispatcher).__name__}._pending is a {type(pending).__name__}, not a dict"
        )
    return pending.keys()


def knows_output_schema(session: ClientSession, tool: str) -> bool:
    """Whether the session holds ``tool``'s output schema from a listing (``_tool_output_schemas``).

    ``call_tool`` validates a result against it, and lists the tools again first when it does
    not hold it: a result can be checked without waiting (``received_tool_result``) only then.
    """
    schemas = _attribute(session, "_tool_output_schemas", "ClientSession")
    return tool in schemas


def received_tool_result(session: ClientSession, tool: str, raw: dict[str, Any]) -> Any:
    """What ``session.call_tool(tool, …)`` makes of the answer ``raw``, step by step as it does
    (``send_request``'s clamping, per-version validation and sieve, the result adapter, then
    the output schema's check), for an answer that reached mcpfleet below the SDK
    (``client.raw``). Raises what ``call_tool`` raises for that answer.

    Only for a tool whose output schema the session holds (``knows_output_schema``): the
    check then never waits, and runs here to its end (and not at all when the tool declares
    no output schema, where it checks nothing).
    """
    steps = _result_steps()
    steps.clamp(raw)
    # The SDK's own fallback for a session with no negotiated version.
    version = _attribute(session, "_negotiated_version", "ClientSession") or "2025-11-25"
    with contextlib.suppress(KeyError):
        steps.methods.validate_server_result("tools/call", version, raw)
    foreign = steps.later_fields("tools/call", version)
    if not foreign.isdisjoint(raw):
        raw = {key: value for key, value in raw.items() if key not in foreign}
    adapter = _attribute(session, "_call_tool_adapter", "ClientSession")
    result = adapter.validate_python(raw, by_name=False)
    if (
        isinstance(result, steps.call_tool_result)
        and not result.is_error
        and _attribute(session, "_tool_output_schemas", "ClientSession").get(tool) is not None
    ):
        _run_without_waiting(session.validate_tool_result(tool, result), "ClientSession.validate_tool_result")
    return result


def _run_without_waiting(coroutine: Any, what: str) -> None:
    """Run a coroutine that has nothing to wait for to its end, here and now."""
    try:
        coroutine.send(None)
    except StopIteration:
        return
    coroutine.close()
    raise PrivateApiMovedError(f"the mcp SDK's {what} now waits where it did not")


def wire_result(method: str, version: str, result: Any) -> dict[str, Any]:
    """The wire form a lowlevel ``Server`` gives a handler's ``result`` for a handshake-era
    client (``ServerRunner._serialize``: the dump, then the per-version sieve), for an answer
    that mcpfleet writes itself. ``MCPError`` (``INTERNAL_ERROR``) for a result the sieve
    refuses, as the server answers it. No cache hint is applied: the gateway sets none for the
    methods this serves.
    """
    from pydantic import ValidationError

    steps = _result_steps()
    if version in steps.modern_versions:
        raise ValueError(f"wire_result serves the handshake era, not {version}")
    dumped: dict[str, Any] = steps.dump_result(result)
    try:
        serialized: dict[str, Any] = steps.methods.serialize_server_result(method, version, dumped)
    except ValidationError:
        from mcp.server import runner
        from mcp.shared.exceptions import MCPError
        from mcp_types import INTERNAL_ERROR

        runner.logger.exception("handler for %r returned an invalid result", method)
        raise MCPError(code=INTERNAL_ERROR, message="Handler returned an invalid result") from None
    return serialized


@dataclass(frozen=True)
class _ResultSteps:
    """The SDK's functions ``received_tool_result`` and ``wire_result`` run, looked up once."""

    clamp: Any
    later_fields: Any
    dump_result: Any
    methods: Any
    call_tool_result: Any
    modern_versions: Container[str]


@functools.cache
def _result_steps() -> _ResultSteps:
    import mcp_types
    from mcp.client import session as session_module
    from mcp.server import runner
    from mcp_types import methods
    from mcp_types.version import MODERN_PROTOCOL_VERSIONS

    return _ResultSteps(
        clamp=_attribute(session_module, "_clamp_inbound_ttl", "mcp.client.session"),
        later_fields=_attribute(session_module, "_later_revision_fields", "mcp.client.session"),
        dump_result=_attribute(runner, "_dump_result", "mcp.server.runner"),
        methods=methods,
        call_tool_result=mcp_types.CallToolResult,
        modern_versions=MODERN_PROTOCOL_VERSIONS,
    )


def server_connection_of(session: ServerSession) -> Connection:
    """The connection a server-side request arrived on (``ServerSession._connection``).

    The gateway keeps one record per client and must know which client each request comes
    from; the SDK builds a new ``ServerSession`` per request and hands handlers no public
    path to the ``Connection`` they share (nor a session id on stdio).
    """
    from mcp.server.connection import Connection

    connection = _attribute(session, "_connection", "ServerSession")
    if not isinstance(connection, Connection):
        raise PrivateApiMovedError(
            f"the mcp SDK's ServerSession._connection is a {type(connection).__name__}, not a Connection"
        )
    return connection


def open_http_sessions(manager: StreamableHTTPSessionManager) -> list[StreamableHTTPServerTransport]:
    """The transports of the handshake-era sessions a streamable HTTP manager still serves
    (``_server_instances``).

    The HTTP gateway closes their streams itself before the manager cancels them on shutdown
    (``mcpfleet.gateway.http``): the SDK cancels a session's request handlers and the reader of
    their answers together, and each handler then waits for a write nobody takes.
    """
    instances = _attribute(manager, "_server_instances", "StreamableHTTPSessionManager")
    if not isinstance(instances, dict):
        raise PrivateApiMovedError(
            f"the mcp SDK's StreamableHTTPSessionManager._server_instances is a "
            f"{type(instances).__name__}, not a dict"
        )
    return list(instances.values())


def http_session_transport(
    manager: StreamableHTTPSessionManager, session_id: str, user: object
) -> StreamableHTTPServerTransport | None:
    """The transport of the live handshake-era session ``session_id``, if ``user`` (the ASGI
    scope's) may use it: the manager's own test (``_server_instances``, ``_session_owners``).

    The HTTP gateway's fast path answers a session's calls without the manager
    (``mcpfleet.gateway.http_fast``); an unknown or ended session, or one created with another
    credential, is left to the manager, which answers 404.
    """
    from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser, authorization_context

    instances = _attribute(manager, "_server_instances", "StreamableHTTPSessionManager")
    owners = _attribute(manager, "_session_owners", "StreamableHTTPSessionManager")
    if not isinstance(instances, dict) or not isinstance(owners, dict):
        raise PrivateApiMovedError(
            "the mcp SDK's StreamableHTTPSessionManager._server_instances or ._session_owners is not a dict"
        )
    transport: StreamableHTTPServerTransport | None = instances.get(session_id)
    if transport is None or transport.is_terminated:
        return None
    requestor = authorization_context(user) if isinstance(user, AuthenticatedUser) else None
    return transport if requestor == owners.get(session_id) else None


def use_event_store(transport: StreamableHTTPServerTransport, store: object) -> None:
    """Make ``store`` the event store of this session's streams from now on (``_event_store``).

    The manager hands every session one store; a team gateway keys each session's events by the
    session (``gateway.shared_sessions``), which the SDK's ``EventStore`` interface never names.
    """
    _attribute(transport, "_event_store", "StreamableHTTPServerTransport")
    transport._event_store = store  # type: ignore[assignment]


async def adopt_http_session(
    manager: StreamableHTTPSessionManager,
    session_id: str,
    initialize_params: dict[str, Any],
    user: object,
    event_store: object,
) -> bool:
    """Serve the handshake-era session ``session_id``, opened by another process, from here on:
    a transport under that id in the manager's table (``_server_instances``, ``_session_owners``,
    as ``_admit_session`` registers one) and its server task in the manager's task group
    (``_task_group``, ``_lifespan_state``), whose connection starts initialized with the
    session's ``initialize`` parameters (``Connection.for_loop``, then what ``ServerRunner``
    commits on ``initialize`` and ``notifications/initialized``). ``False`` at the manager's
    session limit. Ends as the manager's own sessions end (``_discard_session``).
    """
    from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser, authorization_context
    from mcp.server.connection import Connection
    from mcp.server.runner import ServerRunner, serve_connection
    from mcp.server.streamable_http import StreamableHTTPServerTransport
    from mcp.shared.jsonrpc_dispatcher import JSONRPCDispatcher

    instances = _attribute(manager, "_server_instances", "StreamableHTTPSessionManager")
    owners = _attribute(manager, "_session_owners", "StreamableHTTPSessionManager")
    task_group = _attribute(manager, "_task_group", "StreamableHTTPSessionManager")
    lifespan_state = _attribute(manager, "_lifespan_state", "StreamableHTTPSessionManager")
    discard = _attribute(manager, "_discard_session", "StreamableHTTPSessionManager")
    negotiate = _attribute(ServerRunner, "_negotiate_initialize", "ServerRunner")
    if session_id in instances:
        return True
    if task_group is None or (manager.max_sessions is not None and len(instances) >= manager.max_sessions):
        return False
    init, negotiated = negotiate(initialize_params)
    transport = StreamableHTTPServerTransport(
        mcp_session_id=session_id,
        is_json_response_enabled=manager.json_response,
        event_store=event_store,  # type: ignore[arg-type]
        security_settings=manager.security_settings,
        retry_interval=manager.retry_interval,
        idle_timeout=manager.session_idle_timeout,
    )
    if isinstance(user, AuthenticatedUser):
        owners[session_id] = authorization_context(user)
    instances[session_id] = transport

    async def run_server(*, task_status: Any) -> None:
        import anyio

        async with transport.connect() as (read_stream, write_stream):
            task_status.started()
            try:
                idle_scope = transport.idle_scope if transport.idle_scope is not None else anyio.CancelScope()
                with idle_scope:
                    dispatcher: Any = JSONRPCDispatcher(
                        read_stream, write_stream, inline_methods=frozenset({"initialize"})
                    )
                    connection = Connection.for_loop(dispatcher, session_id=session_id)
                    connection.client_params, connection.protocol_version = init, negotiated
                    connection.initialized.set()
                    await serve_connection(
                        manager.app, dispatcher, connection=connection, lifespan_state=lifespan_state
                    )
            finally:
                await discard(session_id, transport)

    await task_group.start(run_server)
    return True


def has_standalone_stream(transport: StreamableHTTPServerTransport) -> bool:
    """Whether a session's client holds its standalone GET stream open (``_request_streams``
    under ``GET_STREAM_KEY``): where the session's messages unrelated to a request go."""
    from mcp.server.streamable_http import GET_STREAM_KEY

    streams = _attribute(transport, "_request_streams", "StreamableHTTPServerTransport")
    if not isinstance(streams, dict):
        raise PrivateApiMovedError(
            "the mcp SDK's StreamableHTTPServerTransport._request_streams is not a dict"
        )
    return GET_STREAM_KEY in streams


def oauth_is_initialized(provider: OAuthClientProvider) -> bool:
    """Whether the provider has loaded its stored tokens and client (``_initialized``)."""
    return bool(_attribute(provider, "_initialized", "OAuthClientProvider"))


async def oauth_refresh_request(provider: OAuthClientProvider) -> httpx2.Request:
    """The token refresh request the SDK would send (``_refresh_token``)."""
    build = _attribute(provider, "_refresh_token", "OAuthClientProvider")
    request: httpx2.Request = await build()
    return request


async def oauth_apply_refresh(provider: OAuthClientProvider, response: httpx2.Response) -> bool:
    """Store the tokens of a refresh answer; whether it brought any (``_handle_refresh_response``)."""
    handle = _attribute(provider, "_handle_refresh_response", "OAuthClientProvider")
    refreshed: bool = await handle(response)
    return refreshed


def oauth_add_bearer(provider: OAuthClientProvider, request: httpx2.Request) -> None:
    """Put the current access token on ``request`` (``_add_auth_header``)."""
    _attribute(provider, "_add_auth_header", "OAuthClientProvider")(request)


def check_oauth_provider_overrides(provider_class: type[OAuthClientProvider]) -> None:
    """Raise ``PrivateApiMovedError`` if the SDK's provider lacks a method mcpfleet overrides."""
    for name in OAUTH_PROVIDER_OVERRIDES:
        if not callable(getattr(provider_class, name, None)):
            raise PrivateApiMovedError(f"the mcp SDK no longer has OAuthClientProvider.{name}")


__all__ = [
    "OAUTH_PROVIDER_OVERRIDES",
    "PrivateApiMovedError",
    "adopt_http_session",
    "check_oauth_provider_overrides",
    "has_standalone_stream",
    "http_session_transport",
    "knows_output_schema",
    "oauth_add_bearer",
    "oauth_apply_refresh",
    "oauth_is_initialized",
    "oauth_refresh_request",
    "open_http_sessions",
    "pending_request_ids",
    "received_tool_result",
    "server_connection_of",
    "use_event_store",
    "wire_result",
]
