"""The fast path of a ``tools/call``: from the client's parsed message to the backend's pipe and
back, without the SDK's server or client in between.

A call that needs nothing of the gateway but the relaying (the name resolved, the id and the
name rewritten, the answer sent back under the client's id) costs the SDK's server a task, a
tracing span, validation of what it relays and several hops between tasks, and the SDK's client
as much again. ``FastPath.take`` does that relaying itself: the request goes out below the SDK
``Client`` (``client.raw``, under an id the SDK never mints), and the backend's answer, taken
in the transport's reading task before the SDK's session sees it, is written to the client
from there, with no task of its own.

What the answer says is the SDK path's, byte for byte: the backend's result goes through the
very steps the SDK's client and server apply to it (``RawExchange.tool_result``,
``client._sdk.wire_result``), and a failure through the gateway's own mapping
(``core.call_failure``, ``handlers.jsonrpc_error``). ``tests/integration/gateway/
test_gateway_fast_path.py`` diffs both paths over every tool of a reference backend.

``take`` decides per request, from the message as parsed (nothing is parsed twice): it takes a
``tools/call`` of a handshake-era client, with no progress token, of a tool the catalog serves
now (not withheld, not the tool budget's ``find_tools``/``call_tool``) on a stdio backend
connected now in the handshake era whose tool the connection can check at once; and the
client's ``notifications/cancelled`` of a call it took. Anything else it leaves (``False``) to
the SDK's server, unchanged: progress, ``input_required``, the budget's tools, a backend still
starting, 2026-07-28 clients and backends, and every call while the gateway's guard sees each
asker (team mode: ``Views.passive``), whose hooks only the gateway's request path runs. The
transport says whose request it is (``FastCaller``).

While a call is out, it is in the relay's registry of requests in flight like any other: the
backend's questions (sampling, elicitation, roots) reach its client, and its log messages go
with the call, before its answer (when the backend logged meanwhile, the answer waits for them
as the SDK path's does). Both ride the client's own channel, not the request's (which has no
SDK channel): on stdio and a daemon session's socket that is the same stream; a transport
where it is not (streamable HTTP without a standalone stream) must offer only the calls of
clients that can be reached there. Its deadline is the connection's (``toolTimeout``, re-armed by
progress), kept by one timer for the whole gateway; when it passes, or the client cancels, the
backend is told (``notifications/cancelled``) as the SDK tells it.

This module imports the SDK: import it only to serve.
"""

from __future__ import annotations

import logging
import math
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import anyio
import anyio.lowlevel
import mcp_types
from mcp.shared.jsonrpc_dispatcher import handler_exception_to_error_data

from mcpfleet.client._sdk import wire_result
from mcpfleet.client.deadline import PROGRESS_CEILING_FACTOR, call_expired
from mcpfleet.contract import notifications
from mcpfleet.errors import ConnectionClosedError, MCPFleetError
from mcpfleet.fleet.manager import lost_during_call
from mcpfleet.gateway.budget import CALL_TOOL, FIND_TOOLS
from mcpfleet.gateway.core import LOG_FLUSH_TIMEOUT_S, Gateway, call_failure, is_error_result
from mcpfleet.gateway.forward import Forward, InFlight, LogRelay
from mcpfleet.gateway.handlers import call_scoped_logs, jsonrpc_error
from mcpfleet.telemetry import active

if TYPE_CHECKING:
    from mcpfleet.client.connection import ServerConnection
    from mcpfleet.gateway.sessions import ClientSession
    from mcpfleet.telemetry.calls import RawCall

logger = logging.getLogger(__name__)

Reply = Callable[[bytes], None]
"""Takes one JSON-RPC message for the client (UTF-8 JSON, no line end) and sends it on, in the
order given, after whatever the transport was given before. It must not block: it is called
from a backend transport's reading task, which other clients' answers share."""

TOOLS_CALL = "tools/call"
ABANDONED = "caller cancelled"
"""The reason the backend reads in the cancellation of a call given up (the SDK's words)."""
_PLAIN_CALL_KEYS = frozenset({"name", "arguments", "_meta"})
"""The params of a call the fast path takes: anything else is for the SDK to read."""
_MCP_META_PREFIX = "io.modelcontextprotocol/"
LOG_TURNS = 3
"""Turns of the event loop an answer gives a log the backend wrote before it to be set on its
way (the session's read, its notification task, the relay's first step)."""


@dataclass(frozen=True)
class FastCaller:
    """Whose request it is, as the transport knows it."""

    client: ClientSession | None = None
    """The client's session; ``None``: the gateway's one handshake-era client (a stdio
    gateway, a daemon session), and no fast path while it has none or several."""
    on_log: LogRelay | None = None
    """Where the backend's logs of the call go, when not on the client's own channel (the
    HTTP fast path's response, which must carry them before the answer)."""


