"""One live connection to one MCP server, owned by one task.

The SDK's ``Client`` must be entered and exited in the same task, so every connection has an
*owner task*: it builds the transport, enters the client (the handshake), reports the
connection ready, then waits until ``close()`` is called or the transport ends, and exits
the client itself. Callers in any task use the connection through the session's streams,
which have no task affinity.

``open_connection(task_group, …)`` starts the owner in a task group the caller keeps for the
connection's life (the manager's). ``connect_to_server(…)`` is the standalone convenience:
with no task group to borrow it hosts the owner in an asyncio task of its own (see there).

The protocol era is the SDK's business (its ``Client`` modes), steered here by what is known
about the server: a remembered verdict (``EraVerdict``, from the tool cache) connects without
any probe (``initialize`` for a legacy server, the remembered ``DiscoverResult`` adopted for a
2026-07-28 one); with none, the SDK's ``auto`` mode probes ``server/discover`` and falls back to
``initialize``, with the probe cut short after ``probe_timeout_ms`` (``_ProbeBound``) so a
server that drops unknown requests costs that bound, not the SDK's 10 s. A remembered verdict
the server refuses raises ``EraMismatchError``; the caller connects again without it.

This module imports ``mcp``; import it only when a server is actually contacted.
"""

from __future__ import annotations

import contextlib
import inspect
import logging
import math
import time
import warnings
from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack
from functools import partial
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, Literal, TypeVar

import anyio
import anyio.abc
import anyio.to_thread
import mcp_types as mcp_types
from mcp import Client, InputRequiredRoundsExceededError
from mcp.client.session import ClientRequestContext
from mcp.shared.exceptions import MCPDeprecationWarning, MCPError
from mcp.shared.message import SessionMessage
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import BaseModel, ValidationError

from mcpfleet.client.definitions import LEGACY_ERA, Era, EraVerdict, ServerInfo, ToolDefinition
from mcpfleet.client.opening import check_transport
from mcpfleet.client.secrets import resolve_secrets_off_loop
from mcpfleet.errors import (
    AuthRequiredError,
    ConnectError,
    ConnectionClosedError,
    ConnectTimeoutError,
    EraMismatchError,
    MCPFleetError,
    RequestError,
    ServerExitedError,
    ToolCallError,
)
from mcpfleet.transport.stdio import (
    MESSAGE_TOO_LARGE,
    StdioTransport,
    exit_description,
    prepare_stdio_transport,
)

if TYPE_CHECKING:
    import contextvars

    from mcp.client._transport import ReadStream, TransportStreams, WriteStream

    from mcpfleet.config.model import ServerConfig
    from mcpfleet.transport.http import HttpTransport

logger = logging.getLogger(__name__)

NotificationCallback = Callable[[str, dict[str, Any] | None], Awaitable[None] | None]
ProgressCallback = Callable[[float, float | None, str | None], Awaitable[None] | None]
ElicitationHandler = Callable[[dict[str, Any]], Awaitable[dict[str, Any]]]
"""Answers a server's ``elicitation/create``: receives its params as JSON (``message``,
``requestedSchema`` or ``url``, ``mode``) and returns the result as JSON
(``{"action": "accept", "content": {...}}``, or ``"decline"`` / ``"cancel"``)."""
SamplingHandler = Callable[[dict[str, Any]], Awaitable[dict[str, Any]]]
"""Answers a server's ``sampling/createMessage``: receives its params as JSON (``messages``,
``maxTokens``, ``systemPrompt``, ``tools``…) and returns the result as JSON (``{"role":
"assistant", "content": {"type": "text", "text": ...}, "model": ..., "stopReason": ...}``)."""

CLIENT_NAME = "mcpfleet"
CLIENT_VERSION = "0.1.0"
PROGRESS_CEILING_FACTOR = 10
"""Progress keeps re-arming a call's deadline, up to this many times its timeout in total."""
CLOSE_BOUND_S = 5.0
"""Bound of the transport teardown beyond the stdio kill ladder (HTTP session DELETE, streams)."""
EXIT_OBSERVE_S = 1.0
"""After the session ends, how long to wait for the process exit status to name the reason."""
STDERR_TAIL_IN_ERRORS = 5
MAX_LIST_PAGES = 1000
DEFAULT_PROBE_TIMEOUT_MS = 1000
"""How long first contact waits for a ``server/discover`` answer before the SDK falls back to
``initialize``. A server that answers at all answers within milliseconds (modern servers with
their ``DiscoverResult``, legacy ones with "method not found"); only one that silently drops
unknown requests reaches the bound, and it is remembered as legacy, so it costs this once."""
INPUT_REQUIRED_MAX_ROUNDS = 10
"""A 2026-07-28 request answered with ``input_required`` is retried at most this many times."""

