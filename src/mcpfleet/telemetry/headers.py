"""The W3C trace context of an HTTP request, read from the JSON-RPC message it carries.

The SDK's HTTP client posts a request from its writer task, not from the task of the call, so
the current span there is not the call's; the SDK has written the call's trace context into the
message's ``_meta`` by then (``traceparent``, ``tracestate``), and this is where an HTTP
backend's ``traceparent`` header is taken from (``transport.http``). Standard library only.
"""

from __future__ import annotations

import json

HEADER_KEYS = ("traceparent", "tracestate")


def trace_headers(body: bytes) -> dict[str, str]:
    """The ``traceparent``/``tracestate`` headers a JSON-RPC request's ``_meta`` names (none for
    a body that is not such a request: a batch, a notification without them, not JSON)."""
    if b'"traceparent"' not in body:
        return {}
    try:
        message = json.loads(body)
    except ValueError:
        return {}
    params = message.get("params") if isinstance(message, dict) else None
    meta = params.get("_meta") if isinstance(params, dict) else None
    if not isinstance(meta, dict):
        return {}
    return {key: value for key in HEADER_KEYS if isinstance(value := meta.get(key), str)}