ANY_CALLER = FastCaller()


class FastPath:
    """The fast path of one gateway; every transport serving the gateway may offer it messages."""

    def __init__(self, gateway: Gateway) -> None:
        self.gateway = gateway
        self._calls: dict[tuple[Reply, Any], _FastCall] = {}
        self._deadlines = _Deadlines()
        self.taken = 0
        """How many calls the fast path has taken."""

    async def take(self, message: Any, reply: Reply, caller: FastCaller = ANY_CALLER) -> bool:
        """Take ``message`` (a parsed ``mcp_types.JSONRPCMessage``) if the fast path answers it,
        through ``reply``; ``False``: it was not taken, and goes to the SDK's server as it is.

        Returns once a call is on its way to the backend (its answer comes later, through
        ``reply``), or once a cancellation has been passed on.
        """
        if isinstance(message, mcp_types.JSONRPCRequest):
            if message.method != TOOLS_CALL:
                return False
            return await self._call(message, reply, caller)
        if isinstance(message, mcp_types.JSONRPCNotification) and message.method == notifications.CANCELLED:
            return await self._cancelled(message, reply)
        return False

    async def forget(self, reply: Reply) -> None:
        """The client behind ``reply`` is gone: give up its calls, telling their backends."""
        for key, call in list(self._calls.items()):
            if key[0] == reply:
                await call.abandon()

    # -- one call --------------------------------------------------------------------------------------

    async def _call(self, request: mcp_types.JSONRPCRequest, reply: Reply, caller: FastCaller) -> bool:
        params = request.params
        if params is None or not params.keys() <= _PLAIN_CALL_KEYS or not _plain_meta(params.get("_meta")):
            return False
        name = params.get("name")
        arguments = params.get("arguments")
        if arguments is None:
            arguments = {}
        if not isinstance(name, str) or not isinstance(arguments, dict):
            return False
        key = (reply, request.id)
        if key in self._calls:
            return False  # a second request under an id still in flight: the SDK's to judge
        client = caller.client if caller.client is not None else self.gateway.sessions.only()
        if client is None or client.era != "legacy":
            return False
        if not self.gateway.views.passive:
            return False  # a guard that sees each asker (team mode) judges every call itself
        forward = resolve_now(self.gateway, client, name, arguments)
        if forward is None or forward.server is None or forward.connection is None:
            return False
        connection = forward.connection
        if not connection.raw.ready(forward.backend_name):
            return False
        call = _FastCall(self, key, forward, connection, client, request.id, reply, caller)
        if not await call.send(params.get("_meta")):
            return False
        self.taken += 1
        return True

    async def _cancelled(self, notice: mcp_types.JSONRPCNotification, reply: Reply) -> bool:
        request_id = (notice.params or {}).get("requestId")
        call = self._calls.get((reply, request_id)) if isinstance(request_id, int | str) else None
        if call is None:
            return False
        await call.abandon()
        return True


def resolve_now(
    gateway: Gateway, client: ClientSession, name: str, arguments: dict[str, Any]
) -> Forward | None:
    """``Gateway.resolve_call`` when it has nothing to decide or wait for: the tool budget
    passes the name through, the served catalog names a tool now, which is not withheld, on a
    server connected now. ``None`` when any of that does not hold: ``resolve_call`` decides."""
    if gateway.budget.mode != "all" and name in (FIND_TOOLS, CALL_TOOL):
        return None
    target = gateway.catalog.tool_target(name)
    if target is None:
        return None
    fleet = gateway.fleet
    if any((held.server, held.tool) == target for held in fleet.withheld_tools()):
        return None
    server, tool = target
    connection = fleet.get_connection(server)
    if connection is None:
        return None
    return Forward(fleet, client, "tools", name, server, tool, connection, arguments)


def _plain_meta(meta: Any) -> bool:
    """Whether a call's ``_meta`` asks nothing of the gateway: no progress, no 2026-07-28 key."""
    if meta is None:
        return True
    if not isinstance(meta, dict) or "progressToken" in meta:
        return False
    return not any(isinstance(key, str) and key.startswith(_MCP_META_PREFIX) for key in meta)