_T = TypeVar("_T")
_Model = TypeVar("_Model", bound=BaseModel)


class ServerConnection:
    """A connected MCP server. Build it with ``open_connection`` or ``connect_to_server``."""

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
        probe_timeout_ms: int = DEFAULT_PROBE_TIMEOUT_MS,
        stdio_transport: StdioTransport | None = None,
    ) -> None:
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
        self._cwd = cwd
        self._timeout_ms = config.effective_timeout_ms if timeout_ms is None else timeout_ms
        self._on_notification = on_notification
        self._remembered_era = era
        self._verdict_unconfirmed = False
        """Connected on a remembered verdict that no answer of the server has confirmed yet."""
        self._probe_timeout_ms = probe_timeout_ms
        self._auth = auth
        self._resolve_secrets = resolve_secrets
        self._elicitation_handler = elicitation_handler
        self._sampling_handler = sampling_handler
        self._client: Client | None = None
        self._stdio: StdioTransport | None = stdio_transport
        """Set up front when the process was spawned before the SDK was loaded (``opening``)."""
        self._http: HttpTransport | None = None
        self._wake = anyio.Event()
        self._close_requested = False
        self._owner_done = anyio.Event()
        self._transport_error: BaseException | None = None
        self.host_task: Any = None
        """The asyncio task hosting the owner when no task group does (``connect_to_server``)."""

    # -- public surface ---------------------------------------------------------------------------------
    def stderr_tail(self, lines: int = 20) -> list[str]:
        """The last lines the server wrote on stderr (stdio only)."""
        return self._stdio.stderr.tail(lines) if self._stdio is not None else []

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

    async def list_tools(self) -> list[ToolDefinition]:
        """Every tool of the server (all pages)."""
        pages = await self._paginate("tools/list", lambda session, params: session.list_tools(params=params))
        tools: list[ToolDefinition] = []
        for page in pages:
            for tool in page.tools:
                annotations = (
                    tool.annotations.model_dump(by_alias=True, exclude_none=True)
                    if tool.annotations
                    else None
                )
                tools.append(
                    ToolDefinition(
                        name=tool.name,
                        description=tool.description,
                        input_schema=dict(tool.input_schema),
                        output_schema=dict(tool.output_schema) if tool.output_schema is not None else None,
                        title=tool.title,
                        annotations=annotations,
                    )
                )
        return tools

    async def list_resources(self) -> list[dict[str, Any]]:
        pages = await self._paginate(
            "resources/list", lambda session, params: session.list_resources(params=params)
        )
        return [_dump(resource) for page in pages for resource in page.resources]

    async def read_resource(self, uri: str) -> dict[str, Any]:
        client = self._live_client()
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

    async def list_prompts(self) -> list[dict[str, Any]]:
        pages = await self._paginate(
            "prompts/list", lambda session, params: session.list_prompts(params=params)
        )
        return [_dump(prompt) for page in pages for prompt in page.prompts]

    async def get_prompt(self, name: str, arguments: dict[str, str] | None = None) -> dict[str, Any]:
        client = self._live_client()
        result = await self._request("prompts/get", lambda: client.get_prompt(name, arguments or None))
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
    ) -> mcp_types.CallToolResult:
        """Call one tool. Its deadline (``timeout_ms``, else the config's ``tool_timeout_ms``,
        else 10 minutes; 0 for none) is re-armed by each progress notification, up to
        ``PROGRESS_CEILING_FACTOR`` times the timeout. A deadline that passes, like a cancelled
        caller, cancels the request on the server too (``notifications/cancelled``); the
        connection stays up."""
        client = self._live_client()
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
                return await client.call_tool(
                    tool, arguments or {}, progress_callback=relay_progress if wants_progress else None
                )
        except MCPError as error:
            if error.code == mcp_types.CONNECTION_CLOSED:
                raise self._closed_error() from None
            if error.code == MESSAGE_TOO_LARGE:
                message = f"The answer to {tool} was dropped: {error.error.message}"
                raise ToolCallError(message, server=self.name, tool=tool) from None
            raise ToolCallError(
                f'MCP server "{self.name}" rejected the call to {tool}: {error.error.message}',
                server=self.name,
                tool=tool,
            ) from None
        except InputRequiredRoundsExceededError as error:
            raise ToolCallError(
                f'MCP server "{self.name}" still asked for input after {error.max_rounds} rounds of '
                f"answers to {tool}; the call was abandoned",
                server=self.name,
                tool=tool,
            ) from None
        except (RuntimeError, ValidationError) as error:
            raise ToolCallError(
                f'MCP server "{self.name}" returned an unusable result for {tool}: {_first_line(error)}',
                server=self.name,
                tool=tool,
            ) from None
        # Only the deadline's cancellation, swallowed by the scope, gets here.
        elapsed_ms = round((anyio.current_time() - started) * 1000)
        raise ToolCallError(
            f'MCP tool {tool} on server "{self.name}" timed out after {elapsed_ms}ms '
            f"(timeout {timeout}ms, re-armed by progress up to {PROGRESS_CEILING_FACTOR}x); "
            'raise "toolTimeout" in its config or pass a longer timeout to the call',
            server=self.name,
            tool=tool,
        )

    # -- requests ---------------------------------------------------------------------------------------
    def _live_client(self) -> Client:
        if self.closed or self._client is None:
            raise self._closed_error()
        return self._client

    def _closed_error(self) -> ConnectionClosedError:
        reason = self.close_reason or "not connected"
        return ConnectionClosedError(f'MCP server "{self.name}" is not connected: {reason}', server=self.name)

    async def _request(self, method: str, send: Callable[[], Awaitable[_T]]) -> _T:
        bound = self._timeout_ms / 1000 if self._timeout_ms > 0 else math.inf
        try:
            with anyio.fail_after(bound):
                answer = await send()
            self._verdict_unconfirmed = False
            return answer
        except TimeoutError:
            raise RequestError(
                f'MCP server "{self.name}" did not answer {method} within {self._timeout_ms}ms',
                server=self.name,
                method=method,
            ) from None
        except MCPError as error:
            if error.code == mcp_types.CONNECTION_CLOSED:
                raise self._closed_error() from None
            if error.code == MESSAGE_TOO_LARGE:
                message = f"The answer to {method} was dropped: {error.error.message}"
                raise RequestError(message, server=self.name, method=method) from None
            refusal = self._era_refusal(error) if self._verdict_unconfirmed else None
            if refusal is not None:
                raise self._era_mismatch(refusal) from None
            raise RequestError(
                f'MCP server "{self.name}" rejected {method}: {error.error.message}',
                server=self.name,
                method=method,
            ) from None
        except (RuntimeError, ValidationError) as error:
            raise RequestError(
                f'MCP server "{self.name}" answered {method} with an unusable result: {_first_line(error)}',
                server=self.name,
                method=method,
            ) from None

    async def _paginate(self, method: str, fetch: Callable[[Any, Any], Awaitable[Any]]) -> list[Any]:
        client = self._live_client()
        pages: list[Any] = []
        cursor: str | None = None
        seen: set[str] = set()
        for _ in range(MAX_LIST_PAGES):
            params = mcp_types.PaginatedRequestParams(cursor=cursor) if cursor is not None else None
            page = await self._request(method, partial(fetch, client.session, params))
            pages.append(page)
            cursor = page.next_cursor
            # A server that repeats a cursor would page forever.
            if cursor is None or cursor in seen:
                break
            seen.add(cursor)
        return pages

    # -- server → client ----------------------------------------------------------------------------------
    async def _list_roots(self, context: ClientRequestContext) -> mcp_types.ListRootsResult:
        root = self._cwd.resolve()
        entry = mcp_types.Root.model_validate({"uri": root.as_uri(), "name": root.name or str(root)})
        return mcp_types.ListRootsResult(roots=[entry])

    async def _elicit(
        self, context: ClientRequestContext, params: mcp_types.ElicitRequestParams
    ) -> mcp_types.ElicitResult | mcp_types.ErrorData:
        assert self._elicitation_handler is not None
        return await self._ask_host("elicitation", self._elicitation_handler, params, mcp_types.ElicitResult)

    async def _sample(
        self, context: ClientRequestContext, params: mcp_types.CreateMessageRequestParams
    ) -> mcp_types.CreateMessageResult | mcp_types.CreateMessageResultWithTools | mcp_types.ErrorData:
        assert self._sampling_handler is not None
        # A request that offers tools may be answered with tool use, which only the wider type holds.
        result_type = (
            mcp_types.CreateMessageResultWithTools if params.tools else mcp_types.CreateMessageResult
        )
        return await self._ask_host("sampling", self._sampling_handler, params, result_type)

    async def _ask_host(
        self,
        what: str,
        handler: Callable[[dict[str, Any]], Awaitable[dict[str, Any]]],
        params: BaseModel,
        result_type: type[_Model],
    ) -> _Model | mcp_types.ErrorData:
        """Run a host hook on a server's request (a legacy server→client request, or one round of
        a 2026-07-28 ``input_required`` result: the SDK routes both here)."""
        request = params.model_dump(by_alias=True, mode="json", exclude_none=True)
        try:
            answer = await handler(request)
            return result_type.model_validate(answer)
        except ValidationError as error:
            logger.warning("%s: the %s handler returned an invalid result: %s", self.name, what, error)
            return mcp_types.ErrorData(code=mcp_types.INTERNAL_ERROR, message=f"invalid {what} result")
        except Exception as error:
            # The server waits for an answer: a failing host hook must still produce one.
            logger.exception("%s: the %s handler raised", self.name, what)
            return mcp_types.ErrorData(code=mcp_types.INTERNAL_ERROR, message=f"{what} failed: {error}")

    async def _on_message(self, message: Any) -> None:
        if isinstance(message, Exception):
            logger.debug("%s: transport reported %r", self.name, message)
            self._transport_error = message
            return
        data = message.model_dump(by_alias=True, mode="json", exclude_none=True)
        method = data.get("method")
        if not isinstance(method, str) or self._on_notification is None:
            return
        params = data.get("params")
        if method == "notifications/progress" and self._progress_belongs_to_call(params):
            return
        try:
            outcome = self._on_notification(method, params if isinstance(params, dict) else None)
            if inspect.isawaitable(outcome):
                await outcome
        except Exception:
            logger.exception("%s: on_notification raised for %s", self.name, method)

    def _progress_belongs_to_call(self, params: Any) -> bool:
        """Whether a progress token is the id of one of our in-flight requests (the SDK uses the id as token).

        The SDK exposes no public table of in-flight requests, so its dispatcher's is read.
        """
        token = params.get("progressToken") if isinstance(params, dict) else None
        client = self._client
        if token is None or client is None:
            return False
        pending = getattr(getattr(client.session, "_dispatcher", None), "_pending", None)
        return isinstance(pending, dict) and (token in pending or str(token) in pending)

    # -- owner task -----------------------------------------------------------------------------------------
    def _mark_closed(self, reason: str) -> None:
        if not self.closed:
            self.closed = True
            self.close_reason = reason

    def _transport_ended(self) -> None:
        self._wake.set()

    async def _build_transport(self) -> Any:
        config = self.config
        check_transport(self.name, config)
        if config.transport == "stdio":
            if self._stdio is None:
                self._stdio = await prepare_stdio_transport(
                    self.name, config, cwd=self._cwd, resolve_secrets=self._resolve_secrets
                )
            return self._stdio
        from mcpfleet.transport.http import HttpTransport

        if not config.url:
            raise ConnectError(f'MCP server "{self.name}" has no "url"', server=self.name)
        headers = await resolve_secrets_off_loop(
            self.name, config.headers, enabled=self._resolve_secrets, literal_keys=config.literal_header_keys
        )
        kind: Literal["http", "sse"] = "sse" if config.transport == "sse" else "http"
        self._http = HttpTransport(config.url, kind=kind, headers=headers, auth=self._auth)  # type: ignore[arg-type]
        return self._http

    def _connect_plan(self) -> tuple[str, mcp_types.DiscoverResult | None, bool]:
        """The SDK ``Client`` mode for this connection, the ``DiscoverResult`` to adopt, and
        whether both come from the remembered verdict (which the server may since refuse)."""
        if self.config.transport == "sse":
            # The HTTP+SSE transport predates the 2026-07-28 revision: nothing to probe for.
            return "legacy", None, False
        remembered = self._remembered_era
        if remembered == LEGACY_ERA:
            return "legacy", None, True
        if isinstance(remembered, dict):
            try:
                discover = mcp_types.DiscoverResult.model_validate(remembered)
            except ValidationError as error:
                logger.info("%s: the remembered DiscoverResult is unusable (%s); probing", self.name, error)
                return "auto", None, False
            mutual = [
                version for version in MODERN_PROTOCOL_VERSIONS if version in discover.supported_versions
            ]
            if mutual:
                return mutual[-1], discover, True
        return "auto", None, False

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
                async with AsyncExitStack() as stack:
                    mode, prior_discover, self._verdict_unconfirmed = self._connect_plan()
                    self.probed = mode == "auto"
                    transport = await self._build_transport()
                    probe = _ProbeBound(transport, self._probe_timeout_ms / 1000) if self.probed else None
                    watched = _WatchedTransport(probe or transport, self._transport_ended)
                    if prior_discover is not None:
                        watched.speaks_modern()
                    client = Client(
                        watched,
                        mode=mode,
                        prior_discover=prior_discover,
                        cache=None,
                        client_info=mcp_types.Implementation(name=CLIENT_NAME, version=CLIENT_VERSION),
                        list_roots_callback=self._list_roots,
                        message_handler=self._on_message,
                        # Without a handler the client must not advertise the capability.
                        elicitation_callback=self._elicit if self._elicitation_handler is not None else None,
                        sampling_callback=self._sample if self._sampling_handler is not None else None,
                        input_required_max_rounds=INPUT_REQUIRED_MAX_ROUNDS,
                    )
                    handshake_started = time.perf_counter()
                    await stack.enter_async_context(client)
                    if probe is not None:
                        probe.settle()
                        self.probe_timed_out = probe.timed_out
                    if client.session.discover_result is not None:
                        watched.speaks_modern()
                    # An initialize answer confirms a remembered legacy verdict; an adopted
                    # DiscoverResult cost no traffic, so the first answered request confirms it.
                    self._verdict_unconfirmed = self._verdict_unconfirmed and mode != "legacy"
                    handshake_done = True
                    scope.deadline = math.inf
                    self._adopt(client, (time.perf_counter() - handshake_started) * 1000)
                    if probe is not None and probe.late_discover is not None and self.era == "legacy":
                        self._remember_late_discover(probe.late_discover)
                    task_status.started()
                    await self._wake.wait()
                    if not self._close_requested:
                        self._mark_closed(await self._loss_reason())
                    self._client = None
                    scope.deadline = anyio.current_time() + CLOSE_BOUND_S
            if not handshake_done:
                raise TimeoutError  # the deadline cancelled the handshake and the scope swallowed it
        except BaseException as error:
            self._mark_closed(self.close_reason or "connect failed")
            if not handshake_done:
                raise await self._connect_error(error, timed_out=scope.cancel_called) from None
            if not isinstance(error, Exception):
                raise
            logger.warning("%s: error while closing the connection: %r", self.name, error)
        finally:
            self._client = None
            self._owner_done.set()

    def _adopt(self, client: Client, handshake_ms: float) -> None:
        info = client.server_info
        self.protocol_version = client.protocol_version
        discover = client.session.discover_result
        self.era = "legacy" if discover is None else "modern"
        self.era_verdict = (
            LEGACY_ERA
            if discover is None
            else discover.model_dump(by_alias=True, mode="json", exclude_none=True)
        )
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
        if self._stdio is not None:
            self.pid = self._stdio.pid
            if self._stdio.spawn_ms is not None:
                self.timings_ms["spawn"] = round(self._stdio.spawn_ms, 2)
        self.timings_ms["handshake"] = round(handshake_ms, 2)
        self._client = client

    def _remember_late_discover(self, answer: dict[str, Any]) -> None:
        """Keep a ``DiscoverResult`` that came after the probe's bound as the era verdict.

        Its server was still booting when the bound passed, so this connection went on with
        ``initialize``; the answer shows it speaks 2026-07-28, which the next connection uses.
        """
        try:
            discover = mcp_types.DiscoverResult.model_validate(answer)
        except ValidationError:
            return
        if any(version in discover.supported_versions for version in MODERN_PROTOCOL_VERSIONS):
            logger.info(
                "%s answered server/discover after the probe's bound; next time: 2026-07-28", self.name
            )
            self.era_verdict = discover.model_dump(by_alias=True, mode="json", exclude_none=True)

    async def _loss_reason(self) -> str:
        if self._stdio is not None:
            with anyio.move_on_after(EXIT_OBSERVE_S):
                await self._stdio.exited.wait()
            if self._stdio.returncode is not None:
                return f"process {exit_description(self._stdio.returncode)}"
            return "the server closed its stdout"
        if self._transport_error is not None:
            return f"the HTTP stream failed: {_first_line(self._transport_error)}"
        return "the server ended the session"

    async def _connect_error(self, error: BaseException, *, timed_out: bool) -> BaseException:
        """Turn whatever stopped the handshake into one clear mcpfleet error."""
        root = _root_cause(error)
        if isinstance(root, MCPFleetError):
            return root
        if timed_out:
            return ConnectTimeoutError(
                f'Connection to MCP server "{self.name}" timed out after {self._timeout_ms}ms',
                server=self.name,
            )
        if self._verdict_unconfirmed:
            refusal = self._era_refusal(root)
            if refusal is not None:
                return self._era_mismatch(refusal)
        if self._http is not None:
            http_error = self._http_connect_error(root)
            if http_error is not None:
                return http_error
        if isinstance(root, MCPError) and root.code != mcp_types.CONNECTION_CLOSED:
            return ConnectError(
                f'MCP server "{self.name}" rejected the handshake: {root.error.message}', server=self.name
            )
        stdio = self._stdio
        if stdio is not None and stdio.pid is not None:
            tail = " | ".join(stdio.stderr.tail(STDERR_TAIL_IN_ERRORS)) or "(no stderr output)"
            if stdio.returncode is not None and not stdio.signalled:
                self._mark_closed(f"process {exit_description(stdio.returncode)}")
                return ServerExitedError(
                    f'MCP server "{self.name}" ({stdio.describe_command()}) '
                    f"{exit_description(stdio.returncode)} before the handshake: {tail}",
                    server=self.name,
                    returncode=stdio.returncode,
                )
            return ConnectError(
                f'MCP server "{self.name}" ({stdio.describe_command()}) closed the connection before '
                f"the handshake: {tail}",
                server=self.name,
            )
        if isinstance(root, Exception):
            return ConnectError(
                f'MCP server "{self.name}": handshake failed: {type(root).__name__}: {_first_line(root)}',
                server=self.name,
            )
        return root

    def _era_refusal(self, root: BaseException) -> str | None:
        """What says the server refused the handshake of the remembered era, if anything does.

        Only an answer counts (HTTP error statuses reach the SDK as JSON-RPC errors too), and
        not one about credentials: a server that cannot be reached or wants a login says
        nothing about its era.
        """
        if not isinstance(root, MCPError) or root.code == mcp_types.CONNECTION_CLOSED:
            return None
        if self._http is not None and self._http.error_status in (401, 403):
            return None
        return root.error.message

    def _era_mismatch(self, detail: str) -> EraMismatchError:
        return EraMismatchError(
            f'MCP server "{self.name}" refused the {_era_name(self._remembered_era)} protocol remembered for '
            f"it ({detail}); connect again to probe its protocol anew",
            server=self.name,
        )

    def _http_connect_error(self, root: BaseException) -> ConnectError | None:
        from mcp.client.auth.exceptions import OAuthFlowError

        assert self._http is not None
        url = self._http.url
        if isinstance(root, OAuthFlowError):
            # Checked before the HTTP status: the OAuth discovery probes well-known URLs that may
            # answer 404, and that status says nothing about the server's own "url".
            return AuthRequiredError(
                f'MCP server "{self.name}" ({url}): OAuth failed: {_first_line(root)}; '
                f"run: mcpfleet login {self.name}",
                server=self.name,
            )
        status = self._http.error_status or _status_of(root)
        if status == 401:
            return AuthRequiredError(
                f'MCP server "{self.name}" ({url}) requires authentication; run: mcpfleet login {self.name}',
                server=self.name,
            )
        if status is not None:
            return ConnectError(
                f'MCP server "{self.name}" answered HTTP {status} at {url}; check the "url" field',
                server=self.name,
            )
        if _is_connect_failure(root):
            return ConnectError(
                f'MCP server "{self.name}": cannot reach {url} ({_first_line(root)})', server=self.name
            )
        return None


