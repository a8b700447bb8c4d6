"""One connection to one MCP server (stdio, streamable HTTP or SSE) on the official SDK.

Importing this package is cheap: ``ServerConnection`` lives with the SDK-importing code in
``mcpfleet.client.connection`` and is loaded on first use; ``open_connection`` and
``connect_to_server`` spawn a stdio server before loading the SDK (``opening``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from mcpfleet.client.definitions import ServerInfo, ToolDefinition
from mcpfleet.client.opening import connect_to_server, open_connection

if TYPE_CHECKING:
    from mcpfleet.client.connection import ServerConnection


def __getattr__(name: str) -> Any:
    if name == "ServerConnection":
        from mcpfleet.client.connection import ServerConnection

        return ServerConnection
    raise AttributeError(f"module 'mcpfleet.client' has no attribute {name!r}")


__all__ = ["ServerConnection", "ServerInfo", "ToolDefinition", "connect_to_server", "open_connection"]
