"""Local OTLP receivers for the telemetry tests: a real HTTP server on 127.0.0.1 that takes what
an OpenTelemetry exporter posts to ``/v1/traces`` and ``/v1/metrics`` (protobuf, gzipped or not),
and a real gRPC server (grpcio, HTTP/2) serving the collector's ``TraceService/Export`` and
``MetricsService/Export``; both decode with ``opentelemetry-proto`` and keep every span and
metric name.

``running_receiver()`` (OTLP/HTTP) and ``running_grpc_receiver()`` yield one serving;
``Receiver.endpoint`` is what ``OTEL_EXPORTER_OTLP_ENDPOINT`` is set to; ``wait_for(predicate)``
returns once what was received satisfies ``predicate`` (a hang guard bounds it, nothing is timed).
"""

from __future__ import annotations

import gzip
import threading
from collections.abc import Callable, Iterator
from concurrent import futures
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import grpc
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
    ExportMetricsServiceRequest,
    ExportMetricsServiceResponse,
)
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

HANG_GUARD_S = 60.0


@dataclass(frozen=True)
class ReceivedSpan:
    name: str
    trace_id: str
    span_id: str
    parent_span_id: str
    kind: int
    service: str
    attributes: dict[str, Any]


class Receiver:
    def __init__(self) -> None:
        self.spans: list[ReceivedSpan] = []
        self.metric_names: set[str] = set()
        self.changed = threading.Condition()
        self.endpoint = ""

    def take_traces(self, body: bytes) -> None:
        request = ExportTraceServiceRequest.FromString(body)
        with self.changed:
            for resource_spans in request.resource_spans:
                service = next(
                    (
                        attribute.value.string_value
                        for attribute in resource_spans.resource.attributes
                        if attribute.key == "service.name"
                    ),
                    "",
                )
                for scope_spans in resource_spans.scope_spans:
                    for span in scope_spans.spans:
                        self.spans.append(
                            ReceivedSpan(
                                name=span.name,
                                trace_id=span.trace_id.hex(),
                                span_id=span.span_id.hex(),
                                parent_span_id=span.parent_span_id.hex(),
                                kind=span.kind,
                                service=service,
                                attributes={
                                    attribute.key: attribute.value.string_value
                                    for attribute in span.attributes
                                },
                            )
                        )
            self.changed.notify_all()

    def take_metrics(self, body: bytes) -> None:
        request = ExportMetricsServiceRequest.FromString(body)
        with self.changed:
            for resource_metrics in request.resource_metrics:
                for scope_metrics in resource_metrics.scope_metrics:
                    self.metric_names.update(metric.name for metric in scope_metrics.metrics)
            self.changed.notify_all()

    def wait_for(self, done: Callable[[Receiver], bool]) -> None:
        with self.changed:
            if not self.changed.wait_for(lambda: done(self), timeout=HANG_GUARD_S):
                raise AssertionError(
                    f"the receiver never got what was awaited; spans: {[s.name for s in self.spans]}, "
                    f"metrics: {sorted(self.metric_names)}"
                )

    def by_id(self) -> dict[str, ReceivedSpan]:
        with self.changed:
            return {span.span_id: span for span in self.spans}


@contextmanager
def running_receiver() -> Iterator[Receiver]:
    receiver = Receiver()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("content-length", "0")))
            if self.headers.get("content-encoding") == "gzip":
                body = gzip.decompress(body)
            if self.path == "/v1/traces":
                receiver.take_traces(body)
                answer = ExportTraceServiceResponse().SerializeToString()
            elif self.path == "/v1/metrics":
                receiver.take_metrics(body)
                answer = ExportMetricsServiceResponse().SerializeToString()
            else:
                self.send_response(404)
                self.end_headers()
                return
            self.send_response(200)
            self.send_header("content-type", "application/x-protobuf")
            self.send_header("content-length", str(len(answer)))
            self.end_headers()
            self.wfile.write(answer)

        def log_message(self, format: str, *args: Any) -> None:
            return

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    receiver.endpoint = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield receiver
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


@contextmanager
def running_grpc_receiver() -> Iterator[Receiver]:
    """The same receiver behind gRPC: the exporters' ``Export`` calls, taken as raw bytes (no
    (de)serializer given), decoded by ``take_traces`` / ``take_metrics`` as over HTTP."""
    receiver = Receiver()

    traces_answer: bytes = ExportTraceServiceResponse().SerializeToString()
    metrics_answer: bytes = ExportMetricsServiceResponse().SerializeToString()

    def traces(body: bytes, context: object) -> bytes:
        receiver.take_traces(body)
        return traces_answer

    def metrics(body: bytes, context: object) -> bytes:
        receiver.take_metrics(body)
        return metrics_answer

    services = {
        "opentelemetry.proto.collector.trace.v1.TraceService": traces,
        "opentelemetry.proto.collector.metrics.v1.MetricsService": metrics,
    }
    handlers = [
        grpc.method_handlers_generic_handler(service, {"Export": grpc.unary_unary_rpc_method_handler(export)})
        for service, export in services.items()
    ]
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4), handlers=handlers)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    receiver.endpoint = f"http://127.0.0.1:{port}"
    try:
        yield receiver
    finally:
        server.stop(grace=None).wait()
