"""Backend → client requests: a backend's ``sampling/createMessage``, ``elicitation/create`` and
``roots/list`` go to the client whose request caused them.

The fleet hands every such request to one ``ServerRequestHandler`` with the asking server's
name (``mcpfleet.client.inbound``); ``Relay`` is the gateway's. It decides who answers:

* the client request in flight on that backend: on a 2026-07-28 backend the SDK asks from
  inside the call's own task, so the call is known exactly (a context variable set around
  it); a handshake-era backend asks on its connection, unrelated to any call, so it is the
  latest call in flight on that backend (two clients calling the same backend at once is the
  one case the protocol leaves ambiguous);
* with no call in flight (a backend asking for roots as it starts, or after being told they
  changed, or asking of its own accord), the one handshake-era client connected, when there
  is exactly one; with none or several, nobody can say whose question it is: it is refused
  with ``INVALID_REQUEST`` (roots included) and logged naming the server;
* that client must have declared the capability the request needs (``sampling``, with
  ``tools`` or ``context`` when the request uses them; ``elicitation`` in the request's mode;
  ``roots``); if it did not, or nobody can be asked, sampling and elicitation are refused
  with ``INVALID_REQUEST`` (what the SDK's own client answers when it offers neither) naming
  the missing capability, and roots fall back to the fleet's working folder.

How a client is asked depends on its era. A handshake-era client gets a request on its
connection (with the id of the call it belongs to, so over HTTP it rides that call's
stream). A 2026-07-28 client calling a 2026-07-28 backend is not asked by the relay at all:
the call is sent on the client's behalf (``mcpfleet.client.behalf``), so the backend is told
the client's own capabilities and its ``input_required`` result goes back to the client as it
is (the backend's keys, its ``requestState`` of each round); the client's retry, with its
``inputResponses`` and that ``requestState``, goes to the backend the same way. A 2026-07-28
client calling a handshake-era backend has no channel for that backend's requests: its call
is *parked*. The backend call runs in a task of its own; when the backend asks, the client's request is
answered with an ``input_required`` result carrying the question and a ``requestState``
naming the parked call; the client retries with its answers, which are handed to the waiting
backend, and the retry waits for the result or the next question. A parked question
unanswered for ``ANSWER_TIMEOUT_S`` is answered with an error, and a finished call nobody
collects is dropped after as long.

The client's roots become the backends' roots: a handshake-era client that declares roots
and connects, or sends ``notifications/roots/list_changed``, makes every backend hear
``notifications/roots/list_changed`` and ask again (``handlers.GatewayHandlers`` follows those
notifications; the questions that follow come here).

Imports of the SDK stay inside the functions that serve (the gateway's core imports this
module).
"""

from __future__ import annotations

import itertools
import logging
import secrets
from collections.abc import Awaitable, Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, NoReturn

import anyio
import anyio.lowlevel

from mcpfleet.client.behalf import Caller, on_behalf_of
from mcpfleet.gateway.forward import (
    Forward,
    InFlight,
    InFlightRegistry,
    LogRelay,
    ProgressRelay,
    asking_flight,
    current_flight,
)

if TYPE_CHECKING:
    from mcp.server.context import ServerRequestContext
    from mcp.server.session import ServerSession

    from mcpfleet.gateway.sessions import ClientSession, ClientSessions

logger = logging.getLogger(__name__)

BackendCall = Callable[[InFlight | None, ProgressRelay | None], Awaitable[Any]]
"""Sends one client request on to its backend; takes the request in flight (``None`` when no
server serves its name) and where the backend's progress goes."""

ANSWER_TIMEOUT_S = 600.0
"""How long a backend's question waits for the client's answer (a person may be typing it)."""

SAMPLING = "sampling/createMessage"
ELICITATION = "elicitation/create"
ROOTS = "roots/list"
_WHAT = {SAMPLING: "Sampling", ELICITATION: "Elicitation", ROOTS: "Roots"}

_INVALID_PARAMS = -32602
_INVALID_REQUEST = -32600
_INTERNAL_ERROR = -32603
_REQUEST_TIMEOUT = -32001


