"""The gateway as the SDK's lowlevel ``Server``: one handler per MCP method, each a thin
translation between the wire and ``Gateway``.

``build_server(gateway)`` returns a ``Server`` that any SDK transport can serve in both
protocol eras (``Server.run`` over a stream pair serves the ``initialize`` era and the
2026-07-28 per-request era alike). Lists are answered from the gateway's current catalog, in
pages (``paging.py``); only the first ones wait, for servers starting with nothing cached
(``Gateway.first_lists_ready``). A call, a read or a prompt waits for its backend, bounded by
the fleet's policy. A name or URI the gateway does not serve is a JSON-RPC error
(``Invalid params``); a backend's own JSON-RPC error, on a call as on a read, a prompt or a
completion, reaches the client as the backend sent it (code, message, ``data``).

Change notifications reach handshake-era clients on their session (``ClientSessions``) and
2026-07-28 clients on the ``subscriptions/listen`` streams they open; a listen stream that
asks for resource URIs subscribes the backends behind them for as long as it stays open.

This module imports the SDK: import it only to serve.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import anyio
import mcp_types
from mcp.server.caching import CacheHint
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import Server
from mcp.server.lowlevel.server import NotificationOptions
from mcp.server.models import InitializationOptions
from mcp.server.session import ServerSession
from mcp.server.subscriptions import (
    InMemorySubscriptionBus,
    ListenHandler,
    PromptsListChanged,
    ResourcesListChanged,
    ResourceUpdated,
    ServerEvent,
    ToolsListChanged,
)
from mcp.shared.exceptions import MCPError

from mcpfleet import __version__
from mcpfleet.client.behalf import Caller, on_behalf_of
from mcpfleet.contract import notifications
from mcpfleet.errors import MCPFleetError
from mcpfleet.gateway.core import SERVER_NAME, Gateway, UnknownNameError
from mcpfleet.gateway.forward import InFlight, LogRelay, ProgressRelay
from mcpfleet.gateway.guard import Asker, GuardRefusal
from mcpfleet.gateway.http_fast import FastCall, HttpFastPath
from mcpfleet.gateway.paging import InvalidCursor, PagedList, page_of
from mcpfleet.gateway.rejections import BackendRejection
from mcpfleet.gateway.served_catalog import ListKind, ServedCatalog
from mcpfleet.gateway.sessions import LOG_LEVELS, ClientSession
from mcpfleet.redaction import redact_text
from mcpfleet.telemetry import parented_on

Context = ServerRequestContext[Any, Any]

NEVER_FRESH = CacheHint(ttl_ms=0, scope="private")
"""Every list may change whenever a backend connects or re-lists (clients hear of it through
``list_changed``), and what is served depends on the user's own config: nothing is kept fresh
for a client, nothing is shared between clients."""

_LISTEN_EVENTS: dict[ListKind, Callable[[], ServerEvent]] = {
    "tools": ToolsListChanged,
    "resources": ResourcesListChanged,
    "prompts": PromptsListChanged,
}


EVERY_LIST_CHANGES = NotificationOptions(prompts_changed=True, resources_changed=True, tools_changed=True)


class _GatewayServer(Server[Any]):
    """A ``Server`` that declares, by default, that every list may change, and knows its
    gateway's handlers (the HTTP fast path answers calls with them: ``fast_path_of``).

    The streamable-HTTP session manager runs each session with the server's default
    initialization options (it takes none of its own): without this, HTTP clients of the
    handshake era would read ``listChanged: false`` and could ignore the gateway's notices.
    """

    handlers: GatewayHandlers

    def create_initialization_options(
        self,
        notification_options: NotificationOptions | None = None,
        experimental_capabilities: dict[str, dict[str, Any]] | None = None,
        extensions: dict[str, dict[str, Any]] | None = None,
    ) -> InitializationOptions:
        return super().create_initialization_options(
            notification_options or EVERY_LIST_CHANGES, experimental_capabilities, extensions
        )


def build_server(gateway: Gateway) -> Server[Any]:
    """The lowlevel ``Server`` that serves ``gateway`` (enter the gateway first)."""
    handlers = GatewayHandlers(gateway)
    server = _GatewayServer(
        SERVER_NAME,
        version=__version__,
        instructions=gateway.instructions,
        cache_hints={
            "tools/list": NEVER_FRESH,
            "resources/list": NEVER_FRESH,
            "resources/templates/list": NEVER_FRESH,
            "resources/read": NEVER_FRESH,
            "prompts/list": NEVER_FRESH,
            "server/discover": NEVER_FRESH,
        },
    )
    server.handlers = handlers
    # Without it the SDK checks a 2026-07-28 call's Mcp-Param headers against a schema it
    # finds by running the whole tools/list handler, once per call.
    server.get_tool_input_schema = handlers.tool_input_schema
    for method, params_type, handler in handlers.requests():
        server.add_request_handler(method, params_type, handler)
    for method, handler in handlers.notifications():
        server.add_notification_handler(method, mcp_types.NotificationParams, handler)
    return server


def fast_path_of(server: Server[Any]) -> HttpFastPath | None:
    """What the HTTP gateway's fast path answers calls with, for a server ``build_server`` built."""
    from mcpfleet.gateway.fast_path import FastPath  # it imports this module

    if not isinstance(server, _GatewayServer):
        return None
    handlers = server.handlers
    return HttpFastPath(handlers.sessions, FastPath(handlers.gateway), handlers.fast_call)


