"""What one call leaves in the Prometheus registry, however it ends: counted once, an error when it
raised or answered an error result, its latency observed; the gauges read the watched fleets,
each server and process once."""

from __future__ import annotations

import asyncio

import pytest

from mcpfleet.gateway.rejections import BackendRejection
from mcpfleet.telemetry.calls import FleetSnapshot, FleetSources, Telemetry, error_kind
from mcpfleet.telemetry.prometheus import PrometheusMeters


def recording() -> tuple[Telemetry, PrometheusMeters]:
    telemetry = Telemetry(FleetSources())
    meters = PrometheusMeters(telemetry)
    telemetry.attach_prometheus(meters)
    return telemetry, meters


def value(meters: PrometheusMeters, name: str, **labels: str) -> float | None:
    return meters.registry.get_sample_value(name, labels)


def test_a_call_that_raises_is_counted_as_an_error_and_the_error_goes_on() -> None:
    telemetry, meters = recording()
    with telemetry.gateway_call("alpha", "echo"):
        pass
    with pytest.raises(RuntimeError), telemetry.gateway_call("alpha", "echo"):
        raise RuntimeError("backend gone")
    with telemetry.gateway_call("alpha", "echo") as outcome:
        outcome.error = "tool_error"
    assert value(meters, "mcpfleet_calls_total", server="alpha", tool="echo") == 3
    assert value(meters, "mcpfleet_call_errors_total", server="alpha", tool="echo") == 2
    assert value(meters, "mcpfleet_call_duration_seconds_count", server="alpha", tool="echo") == 3


def test_a_fast_path_call_is_recorded_when_it_ends() -> None:
    telemetry, meters = recording()
    call = telemetry.raw_call("alpha", "echo", {"traceparent": "garbage"})
    assert call.backend_meta() is None  # not tracing: nothing to pass on
    assert value(meters, "mcpfleet_calls_total", server="alpha", tool="echo") is None
    call.end("cancelled")
    assert value(meters, "mcpfleet_call_errors_total", server="alpha", tool="echo") == 1


def test_error_kinds() -> None:
    assert error_kind(asyncio.CancelledError()) == "cancelled"
    assert error_kind(BackendRejection("alpha", -32602, "bad arguments", None)) == "-32602"
    assert error_kind(ValueError("x")) == "ValueError"


def test_the_gauges_count_each_server_and_process_once() -> None:
    telemetry, meters = recording()
    shared = {"notes": "connected", "web": "failed"}
    first = telemetry.fleets.watch(lambda: FleetSnapshot(shared, 1, frozenset({101})))
    telemetry.fleets.watch(lambda: FleetSnapshot({**shared, "own": "connecting"}, 2, frozenset({101, 102})))
    assert value(meters, "mcpfleet_servers", state="connected") == 1
    assert value(meters, "mcpfleet_servers", state="failed") == 1
    assert value(meters, "mcpfleet_servers", state="connecting") == 1
    assert value(meters, "mcpfleet_sessions") == 3
    assert value(meters, "mcpfleet_processes") == 2
    first()
    assert value(meters, "mcpfleet_sessions") == 2
