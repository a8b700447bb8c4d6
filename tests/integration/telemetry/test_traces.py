"""Traces end to end: a real ``mcpfleet serve`` (stdio) with the OTLP exporter pointed at a local
receiver (``otlp_receiver``), in front of a stdio backend (a call the fast path takes) and an HTTP
backend (a call through the SDK's server and client), both ``tests/servers/trace_server.py``,
which answer with the trace context they received.

For each call, the spans the receiver gets chain from the client's own ``_meta.traceparent``
through the gateway's span and the client connection's span down to the span the backend was
told is its parent, in ``_meta`` and, over HTTP, in the ``traceparent`` header too.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any, cast

import pytest
from mcp_types import RequestParamsMeta
from tests.integration.gateway.gateway_harness import open_gateway, wait_until
from tests.integration.telemetry.otlp_receiver import (
    ReceivedSpan,
    Receiver,
    running_grpc_receiver,
    running_receiver,
)
from tests.servers.fixtures import SERVERS_DIR, first_text, start_http_server

pytestmark = pytest.mark.anyio

TRACE_SERVER = SERVERS_DIR / "trace_server.py"
CLIENT_TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
CLIENT_SPAN_IDS = {"pipe": "00f067aa0ba902b7", "web": "53995c3f42cd8ad8"}
"""The client's own span of each call: the parent it names in ``_meta.traceparent``."""


def traceparent(trace_id: str, span_id: str) -> str:
    return f"00-{trace_id}-{span_id}-01"


def parent_of(header: str) -> tuple[str, str]:
    """``(trace id, parent span id)`` of a ``traceparent`` value."""
    version, trace_id, span_id, flags = header.split("-")
    assert (version, flags) == ("00", "01"), header
    return trace_id, span_id


def otel_environment(receiver: Receiver) -> dict[str, str]:
    environ = {name: value for name, value in os.environ.items() if not name.startswith("OTEL_")}
    return {
        **environ,
        "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.endpoint,
        "OTEL_SERVICE_NAME": "gateway-under-test",
        "OTEL_BSP_SCHEDULE_DELAY": "50",
        "OTEL_METRIC_EXPORT_INTERVAL": "200",
    }


def ancestry(spans: dict[str, ReceivedSpan], span_id: str) -> list[ReceivedSpan]:
    """The span ``span_id`` and its exported ancestors, nearest first."""
    chain: list[ReceivedSpan] = []
    while span_id in spans:
        chain.append(spans[span_id])
        span_id = spans[span_id].parent_span_id
    return chain


async def test_one_call_is_traced_from_the_client_through_the_gateway_to_each_backend(
    isolated_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    web = start_http_server("--http", "--name", "web", script=TRACE_SERVER)
    try:
        with running_receiver() as receiver:
            for name, value in otel_environment(receiver).items():
                monkeypatch.setenv(name, value)
            servers: dict[str, dict[str, Any]] = {
                "pipe": {"command": sys.executable, "args": [str(TRACE_SERVER), "--name", "pipe"]},
                "web": {"type": "http", "url": web.url},
            }
            async with open_gateway(isolated_home, servers, serve_args=("--prefix", "always")) as run:

                async def both_listed() -> bool:
                    names = {tool.name for tool in (await run.client.list_tools()).tools}
                    return {"pipe_trace", "web_trace"} <= names

                await wait_until(both_listed, timeout_s=30)
                received: dict[str, dict[str, Any]] = {}
                for server, client_span in CLIENT_SPAN_IDS.items():
                    # RequestParamsMeta takes extra keys (PEP 728's extra_items), which mypy does not read.
                    meta = cast(RequestParamsMeta, {"traceparent": traceparent(CLIENT_TRACE_ID, client_span)})
                    result = await run.client.call_tool(f"{server}_trace", {}, meta=meta)
                    received[server] = json.loads(first_text(result))

                def backend_parent(server: str) -> str:
                    trace_id, parent = parent_of(received[server]["meta"]["traceparent"])
                    assert trace_id == CLIENT_TRACE_ID, received[server]
                    return parent

                def chains_complete(receiver: Receiver) -> bool:
                    spans = {span.span_id: span for span in receiver.spans}
                    return all(
                        any(
                            span.parent_span_id == CLIENT_SPAN_IDS[server]
                            for span in ancestry(spans, backend_parent(server))
                        )
                        for server in CLIENT_SPAN_IDS
                    )

                receiver.wait_for(chains_complete)
                spans = receiver.by_id()
                # Over HTTP the header says what the _meta says.
                assert received["web"]["headers"]["traceparent"] == received["web"]["meta"]["traceparent"]
                for server, client_span in CLIENT_SPAN_IDS.items():
                    chain = ancestry(spans, backend_parent(server))
                    names = [span.name for span in chain]
                    assert "connection tools/call" in names and "gateway tools/call" in names, names
                    connection = chain[names.index("connection tools/call")]
                    gateway = chain[names.index("gateway tools/call")]
                    # the connection's span under the gateway's, the gateway's under the client's
                    assert names.index("connection tools/call") < names.index("gateway tools/call")
                    assert chain[-1].parent_span_id == client_span
                    assert {span.trace_id for span in chain} == {CLIENT_TRACE_ID}
                    for span in (connection, gateway):
                        assert span.attributes["mcpfleet.server"] == server
                        assert span.attributes["mcpfleet.tool"] == "trace"
                        assert span.service == "gateway-under-test"
                    assert connection.attributes["mcpfleet.transport"] == (
                        "stdio" if server == "pipe" else "http"
                    )
                # The stdio backend's call took the fast path: no SDK server span between the
                # client's span and the gateway's, nor an SDK client span under the connection's.
                pipe_chain = ancestry(spans, backend_parent("pipe"))
                assert [span.name for span in pipe_chain] == ["connection tools/call", "gateway tools/call"]
                receiver.wait_for(
                    lambda got: {"mcpfleet.calls", "mcpfleet.call.duration"} <= got.metric_names
                )
    finally:
        web.stop()


async def test_the_same_chain_is_exported_over_grpc_when_the_protocol_says_so(
    isolated_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with running_grpc_receiver() as receiver:
        for name, value in otel_environment(receiver).items():
            monkeypatch.setenv(name, value)
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")
        servers = {"pipe": {"command": sys.executable, "args": [str(TRACE_SERVER), "--name", "pipe"]}}
        async with open_gateway(isolated_home, servers, serve_args=("--prefix", "always")) as run:

            async def listed() -> bool:
                return "pipe_trace" in {tool.name for tool in (await run.client.list_tools()).tools}

            await wait_until(listed, timeout_s=30)
            meta = cast(
                RequestParamsMeta, {"traceparent": traceparent(CLIENT_TRACE_ID, CLIENT_SPAN_IDS["pipe"])}
            )
            answer = json.loads(first_text(await run.client.call_tool("pipe_trace", {}, meta=meta)))
            trace_id, backend_parent = parent_of(answer["meta"]["traceparent"])
            assert trace_id == CLIENT_TRACE_ID

            def chain_complete(got: Receiver) -> bool:
                chain = ancestry({span.span_id: span for span in got.spans}, backend_parent)
                return bool(chain) and chain[-1].parent_span_id == CLIENT_SPAN_IDS["pipe"]

            receiver.wait_for(chain_complete)
            chain = ancestry(receiver.by_id(), backend_parent)
            assert [span.name for span in chain] == ["connection tools/call", "gateway tools/call"]
            assert {span.service for span in chain} == {"gateway-under-test"}
            receiver.wait_for(lambda got: {"mcpfleet.calls", "mcpfleet.call.duration"} <= got.metric_names)
