"""Which ``OTEL_*`` variables turn telemetry on, and the errors of those mcpfleet cannot honour."""

from __future__ import annotations

import pytest

from mcpfleet.errors import ConfigError
from mcpfleet.telemetry.settings import TelemetrySettings


def read(**environ: str) -> TelemetrySettings:
    return TelemetrySettings.from_environment(environ)


def test_nothing_set_is_off() -> None:
    assert read() == TelemetrySettings()
    assert not read().exporting


def test_an_endpoint_means_otlp_for_both_signals() -> None:
    assert read(OTEL_EXPORTER_OTLP_ENDPOINT="http://collector:4318") == TelemetrySettings("otlp", "otlp")


def test_a_per_signal_endpoint_turns_on_that_signal_only() -> None:
    settings = read(OTEL_EXPORTER_OTLP_TRACES_ENDPOINT="http://collector:4318/v1/traces")
    assert settings == TelemetrySettings(traces="otlp", metrics=None)


def test_an_exporter_named_wins_over_the_endpoint() -> None:
    settings = read(
        OTEL_EXPORTER_OTLP_ENDPOINT="http://collector:4318",
        OTEL_METRICS_EXPORTER="none",
        OTEL_TRACES_EXPORTER="console",
    )
    assert settings == TelemetrySettings(traces="console", metrics=None)


def test_sdk_disabled_turns_everything_off() -> None:
    assert read(OTEL_SDK_DISABLED="true", OTEL_TRACES_EXPORTER="otlp") == TelemetrySettings()
    assert read(OTEL_SDK_DISABLED="false", OTEL_TRACES_EXPORTER="otlp").traces == "otlp"


@pytest.mark.parametrize("value", ["zipkin", "otlp,console", "jaeger"])
def test_an_exporter_mcpfleet_does_not_ship_names_the_variable_and_the_choices(value: str) -> None:
    with pytest.raises(
        ConfigError, match=r"OTEL_TRACES_EXPORTER='.*': mcpfleet exports traces with one of otlp"
    ):
        read(OTEL_TRACES_EXPORTER=value)


def test_grpc_is_taken_per_signal_and_another_protocol_is_refused_with_the_two_that_work() -> None:
    both = read(OTEL_EXPORTER_OTLP_ENDPOINT="http://collector:4317", OTEL_EXPORTER_OTLP_PROTOCOL="grpc")
    assert both == TelemetrySettings("otlp", "otlp", traces_protocol="grpc", metrics_protocol="grpc")
    assert read(OTEL_EXPORTER_OTLP_ENDPOINT="http://c:4318") == TelemetrySettings("otlp", "otlp")
    # the per-signal protocol is read first
    mixed = read(
        OTEL_EXPORTER_OTLP_ENDPOINT="http://c:4318",
        OTEL_EXPORTER_OTLP_TRACES_PROTOCOL="http/protobuf",
        OTEL_EXPORTER_OTLP_PROTOCOL="grpc",
    )
    assert (mixed.traces_protocol, mixed.metrics_protocol) == ("http/protobuf", "grpc")
    with pytest.raises(
        ConfigError,
        match=r"OTEL_EXPORTER_OTLP_PROTOCOL='http/json'.*speak http/protobuf .* or grpc .*set "
        r"OTEL_EXPORTER_OTLP_PROTOCOL to one of those",
    ):
        read(OTEL_EXPORTER_OTLP_ENDPOINT="http://collector:4318", OTEL_EXPORTER_OTLP_PROTOCOL="http/json")
    # a signal that is off, or exported to the console, reads no protocol
    console = read(OTEL_TRACES_EXPORTER="console", OTEL_EXPORTER_OTLP_PROTOCOL="http/json")
    assert console == TelemetrySettings(traces="console")
