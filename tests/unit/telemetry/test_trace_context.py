"""The trace context read from what a client or the SDK wrote: a client's ``_meta`` (whatever it
holds) and the JSON-RPC body of an HTTP request (``traceparent`` headers)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from opentelemetry import trace

from mcpfleet.telemetry.headers import trace_headers
from mcpfleet.telemetry.otel import client_context

PARENT = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"


def body(meta: Any) -> bytes:
    return json.dumps(
        {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "t", "_meta": meta}}
    ).encode()


def test_the_headers_are_the_meta_s_trace_context() -> None:
    assert trace_headers(body({"traceparent": PARENT, "tracestate": "a=1", "progressToken": 3})) == {
        "traceparent": PARENT,
        "tracestate": "a=1",
    }


@pytest.mark.parametrize(
    "raw",
    [
        b'not json but "traceparent"',
        b'[{"params": {"_meta": {"traceparent": "x"}}}]',
        body({"traceparent": 7}),
        body("traceparent"),
        json.dumps({"params": ["traceparent"]}).encode(),
        body({}),
    ],
)
def test_a_body_without_a_usable_trace_context_gives_no_header(raw: bytes) -> None:
    assert trace_headers(raw) == {}


def test_a_client_s_traceparent_is_the_parent() -> None:
    context = client_context({"traceparent": PARENT, "tracestate": "a=1"})
    assert context is not None
    span_context = trace.get_current_span(context).get_span_context()
    assert (format(span_context.trace_id, "032x"), format(span_context.span_id, "016x")) == (
        "4bf92f3577b34da6a3ce929d0e0e4736",
        "00f067aa0ba902b7",
    )
    assert span_context.is_remote


@pytest.mark.parametrize(
    "meta",
    [
        None,
        {},
        {"traceparent": 12},
        {"traceparent": ["00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"]},
        {"traceparent": "00-00000000000000000000000000000000-00f067aa0ba902b7-01"},
        {"traceparent": "garbage", "tracestate": {"nested": True}},
    ],
)
def test_a_meta_without_a_valid_traceparent_starts_a_new_trace(meta: Any) -> None:
    assert client_context(meta) is None
