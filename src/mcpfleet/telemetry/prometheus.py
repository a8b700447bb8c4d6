"""The Prometheus side: the calls counted in a registry of this process's own, and ``/metrics``.

``metrics_app()`` is the ASGI application of ``/metrics`` (the Prometheus text format, which
``prometheus_client`` writes), for whatever serves it: the team gateway (``MetricsRoute``, in
front of its MCP application) and the local dashboard. Its registry is mcpfleet's alone, not
``prometheus_client``'s global one, so an embedding process's metrics stay its own.

Imported by ``mcpfleet.telemetry.serve_prometheus`` only (``prometheus_client``, ``mcpfleet[otel]``).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from prometheus_client import CollectorRegistry, Counter, Histogram, make_asgi_app
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

if TYPE_CHECKING:
    from starlette.types import ASGIApp, Receive, Scope, Send

    from mcpfleet.telemetry.calls import Telemetry

METRICS_PATH = "/metrics"
LATENCY_BUCKETS_S = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
"""From a loopback call's milliseconds to a slow tool's minute."""


class PrometheusMeters:
    """The call counters and latency histogram, by server and tool, and the fleet's gauges."""

    def __init__(self, telemetry: Telemetry) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        labels = ("server", "tool")
        self._calls = Counter(
            "mcpfleet_calls", "tools/call requests the gateway sent on", labels, registry=self.registry
        )
        self._errors = Counter(
            "mcpfleet_call_errors",
            "calls that ended in an error (a JSON-RPC error, an error result, cancelled)",
            labels,
            registry=self.registry,
        )
        self._duration = Histogram(
            "mcpfleet_call_duration_seconds",
            "time from the call sent on to its answer",
            labels,
            buckets=LATENCY_BUCKETS_S,
            registry=self.registry,
        )
        self.registry.register(_FleetGauges(telemetry))

    def record(self, server: str, tool: str, seconds: float, error: str | None) -> None:
        self._calls.labels(server, tool).inc()
        self._duration.labels(server, tool).observe(seconds)
        if error is not None:
            self._errors.labels(server, tool).inc()


class _FleetGauges(Collector):
    """Servers by state, client sessions and server processes, read at each scrape."""

    def __init__(self, telemetry: Telemetry) -> None:
        self._telemetry = telemetry

    def describe(self) -> Iterator[Metric]:
        return iter(())  # the families depend on the states present: collected, not described

    def collect(self) -> Iterator[Metric]:
        totals = self._telemetry.fleet_totals()
        servers = GaugeMetricFamily("mcpfleet_servers", "servers by state", labels=["state"])
        for state, count in sorted(totals.servers_by_state.items()):
            servers.add_metric([state], count)
        yield servers
        yield GaugeMetricFamily("mcpfleet_sessions", "client sessions served", value=totals.sessions)
        yield GaugeMetricFamily("mcpfleet_processes", "server processes running", value=totals.processes)


def metrics_app(telemetry: Telemetry) -> ASGIApp:
    """The ASGI application answering ``GET``/``HEAD`` with ``telemetry``'s metrics as Prometheus
    text (``405`` to any other method). Who may read it is the mounting side's decision."""
    if telemetry.prometheus is None:
        raise ValueError("serve_prometheus() first: this telemetry records nothing for Prometheus")
    exposition = make_asgi_app(telemetry.prometheus.registry)

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["method"] not in ("GET", "HEAD"):
            await send({"type": "http.response.start", "status": 405, "headers": [(b"allow", b"GET, HEAD")]})
            await send({"type": "http.response.body", "body": b"GET only"})
            return
        await exposition(scope, receive, send)

    return app


class MetricsRoute:
    """ASGI: ``/metrics`` answered by ``metrics_app``, every other path by ``app``."""

    def __init__(self, app: ASGIApp, metrics: ASGIApp) -> None:
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["path"] == METRICS_PATH:
            await self.metrics(scope, receive, send)
            return
        await self.app(scope, receive, send)