class _FastCall:
    """One call the fast path took: out at its backend until answered, cancelled or expired.

    Its ``answered``/``progressed``/``ended`` (``client.raw.RawCall``) run in the backend
    transport's reading task."""

    def __init__(
        self,
        fast_path: FastPath,
        key: tuple[Reply, Any],
        forward: Forward,
        connection: ServerConnection,
        client: ClientSession,
        request_id: Any,
        reply: Reply,
        caller: FastCaller,
    ) -> None:
        assert forward.server is not None
        self._fast_path = fast_path
        self._key = key
        self.forward = forward
        self.server = forward.server
        self.tool = forward.backend_name
        self.connection = connection
        self.client = client
        self.request_id = request_id
        self._reply = reply
        # The request has no SDK channel of its own: the backend's questions and logs of the
        # call go on the client's (the one stream of stdio and of a daemon session's socket).
        session = client.sdk_session
        assert session is not None, "a handshake-era client is registered, with its SDK session"
        on_log = caller.on_log if caller.on_log is not None else call_scoped_logs(session, None, client)
        self.flight = InFlight(forward.server, forward, session, None, on_log=on_log)
        self.done = False
        self.backend_id: str | None = None
        self.record: RawCall | None = None
        """Its telemetry (``mcpfleet.telemetry``), from when it is sent until it ends."""
        self._logs_before = connection.raw.logs_seen
        config = connection.config
        self.timeout_ms = config.effective_tool_timeout_ms
        self._timeout_s = self.timeout_ms / 1000
        self._started = anyio.current_time()
        self.deadline = self._started + self._timeout_s if self.timeout_ms > 0 else math.inf
        self._ceiling = self._started + self._timeout_s * PROGRESS_CEILING_FACTOR

    # -- sending ---------------------------------------------------------------------------------------

    async def send(self, client_meta: Any) -> bool:
        """Send the call on; ``client_meta``, the client's ``_meta``, may carry its trace context."""
        fast_path = self._fast_path
        fast_path._calls[self._key] = self
        flights = fast_path.gateway.relay.flights
        flights.enter(self.flight)
        fast_path._deadlines.arm(self)
        params: dict[str, Any] = {"name": self.tool, "arguments": dict(self.forward.arguments)}
        telemetry = active()
        if telemetry is not None:
            self.record = telemetry.raw_call(self.server, self.tool, client_meta)
            backend_meta = self.record.backend_meta()
            if backend_meta:
                params["_meta"] = backend_meta
        try:
            self.backend_id = await self.connection.raw.send(TOOLS_CALL, params, self)
        finally:
            if self.backend_id is None and not self.done:
                self.record = None  # not sent: the SDK's path answers (and records) the call
                self._settle()
        return self.backend_id is not None

    def _settle(self) -> None:
        """Out of every table: the call is over, whatever its end."""
        self.done = True
        fast_path = self._fast_path
        if fast_path._calls.get(self._key) is self:
            del fast_path._calls[self._key]
        fast_path.gateway.relay.flights.leave(self.flight)
        fast_path._deadlines.disarm(self)

    def _recorded(self, error: str | None) -> None:
        """The call's telemetry ends: ``error`` says how it failed (``None``: it did not)."""
        if self.record is not None:
            self.record.end(error)
            self.record = None

    # -- what the backend says (its transport's reading task) ------------------------------------------

    def answered(self, message: Any) -> None:
        if self.done:
            return
        if self.connection.raw.logs_seen != self._logs_before:
            # The backend logged during the call: its logs go out first (``server_logs``),
            # once the SDK's session has read them (they were handed on before this answer).
            self._fast_path.gateway.fleet.task_group.start_soon(self._answer_after_logs, message)
            return
        self._answer(message)

    def progressed(self) -> None:
        if self.done or self.timeout_ms <= 0:
            return
        self.deadline = min(anyio.current_time() + self._timeout_s, self._ceiling)
        self._fast_path._deadlines.rearm(self)

    def ended(self) -> None:
        if not self.done:
            self._answer(None)

    async def _answer_after_logs(self, message: Any) -> None:
        # The session reads the log (one turn) and starts the task that sets up its delivery
        # (the next): only then is the delivery there to wait for.
        for _ in range(LOG_TURNS):
            await anyio.lowlevel.checkpoint()
        with anyio.move_on_after(LOG_FLUSH_TIMEOUT_S):
            for delivered in self.flight.log_deliveries:
                await delivered.wait()
        if not self.done:
            self._answer(message)

    def _answer(self, message: Any) -> None:
        answer, error = self._answer_bytes(lambda: self._outcome(message))
        self._settle()  # after the outcome, which says whether it failed (``flight.failed``)
        self._recorded(error)
        self._reply(answer)

    def _answer_bytes(self, outcome: Callable[[], Any]) -> tuple[bytes, str | None]:
        """The answer the SDK path gives the client for the call's ``outcome()``: its result,
        or what ``Gateway.call_tool`` raises; and how it failed, for telemetry."""
        failure: Exception
        try:
            result = outcome()
            return self._result_bytes(result), ("tool_error" if is_error_result(result) else None)
        except MCPFleetError as error:
            failure = jsonrpc_error(error)  # the handler's ``_as_jsonrpc_errors``
        except Exception as error:
            failure = error
        # From here on as the SDK's server answers a handler that raised ``failure``.
        error_data = handler_exception_to_error_data(failure)
        if error_data is None:
            logger.error("handler for %r raised", TOOLS_CALL, exc_info=failure)
            error_data = mcp_types.ErrorData(code=0, message=str(failure))
        return self._error_bytes(error_data), str(error_data.code)

    def _outcome(self, message: Any) -> Any:
        """The call's result (``Gateway.call_tool``'s), or what it raises."""
        gateway = self._fast_path.gateway
        result: Any
        try:
            try:
                result = self.connection.raw.tool_result(self.tool, message)
            except ConnectionClosedError as error:
                raise lost_during_call(self.connection, self.tool) from error
        except MCPFleetError as error:
            result = call_failure(gateway, self.server, error, self.flight)
        self.flight.failed = is_error_result(result)
        return result

    def _result_bytes(self, result: Any) -> bytes:
        if isinstance(result, dict):
            # ``handlers._complete``: what an answer of the gateway's own carries.
            result.setdefault("resultType", "complete")
        wire = wire_result(TOOLS_CALL, self.client.protocol_version, result)
        response = mcp_types.JSONRPCResponse(jsonrpc="2.0", id=self.request_id, result=wire)
        return response.model_dump_json(by_alias=True, exclude_unset=True).encode()

    def _error_bytes(self, error: mcp_types.ErrorData) -> bytes:
        answer = mcp_types.JSONRPCError(jsonrpc="2.0", id=self.request_id, error=error)
        return answer.model_dump_json(by_alias=True, exclude_unset=True).encode()

    # -- giving up -------------------------------------------------------------------------------------

    async def abandon(self) -> None:
        """The client cancelled the call, or went away: nothing is answered; the backend is told."""
        if self.done:
            return
        self._settle()
        self._recorded("cancelled")
        if self.backend_id is not None:
            await self.connection.raw.abandon(self.backend_id, ABANDONED)

    async def expire(self) -> None:
        """The deadline passed: the backend is told, the client answered as the SDK path answers."""
        if self.done:
            return
        backend_id = self.backend_id
        self.flight.failed = True
        self._settle()
        if backend_id is not None:
            await self.connection.raw.abandon(backend_id, ABANDONED)
        expired = call_expired(
            server=self.server, tool=self.tool, timeout_ms=self.timeout_ms, started=self._started
        )
        gateway = self._fast_path.gateway
        answer, _ = self._answer_bytes(lambda: call_failure(gateway, self.server, expired, self.flight))
        self._recorded("timeout")
        self._reply(answer)


