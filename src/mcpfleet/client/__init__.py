"""One connection to one MCP server (stdio, streamable HTTP or SSE) on the official SDK.

Importing this package is cheap: ``ServerConnection`` lives with the SDK-importing code in
``mcpfleet.client.connection`` and is loaded on first use; ``open_connection`` (the owner task
in the caller's task group) and ``connect_to_server`` (an ``async with`` block) spawn a stdio
server before loading the SDK (``opening``). Both take one ``ConnectionOptions`` record
(``options``), or its fields as keywords.

``client`` may use ``transport`` and never ``auth``: a connection receives its ``httpx2.Auth``
ready-made, and ``auth`` is the one that imports from here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from mcpfleet.client.definitions import ServerInfo, ToolDefinition
from mcpfleet.client.opening import connect_to_server, open_connection
from mcpfleet.client.options import ConnectionOptions

if TYPE_CHECKING:
    from mcpfleet.client.connection import ServerConnection


def __getattr__(name: str) -> Any:
    if name == "ServerConnection":
        from mcpfleet.client.connection import ServerConnection

        return ServerConnection
    raise AttributeError(f"module 'mcpfleet.client' has no attribute {name!r}")


__all__ = [
    "ConnectionOptions",
    "ServerConnection",
    "ServerInfo",
    "ToolDefinition",
    "connect_to_server",
    "open_connection",
]