class GatewayHandlers:
    """The gateway's answer to each MCP request, one method per request (and the client
    notifications it follows). A request to a backend is resolved once into a ``Forward``,
    which the relay and the gateway's core both take."""

    def __init__(self, gateway: Gateway) -> None:
        self.gateway = gateway
        self.relay = gateway.relay
        self.sessions = gateway.sessions
        self._bus = InMemorySubscriptionBus()
        self._listen_streams = ListenHandler(self._bus)
        gateway.on_list_changed(self._publish_list_changed)
        gateway.on_resource_updated(self._publish_resource_updated)

    def requests(self) -> list[tuple[str, type[Any], Any]]:
        return [
            ("tools/list", mcp_types.PaginatedRequestParams, self.list_tools),
            ("tools/call", mcp_types.CallToolRequestParams, self.call_tool),
            ("resources/list", mcp_types.PaginatedRequestParams, self.list_resources),
            ("resources/templates/list", mcp_types.PaginatedRequestParams, self.list_resource_templates),
            ("resources/read", mcp_types.ReadResourceRequestParams, self.read_resource),
            ("resources/subscribe", mcp_types.SubscribeRequestParams, self.subscribe),
            ("resources/unsubscribe", mcp_types.UnsubscribeRequestParams, self.unsubscribe),
            ("subscriptions/listen", mcp_types.SubscriptionsListenRequestParams, self.listen),
            ("prompts/list", mcp_types.PaginatedRequestParams, self.list_prompts),
            ("prompts/get", mcp_types.GetPromptRequestParams, self.get_prompt),
            ("completion/complete", mcp_types.CompleteRequestParams, self.complete),
            ("logging/setLevel", mcp_types.SetLevelRequestParams, self.set_logging_level),
        ]

    def notifications(self) -> list[tuple[str, Any]]:
        return [
            ("notifications/initialized", self.on_initialized),
            ("notifications/roots/list_changed", self.on_roots_changed),
        ]

    # -- change notices for 2026-07-28 listen streams ----------------------------------------------------

    async def _publish_list_changed(self, kind: ListKind) -> None:
        await self._bus.publish(_LISTEN_EVENTS[kind]())

    async def _publish_resource_updated(self, uri: str) -> None:
        await self._bus.publish(ResourceUpdated(uri=uri))

    # -- who asks ---------------------------------------------------------------------------------------

    def _asking(self, ctx: Context) -> tuple[ClientSession, Asker]:
        """The client behind a request, and who asks as the gateway's guard sees them (from the
        ASGI scope of the HTTP request that carried it: ``ctx.request``, none over stdio)."""
        client = self.sessions.session_for(ctx)
        scope = getattr(ctx.request, "scope", None)
        with _as_jsonrpc_errors():
            return client, self.gateway.views.asker(scope, client)

    async def _catalog(self, ctx: Context) -> tuple[ClientSession, ServedCatalog]:
        """What the asker of a list is served (the guard's view, once the first lists may be served)."""
        client, asker = self._asking(ctx)
        await self.gateway.first_lists_ready()
        return client, self.gateway.views.catalog_for(self.gateway.catalog, asker.viewer)

    # -- lists ------------------------------------------------------------------------------------------

    def tool_input_schema(self, name: str) -> Any:
        """The ``inputSchema`` of the served tool ``name`` (``None``: no such tool served now)."""
        return next(
            (tool["inputSchema"] for tool in self.gateway.catalog.tools if tool.get("name") == name), None
        )

    async def list_tools(self, ctx: Context, params: mcp_types.PaginatedRequestParams) -> dict[str, Any]:
        client, catalog = await self._catalog(ctx)
        return _page("tools", self.gateway.budget.listing(catalog, client.client_name), params)

    async def list_resources(self, ctx: Context, params: mcp_types.PaginatedRequestParams) -> dict[str, Any]:
        _, catalog = await self._catalog(ctx)
        return _page("resources", catalog.resources, params)

    async def list_resource_templates(
        self, ctx: Context, params: mcp_types.PaginatedRequestParams
    ) -> dict[str, Any]:
        _, catalog = await self._catalog(ctx)
        return _page("resourceTemplates", catalog.resource_templates, params)

    async def list_prompts(self, ctx: Context, params: mcp_types.PaginatedRequestParams) -> dict[str, Any]:
        _, catalog = await self._catalog(ctx)
        return _page("prompts", catalog.prompts, params)

    # -- requests forwarded to a backend ---------------------------------------------------------------------

    async def call_tool(self, ctx: Context, params: mcp_types.CallToolRequestParams) -> Any:
        client, asker = self._asking(ctx)
        on_log = (
            call_scoped_logs(ctx.session, ctx.request_id, client)
            if client.registered
            else _request_scoped_logs(ctx)
        )
        forward = await self.gateway.resolve_call(client, params.name, params.arguments or {}, asker)
        if forward.answer is not None:
            return _complete(forward.answer)

        async def relay_progress(progress: float, total: float | None, message: str | None) -> None:
            await ctx.session.report_progress(progress, total, message)

        async def call_backend(flight: InFlight | None, on_progress: ProgressRelay | None) -> Any:
            return await self.gateway.call_tool(forward, flight, on_progress=on_progress)

        with _as_jsonrpc_errors():
            return await self.relay.run(ctx, forward, call_backend, progress=relay_progress, on_log=on_log)

    async def fast_call(self, call: FastCall) -> Any:
        """A ``tools/call`` the HTTP fast path answers without the SDK's server
        (``gateway.http_fast``): resolved and sent on as ``call_tool`` does. A handshake-era
        client's call is in flight with no request of the SDK's to ride: its backend's questions
        and logs go to the client's session (its standalone stream, which the fast path
        requires); a 2026-07-28 client that declared nothing to be asked has none to receive.
        No SDK server span is current here: the call's span is parented on its ``_meta``."""
        with parented_on(call.params.get("_meta")):
            return await self._fast_call(call)

    async def _fast_call(self, call: FastCall) -> Any:
        client = call.client
        with _as_jsonrpc_errors():
            asker = self.gateway.views.asker(call.scope, client)
        forward = await self.gateway.resolve_call(client, call.name, call.arguments, asker)
        if forward.answer is not None:
            return _complete(forward.answer)
        with _as_jsonrpc_errors():
            if forward.server is None or client.sdk_session is None:
                if forward.server is not None and forward.speaks_modern:
                    with on_behalf_of(Caller(capabilities=client.capabilities)):
                        return await self.gateway.call_tool(forward, None)
                return await self.gateway.call_tool(forward, None)
            flight = InFlight(forward.server, forward, client.sdk_session, None, on_log=call.on_log)
            with self.relay.flights.flying(flight):
                return await self.gateway.call_tool(forward, flight)

    async def read_resource(self, ctx: Context, params: mcp_types.ReadResourceRequestParams) -> Any:
        client, asker = self._asking(ctx)
        with _as_jsonrpc_errors():
            forward = await self.gateway.resolve(client, "resources", params.uri, asker)

        async def read_backend(flight: InFlight | None, on_progress: ProgressRelay | None) -> dict[str, Any]:
            return _complete(await self.gateway.read_resource(forward))

        with _as_jsonrpc_errors():
            return await self.relay.run(ctx, forward, read_backend, progress=None)

    async def get_prompt(self, ctx: Context, params: mcp_types.GetPromptRequestParams) -> Any:
        client, asker = self._asking(ctx)
        with _as_jsonrpc_errors():
            forward = await self.gateway.resolve(client, "prompts", params.name, asker)

        async def get_from_backend(
            flight: InFlight | None, on_progress: ProgressRelay | None
        ) -> dict[str, Any]:
            return _complete(await self.gateway.get_prompt(forward, params.arguments))

        with _as_jsonrpc_errors():
            return await self.relay.run(ctx, forward, get_from_backend, progress=None)

    async def complete(self, ctx: Context, params: mcp_types.CompleteRequestParams) -> dict[str, Any]:
        _, asker = self._asking(ctx)
        ref = params.ref.model_dump(by_alias=True, mode="json", exclude_none=True)
        argument = {"name": params.argument.name, "value": params.argument.value}
        context_arguments = params.context.arguments if params.context is not None else None
        with _as_jsonrpc_errors():
            return _complete(await self.gateway.complete(ref, argument, context_arguments, asker))

    # -- subscriptions --------------------------------------------------------------------------------------

    async def subscribe(self, ctx: Context, params: mcp_types.SubscribeRequestParams) -> dict[str, Any]:
        client, asker = self._asking(ctx)
        with _as_jsonrpc_errors():
            await self.gateway.subscriptions.subscribe(client, params.uri, asker)
        return {}

    async def unsubscribe(self, ctx: Context, params: mcp_types.UnsubscribeRequestParams) -> dict[str, Any]:
        await self.gateway.subscriptions.unsubscribe(self.sessions.session_for(ctx), params.uri)
        return {}

    async def listen(self, ctx: Context, params: mcp_types.SubscriptionsListenRequestParams) -> Any:
        """A 2026-07-28 listen stream; the resources it names are subscribed while it is open."""
        client, asker = self._asking(ctx)
        uris = list(params.notifications.resource_subscriptions or ())
        subscribed: list[str] = []
        try:
            for uri in uris:
                with _as_jsonrpc_errors():
                    await self.gateway.subscriptions.subscribe(client, uri, asker)
                subscribed.append(uri)
            return await self._listen_streams(ctx, params)
        finally:
            with anyio.CancelScope(shield=True):
                for uri in subscribed:
                    await self.gateway.subscriptions.unsubscribe(client, uri)

    # -- the client's settings and roots -------------------------------------------------------------------

    async def set_logging_level(
        self, ctx: Context, params: mcp_types.SetLevelRequestParams
    ) -> dict[str, Any]:
        if params.level not in LOG_LEVELS:
            raise MCPError(code=mcp_types.INVALID_PARAMS, message=f"unknown log level {params.level!r}")
        self.sessions.session_for(ctx).log_level = params.level
        return {}

    async def on_initialized(self, ctx: Context, params: Any) -> None:
        # Registering the client from its handshake on means one that has asked nothing yet
        # still hears of every list change (of its own view: bound to its asker here); the
        # roots it declares become the backends' roots.
        client, _ = self._asking(ctx)
        if "roots" in client.capabilities:
            self.gateway.tell_backends_roots_changed()

    async def on_roots_changed(self, ctx: Context, params: Any) -> None:
        self.sessions.session_for(ctx)
        self.gateway.tell_backends_roots_changed()