class _WatchedTransport:
    """Wraps a transport so the owner learns when the server side of the stream ends, and so
    results on a 2026-07-28 connection carry their ``resultType`` (see ``speaks_modern``)."""

    def __init__(self, inner: Any, on_end: Callable[[], None]) -> None:
        self._inner = inner
        self._on_end = on_end
        self._modern = False
        self._read_stream: _EndWatchingReadStream | None = None

    def speaks_modern(self) -> None:
        """From now on, a result without ``resultType`` is given ``"complete"``.

        The 2026-07-28 revision makes the field optional with that default (a client MUST
        read a result without it as complete), while the SDK's wire validation requires it
        and rejects the whole result; filling in the default is what the revision prescribes.
        """
        self._modern = True
        if self._read_stream is not None:
            self._read_stream.default_result_type = True

    async def __aenter__(self) -> TransportStreams:
        read_stream, write_stream = await self._inner.__aenter__()
        self._read_stream = _EndWatchingReadStream(read_stream, self._on_end)
        self._read_stream.default_result_type = self._modern
        return self._read_stream, write_stream

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> bool | None:
        result: bool | None = await self._inner.__aexit__(exc_type, exc, traceback)
        return result


class _EndWatchingReadStream:
    """A read stream that calls ``on_end`` once the transport delivers its last message."""

    def __init__(self, inner: ReadStream[SessionMessage | Exception], on_end: Callable[[], None]) -> None:
        self._inner = inner
        self._on_end = on_end
        self.default_result_type = False

    @property
    def last_context(self) -> Any:
        return getattr(self._inner, "last_context", None)

    async def receive(self) -> SessionMessage | Exception:
        try:
            message = await self._inner.receive()
        except (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError):
            self._on_end()
            raise
        if (
            self.default_result_type
            and isinstance(message, SessionMessage)
            and isinstance(message.message, mcp_types.JSONRPCResponse)
        ):
            message.message.result.setdefault("resultType", "complete")
        return message

    async def aclose(self) -> None:
        await self._inner.aclose()

    def __aiter__(self) -> _EndWatchingReadStream:
        return self

    async def __anext__(self) -> SessionMessage | Exception:
        try:
            return await self.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None

    async def __aenter__(self) -> _EndWatchingReadStream:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.aclose()
        self._on_end()


