"""Requests sent below the SDK ``Client``: written straight to a stdio server's stdin, answered
before the SDK's session sees the answer.

A relay that only passes a ``tools/call`` on (the gateway's fast path, ``gateway.fast_path``)
needs none of the SDK client's machinery for it (its dispatcher's task hops, its tracing span,
its per-request memory stream), only the pipe and the answer. ``RawExchange`` is that, on one
connection:

* the request goes out under an id the SDK never mints: the SDK numbers its requests 1, 2, …;
  these are strings (``"mcpfleet-1"``, …), so no answer can be taken for the other's;
* every message from the server passes ``intercept`` first, in the transport's reading task
  (``StdioTransport.intercept``), in the order the server wrote them: an answer to a raw
  request, and the progress of one, are taken there and never reach the SDK's session
  (no hop to the session's task either); anything else goes on;
* the answer is handed to the request's ``RawCall`` in that task, synchronously: what the
  caller does with it must not block the connection's reading;
* a raw request carries a progress token (its own id), as the SDK's calls do (the
  connection's deadline is re-armed by progress): a server behaves the same either way;
* when the transport ends, every raw request still open is told (``RawCall.ended``).

Only stdio connections in the handshake era offer it (``available``): a 2026-07-28 request
carries per-request ``_meta`` the SDK writes, and HTTP has no pipe to write to. The SDK's own
post-processing of an answer (``_sdk.received_tool_result``) and the connection's error map
run on a raw call's answer too (``tool_result``), so its result is the one
``ServerConnection.call_tool`` returns for the same answer.

Part of ``connection.py``, which imports the SDK: the messages read here are its types.
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Protocol

import anyio
import mcp_types
from mcp.shared.exceptions import MCPError

from mcpfleet.client._errors import Asked, closed_error, request_failure
from mcpfleet.client._sdk import knows_output_schema, received_tool_result
from mcpfleet.transport.stdio import StdioTransport

if TYPE_CHECKING:
    from mcp import Client
    from mcp.client.session import ClientSession
    from mcp.shared.message import SessionMessage

logger = logging.getLogger(__name__)

RAW_ID_PREFIX = "mcpfleet-"
"""Raw request ids are this prefix and a counter: strings, where the SDK's ids are numbers."""
LOG_MESSAGE = "notifications/message"
PROGRESS = "notifications/progress"
CANCELLED = "notifications/cancelled"
CANCEL_WRITE_BOUND_S = 2.0
"""How long telling the server of an abandoned request may take (the SDK's own bound is alike)."""

LineWriter = Callable[[bytes], Awaitable[None]]
"""Writes whole JSON-RPC lines to the server (``StdioTransport.send_lines``)."""


class RawCall(Protocol):
    """What a raw request's sender is told, each from the transport's reading task (no blocking)."""

    def answered(self, message: Any) -> None:
        """The server's answer: an ``mcp_types.JSONRPCResponse`` or ``JSONRPCError``."""

    def progressed(self) -> None:
        """The server reported progress on the request (its deadline is re-armed)."""

    def ended(self) -> None:
        """The transport ended before the server answered."""


