"""One live connection to one MCP server, owned by one task.

The SDK's ``Client`` must be entered and exited in the same task, so every connection has an
*owner task*: it builds the transport, enters the client (the handshake), reports the
connection ready, then waits until ``close()`` is called or the transport ends, and exits
the client itself. Callers in any task use the connection through the session's streams,
which have no task affinity. The owner runs in a task group that whoever opened the
connection holds for its life (``opening.py``).

Around the connection: ``handshake.py`` settles the protocol era (a remembered verdict, or the
bounded ``server/discover`` probe; a remembered verdict the server refuses raises
``EraMismatchError`` and the caller connects again without it), ``inbound.py`` answers what the
server asks of the client, ``_errors.py`` maps whatever the SDK raises to mcpfleet errors,
``link.py`` holds the transport underneath, ``listings.py`` walks paginated listings and caps
the tool list, ``deadline.py`` is a call's progress-armed deadline and ``listening.py`` follows
a 2026-07-28 server's list changes. ``options.py`` is the record a connection is opened with.

This module imports ``mcp``; import it only when a server is actually contacted.
"""

from __future__ import annotations

import logging
import math
import time
import warnings
from collections.abc import Awaitable, Callable
from functools import partial, wraps
from typing import TYPE_CHECKING, Any, Concatenate, ParamSpec, TypeVar

import anyio
import anyio.abc
import mcp_types as mcp_types
from mcp import Client
from mcp.shared.exceptions import MCPDeprecationWarning
from pydantic import TypeAdapter

from mcpfleet.client._errors import (
    Asked,
    closed_error,
    era_mismatch,
    raise_connect_error,
    request_errors,
    request_failure,
)
from mcpfleet.client.behalf import Caller, current_caller
from mcpfleet.client.deadline import CallDeadline, DeadlineKeeper, ProgressCallback
from mcpfleet.client.definitions import (
    DEFAULT_PROBE_TIMEOUT_MS,
    Era,
    EraVerdict,
    ServerInfo,
    ToolDefinition,
)
from mcpfleet.client.handshake import Negotiated, negotiated_client, plan_connection
from mcpfleet.client.inbound import (
    ElicitationHandler,
    InboundHandlers,
    NotificationCallback,
    SamplingHandler,
    ServerRequestHandler,
    server_request_handler,
)
from mcpfleet.client.link import TransportLink
from mcpfleet.client.listening import follow_list_changes
from mcpfleet.client.listings import capped_tool_definitions, enough_tools, walk_pages
from mcpfleet.client.raw import RawExchange
from mcpfleet.client.screening import ToolScreen
from mcpfleet.contract import notifications
from mcpfleet.errors import EraMismatchError
from mcpfleet.telemetry import active

if TYPE_CHECKING:
    from mcpfleet.client.options import ConnectionOptions
    from mcpfleet.config.model import ServerConfig
    from mcpfleet.transport.stdio import StdioTransport

logger = logging.getLogger(__name__)

CLOSE_BOUND_S = 5.0
"""Bound of the transport teardown beyond the stdio kill ladder (HTTP session DELETE, streams)."""

_T = TypeVar("_T")
_P = ParamSpec("_P")

_INPUT_RESPONSES: TypeAdapter[mcp_types.InputResponses] = TypeAdapter(mcp_types.InputResponses)


def _traced(
    call_tool: Callable[Concatenate[ServerConnection, str, _P], Awaitable[_T]],
) -> Callable[Concatenate[ServerConnection, str, _P], Awaitable[_T]]:
    """``call_tool`` in the connection's span of the call while telemetry traces
    (``mcpfleet.telemetry``): the SDK's request goes out under it, its trace context in the
    request's ``_meta`` (and, over HTTP, its ``traceparent`` header: ``transport.http``)."""

    @wraps(call_tool)
    async def traced(connection: ServerConnection, tool: str, /, *args: _P.args, **kwargs: _P.kwargs) -> _T:
        telemetry = active()
        if telemetry is None or not telemetry.tracing:
            return await call_tool(connection, tool, *args, **kwargs)
        with telemetry.connection_call(connection.name, tool, connection.config.transport):
            return await call_tool(connection, tool, *args, **kwargs)

    return traced


