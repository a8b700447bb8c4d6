"""Telemetry (B18, docs/telemetry.md): OpenTelemetry traces and metrics of the calls a gateway
serves, and the Prometheus text of ``/metrics``. Off, and free, unless asked for.

Each serving process (``mcpfleet serve``, the daemon, a team gateway) calls ``start(role)`` once
when it starts: the standard ``OTEL_*`` variables (``settings``) decide whether OpenTelemetry is
set up (``otel``, which imports the SDK and its OTLP exporter only then). A process that serves
``/metrics`` calls ``serve_prometheus()`` (``prometheus``, which imports ``prometheus_client``
only then; ``metrics_app()`` is its ASGI application). Either one makes ``active()`` a
``Telemetry`` (``calls``), which the gateway, the fast paths and the client connection ask once
per call; each open gateway lets the gauges read its fleet (``watch_fleet``, telemetry on or
not). With neither, ``active()`` is ``None`` and a call pays for that one look-up, and nothing
of OpenTelemetry or ``prometheus_client`` is imported by mcpfleet (the ``mcp`` SDK itself
imports the OpenTelemetry API, whose no-op tracer it calls whatever mcpfleet does).

This module imports the standard library only.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager, nullcontext
from typing import TYPE_CHECKING, Any

from mcpfleet.errors import ConfigError
from mcpfleet.telemetry.settings import EXTRA_HINT, TelemetrySettings

if TYPE_CHECKING:
    from starlette.types import ASGIApp

    from mcpfleet.telemetry.calls import FleetSource, FleetSources, Telemetry

_active: Telemetry | None = None
_fleets: FleetSources | None = None


def active() -> Telemetry | None:
    """This process's telemetry, ``None`` while nothing asked for any."""
    return _active


def watch_fleet(source: FleetSource) -> Callable[[], None]:
    """Let the gauges read ``source`` (one open gateway's fleet) until the returned function is
    called; cheap, and done whether or not telemetry is on."""
    global _fleets
    if _fleets is None:
        from mcpfleet.telemetry.calls import FleetSources

        _fleets = FleetSources()
    return _fleets.watch(source)


def metrics_app() -> ASGIApp:
    """The ASGI application of ``/metrics`` (Prometheus text) for this process, which records
    calls for it from now on (``serve_prometheus``): what the dashboard and the team gateway
    mount. Who may read it is the mounting side's decision."""
    from mcpfleet.telemetry.prometheus import metrics_app as prometheus_app

    return prometheus_app(serve_prometheus())


def parented_on(meta: Any) -> AbstractContextManager[object]:
    """While tracing: the client's trace context in a request's ``_meta`` current for the block
    (for a request the SDK's server, whose span does that, does not see); else nothing."""
    telemetry = _active
    if telemetry is None or telemetry.otel is None or not telemetry.tracing:
        return nullcontext()
    return telemetry.otel.parented_on(meta if isinstance(meta, Mapping) else None)


def start(role: str, environ: Mapping[str, str] | None = None) -> Telemetry | None:
    """Set up what the ``OTEL_*`` variables of ``environ`` (this process's by default) ask for,
    once per process; ``role`` (``gateway``, ``daemon``, ``team-gateway``) names the service when
    ``OTEL_SERVICE_NAME`` does not. ``ConfigError`` naming the variable for a value mcpfleet
    cannot honour, or the extra to install when ``mcpfleet[otel]`` is not."""
    global _active
    settings = TelemetrySettings.from_environment(os.environ if environ is None else environ)
    if not settings.exporting:
        return _active
    telemetry = _telemetry()
    if telemetry.otel is None:
        try:
            from mcpfleet.telemetry.otel import OtelExport
        except ModuleNotFoundError as error:
            raise ConfigError(
                f"the OTEL_* variables ask for telemetry, but {error.name} is not installed: "
                f"{EXTRA_HINT}, or unset them"
            ) from error

        telemetry.attach_otel(OtelExport.start(settings, service=f"mcpfleet-{role}"))
    _active = telemetry
    return telemetry


def serve_prometheus() -> Telemetry:
    """Record the calls for ``/metrics`` from now on (``prometheus.metrics_app`` serves them)."""
    global _active
    telemetry = _telemetry()
    if telemetry.prometheus is None:
        try:
            from mcpfleet.telemetry.prometheus import PrometheusMeters
        except ModuleNotFoundError as error:
            raise ConfigError(f"/metrics needs {error.name}, which is not installed: {EXTRA_HINT}") from error

        telemetry.attach_prometheus(PrometheusMeters(telemetry))
    _active = telemetry
    return telemetry


def _telemetry() -> Telemetry:
    global _fleets
    if _active is not None:
        return _active
    from mcpfleet.telemetry.calls import FleetSources, Telemetry

    if _fleets is None:
        _fleets = FleetSources()
    return Telemetry(_fleets)


__all__ = [
    "EXTRA_HINT",
    "TelemetrySettings",
    "active",
    "metrics_app",
    "parented_on",
    "serve_prometheus",
    "start",
    "watch_fleet",
]