class _ProbeBound:
    """A transport wrapper that answers an unanswered ``server/discover`` after ``bound_s``.

    The SDK's ``auto`` mode probes ``server/discover`` with a 10 s timeout of its own and falls
    back to ``initialize`` on any error, a timeout included. Here the timeout comes sooner: once
    the bound passes without an answer, the request-timeout error the SDK would have produced
    is delivered in its place, and the SDK's own fallback logic carries on unchanged. A late
    answer finds no waiter and is dropped by the SDK; a late ``DiscoverResult`` is kept
    (``late_discover``): the server was only slow (still booting), and speaks 2026-07-28.

    The read side must be able to deliver that error while the SDK's reader already waits for
    the server, so until the handshake is over (``settle()``) a pump task moves the server's
    messages into a buffer the reader drains, and the timer writes into the same buffer. After
    that the pump hands over: the reader drains the buffer, then reads the transport directly.
    """

    def __init__(self, inner: Any, bound_s: float) -> None:
        self._inner = inner
        self._bound_s = bound_s
        self._settled = False
        self._unanswered: set[Any] = set()
        self._expired: set[Any] = set()
        self.timed_out = False
        self.late_discover: dict[str, Any] | None = None
        self._task_group: anyio.abc.TaskGroup | None = None
        self._buffer_in: Any = None

    def settle(self) -> None:
        """The handshake is over: no probe will be sent again, the pump may retire."""
        self._settled = True

    async def __aenter__(self) -> TransportStreams:
        read_stream, write_stream = await self._inner.__aenter__()
        try:
            buffer_in, buffer_out = anyio.create_memory_object_stream[
                "tuple[SessionMessage | Exception, contextvars.Context | None]"
            ](math.inf)
            self._buffer_in = buffer_in
            self._task_group = anyio.create_task_group()
            await self._task_group.__aenter__()
        except BaseException as error:
            await self._inner.__aexit__(type(error), error, error.__traceback__)
            raise
        self._task_group.start_soon(self._pump, read_stream, buffer_in)
        return _BufferedReadStream(buffer_out, read_stream), _ProbeWatchingWriteStream(write_stream, self)

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> bool | None:
        if self._task_group is not None:
            self._task_group.cancel_scope.cancel()
            await self._task_group.__aexit__(None, None, None)
            self._task_group = None
        result: bool | None = await self._inner.__aexit__(exc_type, exc, traceback)
        return result

    def probe_sent(self, request_id: Any) -> None:
        if self._settled or self._task_group is None:
            return
        self._unanswered.add(request_id)
        self._task_group.start_soon(self._expire, request_id)

    async def _expire(self, request_id: Any) -> None:
        await anyio.sleep(self._bound_s)
        if request_id not in self._unanswered:
            return
        self._unanswered.discard(request_id)
        self._expired.add(request_id)
        self.timed_out = True
        error = mcp_types.JSONRPCError(
            jsonrpc="2.0",
            id=request_id,
            error=mcp_types.ErrorData(
                code=mcp_types.REQUEST_TIMEOUT,
                message=f"server/discover not answered within {self._bound_s * 1000:.0f}ms",
            ),
        )
        with contextlib.suppress(anyio.ClosedResourceError, anyio.BrokenResourceError):
            self._buffer_in.send_nowait((SessionMessage(error), None))

    async def _pump(self, read_stream: Any, buffer_in: Any) -> None:
        async with buffer_in:
            while not self._settled:
                try:
                    message = await read_stream.receive()
                except (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError):
                    return  # the reader meets the same end when it reads the transport itself
                if isinstance(message, SessionMessage) and isinstance(
                    message.message, mcp_types.JSONRPCResponse | mcp_types.JSONRPCError
                ):
                    self._unanswered.discard(message.message.id)
                    if message.message.id in self._expired and isinstance(
                        message.message, mcp_types.JSONRPCResponse
                    ):
                        self.late_discover = message.message.result
                try:
                    buffer_in.send_nowait((message, getattr(read_stream, "last_context", None)))
                except (anyio.ClosedResourceError, anyio.BrokenResourceError):
                    return  # the reader is gone: the connection is closing


