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
server asks of the client, and ``_errors.py`` maps whatever the SDK raises to mcpfleet errors.

This module imports ``mcp``; import it only when a server is actually contacted.
"""

from __future__ import annotations

import inspect
import logging
import math
import time
import warnings
from collections.abc import Awaitable, Callable
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, TypeVar

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
    first_line,
    raise_connect_error,
    request_errors,
    request_failure,
)
from mcpfleet.client.behalf import Caller, current_caller
from mcpfleet.client.definitions import (
    DEFAULT_PROBE_TIMEOUT_MS,
    Era,
    EraVerdict,
    LogLevel,
    ServerInfo,
    ToolDefinition,
)
from mcpfleet.client.handshake import Negotiated, negotiated_client, plan_connection
from mcpfleet.client.inbound import (
    WORKING_FOLDER,
    ElicitationHandler,
    InboundHandlers,
    NotificationCallback,
    RootsOffer,
    SamplingHandler,
    ServerRequestHandler,
    server_request_handler,
)
from mcpfleet.client.screening import ToolScreen
from mcpfleet.client.secrets import resolve_secrets_off_loop
from mcpfleet.contract import notifications
from mcpfleet.errors import ConnectError, EraMismatchError, ToolCallError
from mcpfleet.transport.process import exit_description

if TYPE_CHECKING:
    from mcpfleet.config.model import ServerConfig
    from mcpfleet.transport.http import HttpTransport
    from mcpfleet.transport.process import ServerProcess
    from mcpfleet.transport.stdio import StdioTransport

logger = logging.getLogger(__name__)

ProgressCallback = Callable[[float, float | None, str | None], Awaitable[None] | None]

PROGRESS_CEILING_FACTOR = 10
"""Progress keeps re-arming a call's deadline, up to this many times its timeout in total."""
CLOSE_BOUND_S = 5.0
"""Bound of the transport teardown beyond the stdio kill ladder (HTTP session DELETE, streams)."""
EXIT_OBSERVE_S = 1.0
"""After the session ends, how long to wait for the process exit status to name the reason."""
MAX_LIST_PAGES = 1000
LISTEN_REOPENS = 3
"""How many times a connection re-opens a 2026-07-28 server's ``subscriptions/listen`` stream
that was lost while the connection lives; then the server's list changes are no longer
followed until it reconnects."""
LISTEN_REOPEN_DELAY_S = 1.0
LIST_CHANGED_NOTIFICATIONS = notifications.LIST_CHANGED
"""Capability → the notification that announces a change of its list."""

_T = TypeVar("_T")

_INPUT_RESPONSES: TypeAdapter[mcp_types.InputResponses] = TypeAdapter(mcp_types.InputResponses)


