"""What the standard ``OTEL_*`` variables ask of this process, read without importing OpenTelemetry.

Telemetry is on only when a variable says so: ``OTEL_TRACES_EXPORTER`` / ``OTEL_METRICS_EXPORTER``
naming an exporter other than ``none``, or an OTLP endpoint (``OTEL_EXPORTER_OTLP_ENDPOINT``, or
the per-signal ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` / ``…_METRICS_ENDPOINT``), which means
``otlp`` for a signal whose exporter variable is unset. OTLP goes over HTTP/protobuf unless
``OTEL_EXPORTER_OTLP_PROTOCOL`` (or the per-signal ``…_TRACES_PROTOCOL`` / ``…_METRICS_PROTOCOL``,
read first) says ``grpc``. ``OTEL_SDK_DISABLED=true`` turns it all off whatever else is set.
Everything else (service name, resource attributes, headers, timeouts, the sampler, batch
sizes) the OpenTelemetry SDK reads itself, from the same variables.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from mcpfleet.errors import ConfigError

Exporter = Literal["otlp", "console"]
OtlpProtocol = Literal["http/protobuf", "grpc"]
SIGNALS = ("traces", "metrics")
EXPORTERS: tuple[Exporter, ...] = ("otlp", "console")
HTTP_PROTOBUF: OtlpProtocol = "http/protobuf"
GRPC: OtlpProtocol = "grpc"
PROTOCOLS: tuple[OtlpProtocol, ...] = (HTTP_PROTOBUF, GRPC)
EXTRA_HINT = "install mcpfleet[otel] (pip install 'mcpfleet[otel]')"


@dataclass(frozen=True)
class TelemetrySettings:
    """The exporter of each signal, ``None`` where that signal is off, and the protocol of each
    OTLP one."""

    traces: Exporter | None = None
    metrics: Exporter | None = None
    traces_protocol: OtlpProtocol = HTTP_PROTOBUF
    metrics_protocol: OtlpProtocol = HTTP_PROTOBUF

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
        return cls(
            traces=traces,
            metrics=metrics,
            traces_protocol=_protocol(environ, "traces") if traces == "otlp" else HTTP_PROTOBUF,
            metrics_protocol=_protocol(environ, "metrics") if metrics == "otlp" else HTTP_PROTOBUF,
        )


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
    return "otlp" if choices[0] == "otlp" else "console"


def _protocol(environ: Mapping[str, str], signal: str) -> OtlpProtocol:
    for variable in (f"OTEL_EXPORTER_OTLP_{signal.upper()}_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL"):
        named = environ.get(variable, "").strip().lower()
        if not named:
            continue
        for protocol in PROTOCOLS:
            if named == protocol:
                return protocol
        raise ConfigError(
            f"{variable}={named!r}: mcpfleet's OTLP exporters speak {HTTP_PROTOBUF} (a collector's "
            f"port 4318) or {GRPC} (port 4317); set {variable} to one of those or unset it"
        )
    return HTTP_PROTOBUF
