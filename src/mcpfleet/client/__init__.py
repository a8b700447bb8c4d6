"""One connection to one MCP server (stdio, streamable HTTP or SSE) on the official SDK.

Importing this package is cheap: ``connect_to_server``, ``open_connection`` and
``ServerConnection`` live in ``mcpfleet.client.connection``, which imports the SDK
(``mcp``, ~0.6 s), and are loaded from there on first use only.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from mcpfleet.client.definitions import ServerInfo, ToolDefinition

if TYPE_CHECKING:
    from mcpfleet.client.connection import ServerConnection, connect_to_server, open_connection

_FROM_CONNECTION = frozenset({"ServerConnection", "connect_to_server", "open_connection"})


def __getattr__(name: str) -> Any:
    if name in _FROM_CONNECTION:
        from mcpfleet.client import connection

        return getattr(connection, name)
    raise AttributeError(f"module 'mcpfleet.client' has no attribute {name!r}")


__all__ = ["ServerConnection", "ServerInfo", "ToolDefinition", "connect_to_server", "open_connection"]
