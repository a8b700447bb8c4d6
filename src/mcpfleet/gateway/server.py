"""The gateway as the SDK's lowlevel ``Server``: one handler per MCP method, each a thin
translation between the wire and ``Gateway``.

``build_server(gateway)`` returns a ``Server`` that any SDK transport can serve in both
protocol eras (``Server.run`` over a stream pair serves the ``initialize`` era and the
2026-07-28 per-request era alike). Handlers never wait for a backend that is still starting
to answer a list; a call does wait for its backend, bounded by the fleet's policy.

This module imports the SDK: import it only to serve.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import mcp_types
from mcp.server.caching import CacheHint
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import Server
from mcp.server.lowlevel.server import NotificationOptions
from mcp.server.models import InitializationOptions
from mcp.server.subscriptions import (
    InMemorySubscriptionBus,
    ListenHandler,
    PromptsListChanged,
    ResourcesListChanged,
    ServerEvent,
    ToolsListChanged,
)
from mcp.shared.exceptions import MCPError

from mcpfleet import __version__
from mcpfleet.gateway.catalog import ListKind
from mcpfleet.gateway.core import SERVER_NAME, Gateway, UnknownToolError

if TYPE_CHECKING:
    from collections.abc import Callable

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
    """A ``Server`` that declares, by default, that every list may change.

    The streamable-HTTP session manager runs each session with the server's default
    initialization options (it takes none of its own): without this, HTTP clients of the
    handshake era would read ``listChanged: false`` and could ignore the gateway's notices.
    """

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
    bus = InMemorySubscriptionBus()

    async def publish(kind: ListKind) -> None:
        await bus.publish(_LISTEN_EVENTS[kind]())

    gateway.on_list_changed(publish)

    async def list_tools(ctx: Context, params: mcp_types.PaginatedRequestParams) -> dict[str, Any]:
        gateway.sessions.session_for(ctx)
        return {"tools": list(gateway.catalog.tools), "resultType": "complete"}

    async def call_tool(ctx: Context, params: mcp_types.CallToolRequestParams) -> Any:
        gateway.sessions.session_for(ctx)

        async def relay_progress(progress: float, total: float | None, message: str | None) -> None:
            await ctx.session.report_progress(progress, total, message)

        try:
            return await gateway.call_tool(params.name, params.arguments or {}, on_progress=relay_progress)
        except UnknownToolError as error:
            raise MCPError(code=mcp_types.INVALID_PARAMS, message=str(error)) from None

    server: Server[Any] = _GatewayServer(
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
        on_subscriptions_listen=ListenHandler(bus),
    )
    server.add_request_handler("tools/list", mcp_types.PaginatedRequestParams, list_tools)
    server.add_request_handler("tools/call", mcp_types.CallToolRequestParams, call_tool)
    return server


def initialization_options(server: Server[Any]) -> InitializationOptions:
    """What the gateway answers ``initialize`` with: every list may change."""
    return server.create_initialization_options(
        NotificationOptions(prompts_changed=True, resources_changed=True, tools_changed=True)
    )