@dataclass(eq=False)
class Question:
    """A backend's request waiting for a 2026-07-28 client's answer."""

    key: str
    request: dict[str, Any]
    """``{"method": …, "params": …}``, as it goes into ``inputRequests``."""
    answered: anyio.Event = field(default_factory=anyio.Event)
    answer: dict[str, Any] | None = None


class ParkedCall:
    """A 2026-07-28 client's call whose backend keeps running between the client's rounds."""

    def __init__(self, token: str, method: str, target: str | None, *, answer_timeout_s: float) -> None:
        self.token = token
        self.method = method
        self.target = target
        """The tool or prompt name, or the resource URI: a retry must name the same."""
        self.pending: dict[str, Question] = {}
        self.finished = False
        self._answer_timeout_s = answer_timeout_s
        self._keys = itertools.count(1)
        self._changed = anyio.Event()
        self._scope = anyio.CancelScope()
        self._result: Any = None
        self._failure: Exception | None = None
        self._collected = anyio.Event()
        self._round_progress: ProgressRelay | None = None

    # -- the backend's side (its own task) ---------------------------------------------------------------

    async def run_backend(self, start: Callable[[ProgressRelay | None], Awaitable[Any]]) -> None:
        try:
            with self._scope:
                self._result = await start(self._relay_progress)
        except Exception as error:
            self._failure = error
        finally:
            self.finished = True
            self._signal()

    async def wait_collected(self) -> None:
        """Until a round has taken the result (bounded: the client may never come back)."""
        with anyio.move_on_after(self._answer_timeout_s):
            await self._collected.wait()

    async def ask(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        """Put a question to the client's next round and wait for its answer."""
        question = Question(f"q{next(self._keys)}", {"method": method, "params": params})
        self.pending[question.key] = question
        self._signal()
        try:
            with anyio.fail_after(self._answer_timeout_s):
                await question.answered.wait()
        except TimeoutError:
            _raise(
                _REQUEST_TIMEOUT,
                f"the MCP client did not answer within {self._answer_timeout_s:g} s "
                "(a 2026-07-28 client must retry its call with the answers)",
            )
        finally:
            self.pending.pop(question.key, None)
        assert question.answer is not None
        return question.answer

    async def _relay_progress(self, progress: float, total: float | None, message: str | None) -> None:
        # Between rounds no request of the client is open to carry progress: it is dropped.
        relay = self._round_progress
        if relay is None:
            return
        try:
            await relay(progress, total, message)
        except Exception as error:
            logger.debug("could not relay progress to the client: %r", error)

    # -- the client's side (one request per round) ----------------------------------------------------------

    def answer(self, responses: Mapping[str, Any]) -> None:
        for key, response in responses.items():
            question = self.pending.pop(key, None)
            if question is not None and isinstance(response, Mapping):
                question.answer = dict(response)
                question.answered.set()

    async def round(self, progress: ProgressRelay | None) -> Any:
        """Wait for the call's result, or for the questions to ask the client in this round."""
        self._round_progress = progress
        try:
            while True:
                if self.finished:
                    return self._collect()
                if self.pending:
                    # Questions a backend asks together arrive from sibling tasks started at
                    # once: one checkpoint lets them all into this round.
                    await anyio.lowlevel.checkpoint()
                    return self._input_required()
                await self._changed.wait()
        except anyio.get_cancelled_exc_class():
            # The client gave up its call (or the gateway is closing): the backend call goes too.
            self._scope.cancel()
            raise
        finally:
            self._round_progress = None

    def _collect(self) -> Any:
        self._collected.set()
        if self._failure is not None:
            raise self._failure
        if self._scope.cancelled_caught:
            _raise(_INTERNAL_ERROR, "the call was cancelled before its backend answered")
        return self._result

    def _input_required(self) -> Any:
        import mcp_types

        return mcp_types.InputRequiredResult.model_validate(
            {
                "inputRequests": {key: question.request for key, question in self.pending.items()},
                "requestState": self.token,
            }
        )

    def _signal(self) -> None:
        self._changed.set()
        self._changed = anyio.Event()


class Relay:
    """The gateway's ``ServerRequestHandler`` and the registry of its requests in flight.

    Built first, on the clients it may ask (``sessions``, the gateway's), then given to the
    fleet (``MCPManager(…, server_requests=relay)``, or the daemon's view) and to the gateway
    (``Gateway(fleet, relay=relay)``), which serves those same sessions: ``open_gateway``
    (``gateway.assembly``) does all three. Every client request that a backend may answer with
    questions goes through ``run``, with its ``Forward``.
    """

    def __init__(self, sessions: ClientSessions, *, answer_timeout_s: float = ANSWER_TIMEOUT_S) -> None:
        self.sessions = sessions
        self.answer_timeout_s = answer_timeout_s
        self.flights = InFlightRegistry()
        """The gateway's requests in flight: the relay ties backends' questions to them, the
        core their log messages."""
        self._parked: dict[str, ParkedCall] = {}

    # -- what backends ask (ServerRequestHandler) ---------------------------------------------------------

    @property
    def sampling_capability(self) -> dict[str, Any] | None:
        return relayed_sampling_capability()

    @property
    def offers_elicitation(self) -> bool:
        return True

    async def create_message(self, server: str, params: dict[str, Any]) -> dict[str, Any]:
        with _noted_on_the_call():
            return await self._relay(server, SAMPLING, params)

    async def elicit(self, server: str, params: dict[str, Any]) -> dict[str, Any]:
        with _noted_on_the_call():
            return await self._relay(server, ELICITATION, params)

    def failed_here(self, code: int, message: str) -> bool:
        """Whether the call running in this task had a question of its backend fail with this
        error here, in the gateway (see ``InFlight.local_errors``)."""
        flight = current_flight()
        return flight is not None and (code, message) in flight.local_errors

    async def list_roots(self, server: str) -> list[dict[str, Any]] | None:
        route = self._route(server, ROOTS, {})
        if isinstance(route, str):
            logger.debug("%s asked for roots; %s: it gets the working folder", server, route)
            return None
        roots = (await self._ask(route, ROOTS, {})).get("roots")
        return roots if isinstance(roots, list) else None

    async def _relay(self, server: str, method: str, params: dict[str, Any]) -> dict[str, Any]:
        route = self._route(server, method, params)
        if isinstance(route, str):
            logger.info("%s: %s refused: %s", server, method, route)
            _raise(
                _INVALID_REQUEST,
                f'{_WHAT[method]} not supported: {route} (asked by MCP server "{server}" through '
                "mcpfleet; use an MCP client that offers it)",
            )
        return await self._ask(route, method, params)

    # -- who answers ----------------------------------------------------------------------------------------

    def _route(self, server: str, method: str, params: dict[str, Any]) -> InFlight | ClientSession | str:
        """The call in flight that caused the request, else the one client to ask outside any
        call; a string says why that client cannot be asked. With no call in flight and not
        exactly one client, the request is refused here (``MCPError``), roots included."""
        flight = self._flight_on(server)
        if flight is not None:
            missing = missing_capability(flight.client.capabilities, method, params)
            if missing is not None:
                return f'the MCP client of this call did not declare the "{missing}" capability'
            return flight
        clients = list(self.sessions)
        if len(clients) != 1:
            # Another client's answer (a password typed for an elicitation) must never reach a
            # backend whose question was not about that client's call.
            connected = (
                "no MCP client is connected" if not clients else f"{len(clients)} MCP clients are connected"
            )
            message = (
                f'{method} refused: the MCP server "{server}" asked with no call in flight and '
                f"{connected}, so the question cannot be tied to the client it is for; a question is "
                "answered only within the call that caused it"
            )
            # None connected: a backend asking for roots before its client is up, said at info.
            logger.log(logging.WARNING if clients else logging.INFO, "%s", message)
            _raise(_INVALID_REQUEST, message)
        (client,) = clients
        missing = missing_capability(client.capabilities, method, params)
        if missing is not None:
            return f'its one MCP client did not declare the "{missing}" capability'
        return client

    def flights_on(self, server: str) -> list[InFlight]:
        """This gateway's client requests being answered by ``server`` now, oldest first."""
        return self.flights.on(server)

    def owns(self, flight: InFlight) -> bool:
        """Whether ``flight`` is a request of this gateway's clients."""
        return self.flights.holds(flight)

    def _flight_on(self, server: str) -> InFlight | None:
        current = current_flight()
        # The connection as it is now, not as the request found it: a backend that was still
        # starting then is connected by the time it asks.
        connection = current.forward.fleet.get_connection(server) if current is not None else None
        asking = asking_flight(server, connection)
        if asking is not None:
            return asking
        flights = self.flights_on(server)
        return flights[-1] if flights else None

    async def _ask(
        self, route: InFlight | ClientSession, method: str, params: dict[str, Any]
    ) -> dict[str, Any]:
        if isinstance(route, InFlight):
            if route.parked is not None:
                return await route.parked.ask(method, params)
            return await self._ask_over_connection(route.request_session, route.request_id, method, params)
        assert route.sdk_session is not None, "only registered clients are asked outside a request"
        return await self._ask_over_connection(route.sdk_session, None, method, params)

    async def _ask_over_connection(
        self, session: ServerSession, request_id: Any, method: str, params: dict[str, Any]
    ) -> dict[str, Any]:
        """Ask a handshake-era client, on the channel of request ``request_id`` when there is one."""
        import mcp_types
        from mcp.shared.message import ServerMessageMetadata
        from pydantic import BaseModel

        request = mcp_types.server_request_adapter.validate_python({"method": method, "params": params})
        result_type: type[BaseModel]
        if method == SAMPLING:
            wants_tools = params.get("tools") is not None or params.get("toolChoice") is not None
            result_type = (
                mcp_types.CreateMessageResultWithTools if wants_tools else mcp_types.CreateMessageResult
            )
        elif method == ELICITATION:
            result_type = mcp_types.ElicitResult
        else:
            result_type = mcp_types.ListRootsResult
        metadata = ServerMessageMetadata(related_request_id=request_id) if request_id is not None else None
        try:
            answer = await session.send_request(
                request, result_type, request_read_timeout_seconds=self.answer_timeout_s, metadata=metadata
            )
        except (anyio.BrokenResourceError, anyio.ClosedResourceError):
            _raise(_INTERNAL_ERROR, "the MCP client went away before answering")
        dumped: dict[str, Any] = answer.model_dump(by_alias=True, mode="json", exclude_none=True)
        return dumped

    # -- client requests that backends may answer with questions ------------------------------------------

    async def run(
        self,
        ctx: ServerRequestContext[Any, Any],
        forward: Forward,
        call_backend: BackendCall,
        *,
        progress: ProgressRelay | None,
        on_log: LogRelay | None = None,
    ) -> Any:
        """Serve one ``tools/call`` (or ``prompts/get``, ``resources/read``) resolved as
        ``forward``: ``call_backend`` sends it on, and any question the backend asks meanwhile
        goes to this request's client. ``on_log`` is where the backend's logs of the request go."""
        client, server = forward.client, forward.server
        params: Mapping[str, Any] = ctx.params or {}
        if client.era == "modern":
            state = params.get("requestState")
            if isinstance(state, str) and state in self._parked:
                return await self._resume(ctx, state, progress)
            if server is not None and forward.speaks_modern:
                responses = params.get("inputResponses")
                caller = Caller(
                    capabilities=client.capabilities,
                    input_responses=responses if isinstance(responses, Mapping) else None,
                    request_state=state if isinstance(state, str) else None,
                )
                flight = InFlight(server, forward, ctx.session, ctx.request_id, on_log=on_log)
                with self.flights.flying(flight), on_behalf_of(caller):
                    return await call_backend(flight, progress)
            if state is not None:
                return await self._resume(ctx, state, progress)
            if server is not None and can_be_asked(client.capabilities):
                flight = InFlight(server, forward, ctx.session, ctx.request_id, on_log=on_log)
                return await self._park(ctx, flight, call_backend, progress)
        if server is None:
            return await call_backend(None, progress)
        with self.flights.flying(
            InFlight(server, forward, ctx.session, ctx.request_id, on_log=on_log)
        ) as flight:
            return await call_backend(flight, progress)

    async def _park(
        self,
        ctx: ServerRequestContext[Any, Any],
        flight: InFlight,
        call_backend: BackendCall,
        progress: ProgressRelay | None,
    ) -> Any:
        """Run a 2026-07-28 client's call to a handshake-era backend in a task of its own (the
        fleet's), answering this request with the backend's first question or its result."""
        parked = ParkedCall(
            secrets.token_urlsafe(16), ctx.method, _target(ctx.params), answer_timeout_s=self.answer_timeout_s
        )
        flight.parked = parked
        self._parked[parked.token] = parked
        flight.forward.fleet.task_group.start_soon(
            self._run_parked, parked, flight, call_backend, name=f"mcpfleet gateway call to {flight.server}"
        )
        return await parked.round(progress)

    async def _run_parked(self, parked: ParkedCall, flight: InFlight, call_backend: BackendCall) -> None:
        async def start(progress: ProgressRelay | None) -> Any:
            return await call_backend(flight, progress)

        try:
            with self.flights.flying(flight):
                await parked.run_backend(start)
            await parked.wait_collected()
        finally:
            self._parked.pop(parked.token, None)

    async def _resume(
        self, ctx: ServerRequestContext[Any, Any], state: Any, progress: ProgressRelay | None
    ) -> Any:
        params: Mapping[str, Any] = ctx.params or {}
        parked = self._parked.get(state) if isinstance(state, str) else None
        if parked is None or parked.method != ctx.method or parked.target != _target(params):
            _raise(
                _INVALID_PARAMS,
                "Invalid or expired requestState: the gateway holds no such call (it ended, timed "
                "out or the gateway restarted); send the request again without requestState",
            )
        responses = params.get("inputResponses")
        parked.answer(responses if isinstance(responses, Mapping) else {})
        return await parked.round(progress)


@contextmanager
def _noted_on_the_call() -> Iterator[None]:
    """Remember on the current call a JSON-RPC error its backend's question ends with here."""
    from mcp.shared.exceptions import MCPError

    try:
        yield
    except MCPError as error:
        flight = current_flight()
        if flight is not None:
            flight.local_errors.append((error.code, error.message))
        raise


def relayed_sampling_capability() -> dict[str, Any]:
    """What a relay declares to the backends it asks for: everything a client may offer (each
    question is then checked against what the client it reaches declared)."""
    return {"tools": {}, "context": {}}


def missing_capability(capabilities: Mapping[str, Any], method: str, params: Mapping[str, Any]) -> str | None:
    """The capability a client must have declared to be sent this request, if it did not."""
    if method == SAMPLING:
        sampling = capabilities.get("sampling")
        if not isinstance(sampling, Mapping):
            return "sampling"
        if (
            params.get("tools") is not None or params.get("toolChoice") is not None
        ) and "tools" not in sampling:
            return "sampling.tools"
        if params.get("includeContext") in ("thisServer", "allServers") and "context" not in sampling:
            return "sampling.context"
        return None
    if method == ELICITATION:
        elicitation = capabilities.get("elicitation")
        if not isinstance(elicitation, Mapping):
            return "elicitation"
        if params.get("mode") == "url":
            return None if "url" in elicitation else "elicitation.url"
        # A bare declaration predates the modes and means form.
        return None if "form" in elicitation or "url" not in elicitation else "elicitation.form"
    return None if isinstance(capabilities.get("roots"), Mapping) else "roots"


def can_be_asked(capabilities: Mapping[str, Any]) -> bool:
    """Whether a 2026-07-28 client declared anything a backend could ask of it (else its calls
    run straight through: any question would be refused, or answered with the working folder)."""
    return any(isinstance(capabilities.get(name), Mapping) for name in ("sampling", "elicitation", "roots"))


def _target(params: Mapping[str, Any] | None) -> str | None:
    if params is None:
        return None
    target = params.get("name", params.get("uri"))
    return target if isinstance(target, str) else None


def _raise(code: int, message: str) -> NoReturn:
    """Answer with this JSON-RPC error (to the backend that asked, or the client that called)."""
    from mcp.shared.exceptions import MCPError

    raise MCPError(code=code, message=message)


__all__ = ["ANSWER_TIMEOUT_S", "ParkedCall", "Relay", "can_be_asked", "missing_capability"]
