"""The HTTP gateway's fast path: a ``tools/call`` with nothing to stream, answered as one JSON body.

The SDK's streamable HTTP transport answers every request of a handshake-era session with an
SSE stream: a task group per POST (sse-starlette's four tasks), a priming event stored in the
event store, two memory streams per request, the session's message loop and its dispatcher
(validation, an OpenTelemetry span, a task per request), and the answer serialized by pydantic
and stored again. For a call whose answer is the only message that will ever travel back, none
of that buys anything; it is most of the 4 ms a call cost over loopback. ``FastCalls`` sits
between ``BearerGate`` (every check of the request is done by then, and the body parsed) and
the SDK's app, and answers such a call itself:

- a POST of one ``tools/call`` request whose client accepts ``application/json`` at least as
  much as ``text/event-stream`` (a client that prefers a stream, which it may resume with
  ``Last-Event-ID``, is given the SDK's);
- no ``progressToken`` (progress rides a stream), no ``logLevel`` opt-in and no
  ``input_required`` round (``requestState``, ``inputResponses``) of a 2026-07-28 request, and a
  2026-07-28 client that declared nothing a backend could ask of it (``relay.can_be_asked``);
- a handshake-era request names a session the SDK serves (``Mcp-Session-Id``), created with
  the same credential (``scope["user"]``), whose client is registered with the gateway and
  holds its standalone GET stream open: the backend's questions of the call then reach it
  there (``InFlight`` with no request id), which is what a client reads anyway, and its log
  messages ride the call's own response, which turns into a stream when one comes before the
  answer (``_CallResponse``: the answer stays last); a session without that stream gets the
  SDK's answer, whose stream carries them;
- a 2026-07-28 request carries its envelope (``_meta`` and the ``MCP-Protocol-Version``,
  ``Mcp-Method`` and ``Mcp-Name`` headers, checked by the SDK's own ladder).

Anything else goes on to the SDK unchanged, so both eras, resumable streams, progress,
cancellation and questions keep the SDK's behaviour. The answer itself is the SDK's: the same
result sieve for the protocol version (``serialize_server_result``), the same ``serverInfo``
stamp on a 2026-07-28 result, the same JSON-RPC error mapping. A handshake-era client cancels a
fast call with ``notifications/cancelled`` as it would any other (answered ``202``, like the
SDK); a 2026-07-28 client, by closing its connection.

Imported only by ``gateway.http`` when it serves.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import anyio
import pydantic_core

from mcpfleet.gateway.relay import can_be_asked
from mcpfleet.gateway.sessions import ClientSession, named_in_meta

if TYPE_CHECKING:
    from mcp.server.lowlevel.server import Server
    from starlette.types import ASGIApp, Receive, Scope, Send

    from mcpfleet.gateway.fast_path import FastPath
    from mcpfleet.gateway.forward import LogRelay
    from mcpfleet.gateway.sessions import ClientSessions

logger = logging.getLogger(__name__)

PARSED_BODY = "mcpfleet.parsed_body"
"""The ASGI scope key under which ``BearerGate`` leaves a POST's decoded JSON body (parsed once)."""

_JSON = "application/json"
_SSE = "text/event-stream"
_REQUEST_CANCELLED = -32800
"""What the SDK's handshake-era transport answers a cancelled request with (``REQUEST_CANCELLED``)."""


@dataclass(frozen=True)
class FastCall:
    """One ``tools/call`` the fast path answers: who asked, and what."""

    client: ClientSession
    request_id: str | int
    name: str
    arguments: dict[str, Any]
    params: Mapping[str, Any]
    scope: Scope
    """The request's ASGI scope: who asks, as the gateway's guard reads it (team mode's principal)."""
    on_log: LogRelay | None = None
    """Where the backend's logs of the call go (its response, ``_CallResponse``); ``None``: the
    client's own channel."""


CallAnswer = Callable[[FastCall], Awaitable[Any]]
"""Answers one call: the JSON-RPC ``result``, or raises the SDK's ``MCPError`` for an error."""


@dataclass(frozen=True)
class HttpFastPath:
    """What ``FastCalls`` needs of the gateway: its clients, the fast path to the backends'
    pipes (``gateway.fast_path``), and what answers the calls that one leaves."""

    sessions: ClientSessions
    pipes: FastPath
    answer: CallAnswer