def _request_scoped_logs(ctx: Context) -> LogRelay | None:
    """A 2026-07-28 client gets log messages only on a request that opted in (the
    ``logLevel`` key of its ``_meta``), at that level or above, on that request's stream."""
    requested = (ctx.meta or {}).get(mcp_types.LOG_LEVEL_META_KEY)
    if requested not in LOG_LEVELS:
        return None
    least = LOG_LEVELS.index(requested)

    async def relay(params: dict[str, Any]) -> None:
        level = params.get("level")
        if level not in LOG_LEVELS or LOG_LEVELS.index(level) < least:
            return
        notification = mcp_types.server_notification_adapter.validate_python(
            {"method": notifications.LOG_MESSAGE, "params": params}, by_name=False
        )
        await ctx.session.send_notification(notification, related_request_id=ctx.request_id)

    return relay


def call_scoped_logs(session: ServerSession, request_id: Any, client: ClientSession) -> LogRelay:
    """A handshake-era client gets the logs a backend writes during its call with the call
    (``related_request_id``: ``request_id``, on ``session``), at the level it asked for: over
    HTTP they ride the call's response stream, which a client that opened no standalone
    stream still reads (over stdio there is one stream, and nothing changes)."""

    async def relay(params: dict[str, Any]) -> None:
        level = params.get("level")
        if not isinstance(level, str) or not client.wants_log(level):
            return
        notification = mcp_types.server_notification_adapter.validate_python(
            {"method": notifications.LOG_MESSAGE, "params": params}, by_name=False
        )
        await session.send_notification(notification, related_request_id=request_id)

    return relay