class RawExchange:
    """The raw requests of one connection, and the hook that takes their answers.

    ``client_of`` is the connection's SDK ``Client`` while it is up, ``close_reason`` why it
    ended, ``ended`` whether it has."""

    def __init__(
        self,
        server: str,
        client_of: Callable[[], Client | None],
        close_reason: Callable[[], str | None],
        ended: Callable[[], bool],
    ) -> None:
        self.server = server
        self._client_of = client_of
        self._close_reason = close_reason
        self._ended = ended
        self._write: LineWriter | None = None
        self._pending: dict[str, RawCall] = {}
        self._ids = itertools.count(1)
        self.logs_seen = 0
        """How many log messages (``notifications/message``) the server has sent: a caller
        compares it before and after its request to know whether the server logged meanwhile."""

    @property
    def available(self) -> bool:
        return self._write is not None

    def _session_of(self) -> ClientSession | None:
        client = self._client_of()
        return client.session if client is not None else None

    def ready(self, tool: str) -> bool:
        """Whether a call of ``tool`` may be sent raw now: the connection is up and offers it,
        and a result of ``tool`` can be checked at once (``_sdk.knows_output_schema``)."""
        session = self._session_of()
        return (
            self._write is not None
            and session is not None
            and not self._ended()
            and knows_output_schema(session, tool)
        )

    def tool_result(
        self, tool: str, answer: mcp_types.JSONRPCResponse | mcp_types.JSONRPCError | None
    ) -> mcp_types.CallToolResult:
        """The result ``ServerConnection.call_tool(tool, …)`` returns, or the error it raises,
        for ``answer``: the server's answer to a raw ``tools/call`` (``None``: the transport
        ended first). Only for a tool that was ``ready``."""
        try:
            if answer is None:
                raise MCPError(code=mcp_types.CONNECTION_CLOSED, message="Connection closed")
            if isinstance(answer, mcp_types.JSONRPCError):
                error = answer.error
                raise MCPError(code=error.code, message=error.message, data=error.data)
            session = self._session_of()
            if session is None:
                raise closed_error(self.server, self._close_reason())
            result = received_tool_result(session, tool, answer.result)
            if not isinstance(result, mcp_types.CallToolResult):
                # ``call_tool`` would answer the rounds of a result claimed by an extension:
                # mcpfleet's connections claim none, so this is a result it cannot use.
                raise RuntimeError(f"unexpected result type {type(result).__name__}")
            return result
        except Exception as error:
            failure = request_failure(
                error, Asked(self.server, "tools/call", tool), close_reason=self._close_reason
            )
            if failure is None:
                raise
            raise failure from error

    def offer(self, transport: object, era: str | None) -> None:
        """Offer raw requests on ``transport``, the connection's, now past its handshake: on a
        stdio one in the handshake era (the others offer none). From then on the transport
        hands every message to ``intercept`` first, and its end ``detach``es."""
        if era == "legacy" and isinstance(transport, StdioTransport):
            transport.intercept = self.intercept
            transport.on_read_end = self.detach
            self.attach(transport.send_lines)

    def attach(self, write: LineWriter) -> None:
        """Offer raw requests, written with ``write``."""
        self._write = write

    def detach(self) -> None:
        """No more raw requests: the transport ended; the open ones are told it ended."""
        self._write = None
        pending, self._pending = self._pending, {}
        for call in pending.values():
            _tell(call.ended)

    async def send(self, method: str, params: dict[str, Any], call: RawCall) -> str | None:
        """Send ``method`` with ``params`` (a progress token is added); ``call`` gets its answer.

        Returns the request's id, or ``None`` when nothing was sent (no raw requests here,
        or the pipe is closed): the request has not left this process, the caller may send it
        another way."""
        from pydantic_core import to_json

        write = self._write
        if write is None:
            return None
        request_id = f"{RAW_ID_PREFIX}{next(self._ids)}"
        meta = params.get("_meta")
        params = (
            {**params, "_meta": {**meta, "progressToken": request_id}}
            if isinstance(meta, dict)
            else {
                **params,
                "_meta": {"progressToken": request_id},
            }
        )
        line = to_json({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}) + b"\n"
        self._pending[request_id] = call
        try:
            await write(line)
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, OSError) as error:
            logger.debug("%s: a raw request could not be written: %r", self.server, error)
            self._pending.pop(request_id, None)
            return None
        except BaseException:
            # Cancelled mid-write: whether the line left is unknown, so the server is told.
            with anyio.CancelScope(shield=True), anyio.move_on_after(CANCEL_WRITE_BOUND_S):
                await self.abandon(request_id, "caller cancelled")
            raise
        return request_id

    async def abandon(self, request_id: str, reason: str) -> None:
        """Stop waiting for ``request_id``: the server is told (``notifications/cancelled``, as
        the SDK tells it of a call it gives up), and its answer, if one still comes, is dropped."""
        from pydantic_core import to_json

        self._pending.pop(request_id, None)
        write = self._write
        if write is None:
            return
        params = {"requestId": request_id, "reason": reason}
        try:
            await write(to_json({"jsonrpc": "2.0", "method": CANCELLED, "params": params}) + b"\n")
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, OSError) as error:
            logger.debug("%s: a cancellation could not be written: %r", self.server, error)

    def intercept(self, item: SessionMessage) -> bool:
        """Whether ``item`` (the server's next message) was the answer or progress of a raw
        request, taken here; counts the server's log messages on the way."""
        message = item.message
        if isinstance(message, mcp_types.JSONRPCNotification):
            if message.method == LOG_MESSAGE:
                self.logs_seen += 1
            elif message.method == PROGRESS and self._pending:
                token = (message.params or {}).get("progressToken")
                call = self._pending.get(token) if isinstance(token, str) else None
                if call is not None:
                    _tell(call.progressed)
                    return True
            return False
        if not isinstance(message, mcp_types.JSONRPCResponse | mcp_types.JSONRPCError):
            return False
        request_id = message.id
        if not isinstance(request_id, str) or not request_id.startswith(RAW_ID_PREFIX):
            return False
        # Ours, answered or not: a late answer to an abandoned request is dropped here, as the
        # SDK drops its own late answers.
        answered = self._pending.pop(request_id, None)
        if answered is not None:
            _tell(answered.answered, message)
        return True


def _tell(callback: Callable[..., None], *args: Any) -> None:
    """Run a ``RawCall`` callback in the reading task; its failure must not end the connection."""
    try:
        callback(*args)
    except Exception:
        logger.exception("a raw request's callback failed")


__all__ = ["RAW_ID_PREFIX", "RawCall", "RawExchange"]