class ServerConnection:
    """A connected MCP server. Get one from ``open_connection`` or ``connect_to_server``."""

    def __init__(
        self,
        name: str,
        config: ServerConfig,
        *,
        cwd: Path,
        timeout_ms: int | None,
        on_notification: NotificationCallback | None,
        era: EraVerdict | None,
        auth: object | None,
        resolve_secrets: bool,
        elicitation_handler: ElicitationHandler | None = None,
        sampling_handler: SamplingHandler | None = None,
        server_requests: ServerRequestHandler | None = None,
        probe_timeout_ms: int = DEFAULT_PROBE_TIMEOUT_MS,
        stdio_transport: StdioTransport | None = None,
        log_level: LogLevel | None = None,
        roots: RootsOffer = WORKING_FOLDER,
    ) -> None:
        if config.transport == "stdio" and stdio_transport is None:
            raise ValueError(f"{name}: a stdio connection takes over a spawned transport (see opening.py)")
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
        """Whether that probe went unanswered within ``probe_timeout_ms``."""
        self.pid: int | None = None
        self.timings_ms: dict[str, float] = {}
        self.closed = False
        self.close_reason: str | None = None
        self._timeout_ms = config.effective_timeout_ms if timeout_ms is None else timeout_ms
        self._remembered_era = era
        self._verdict_unconfirmed = False
        """Connected on a remembered verdict that no answer of the server has confirmed yet."""
        self._probe_timeout_ms = probe_timeout_ms
        self._log_level = log_level
        self._auth = auth
        self._resolve_secrets = resolve_secrets
        self._inbound = InboundHandlers(
            name,
            cwd=cwd,
            on_notification=on_notification,
            requests=server_request_handler(server_requests, elicitation_handler, sampling_handler, roots),
            session_of=lambda: self._client.session if self._client is not None else None,
        )
        self._client: Client | None = None
        self._screen = ToolScreen(name, config.effective_max_tools)
        self._stdio = stdio_transport
        self._http: HttpTransport | None = None
        self._wake = anyio.Event()
        self._close_requested = False
        self._owner_done = anyio.Event()

    # -- state ------------------------------------------------------------------------------------------
    @property
    def _process(self) -> ServerProcess | None:
        return self._stdio.process if self._stdio is not None else None

    def stderr_tail(self, lines: int = 20) -> list[str]:
        """The last lines the server wrote on stderr (stdio only)."""
        return self._process.stderr.tail(lines) if self._process is not None else []

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
        if not self.closed:
            self._mark_closed("closed by the client")
        self._wake.set()
        await self._owner_done.wait()

    def _mark_closed(self, reason: str) -> None:
        if not self.closed:
            self.closed = True
            self.close_reason = reason

    # -- requests ---------------------------------------------------------------------------------------
    async def list_tools(self) -> list[ToolDefinition]:
        """Every tool of the server (all pages), up to its cap (``maxTools``): past it, the list
        is cut with one warning and no further page is asked for. Tools that cannot be used were
        left out of each answer already (``screening.py``)."""
        cap = self._screen.max_tools
        cut_before = self._screen.cut_answers
        pages = await self._paginate(
            "tools/list",
            lambda session, params: session.list_tools(params=params),
            enough=lambda pages: sum(len(page.tools) for page in pages) >= cap,
        )
        listed = [tool for page in pages for tool in page.tools]
        more_pages = len(listed) >= cap and pages[-1].next_cursor is not None
        if self._screen.cut_answers > cut_before or len(listed) > cap or more_pages:
            logger.warning(
                'MCP server "%s" lists more than %d tools: only its first %d are used; raise "maxTools" '
                'in its entry (or "maxToolsPerServer" in mcpfleet\'s user config) to take more',
                self.name,
                cap,
                cap,
            )
        tools: list[ToolDefinition] = []
        for tool in listed[:cap]:
            annotations = (
                tool.annotations.model_dump(by_alias=True, exclude_none=True) if tool.annotations else None
            )
            tools.append(
                ToolDefinition(
                    name=tool.name,
                    description=tool.description,
                    input_schema=dict(tool.input_schema),
                    output_schema=dict(tool.output_schema) if tool.output_schema is not None else None,
                    title=tool.title,
                    annotations=annotations,
                    raw=tool.model_dump(by_alias=True, mode="json", exclude_unset=True),
                )
            )
        return tools

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
        """``resources/read``; sent for a caller (``behalf.py``), an ``input_required`` answer is
        returned as it is, like ``call_tool``'s."""
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
        """``prompts/get``; sent for a caller (``behalf.py``), an ``input_required`` answer is
        returned as it is, like ``call_tool``'s."""
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
        connection stays up.

        A 2026-07-28 server's ``input_required`` answer is answered here, round after round
        (the SDK ``Client`` asks the inbound handlers), and only the final result returned;
        sent for a caller (``behalf.py``), it is returned as it is, for that caller to answer
        and retry with its ``inputResponses`` and ``requestState``."""
        client = self._live_client()
        caller = self._relayed_for()
        timeout = self.config.effective_tool_timeout_ms if timeout_ms is None else timeout_ms
        bounded = timeout > 0
        started = anyio.current_time()
        timeout_s = timeout / 1000
        ceiling = started + timeout_s * PROGRESS_CEILING_FACTOR
        scope = anyio.CancelScope(deadline=started + timeout_s if bounded else math.inf)

        async def relay_progress(progress: float, total: float | None, message: str | None) -> None:
            if bounded:
                scope.deadline = min(anyio.current_time() + timeout_s, ceiling)
            if on_progress is not None:
                outcome = on_progress(progress, total, message)
                if inspect.isawaitable(outcome):
                    await outcome

        wants_progress = bounded or on_progress is not None
        try:
            with scope:
                if caller is not None:
                    return await client.session.call_tool(
                        tool,
                        arguments or {},
                        progress_callback=relay_progress if wants_progress else None,
                        input_responses=_input_responses(caller),
                        request_state=caller.request_state,
                        allow_input_required=True,
                    )
                return await client.call_tool(
                    tool, arguments or {}, progress_callback=relay_progress if wants_progress else None
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
        elapsed_ms = round((anyio.current_time() - started) * 1000)
        raise ToolCallError(
            f'MCP tool {tool} on server "{self.name}" timed out after {elapsed_ms}ms '
            f"(timeout {timeout}ms, re-armed by progress up to {PROGRESS_CEILING_FACTOR}x); "
            'raise "toolTimeout" in its config or pass a longer timeout to the call',
            server=self.name,
            tool=tool,
        )

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
        http_status = self._http.error_status if self._http is not None else None
        return era_mismatch(error, server=self.name, remembered=self._remembered_era, http_status=http_status)

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
        """Every page of a listing; ``enough(pages)`` stops the walk early."""
        client = self._live_client()
        pages: list[Any] = []
        cursor: str | None = None
        seen: set[str] = set()
        for _ in range(MAX_LIST_PAGES):
            params = mcp_types.PaginatedRequestParams(cursor=cursor) if cursor is not None else None
            page = await self._request(method, partial(fetch, client.session, params))
            pages.append(page)
            if enough is not None and enough(pages):
                break
            cursor = page.next_cursor
            # A server that repeats a cursor would page forever.
            if cursor is None or cursor in seen:
                break
            seen.add(cursor)
        return pages

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
                plan = plan_connection(self.name, self.config.transport, self._remembered_era)
                self._verdict_unconfirmed = plan.from_verdict
                self.probed = plan.probes
                transport = await self._build_transport()
                handshake_started = time.perf_counter()
                async with negotiated_client(
                    transport,
                    plan,
                    server=self.name,
                    probe_bound_s=self._probe_timeout_ms / 1000,
                    on_transport_end=self._wake.set,
                    screen=self._screen,
                    log_level=self._log_level,
                    **self._inbound.client_options(),
                ) as negotiated:
                    # An initialize answer confirms a remembered legacy verdict; an adopted
                    # DiscoverResult cost no traffic, so the first answered request confirms it.
                    self._verdict_unconfirmed = plan.from_verdict and plan.mode != "legacy"
                    handshake_done = True
                    scope.deadline = math.inf
                    self._adopt(negotiated, (time.perf_counter() - handshake_started) * 1000)
                    async with anyio.create_task_group() as listening:
                        if self.era == "modern":
                            listening.start_soon(self._follow_list_changes, negotiated.client)
                        task_status.started()
                        await self._wake.wait()
                        listening.cancel_scope.cancel()
                    if not self._close_requested:
                        self._mark_closed(await self._loss_reason())
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
                    http=self._http,
                    process=self._process,
                )
            if not isinstance(error, Exception):
                raise
            logger.warning("%s: error while closing the connection: %r", self.name, error)
        finally:
            self._client = None
            self._owner_done.set()

    async def _follow_list_changes(self, client: Client) -> None:
        """Keep one ``subscriptions/listen`` stream open on a 2026-07-28 server, for the list
        changes its capabilities say it announces.

        That era has no unsolicited notifications: a server tells only the listen streams a
        client opened. The SDK passes each event of the stream to the ``message_handler`` as the
        matching ``list_changed`` notification, so the host sees them as it sees a handshake-era
        server's. A stream lost while the connection lives is re-opened (``LISTEN_REOPENS``
        times), each time followed by one ``list_changed`` per list, since what changed in
        between was not seen. Closed with the connection (the owner cancels it).
        """
        from mcp.client.subscriptions import SubscriptionLost
        from mcp.shared.exceptions import MCPError

        announced = [
            capability
            for capability in LIST_CHANGED_NOTIFICATIONS
            if isinstance(self.capabilities.get(capability), dict)
            and self.capabilities[capability].get("listChanged")
        ]
        if not announced:
            return
        for reopen in range(LISTEN_REOPENS + 1):
            try:
                async with client.listen(
                    tools_list_changed="tools" in announced,
                    prompts_list_changed="prompts" in announced,
                    resources_list_changed="resources" in announced,
                ) as subscription:
                    if reopen:
                        for capability in announced:
                            await self._inbound.deliver(LIST_CHANGED_NOTIFICATIONS[capability], None)
                    async for _event in subscription:
                        pass  # already delivered through the message handler
                return  # the server closed the stream gracefully: it announces nothing more
            except SubscriptionLost as error:
                logger.info("%s: the subscriptions/listen stream was lost (%s)", self.name, error)
            except (MCPError, TimeoutError) as error:
                logger.info(
                    "%s: subscriptions/listen was refused (%s); its list changes are not followed",
                    self.name,
                    error,
                )
                return
            await anyio.sleep(LISTEN_REOPEN_DELAY_S)
        logger.warning(
            "%s: the subscriptions/listen stream was lost %d times; its list changes are no longer "
            "followed until it reconnects",
            self.name,
            LISTEN_REOPENS + 1,
        )

    async def _build_transport(self) -> StdioTransport | HttpTransport:
        if self._stdio is not None:
            return self._stdio
        from mcpfleet.transport.http import HttpTransport

        config = self.config
        if not config.url:
            raise ConnectError(f'MCP server "{self.name}" has no "url"', server=self.name)
        headers = await resolve_secrets_off_loop(
            self.name, config.headers, enabled=self._resolve_secrets, literal_keys=config.literal_header_keys
        )
        kind: Literal["http", "sse"] = "sse" if config.transport == "sse" else "http"
        self._http = HttpTransport(config.url, kind=kind, headers=headers, auth=self._auth)  # type: ignore[arg-type]
        return self._http

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
        process = self._process
        if process is not None:
            self.pid = process.pid
            if process.spawn_ms is not None:
                self.timings_ms["spawn"] = round(process.spawn_ms, 2)
        self.timings_ms["handshake"] = round(handshake_ms, 2)
        self._client = client

    async def _loss_reason(self) -> str:
        process = self._process
        if process is not None:
            with anyio.move_on_after(EXIT_OBSERVE_S):
                await process.exited.wait()
            if process.returncode is not None:
                return f"process {exit_description(process.returncode)}"
            return "the server closed its stdout"
        if self._inbound.transport_error is not None:
            return f"the HTTP stream failed: {first_line(self._inbound.transport_error)}"
        return "the server ended the session"


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
