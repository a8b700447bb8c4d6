"""The OpenTelemetry export: the SDK's tracer and meter providers, set up from the ``OTEL_*``
variables, and the spans and instruments of a call.

Imported by ``mcpfleet.telemetry.start`` only when a variable asks for telemetry: it imports the
OpenTelemetry SDK, and the OTLP exporter of the protocol asked for, HTTP/protobuf or gRPC, when
the first provider starts (``mcpfleet[otel]``). The providers become the
process's global ones (unless the process set its own already, which is then used), so the
``mcp`` SDK's own spans (each message its server handles, each request its client sends) are
exported beside mcpfleet's. The SDK reads every other ``OTEL_*`` variable itself: the endpoint
and headers of each signal, ``OTEL_SERVICE_NAME`` and ``OTEL_RESOURCE_ATTRIBUTES``, the
sampler, the batch processor's delays, the metric export interval. The console exporters write
to stderr: a stdio gateway's stdout is its MCP stream.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from opentelemetry import metrics, propagate, trace
from opentelemetry.context import Context, attach, detach
from opentelemetry.metrics import CallbackOptions, Observation
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import (
    ConsoleMetricExporter,
    MetricExporter,
    PeriodicExportingMetricReader,
)
from opentelemetry.sdk.resources import SERVICE_NAME, Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter, SpanExporter
from opentelemetry.trace import Span, SpanKind, StatusCode

from mcpfleet.telemetry.calls import Telemetry
from mcpfleet.telemetry.settings import GRPC, OtlpProtocol, TelemetrySettings

TRACER_NAME = "mcpfleet"
TRACE_KEYS = ("traceparent", "tracestate", "baggage")
"""The ``_meta`` keys of W3C trace context (and baggage) read from a client and sent on."""
GATEWAY_SPAN = "gateway tools/call"
CONNECTION_SPAN = "connection tools/call"


class OtelExport:
    """The providers of this process, and mcpfleet's tracer and instruments on them."""

    def __init__(self, tracer_provider: TracerProvider | None, meter_provider: MeterProvider | None) -> None:
        self.tracer_provider = tracer_provider
        self.meter_provider = meter_provider
        self.tracing = tracer_provider is not None
        self._tracer = trace.get_tracer(TRACER_NAME)
        meter = metrics.get_meter(TRACER_NAME) if meter_provider is not None else None
        self._meter = meter
        self._calls = (
            meter.create_counter(
                "mcpfleet.calls", unit="{call}", description="tools/call requests the gateway sent on"
            )
            if meter is not None
            else None
        )
        self._errors = (
            meter.create_counter(
                "mcpfleet.call.errors", unit="{call}", description="calls that ended in an error"
            )
            if meter is not None
            else None
        )
        self._duration = (
            meter.create_histogram(
                "mcpfleet.call.duration", unit="s", description="time from the call sent on to its answer"
            )
            if meter is not None
            else None
        )

    @classmethod
    def start(cls, settings: TelemetrySettings, *, service: str) -> OtelExport:
        resource = Resource.create()
        if str(resource.attributes.get(SERVICE_NAME, "")).startswith("unknown_service"):
            resource = resource.merge(Resource({SERVICE_NAME: service}))
        tracer_provider = meter_provider = None
        if settings.traces is not None:
            tracer_provider = TracerProvider(resource=resource)
            tracer_provider.add_span_processor(
                BatchSpanProcessor(_span_exporter(settings.traces, settings.traces_protocol))
            )
            if not isinstance(trace.get_tracer_provider(), TracerProvider):
                trace.set_tracer_provider(tracer_provider)
        if settings.metrics is not None:
            reader = PeriodicExportingMetricReader(
                _metric_exporter(settings.metrics, settings.metrics_protocol)
            )
            meter_provider = MeterProvider(resource=resource, metric_readers=[reader])
            if not isinstance(metrics.get_meter_provider(), MeterProvider):
                metrics.set_meter_provider(meter_provider)
        return cls(tracer_provider, meter_provider)

    def shutdown(self) -> None:
        """Export what is pending and stop (also done at interpreter exit, by the providers)."""
        if self.tracer_provider is not None:
            self.tracer_provider.shutdown()
        if self.meter_provider is not None:
            self.meter_provider.shutdown()

    # -- spans -----------------------------------------------------------------------------------------

    @contextmanager
    def gateway_span(self, server: str, tool: str, meta: Mapping[str, Any] | None) -> Iterator[Span]:
        """The gateway's span of a call, current for the block: under the current span (the SDK
        server's, itself parented on the request's ``_meta``), else under ``meta``'s context."""
        current = trace.get_current_span().get_span_context()
        parent = None if current.is_valid else client_context(meta)
        kind = SpanKind.INTERNAL if current.is_valid and not current.is_remote else SpanKind.SERVER
        with self._tracer.start_as_current_span(
            GATEWAY_SPAN, context=parent, kind=kind, attributes=_call_attributes(server, tool)
        ) as span:
            yield span

    @contextmanager
    def parented_on(self, meta: Mapping[str, Any] | None) -> Iterator[None]:
        parent = client_context(meta)
        if parent is None:
            yield
            return
        token = attach(parent)
        try:
            yield
        finally:
            detach(token)

    def connection_span(self, server: str, tool: str, transport: str) -> Any:
        attributes = {**_call_attributes(server, tool), "mcpfleet.transport": transport}
        return self._tracer.start_as_current_span(
            CONNECTION_SPAN, kind=SpanKind.CLIENT, attributes=attributes
        )

    def raw_spans(self, server: str, tool: str, meta: Mapping[str, Any] | None) -> RawSpans:
        attributes = _call_attributes(server, tool)
        gateway = self._tracer.start_span(
            GATEWAY_SPAN, context=client_context(meta), kind=SpanKind.SERVER, attributes=attributes
        )
        connection = self._tracer.start_span(
            CONNECTION_SPAN,
            context=trace.set_span_in_context(gateway),
            kind=SpanKind.CLIENT,
            attributes={**attributes, "mcpfleet.transport": "stdio"},
        )
        return RawSpans(gateway, connection)

    @staticmethod
    def outcome(span: Span, error: str | None) -> None:
        if error is not None:
            span.set_attribute("error.type", error)
            span.set_status(StatusCode.ERROR)

    # -- metrics ---------------------------------------------------------------------------------------

    def record(self, server: str, tool: str, seconds: float, error: str | None) -> None:
        if self._calls is None or self._errors is None or self._duration is None:
            return
        attributes = {"mcpfleet.server": server, "mcpfleet.tool": tool}
        self._calls.add(1, attributes)
        self._duration.record(seconds, attributes)
        if error is not None:
            self._errors.add(1, {**attributes, "error.type": error})

    def observe(self, telemetry: Telemetry) -> None:
        """The gauges of the fleets ``telemetry`` watches, read at each export."""
        meter = self._meter
        if meter is None:
            return

        def servers(options: CallbackOptions) -> Iterable[Observation]:
            totals = telemetry.fleet_totals()
            return [Observation(count, {"state": state}) for state, count in totals.servers_by_state.items()]

        def sessions(options: CallbackOptions) -> Iterable[Observation]:
            return [Observation(telemetry.fleet_totals().sessions)]

        def processes(options: CallbackOptions) -> Iterable[Observation]:
            return [Observation(telemetry.fleet_totals().processes)]

        meter.create_observable_gauge("mcpfleet.servers", [servers], unit="{server}", description="by state")
        meter.create_observable_gauge("mcpfleet.sessions", [sessions], unit="{session}")
        meter.create_observable_gauge("mcpfleet.processes", [processes], unit="{process}")


