"""What the standard ``OTEL_*`` variables ask of this process, read without importing OpenTelemetry.

Telemetry is on only when a variable says so: ``OTEL_TRACES_EXPORTER`` / ``OTEL_METRICS_EXPORTER``
naming an exporter other than ``none``, or an OTLP endpoint (``OTEL_EXPORTER_OTLP_ENDPOINT``, or
the per-signal ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` / ``…_METRICS_ENDPOINT``), which means
``otlp`` for a signal whose exporter variable is unset. ``OTEL_SDK_DISABLED=true`` turns it all
off whatever else is set. Everything else (service name, resource attributes, headers, timeouts,
the sampler, batch sizes) the OpenTelemetry SDK reads itself, from the same variables.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from mcpfleet.errors import ConfigError

Exporter = Literal["otlp", "console"]
SIGNALS = ("traces", "metrics")
EXPORTERS: tuple[Exporter, ...] = ("otlp", "console")
HTTP_PROTOBUF = "http/protobuf"
EXTRA_HINT = "install mcpfleet[otel] (pip install 'mcpfleet[otel]')"


@dataclass(frozen=True)
class TelemetrySettings:
    """The exporter of each signal, ``None`` where that signal is off."""

    traces: Exporter | None = None
    metrics: Exporter | None = None

    @property
    def exporting(self) -> bool:
        return self.traces is not None or self.metrics is not None

    @classmethod
    def from_environment(cls, environ: Mapping[str, str]) -> TelemetrySettings:
        """The settings ``environ`` gives; ``ConfigError`` naming the variable and what it may
        be for an exporter or a protocol mcpfleet does not ship."""
        if environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
            return cls()
        traces, metrics = (_exporter(environ, signal) for signal in SIGNALS)
        return cls(traces=traces, metrics=metrics)


def _exporter(environ: Mapping[str, str], signal: str) -> Exporter | None:
    variable = f"OTEL_{signal.upper()}_EXPORTER"
    named = environ.get(variable, "").strip().lower()
    if not named:
        endpoint_set = any(
            environ.get(name, "").strip()
            for name in ("OTEL_EXPORTER_OTLP_ENDPOINT", f"OTEL_EXPORTER_OTLP_{signal.upper()}_ENDPOINT")
        )
        named = "otlp" if endpoint_set else "none"
    choices = [part.strip() for part in named.split(",") if part.strip()]
    if choices == ["none"]:
        return None
    if len(choices) != 1 or choices[0] not in EXPORTERS:
        raise ConfigError(
            f"{variable}={environ.get(variable)!r}: mcpfleet exports {signal} with one of "
            f"{', '.join(EXPORTERS)} or none; set it to one of those (or unset it)"
        )
    exporter: Exporter = "otlp" if choices[0] == "otlp" else "console"
    if exporter == "otlp":
        _check_protocol(environ, signal)
    return exporter


def _check_protocol(environ: Mapping[str, str], signal: str) -> None:
    for variable in (f"OTEL_EXPORTER_OTLP_{signal.upper()}_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL"):
        protocol = environ.get(variable, "").strip().lower()
        if not protocol:
            continue
        if protocol != HTTP_PROTOBUF:
            raise ConfigError(
                f"{variable}={protocol!r}: mcpfleet's OTLP exporter speaks {HTTP_PROTOBUF} only; "
                f"set {variable}={HTTP_PROTOBUF} (a collector takes it on port 4318) or unset it"
            )
        return
