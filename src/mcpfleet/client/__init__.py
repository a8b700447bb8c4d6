"""One connection to one MCP server (stdio, streamable HTTP or SSE) on the official SDK.

Importing this package is cheap: the SDK (``mcp``, ~0.6 s to import) is loaded only when a
server is actually contacted, inside the functions below.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from mcpfleet.client.definitions import ServerInfo, ToolDefinition

if TYPE_CHECKING:
    import anyio.abc

    from mcpfleet.client.connection import ElicitationHandler, NotificationCallback, ServerConnection
    from mcpfleet.config.model import ServerConfig


async def connect_to_server(
    name: str,
    config: ServerConfig,
    *,
    cwd: Path,
    timeout_ms: int | None = None,
    on_notification: NotificationCallback | None = None,
    protocol_version: str | None = None,
    auth: object | None = None,
    resolve_secrets: bool = True,
    elicitation_handler: ElicitationHandler | None = None,
) -> ServerConnection:
    """Connect one server and return the live connection (asyncio only; see ``open_connection``).

    The handshake (``initialize`` + ``notifications/initialized``) is bounded by ``timeout_ms``,
    else the config's timeout (default 30 000 ms; 0 = unbounded). ``protocol_version`` is the
    remembered era: a modern version is adopted directly, anything else uses the legacy
    handshake (never the SDK's ``server/discover`` probe). ``auth`` (an ``httpx2.Auth``) is used
    for HTTP servers. ``resolve_secrets=False`` (unapproved entries) skips ``!command`` and
    environment-name substitution. ``elicitation_handler`` answers the server's
    ``elicitation/create`` requests (without one the client does not offer elicitation).
    """
    from mcpfleet.client import connection

    return await connection.connect_to_server(
        name,
        config,
        cwd=cwd,
        timeout_ms=timeout_ms,
        on_notification=on_notification,
        protocol_version=protocol_version,
        auth=auth,
        resolve_secrets=resolve_secrets,
        elicitation_handler=elicitation_handler,
    )


async def open_connection(
    task_group: anyio.abc.TaskGroup,
    name: str,
    config: ServerConfig,
    *,
    cwd: Path,
    timeout_ms: int | None = None,
    on_notification: NotificationCallback | None = None,
    protocol_version: str | None = None,
    auth: object | None = None,
    resolve_secrets: bool = True,
    elicitation_handler: ElicitationHandler | None = None,
) -> ServerConnection:
    """Like ``connect_to_server``, with the connection's owner task hosted in ``task_group``
    (which must outlive the connection). Works on every anyio backend."""
    from mcpfleet.client import connection

    return await connection.open_connection(
        task_group,
        name,
        config,
        cwd=cwd,
        timeout_ms=timeout_ms,
        on_notification=on_notification,
        protocol_version=protocol_version,
        auth=auth,
        resolve_secrets=resolve_secrets,
        elicitation_handler=elicitation_handler,
    )


def __getattr__(name: str) -> Any:
    # ``ServerConnection`` lives with the SDK-importing code; load it on first use only.
    if name == "ServerConnection":
        from mcpfleet.client.connection import ServerConnection

        return ServerConnection
    raise AttributeError(name)


__all__ = ["ServerConnection", "ServerInfo", "ToolDefinition", "connect_to_server", "open_connection"]
