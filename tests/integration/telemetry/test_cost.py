"""Telemetry off is free: without an ``OTEL_*`` variable asking for it, neither ``import mcpfleet``
nor a gateway serving a call imports OpenTelemetry's SDK, an exporter or ``prometheus_client``;
``import mcpfleet`` imports nothing of OpenTelemetry at all (the ``mcp`` SDK imports the
OpenTelemetry API itself once a server is contacted, whatever mcpfleet does). With an endpoint
set, the same call loads the SDK and the OTLP exporter: the probe can tell."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client
from tests.integration.gateway.gateway_harness import fake, wait_until, write_config
from tests.servers.fixtures import first_text

pytestmark = pytest.mark.anyio

PROBE = Path(__file__).with_name("module_probe.py")
HEAVY = ("opentelemetry.sdk", "opentelemetry.exporter", "prometheus_client", "google.protobuf", "grpc")


def without_otel() -> dict[str, str]:
    return {name: value for name, value in os.environ.items() if not name.startswith("OTEL_")}


def test_import_mcpfleet_imports_no_opentelemetry() -> None:
    probe = (
        "import sys, mcpfleet; from mcpfleet import telemetry; telemetry.start('gateway'); "
        "print([n for n in sys.modules if n.startswith(('opentelemetry', 'prometheus_client'))])"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, env=without_otel()
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


async def served_call_loads(home: Path, environ: dict[str, str]) -> list[str]:
    """What a stdio gateway (in the probe's process) had loaded once it served one call."""
    config = write_config(home, {"notes": fake("notes", "--tool", "echo")})
    args = [str(PROBE), "--config", str(config), "serve", "--no-daemon"]
    params = StdioServerParameters(command=sys.executable, args=args, env=environ, cwd=str(home))
    stderr_path = home / "probe.stderr"
    with stderr_path.open("w") as errlog:
        async with Client(stdio_client(params, errlog=errlog), mode="legacy") as client:

            async def listed() -> bool:
                return "notes_echo" in {tool.name for tool in (await client.list_tools()).tools}

            await wait_until(listed, timeout_s=30)
            assert first_text(await client.call_tool("notes_echo", {"message": "hi"})) == "hi"
    lines = [line for line in stderr_path.read_text().splitlines() if line.startswith("LOADED ")]
    assert lines, stderr_path.read_text()[-2000:]
    loaded: list[str] = json.loads(lines[-1].removeprefix("LOADED "))
    return loaded


async def test_a_gateway_call_with_telemetry_off_loads_no_sdk_exporter_or_prometheus(
    isolated_home: Path,
) -> None:
    loaded = await served_call_loads(isolated_home, without_otel())
    assert [name for name in loaded if name.startswith(HEAVY)] == []


async def test_with_an_endpoint_the_same_call_loads_the_sdk_and_the_exporter(isolated_home: Path) -> None:
    environ = {
        **without_otel(),
        "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:1",
        "OTEL_METRICS_EXPORTER": "none",
    }
    loaded = await served_call_loads(isolated_home, environ)
    assert "opentelemetry.sdk.trace" in loaded
    assert "opentelemetry.exporter.otlp.proto.http.trace_exporter" in loaded
    assert "prometheus_client" not in loaded