class _ProbeWatchingWriteStream:
    """Tells the ``_ProbeBound`` when a ``server/discover`` request leaves."""

    def __init__(self, inner: WriteStream[SessionMessage], probe: _ProbeBound) -> None:
        self._inner = inner
        self._probe = probe

    async def send(self, item: SessionMessage, /) -> None:
        message = item.message
        if isinstance(message, mcp_types.JSONRPCRequest) and message.method == "server/discover":
            self._probe.probe_sent(message.id)
        await self._inner.send(item)

    async def aclose(self) -> None:
        await self._inner.aclose()

    async def __aenter__(self) -> _ProbeWatchingWriteStream:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.aclose()


class _BufferedReadStream:
    """Reads what the ``_ProbeBound`` pump buffered, then (once it retired) the transport itself."""

    def __init__(self, buffer_out: Any, transport_stream: ReadStream[SessionMessage | Exception]) -> None:
        self._buffer_out = buffer_out
        self._transport_stream = transport_stream
        self._direct = False
        self._last_context: contextvars.Context | None = None

    @property
    def last_context(self) -> Any:
        if self._direct:
            return getattr(self._transport_stream, "last_context", None)
        return self._last_context

    async def receive(self) -> SessionMessage | Exception:
        if not self._direct:
            try:
                message, self._last_context = await self._buffer_out.receive()
                return message  # type: ignore[no-any-return]
            except anyio.EndOfStream:
                self._direct = True
        return await self._transport_stream.receive()

    async def aclose(self) -> None:
        self._buffer_out.close()
        await self._transport_stream.aclose()

    def __aiter__(self) -> _BufferedReadStream:
        return self

    async def __anext__(self) -> SessionMessage | Exception:
        try:
            return await self.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None

    async def __aenter__(self) -> _BufferedReadStream:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.aclose()


