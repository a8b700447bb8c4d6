"""Traces through ``mcpfleet serve --http``: a 2026-07-28 client's call, answered as JSON by the HTTP
fast path (``gateway.http_fast``, no SDK server in between) and as a stream by the SDK's server, is
traced from the client's ``_meta.traceparent`` to the backend either way; on the fast path the
gateway reads the client's context itself, and its span is the first under the client's."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import httpx2
import pytest
from tests.integration.gateway.http_gateway import HttpGateway, running_http_gateway, wait_until_listed
from tests.integration.telemetry.otlp_receiver import Receiver, running_receiver
from tests.integration.telemetry.test_traces import TRACE_SERVER, ancestry, parent_of, traceparent

MODERN = "2026-07-28"
TRACE_ID = "5b8efff798038103d269b633813fc60c"
SPAN_KIND_SERVER = 2
ACCEPTS = {
    "json": "application/json, text/event-stream",
    "stream": "text/event-stream, application/json;q=0.5",
}
CLIENT_SPANS = {"json": "eee19b7ec3c1b174", "stream": "e457b5a2e4d86bd1"}


def modern_call(gateway: HttpGateway, accept: str, client_span: str) -> dict[str, Any]:
    """What the backend says it received, for one 2026-07-28 ``tools/call`` of ``pipe_trace``."""
    meta = {
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "t", "version": "1"},
        "traceparent": traceparent(TRACE_ID, client_span),
    }
    headers = {
        **gateway.headers,
        "Accept": accept,
        "MCP-Protocol-Version": MODERN,
        "Mcp-Method": "tools/call",
        "Mcp-Name": "pipe_trace",
    }
    params = {"name": "pipe_trace", "arguments": {}, "_meta": meta}
    message = {"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": params}
    response = httpx2.post(gateway.url, json=message, headers=headers, timeout=30)
    assert response.status_code == 200, response.text
    if response.headers["content-type"].startswith("application/json"):
        answer = response.json()
    else:
        data = [
            line[5:] for line in response.text.splitlines() if line.startswith("data:") and line[5:].strip()
        ]
        answer = json.loads(data[-1])
    received: dict[str, Any] = json.loads(answer["result"]["content"][0]["text"])
    return received


def test_both_http_paths_are_traced_from_the_client_to_the_backend(
    isolated_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with running_receiver() as receiver:
        for name in [name for name in os.environ if name.startswith("OTEL_")]:
            monkeypatch.delenv(name)
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", receiver.endpoint)
        monkeypatch.setenv("OTEL_BSP_SCHEDULE_DELAY", "50")
        servers = {"pipe": {"command": sys.executable, "args": [str(TRACE_SERVER), "--name", "pipe"]}}
        with running_http_gateway(isolated_home, servers) as gateway:
            wait_until_listed(gateway, "pipe_trace")
            parents = {}
            for path, accept in ACCEPTS.items():
                received = modern_call(gateway, accept, CLIENT_SPANS[path])
                trace_id, parents[path] = parent_of(received["meta"]["traceparent"])
                assert trace_id == TRACE_ID

            def chains_complete(got: Receiver) -> bool:
                spans = {span.span_id: span for span in got.spans}
                return all(
                    any(span.parent_span_id == CLIENT_SPANS[path] for span in ancestry(spans, parents[path]))
                    for path in ACCEPTS
                )

            receiver.wait_for(chains_complete)
            spans = receiver.by_id()
            for path in ACCEPTS:
                names = [span.name for span in ancestry(spans, parents[path])]
                assert names.index("connection tools/call") < names.index("gateway tools/call"), names
            fast = ancestry(spans, parents["json"])
            assert fast[-1].name == "gateway tools/call" and fast[-1].kind == SPAN_KIND_SERVER
            through_the_sdk = ancestry(spans, parents["stream"])
            assert through_the_sdk[-1].name == "tools/call pipe_trace"  # the SDK server's span