class ServerConnection:
    """A connected MCP server. Get one from ``open_connection`` or ``connect_to_server``."""

    def __init__(
        self,
        name: str,
        config: ServerConfig,
        options: ConnectionOptions,
        *,
        stdio_transport: StdioTransport | None = None,
    ) -> None:
        self._link = TransportLink(name, config, options, stdio_transport)
        self.name = name
        self.config = config
        self.server_info = ServerInfo(name="", version="", protocol_version="")
        self.capabilities: dict[str, Any] = {}
        self.instructions: str | None = None
        self.protocol_version = ""
        self.era: Era | None = None
        """``legacy`` (the ``initialize`` handshake) or ``modern`` (2026-07-28), once connected."""
        self.era_verdict: EraVerdict | None = None
        """What to remember about this server's era for the next connection (see ``EraVerdict``)."""
        self.probed = False
        """Whether connecting sent a ``server/discover`` probe (no usable remembered verdict)."""
        self.probe_timed_out = False
        """Whether that probe went unanswered within the options' ``probe_timeout_ms``."""
        self.pid: int | None = None
        self.timings_ms: dict[str, float] = {}
        self.closed = False
        self.close_reason: str | None = None
        self._options = options
        self._timeout_ms = config.effective_timeout_ms if options.timeout_ms is None else options.timeout_ms
        self._verdict_unconfirmed = False
        """Connected on a remembered verdict that no answer of the server has confirmed yet."""
        self._inbound = InboundHandlers(
            name,
            cwd=options.cwd,
            on_notification=options.on_notification,
            requests=server_request_handler(
                options.server_requests, options.elicitation_handler, options.sampling_handler, options.roots
            ),
            session_of=lambda: self._client.session if self._client is not None else None,
        )
        self._client: Client | None = None
        self.raw = RawExchange(name, lambda: self._client, self._close_reason, lambda: self.ended)
        """Requests sent below the SDK, on a stdio connection in the handshake era (``raw.py``)."""
        self._screen = ToolScreen(name, config.effective_max_tools)
        self._wake = anyio.Event()
        self._close_requested = False
        self._owner_done = anyio.Event()
        self._deadlines = DeadlineKeeper()
        """Keeps every call's deadline with one timer, from the owner task's listening group."""

    # -- state ------------------------------------------------------------------------------------------
    def stderr_tail(self, lines: int = 20) -> list[str]:
        """The last lines the server wrote on stderr (stdio only)."""
        return self._link.stderr_tail(lines)

    @property
    def ended(self) -> bool:
        """True once no new request can be served: closed, or the transport ended (process exit,
        stream end) and the owner task is tearing it down, before ``closed`` is set."""
        return self.closed or self._wake.is_set()

    async def wait_closed(self) -> None:
        """Return once the transport is gone (process exit, stream end or ``close()``)."""
        await self._owner_done.wait()

    async def close(self) -> None:
        """Close the connection; idempotent, bounded, and the server's process group is gone on return."""
        self._close_requested = True
        self._mark_closed("closed by the client")
        self._wake.set()
        await self._owner_done.wait()

    def _mark_closed(self, reason: str) -> None:
        if not self.closed:
            self.closed, self.close_reason = True, reason

    # -- requests ---------------------------------------------------------------------------------------
    async def list_tools(self) -> list[ToolDefinition]:
        """Every tool of the server (all pages), up to its cap (``maxTools``): past it, the list
        is cut with one warning and no further page is asked for. Tools that cannot be used were
        left out of each answer already (``screening.py``)."""
        cut_before = self._screen.cut_answers
        pages = await self._paginate(
            "tools/list",
            lambda session, params: session.list_tools(params=params),
            enough=enough_tools(self._screen),
        )
        return capped_tool_definitions(self.name, pages, self._screen, cut_before)

    async def list_resources(self) -> list[dict[str, Any]]:
        pages = await self._paginate(
            "resources/list", lambda session, params: session.list_resources(params=params)
        )
        return [_dump(resource) for page in pages for resource in page.resources]

    async def list_resource_templates(self) -> list[dict[str, Any]]:
        pages = await self._paginate(
            "resources/templates/list",
            lambda session, params: session.list_resource_templates(params=params),
        )
        return [_dump(template) for page in pages for template in page.resource_templates]

    async def read_resource(self, uri: str) -> dict[str, Any]:
        """``resources/read``; for a caller (``behalf.py``), ``input_required`` is returned as is."""
        client = self._live_client()
        caller = self._relayed_for()
        if caller is not None:
            session = client.session
            responses = _input_responses(caller)
            relayed = await self._request(
                "resources/read",
                lambda: session.read_resource(
                    uri,
                    input_responses=responses,
                    request_state=caller.request_state,
                    allow_input_required=True,
                ),
            )
            return _dump(relayed)
        result = await self._request("resources/read", lambda: client.read_resource(uri))
        return _dump(result)

    async def subscribe_resource(self, uri: str) -> None:
        """Ask for ``notifications/resources/updated`` about ``uri`` (needs ``resources.subscribe``)."""
        client = self._live_client()
        await self._request(
            "resources/subscribe", lambda: _handshake_era_call(client.session.subscribe_resource, uri)
        )

    async def unsubscribe_resource(self, uri: str) -> None:
        client = self._live_client()
        await self._request(
            "resources/unsubscribe", lambda: _handshake_era_call(client.session.unsubscribe_resource, uri)
        )

    async def notify_roots_changed(self) -> None:
        """Tell the server its roots changed (``notifications/roots/list_changed``) so it asks
        for them again. Only the handshake era has this notification: a 2026-07-28 server asks
        for roots inside each request that needs them, so it always gets the current ones."""
        client = self._live_client()
        if self.era != "legacy":
            return
        asked = Asked(self.name, notifications.ROOTS_LIST_CHANGED)
        with request_errors(asked, close_reason=self._close_reason):
            await _handshake_era_call(client.session.send_roots_list_changed)

    async def list_prompts(self) -> list[dict[str, Any]]:
        pages = await self._paginate(
            "prompts/list", lambda session, params: session.list_prompts(params=params)
        )
        return [_dump(prompt) for page in pages for prompt in page.prompts]

    async def get_prompt(self, name: str, arguments: dict[str, str] | None = None) -> dict[str, Any]:
        """``prompts/get``; for a caller (``behalf.py``), ``input_required`` is returned as is."""
        client = self._live_client()
        caller = self._relayed_for()
        if caller is not None:
            session = client.session
            responses = _input_responses(caller)
            relayed = await self._request(
                "prompts/get",
                lambda: session.get_prompt(
                    name,
                    arguments or None,
                    input_responses=responses,
                    request_state=caller.request_state,
                    allow_input_required=True,
                ),
            )
            return _dump(relayed)
        result = await self._request("prompts/get", lambda: client.get_prompt(name, arguments or None))
        return _dump(result)

    async def complete(
        self, ref: dict[str, Any], argument: dict[str, str], context_arguments: dict[str, str] | None = None
    ) -> dict[str, Any]:
        """``completion/complete`` for a prompt (``{"type": "ref/prompt", "name"}``) or a resource
        template (``{"type": "ref/resource", "uri"}``) argument."""
        client = self._live_client()
        reference: mcp_types.ResourceTemplateReference | mcp_types.PromptReference = (
            mcp_types.PromptReference.model_validate(ref)
            if ref.get("type") == "ref/prompt"
            else mcp_types.ResourceTemplateReference.model_validate(ref)
        )
        result = await self._request(
            "completion/complete", lambda: client.complete(reference, argument, context_arguments)
        )
        return _dump(result)

    async def ping(self) -> None:
        """Check the server answers: ``ping``, or on a 2026-07-28 connection (which has no
        ``ping``) a ``server/discover``, the request every modern server answers."""
        client = self._live_client()
        if self.era == "modern":
            session = client.session
            await self._request("server/discover", lambda: session.send_discover(self.protocol_version))
        else:
            await self._request("ping", lambda: client.session.send_ping())

    @_traced
    async def call_tool(
        self,
        tool: str,
        arguments: dict[str, Any] | None,
        *,
        timeout_ms: int | None = None,
        on_progress: ProgressCallback | None = None,
    ) -> mcp_types.CallToolResult | mcp_types.InputRequiredResult:
        """Call one tool. Its deadline (``timeout_ms``, else the config's ``tool_timeout_ms``,
        else 10 minutes; 0 for none) is re-armed by each progress notification, up to
        ``PROGRESS_CEILING_FACTOR`` times the timeout. A deadline that passes, like a cancelled
        caller, cancels the request on the server too (``notifications/cancelled``); the
        connection stays up. A 2026-07-28 server's ``input_required`` answer is answered here,
        round after round (the SDK ``Client`` asks the inbound handlers), and only the final
        result returned; sent for a caller (``behalf.py``), it is returned as it is, for that
        caller to answer and retry with its ``inputResponses`` and ``requestState``."""
        client = self._live_client()
        caller = self._relayed_for()
        bound_ms = self.config.effective_tool_timeout_ms if timeout_ms is None else timeout_ms
        deadline = CallDeadline(bound_ms, on_progress, self._deadlines)
        try:
            with deadline:
                if caller is not None:
                    return await client.session.call_tool(
                        tool,
                        arguments or {},
                        progress_callback=deadline.progress_callback,
                        input_responses=_input_responses(caller),
                        request_state=caller.request_state,
                        allow_input_required=True,
                    )
                return await client.call_tool(
                    tool, arguments or {}, progress_callback=deadline.progress_callback
                )
        except Exception as error:
            # Mapped here rather than by ``request_errors``: every call would pay for setting
            # up a context manager that only a failed one needs.
            failure = request_failure(
                error, Asked(self.name, "tools/call", tool), close_reason=self._close_reason
            )
            if failure is None:
                raise
            raise failure from error
        # Only the deadline's cancellation, swallowed by the scope, gets here.
        raise deadline.expired(server=self.name, tool=tool)

    def _relayed_for(self) -> Caller | None:
        """The client this task's requests are sent for, on a 2026-07-28 connection (the only
        era with per-request capabilities and ``input_required``)."""
        return current_caller() if self.era == "modern" else None

    def _live_client(self) -> Client:
        if self.closed or self._client is None:
            raise closed_error(self.name, self.close_reason)
        return self._client

    def _close_reason(self) -> str | None:
        return self.close_reason

    def _era_check(self, error: BaseException) -> EraMismatchError | None:
        """While the remembered era is unconfirmed: whether ``error`` says the server refused it."""
        if not self._verdict_unconfirmed:
            return None
        return era_mismatch(
            error, server=self.name, remembered=self._options.era, http_status=self._link.http_status
        )

    async def _request(self, method: str, send: Callable[[], Awaitable[_T]]) -> _T:
        bound = self._timeout_ms / 1000 if self._timeout_ms > 0 else math.inf
        with (
            request_errors(
                Asked(self.name, method),
                close_reason=self._close_reason,
                timeout_ms=self._timeout_ms,
                era_check=self._era_check,
            ),
            anyio.fail_after(bound),
        ):
            answer = await send()
        self._verdict_unconfirmed = False
        return answer

    async def _paginate(
        self,
        method: str,
        fetch: Callable[[Any, Any], Awaitable[Any]],
        enough: Callable[[list[Any]], bool] | None = None,
    ) -> list[Any]:
        """Every page of a listing (``listings.walk_pages``), each asked for with ``fetch``."""
        session = self._live_client().session
        return await walk_pages(lambda params: self._request(method, partial(fetch, session, params)), enough)

    # -- owner task -------------------------------------------------------------------------------------
    async def run_owner(self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """The owner task: connect, report ready through ``task_status``, serve, then tear down.

        Raises (before ``task_status.started()`` only) the connect error; after that it never
        raises, so it cannot break the task group that hosts it.
        """
        handshake_done = False
        # One scope spans the client's whole life: its deadline bounds the handshake, then is
        # lifted, and is set again to bound the teardown (a scope opened later could not wrap
        # the exit of contexts entered before it).
        scope = anyio.CancelScope(
            deadline=anyio.current_time() + self._timeout_ms / 1000 if self._timeout_ms > 0 else math.inf
        )
        try:
            with scope:
                plan = plan_connection(self.name, self.config.transport, self._options.era)
                self._verdict_unconfirmed = plan.from_verdict
                self.probed = plan.probes
                transport = await self._link.build()
                handshake_started = time.perf_counter()
                async with negotiated_client(
                    transport,
                    plan,
                    server=self.name,
                    probe_bound_s=self._options.probe_bound_ms / 1000,
                    on_transport_end=self._wake.set,
                    screen=self._screen,
                    log_level=self._options.log_level,
                    **self._inbound.client_options(),
                ) as negotiated:
                    # An initialize answer confirms a remembered legacy verdict; an adopted
                    # DiscoverResult cost no traffic, so the first answered request confirms it.
                    self._verdict_unconfirmed = plan.from_verdict and plan.mode != "legacy"
                    handshake_done = True
                    scope.deadline = math.inf
                    self._adopt(negotiated, (time.perf_counter() - handshake_started) * 1000)
                    self.raw.offer(transport, self.era)
                    async with anyio.create_task_group() as listening:
                        listening.start_soon(self._deadlines.run)
                        if self.era == "modern":
                            listening.start_soon(
                                partial(
                                    follow_list_changes,
                                    negotiated.client,
                                    server=self.name,
                                    capabilities=self.capabilities,
                                    deliver=self._inbound.deliver,
                                )
                            )
                        task_status.started()
                        await self._wake.wait()
                        listening.cancel_scope.cancel()
                    if not self._close_requested:
                        self._mark_closed(await self._link.loss_reason(self._inbound.transport_error))
                    self._client = None
                    scope.deadline = anyio.current_time() + CLOSE_BOUND_S
            if not handshake_done:
                raise TimeoutError  # the deadline cancelled the handshake and the scope swallowed it
        except BaseException as error:
            self._mark_closed(self.close_reason or "connect failed")
            if not handshake_done:
                raise_connect_error(
                    error,
                    server=self.name,
                    timeout_ms=self._timeout_ms,
                    timed_out=scope.cancel_called,
                    era_check=self._era_check,
                    http=self._link.http,
                    process=self._link.process,
                )
            if not isinstance(error, Exception):
                raise
            logger.warning("%s: error while closing the connection: %r", self.name, error)
        finally:
            self._client = None
            self._owner_done.set()

    def _adopt(self, negotiated: Negotiated, handshake_ms: float) -> None:
        client = negotiated.client
        info = client.server_info
        self.protocol_version = client.protocol_version
        self.era = negotiated.era
        self.era_verdict = negotiated.verdict
        self.probe_timed_out = negotiated.probe_timed_out
        self.instructions = client.instructions
        self.capabilities = client.server_capabilities.model_dump(
            by_alias=True, mode="json", exclude_none=True
        )
        self.server_info = ServerInfo(
            name=info.name if info is not None else self.name,
            version=info.version if info is not None else "",
            protocol_version=self.protocol_version,
            instructions=self.instructions,
        )
        process = self._link.process
        if process is not None:
            self.pid = process.pid
            if process.spawn_ms is not None:
                self.timings_ms["spawn"] = round(process.spawn_ms, 2)
        self.timings_ms["handshake"] = round(handshake_ms, 2)
        self._client = client


def _handshake_era_call(method: Callable[..., Awaitable[_T]], *args: str) -> Awaitable[_T]:
    """Call an SDK method marked as removed in the 2026-07-28 protocol without its notice.

    It is the right method for the handshake-era servers it is sent to, and the notice
    would reach users. The SDK warns when the coroutine is created, so only that
    synchronous step runs with the warning filtered (a filter held across an await would
    leak into other tasks).
    """
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", MCPDeprecationWarning)
        return method(*args)


def _input_responses(caller: Caller) -> mcp_types.InputResponses | None:
    """The caller's answers, typed for the SDK (which writes them back out unchanged)."""
    if caller.input_responses is None:
        return None
    return _INPUT_RESPONSES.validate_python(dict(caller.input_responses))


def _dump(model: Any) -> dict[str, Any]:
    result: dict[str, Any] = model.model_dump(
        by_alias=True, mode="json", exclude_none=True, exclude_unset=True
    )
    return result


__all__ = [
    "DEFAULT_PROBE_TIMEOUT_MS",
    "ElicitationHandler",
    "NotificationCallback",
    "ProgressCallback",
    "SamplingHandler",
    "ServerConnection",
    "ServerRequestHandler",
]