def initialization_options(server: Server[Any]) -> InitializationOptions:
    """What the gateway answers ``initialize`` with: every list may change."""
    return server.create_initialization_options(
        NotificationOptions(prompts_changed=True, resources_changed=True, tools_changed=True)
    )


def _page(
    kind: PagedList, items: Sequence[dict[str, Any]], params: mcp_types.PaginatedRequestParams
) -> dict[str, Any]:
    """One page of a served list (``paging.py``); a cursor the gateway did not give is ``-32602``."""
    try:
        return _complete(page_of(kind, items, params.cursor if params is not None else None))
    except InvalidCursor as error:
        raise MCPError(code=mcp_types.INVALID_PARAMS, message=str(error)) from None


def _complete(result: dict[str, Any]) -> dict[str, Any]:
    """A final answer: the 2026-07-28 wire wants ``resultType`` on every result (a handshake-era
    backend's answers have none; the handshake era's sieve drops it again)."""
    result.setdefault("resultType", "complete")
    return result


@contextmanager
def _as_jsonrpc_errors() -> Iterator[None]:
    """Turn a name the gateway does not serve, or a backend's refusal, into a JSON-RPC error.

    A backend's own JSON-RPC error (``BackendRejection``) is passed on as it came: code,
    message and ``data``. A resource the gateway does not serve is ``-32602`` with the URI in
    ``data`` (SEP-2164). Any other failure of a backend keeps the code it failed with, and
    mcpfleet's message, which names the server.
    """
    try:
        yield
    except MCPFleetError as error:
        raise jsonrpc_error(error) from None


def jsonrpc_error(error: MCPFleetError) -> MCPError:
    """The JSON-RPC error a request that failed with ``error`` is answered with (see
    ``_as_jsonrpc_errors``; the fast path answers its calls' failures with it too)."""
    if isinstance(error, BackendRejection):
        return MCPError(code=error.code, message=error.message, data=error.data)
    if isinstance(error, GuardRefusal):
        # Refused by the gateway's guard (a policy, a missing per-user credential): the request
        # is not one the client may make, whatever the backend would say.
        return MCPError(code=mcp_types.INVALID_REQUEST, message=f"MCP error: {error}")
    if isinstance(error, UnknownNameError):
        data = {"uri": error.name} if error.kind == "resource" else None
        return MCPError(code=mcp_types.INVALID_PARAMS, message=str(error), data=data)
    cause = error.__cause__
    code = cause.code if isinstance(cause, MCPError) else mcp_types.INTERNAL_ERROR
    return MCPError(code=code, message=redact_text(str(error)))