class RawSpans:
    """The gateway's and the connection's spans of one fast-path call, ended together."""

    __slots__ = ("connection", "gateway")

    def __init__(self, gateway: Span, connection: Span) -> None:
        self.gateway = gateway
        self.connection = connection

    def backend_meta(self) -> dict[str, str]:
        carrier: dict[str, str] = {}
        propagate.inject(carrier, context=trace.set_span_in_context(self.connection))
        return carrier

    def end(self, error: str | None) -> None:
        for span in (self.connection, self.gateway):
            OtelExport.outcome(span, error)
            span.end()


def client_context(meta: Mapping[str, Any] | None) -> Context | None:
    """The trace context a client sent in a request's ``_meta`` (``traceparent``, ``tracestate``),
    or ``None`` (a new trace) when it sent none that parses. Only string values are read: the
    ``_meta`` is the client's, whatever it holds."""
    if not meta or not isinstance(meta.get("traceparent"), str):
        return None
    carrier = {key: value for key in TRACE_KEYS if isinstance(value := meta.get(key), str)}
    context = propagate.extract(carrier)
    return context if trace.get_current_span(context).get_span_context().is_valid else None


def _call_attributes(server: str, tool: str) -> dict[str, str]:
    return {
        "mcp.method.name": "tools/call",
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": tool,
        "mcpfleet.server": server,
        "mcpfleet.tool": tool,
    }


def _span_exporter(exporter: str, protocol: OtlpProtocol) -> SpanExporter:
    if exporter == "console":
        return ConsoleSpanExporter(out=sys.stderr)
    if protocol == GRPC:
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcSpans

        return GrpcSpans()
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    return OTLPSpanExporter()


def _metric_exporter(exporter: str, protocol: OtlpProtocol) -> MetricExporter:
    if exporter == "console":
        return ConsoleMetricExporter(out=sys.stderr)
    if protocol == GRPC:
        from opentelemetry.exporter.otlp.proto.grpc.metric_exporter import OTLPMetricExporter as GrpcMetrics

        return GrpcMetrics()
    from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter

    return OTLPMetricExporter()
