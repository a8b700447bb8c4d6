"""A backend's own JSON-RPC error, told apart from the gateway's failures and passed on as it came."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from mcpfleet.errors import ConnectError, MCPFleetError
from mcpfleet.redaction import redact_text


class BackendRejection(MCPFleetError):
    """A backend answered a request with its own JSON-RPC error, which the client gets unchanged.

    Unlike the gateway's own failures (a backend that crashed, cannot be reached or timed
    out), this is the backend's answer: its code, message and ``data`` are part of its
    protocol (``-32021`` with the capabilities it needs, ``-32602`` with the URI it did not
    find), so a client must read them as if it had asked the backend directly.
    """

    def __init__(self, server: str, code: int, message: str, data: Any) -> None:
        super().__init__(message)
        self.server = server
        self.code = code
        self.message = message
        self.data = data


def backend_rejection(
    server: str,
    error: MCPFleetError,
    *,
    failed_here: Callable[[int, str], bool],
    served_uri: Callable[[str], str],
) -> BackendRejection | None:
    """The backend's own JSON-RPC error behind ``error``, if that is what it is.

    Only an answer of the backend counts: a lost connection, an answer over the size limit, a
    refused protocol era, or a question of the backend that failed here (``failed_here``: the
    relay refused it, the client answered with an error) are the gateway's failures. A ``uri``
    in the error's ``data`` is the backend's URI; the client knows it as ``served_uri(uri)``.
    """
    import mcp_types
    from mcp.shared.exceptions import MCPError

    from mcpfleet.transport.stdio import MESSAGE_TOO_LARGE

    cause = error.__cause__
    if (
        isinstance(error, ConnectError)
        or not isinstance(cause, MCPError)
        or cause.code in (mcp_types.CONNECTION_CLOSED, MESSAGE_TOO_LARGE)
        or failed_here(cause.code, cause.message)
    ):
        return None
    data = cause.data
    if isinstance(data, dict) and isinstance(data.get("uri"), str):
        data = {**data, "uri": served_uri(data["uri"])}
    return BackendRejection(server, cause.code, redact_text(cause.message), data)
