"""Requests sent below the SDK ``Client``: written straight to a stdio server's stdin, answered
before the SDK's session sees the answer.

A relay that only passes a ``tools/call`` on (the gateway's fast path, ``gateway.fast_path``)
needs none of the SDK client's machinery for it (its dispatcher's task hops, its tracing span,
its per-request memory stream), only the pipe and the answer. ``RawExchange`` is that, on one
connection:

* the request goes out under an id the SDK never mints: the SDK numbers its requests 1, 2, …;
  these are strings (``"mcpfleet-1"``, …), so no answer can be taken for the other's;
* every message from the server passes ``intercept`` first, in the SDK's own read loop
  (``watched.py``), in the order the server wrote them: an answer to a raw request, and the
  progress of one, are taken there and never reach the SDK's session; anything else goes on;
* the answer is handed to the request's ``RawCall`` in that loop, synchronously: what the
  caller does with it must not block the connection's reading;
* a raw request carries a progress token (its own id), as the SDK's calls do (the
  connection's deadline is re-armed by progress): a server behaves the same either way;
* when the transport ends, every raw request still open is told (``RawCall.ended``).

Only stdio connections in the handshake era offer it (``available``): a 2026-07-28 request
carries per-request ``_meta`` the SDK writes, and HTTP has no pipe to write to. The SDK's own
post-processing of an answer (``_sdk.received_tool_result``) stays with the connection
(``ServerConnection.raw_tool_result``), so a raw call's result is the one ``call_tool``
returns for the same answer.

Part of ``connection.py``, which imports the SDK: the messages read here are its types.
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Protocol

import anyio
import mcp_types

if TYPE_CHECKING:
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
    """What a raw request's sender is told, each from the connection's read loop (no blocking)."""

    def answered(self, message: Any) -> None:
        """The server's answer: an ``mcp_types.JSONRPCResponse`` or ``JSONRPCError``."""

    def progressed(self) -> None:
        """The server reported progress on the request (its deadline is re-armed)."""

    def ended(self) -> None:
        """The transport ended before the server answered."""


class RawExchange:
    """The raw requests of one connection, and the hook that takes their answers."""

    def __init__(self, server: str) -> None:
        self.server = server
        self._write: LineWriter | None = None
        self._pending: dict[str, RawCall] = {}
        self._ids = itertools.count(1)
        self.logs_seen = 0
        """How many log messages (``notifications/message``) the server has sent: a caller
        compares it before and after its request to know whether the server logged meanwhile."""

    @property
    def available(self) -> bool:
        return self._write is not None

    def attach(self, write: LineWriter) -> None:
        """Offer raw requests, written with ``write`` (the connection is up, in the handshake era)."""
        self._write = write

    def detach(self) -> None:
        """No more raw requests: the transport is ending; the open ones are told it ended."""
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
    """Run a ``RawCall`` callback in the read loop; its failure must not end the connection."""
    try:
        callback(*args)
    except Exception:
        logger.exception("a raw request's callback failed")


__all__ = ["RAW_ID_PREFIX", "RawCall", "RawExchange"]