def _era_name(verdict: EraVerdict | None) -> str:
    return "legacy (initialize)" if verdict == LEGACY_ERA else "2026-07-28"


def _handshake_era_call(method: Callable[[str], Awaitable[_T]], uri: str) -> Awaitable[_T]:
    """Call an SDK method marked as removed in the 2026-07-28 protocol without its notice.

    It is the right method for the handshake-era servers it is sent to, and the notice
    would reach users. The SDK warns when the coroutine is created, so only that
    synchronous step runs with the warning filtered (a filter held across an await would
    leak into other tasks).
    """
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", MCPDeprecationWarning)
        return method(uri)


def _dump(model: Any) -> dict[str, Any]:
    result: dict[str, Any] = model.model_dump(
        by_alias=True, mode="json", exclude_none=True, exclude_unset=True
    )
    return result


def _first_line(error: BaseException) -> str:
    text = str(error).strip() or type(error).__name__
    return text.splitlines()[0][:500]


def _root_cause(error: BaseException) -> BaseException:
    """The first meaningful exception inside (nested) exception groups and cancellations."""
    if isinstance(error, BaseExceptionGroup):
        candidates = [_root_cause(inner) for inner in error.exceptions]
        for candidate in candidates:
            if not isinstance(candidate, anyio.get_cancelled_exc_class()):
                return candidate
        return candidates[0]
    return error


def _status_of(error: BaseException) -> int | None:
    response = getattr(error, "response", None)
    status = getattr(response, "status_code", None)
    return status if isinstance(status, int) and status >= 400 else None


def _is_connect_failure(error: BaseException) -> bool:
    import httpx2

    return isinstance(error, httpx2.TransportError | OSError)


__all__ = ["ElicitationHandler", "NotificationCallback", "SamplingHandler", "ServerConnection"]