class FastCalls:
    """ASGI: the calls ``FastCall`` describes answered by ``answer`` as JSON; the rest to ``app``."""

    def __init__(self, app: ASGIApp, server: Server[Any], fast_path: HttpFastPath) -> None:
        self.app = app
        self.server = server
        self.sessions = fast_path.sessions
        self.pipes = fast_path.pipes
        self.answer = fast_path.answer
        self._in_flight: dict[tuple[str, str | int], Callable[[], Awaitable[None]]] = {}
        """How to cancel each handshake-era call answered here, by session id and request id."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        message = scope.get(PARSED_BODY) if scope["type"] == "http" else None
        answered = False
        if isinstance(message, dict) and message.get("jsonrpc") == "2.0":  # else the SDK's 400
            method = message.get("method")
            if method == "tools/call" and "id" in message:
                answered = await self._answered(scope, receive, send, message)
            elif method == "ping" and "id" in message:
                answered = await self._pong(scope, send, message)
            elif method == "notifications/cancelled":
                answered = await self._cancelled(scope, send, message)
        if not answered:
            await self.app(scope, receive, send)

    async def _answered(self, scope: Scope, receive: Receive, send: Send, message: dict[str, Any]) -> bool:
        """Whether the call was answered here (``False``: it is the SDK's to answer)."""
        headers = _headers(scope)
        params = message.get("params")
        if not (_prefers_json(headers.get("accept", "")) and isinstance(params, dict)):
            return False
        name, arguments = params.get("name"), params.get("arguments", {})
        meta = params.get("_meta")
        if (
            not isinstance(name, str)
            or not isinstance(arguments, dict)
            or (meta is not None and not isinstance(meta, dict))
        ):
            return False  # the SDK answers a malformed call with its own error
        if meta is not None and "progressToken" in meta:
            return False
        version = headers.get("mcp-protocol-version")
        from mcp_types.version import MODERN_PROTOCOL_VERSIONS

        if version in MODERN_PROTOCOL_VERSIONS:
            client = self._modern_client(scope, message, params, headers)
            session_id = None
        else:
            session_id = headers.get("mcp-session-id")
            client = self._handshake_client(scope, session_id)
        if client is None or (session_id, message["id"]) in self._in_flight:
            return False  # a second request under an id still in flight: the SDK's to judge
        call = FastCall(client, message["id"], name, arguments, params, scope)
        if session_id is None:
            await self._answer_watching_disconnect(call, receive, send, version)
        else:
            await self._answer_in_session(call, session_id, scope, send, version)
        return True

    async def _pong(self, scope: Scope, send: Send, message: dict[str, Any]) -> bool:
        """Answer a handshake-era session's ``ping`` (an empty result, what the SDK answers)."""
        from mcpfleet.client._sdk import http_session_transport

        headers = _headers(scope)
        session_id = headers.get("mcp-session-id")
        if session_id is None or not _prefers_json(headers.get("accept", "")):
            return False
        if http_session_transport(self.server.session_manager, session_id, scope.get("user")) is None:
            return False
        body = pydantic_core.to_json({"jsonrpc": "2.0", "id": message["id"], "result": {}})
        await _send_json(send, 200, body, [(b"mcp-session-id", session_id.encode())])
        return True

    def _modern_client(
        self, scope: Scope, message: dict[str, Any], params: dict[str, Any], headers: dict[str, str]
    ) -> ClientSession | None:
        """The transient client of a 2026-07-28 request the fast path may answer, or ``None``."""
        from mcp.shared.inbound import (
            MCP_PARAM_HEADER_PREFIX,
            InboundLadderRejection,
            classify_inbound_request,
            find_duplicated_routing_header,
        )
        from mcp_types import LOG_LEVEL_META_KEY

        meta = params.get("_meta")
        if (
            not isinstance(meta, dict)
            or LOG_LEVEL_META_KEY in meta
            or "requestState" in params
            or "inputResponses" in params
        ):
            return None
        raw_headers = [(key.decode("latin-1"), "") for key, _ in scope["headers"]]
        if find_duplicated_routing_header(raw_headers) is not None or any(
            name.startswith(MCP_PARAM_HEADER_PREFIX.lower()) for name, _ in raw_headers
        ):
            return None  # the SDK refuses a doubled header, and checks Mcp-Param-* against the schema
        verdict = classify_inbound_request(message, headers=headers)
        if isinstance(verdict, InboundLadderRejection):
            return None  # the SDK answers the rejection, with its status
        capabilities = verdict.client_capabilities if isinstance(verdict.client_capabilities, dict) else {}
        if can_be_asked(capabilities):
            return None  # its backend may ask: the relay's input_required rounds are the SDK's
        return ClientSession.for_request(
            "modern", verdict.protocol_version, capabilities, named_in_meta(meta)
        )

    def _handshake_client(self, scope: Scope, session_id: str | None) -> ClientSession | None:
        """The registered client of a live handshake-era session with its GET stream open."""
        from mcpfleet.client._sdk import http_session_transport

        if session_id is None:
            return None
        transport = http_session_transport(self.server.session_manager, session_id, scope.get("user"))
        if transport is None:
            return None  # unknown, ended, or another credential's: the SDK answers 404
        client = self.sessions.by_session_id(session_id)
        if client is None or not _has_standalone_stream(transport):
            return None
        return client

    async def _answer_in_session(
        self, call: FastCall, session_id: str, scope: Scope, send: Send, version: str | None
    ) -> None:
        """Answer a handshake-era call: through the backend's pipe when the fast path takes it,
        else from the gateway's handler; as JSON, or as a stream when the backend logs first
        (``_CallResponse``); cancellable by the client."""
        key = (session_id, call.request_id)
        response = _CallResponse(send, call.client, [(b"mcp-session-id", session_id.encode())])
        call = replace(call, on_log=response.log)
        body = await self._through_the_pipes(call, key)
        if body is None:
            with anyio.CancelScope() as cancel:

                async def cancelled() -> None:
                    cancel.cancel()

                self._in_flight[key] = cancelled
                try:
                    _, body = await self._answer_body(call, version)  # this era answers errors with 200
                finally:
                    self._in_flight.pop(key, None)
            if cancel.cancelled_caught or body is None:
                body = _cancelled_body(call.request_id)
        await response.answer(body)

    async def _through_the_pipes(self, call: FastCall, key: tuple[str, str | int]) -> bytes | None:
        """The answer of the fast path to the backend's pipe (``gateway.fast_path``), or ``None``
        when it does not take the call. Its answer comes from the backend's read loop, through
        ``reply``; a client that cancels gets the SDK's ``Request cancelled`` instead."""
        import mcp_types

        from mcpfleet.gateway.fast_path import FastCaller

        answered: asyncio.Future[bytes] = asyncio.get_running_loop().create_future()

        def reply(data: bytes) -> None:
            if not answered.done():
                answered.set_result(data)

        request = mcp_types.JSONRPCRequest.model_construct(
            jsonrpc="2.0", id=call.request_id, method="tools/call", params=dict(call.params)
        )
        if not await self.pipes.take(request, reply, FastCaller(call.client, call.on_log)):
            return None

        async def cancelled() -> None:
            notice = mcp_types.JSONRPCNotification.model_construct(
                jsonrpc="2.0", method="notifications/cancelled", params={"requestId": call.request_id}
            )
            await self.pipes.take(notice, reply)
            reply(_cancelled_body(call.request_id))

        self._in_flight[key] = cancelled
        try:
            return await answered
        finally:
            self._in_flight.pop(key, None)
            if not answered.done():  # this request is being torn down (the gateway is stopping)
                with anyio.CancelScope(shield=True):
                    await self.pipes.forget(reply)

    async def _answer_watching_disconnect(
        self, call: FastCall, receive: Receive, send: Send, version: str | None
    ) -> None:
        """Answer a 2026-07-28 call; a client that closes its connection cancels it (its only way).

        The wait for the disconnect is one bare asyncio task whose end cancels the call: a task
        group would cost the call as much again as all of the fast path's own work."""
        with anyio.CancelScope() as cancel:

            def hung_up(_: object) -> None:
                cancel.cancel()

            hangup = asyncio.ensure_future(_disconnect(receive))
            hangup.add_done_callback(hung_up)
            try:
                answer = await self._answer_body(call, version)
            finally:
                hangup.remove_done_callback(hung_up)
                hangup.cancel()
        if not cancel.cancelled_caught:
            await _send_json(send, *answer, [])

    async def _answer_body(self, call: FastCall, version: str | None) -> tuple[int, bytes]:
        """The HTTP status and JSON-RPC body of the answer, as the SDK's path would give them."""
        from mcp.server.runner import modern_error_data
        from mcp.shared.inbound import ERROR_CODE_HTTP_STATUS
        from mcp_types import DEFAULT_NEGOTIATED_VERSION, SERVER_INFO_META_KEY
        from mcp_types import methods as protocol_methods
        from mcp_types.version import MODERN_PROTOCOL_VERSIONS

        wire_version = version or DEFAULT_NEGOTIATED_VERSION
        modern = wire_version in MODERN_PROTOCOL_VERSIONS
        try:
            result = _dumped(await self.answer(call))
            result = protocol_methods.serialize_server_result("tools/call", wire_version, result)
            if modern:
                result.setdefault("resultType", "complete")
                meta = result.get("_meta")
                if meta is None or (isinstance(meta, dict) and meta.get(SERVER_INFO_META_KEY) is None):
                    result["_meta"] = {**(meta or {}), SERVER_INFO_META_KEY: self.server.server_info_stamp}
        except Exception as error:
            data = modern_error_data(error)
            status = ERROR_CODE_HTTP_STATUS.get(data.code, 200) if modern else 200
            return status, _error_body(call.request_id, data.code, data.message, data.data)
        return 200, pydantic_core.to_json({"jsonrpc": "2.0", "id": call.request_id, "result": result})

    async def _cancelled(self, scope: Scope, send: Send, message: dict[str, Any]) -> bool:
        """Cancel a call answered here, named by a session's ``notifications/cancelled``; whether
        it was one of them (else the SDK's, which may hold the call)."""
        params = message.get("params")
        session_id = _headers(scope).get("mcp-session-id")
        if not isinstance(params, dict) or session_id is None:
            return False
        cancel = self._in_flight.get((session_id, params.get("requestId")))  # type: ignore[arg-type]
        if cancel is None:
            return False
        await cancel()
        await send(
            {
                "type": "http.response.start",
                "status": 202,
                "headers": [(b"mcp-session-id", session_id.encode())],
            }
        )
        await send({"type": "http.response.body", "body": b""})
        return True


async def _disconnect(receive: Receive) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass


def _dumped(result: Any) -> dict[str, Any]:
    """A handler's result as JSON, as the SDK's server dumps it (a model, or a dict it copies)."""
    from pydantic import BaseModel

    if isinstance(result, BaseModel):
        return result.model_dump(by_alias=True, mode="json", exclude_none=True)
    return dict(result)


def _headers(scope: Scope) -> dict[str, str]:
    return {key.decode("latin-1"): value.decode("latin-1") for key, value in scope["headers"]}


def _prefers_json(accept: str) -> bool:
    """Whether ``accept`` takes JSON at least as gladly as an event stream (RFC 9110 weights;
    the wildcards count as the SDK counts them). At equal weights the type listed first wins:
    a client that names the stream first (``text/event-stream, application/json``, as the
    conformance suite's resumption scenario sends) is asking for it; the SDK's own client names
    JSON first."""
    json_weight = sse_weight = 0.0
    json_at = sse_at = len(accept)
    for position, item in enumerate(accept.split(",")):
        media, *parameters = (part.strip() for part in item.split(";"))
        weight = 1.0
        for parameter in parameters:
            key, _, value = parameter.partition("=")
            if key.strip().lower() == "q":
                try:
                    weight = float(value)
                except ValueError:
                    weight = 0.0
        media = media.lower()
        if media in (_JSON, "application/*", "*/*") and weight > json_weight:
            json_weight, json_at = weight, position
        if media in (_SSE, "text/*", "*/*") and weight > sse_weight:
            sse_weight, sse_at = weight, position
    return json_weight > 0 and (json_weight > sse_weight or (json_weight == sse_weight and json_at <= sse_at))


def _has_standalone_stream(transport: Any) -> bool:
    from mcpfleet.client._sdk import has_standalone_stream

    return has_standalone_stream(transport)


def _cancelled_body(request_id: str | int) -> bytes:
    return _error_body(request_id, _REQUEST_CANCELLED, "Request cancelled")


def _error_body(request_id: str | int, code: int, message: str, data: Any = None) -> bytes:
    error: dict[str, Any] = {"code": code, "message": message}
    if data is not None:
        error["data"] = data
    return pydantic_core.to_json({"jsonrpc": "2.0", "id": request_id, "error": error})


class _CallResponse:
    """The HTTP answer to a handshake-era fast call: one JSON body, unless the backend logs
    before its answer. Its logs then ride this response as a stream, the answer last, as the
    SDK's stream would carry them: sent on the session's standalone stream instead, they could
    reach the client after the answer, which it reads on another connection."""

    def __init__(self, send: Send, client: ClientSession, headers: list[tuple[bytes, bytes]]) -> None:
        self.send = send
        self.client = client
        self.headers = headers
        self.streaming = False

    async def log(self, params: dict[str, Any]) -> None:
        """A log message of the call's backend (``InFlight.on_log``), at the client's level."""
        level = params.get("level")
        if not isinstance(level, str) or not self.client.wants_log(level):
            return
        notice = {"jsonrpc": "2.0", "method": "notifications/message", "params": params}
        await self._event(pydantic_core.to_json(notice), more=True)

    async def answer(self, body: bytes) -> None:
        """The call's JSON-RPC answer: the whole body, or the stream's last event."""
        if self.streaming:
            await self._event(body, more=False)
        else:
            await _send_json(self.send, 200, body, self.headers)

    async def _event(self, data: bytes, *, more: bool) -> None:
        if not self.streaming:
            self.streaming = True
            headers = [(b"content-type", _SSE.encode()), (b"cache-control", b"no-cache"), *self.headers]
            await self.send({"type": "http.response.start", "status": 200, "headers": headers})
        event = b"event: message\r\ndata: " + data + b"\r\n\r\n"
        await self.send({"type": "http.response.body", "body": event, "more_body": more})


async def _send_json(send: Send, status: int, body: bytes, headers: list[tuple[bytes, bytes]]) -> None:
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                *headers,
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})
