"""HTTP transports (streamable HTTP and legacy SSE) on the SDK's clients.

The SDK turns an HTTP error answer into a generic JSON-RPC error and loses the status code,
so the ``httpx2`` client used here records every response status: the connection reads it
back to tell "needs a login" (401) from "wrong URL" (404) in its error messages. While
telemetry traces (``mcpfleet.telemetry``), each request also carries the call's W3C trace
context as ``traceparent``/``tracestate`` headers.
Imported only when an HTTP server is contacted (it imports ``httpx2`` and ``mcp``).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any, Literal

import anyio
import httpx2

from mcpfleet.redaction import remember_credentials
from mcpfleet.telemetry import active
from mcpfleet.telemetry.headers import trace_headers

if TYPE_CHECKING:
    from mcp.client._transport import TransportStreams

CONNECT_TIMEOUT_S = 30.0
"""Connect/write/pool bound of every HTTP operation."""
SSE_READ_TIMEOUT_S = 300.0
"""How long an open event stream may stay silent (servers hold streams open)."""


class HttpTransport(anyio.AsyncContextManagerMixin):
    """An SDK ``Transport`` over streamable HTTP or SSE that remembers HTTP error statuses."""

    def __init__(
        self,
        url: str,
        *,
        kind: Literal["http", "sse"],
        headers: dict[str, str],
        auth: httpx2.Auth | None,
    ) -> None:
        self.url = url
        self.kind = kind
        self.headers = headers
        # The HTTP client and the SDK log the URL as it is; errors name it.
        remember_credentials(url=url, headers=headers)
        self.auth = auth
        self.error_status: int | None = None
        """The last 4xx/5xx status any response had (``None`` when every answer was fine)."""

    async def _record_status(self, response: httpx2.Response) -> None:
        if response.status_code >= 400:
            self.error_status = response.status_code

    def _make_client(
        self,
        headers: dict[str, Any] | None = None,
        timeout: httpx2.Timeout | None = None,
        auth: httpx2.Auth | None = None,
    ) -> httpx2.AsyncClient:
        return httpx2.AsyncClient(
            headers=headers if headers is not None else self.headers,
            timeout=timeout or httpx2.Timeout(CONNECT_TIMEOUT_S, read=SSE_READ_TIMEOUT_S),
            auth=auth if auth is not None else self.auth,
            event_hooks=self._event_hooks(),
        )

    def _event_hooks(self) -> dict[str, list[Any]]:
        hooks: dict[str, list[Any]] = {"response": [self._record_status]}
        telemetry = active()
        if telemetry is not None and telemetry.tracing:
            hooks["request"] = [_send_trace_context]
        return hooks

    @asynccontextmanager
    async def __asynccontextmanager__(self) -> AsyncIterator[TransportStreams]:
        if self.kind == "sse":
            from mcp.client.sse import sse_client

            async with sse_client(
                self.url,
                headers=self.headers,
                timeout=CONNECT_TIMEOUT_S,
                sse_read_timeout=SSE_READ_TIMEOUT_S,
                httpx_client_factory=self._make_client,
                auth=self.auth,
            ) as streams:
                yield streams
        else:
            from mcp.client.streamable_http import streamable_http_client

            async with (
                self._make_client() as client,
                streamable_http_client(self.url, http_client=client) as streams,
            ):
                yield streams


async def _send_trace_context(request: httpx2.Request) -> None:
    """While telemetry traces: the call's trace context, which the SDK wrote into the message's
    ``_meta``, in the request's ``traceparent``/``tracestate`` headers too (W3C trace context)."""
    try:
        body = request.content
    except httpx2.RequestNotRead:
        return  # a streamed body: no message to read it from
    request.headers.update(trace_headers(body))