class _Deadlines:
    """Every fast call's deadline, kept by one task: calls of the same timeout end in the order
    they started (or were last re-armed), so each timeout keeps its calls in one ordered table."""

    def __init__(self) -> None:
        self._by_timeout: dict[float, OrderedDict[_FastCall, None]] = {}
        self._wake = anyio.Event()
        self._sleeping_until = math.inf
        self._running = False

    def arm(self, call: _FastCall) -> None:
        if call.deadline == math.inf:
            return
        queue = self._by_timeout.setdefault(call.timeout_ms, OrderedDict())
        queue[call] = None
        if not self._running:
            self._running = True
            task_group = call._fast_path.gateway.fleet.task_group
            task_group.start_soon(self._keep, name="mcpfleet fast path deadlines")
        elif call.deadline < self._sleeping_until:
            self._wake.set()

    def rearm(self, call: _FastCall) -> None:
        queue = self._by_timeout.get(call.timeout_ms)
        if queue is not None and call in queue:
            queue.move_to_end(call)

    def disarm(self, call: _FastCall) -> None:
        queue = self._by_timeout.get(call.timeout_ms)
        if queue is not None:
            queue.pop(call, None)

    async def _keep(self) -> None:
        while True:
            now = anyio.current_time()
            for call in self._due(now):
                await call.expire()
            self._sleeping_until = min(
                (next(iter(queue)).deadline for queue in self._by_timeout.values() if queue), default=math.inf
            )
            self._wake = anyio.Event()
            with anyio.move_on_after(self._sleeping_until - now):
                await self._wake.wait()

    def _due(self, now: float) -> list[_FastCall]:
        due: list[_FastCall] = []
        for queue in self._by_timeout.values():
            for call in queue:
                if call.deadline > now:
                    break
                due.append(call)
        return due


__all__ = ["ANY_CALLER", "FastCaller", "FastPath", "Reply"]
