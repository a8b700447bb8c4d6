"""The telemetry benchmark: what OpenTelemetry costs when it is off, and when it is on.

    python -m bench.telemetry            # ~1 minute on 2 cores; prints the figures
    python -m bench.telemetry --smoke    # a few seconds: fewer runs and calls
    python -m bench.telemetry --write    # and put section 14 into BENCHMARKS.md

Import: ``python -c "import mcpfleet"``, and ``import mcpfleet.telemetry`` then
``telemetry.start("gateway")`` (what ``mcpfleet serve`` does before it serves), each run
``IMPORT_RUNS`` times in a fresh interpreter with no ``OTEL_*`` variable and with
``OTEL_EXPORTER_OTLP_ENDPOINT`` set (traces and metrics on), each run beside a ``python -c pass``;
the figure is the median of the wall time less that of the bare interpreter.

Calls: two real ``mcpfleet serve --no-daemon`` processes on stdio, the same fake stdio backend
(``tests/servers/fake_server.py``, its ``echo`` tool) behind each, one SDK client each (handshake
era): **off** (no ``OTEL_*``), and **on** (traces and metrics exported over OTLP/HTTP to a local
receiver in this process that answers and drops them, with the batch processor's default delay).
Every call of the client carries a ``_meta.traceparent``, as a traced host's would. The calls go
round both gateways in turn, so a change of the machine's load moves both alike; the figure is
the median latency as the client sees it, and the ratio. Not part of ``make test``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import AsyncExitStack, asynccontextmanager, contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import anyio

HEADING = "## 14. Telemetry: off and on"
REPORT = Path(__file__).resolve().parent.parent / "BENCHMARKS.md"
IMPORT_RUNS = 21
CALLS = 1000
WARMUP = 100
SMOKE = {"import_runs": 3, "calls": 50}
ECHOED = {"message": "hello from the bench"}
TRACEPARENT = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
PROBES = {
    "import mcpfleet": "import mcpfleet",
    "import + telemetry.start()": "import mcpfleet.telemetry as t; t.start('gateway')",
}


def _environment(endpoint: str | None) -> dict[str, str]:
    environ = {name: value for name, value in os.environ.items() if not name.startswith("OTEL_")}
    return environ if endpoint is None else {**environ, "OTEL_EXPORTER_OTLP_ENDPOINT": endpoint}


def _run_ms(code: str, environ: dict[str, str]) -> float:
    started = time.perf_counter()
    subprocess.run([sys.executable, "-c", code], env=environ, check=True, stdin=subprocess.DEVNULL)
    return (time.perf_counter() - started) * 1000


def import_costs(endpoint: str, runs: int) -> dict[str, tuple[float, float]]:
    """Per probe: the median (off, on) milliseconds above a bare interpreter. Each run starts a
    bare interpreter, then the probe off, then on, so the machine's load moves all three alike."""
    off, on = _environment(None), _environment(endpoint)
    costs: dict[str, tuple[float, float]] = {}
    for label, code in PROBES.items():
        above: dict[str, list[float]] = {"off": [], "on": []}
        for _ in range(runs):
            bare = _run_ms("pass", off)
            above["off"].append(_run_ms(code, off) - bare)
            above["on"].append(_run_ms(code, on) - bare)
        costs[label] = (statistics.median(above["off"]), statistics.median(above["on"]))
    return costs


@contextmanager
def _dropping_receiver() -> Iterator[str]:
    """An OTLP/HTTP endpoint that answers 200 to every export and keeps nothing."""

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("content-length", "0")))
            self.send_response(200)
            self.send_header("content-type", "application/x-protobuf")
            self.send_header("content-length", "0")
            self.end_headers()

        def log_message(self, format: str, *args: Any) -> None:
            return

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


@asynccontextmanager
async def _gateways(home: Path, endpoint: str) -> AsyncIterator[dict[str, Any]]:
    from mcp import Client, StdioServerParameters
    from mcp.client.stdio import stdio_client
    from tests.integration.gateway.gateway_harness import fake, serve_command, write_config

    config = write_config(home, {"bench": fake("bench", "--tool", "echo")})
    command = serve_command(config, "--no-daemon")
    async with AsyncExitStack() as stack:
        clients: dict[str, Any] = {}
        for name, environ in (("off", _environment(None)), ("on", _environment(endpoint))):
            params = StdioServerParameters(command=command[0], args=command[1:], env=environ, cwd=str(home))
            errlog = stack.enter_context((home / f"{name}.stderr").open("w"))
            clients[name] = await stack.enter_async_context(
                Client(stdio_client(params, errlog=errlog), mode="legacy")
            )
        yield clients


async def call_latencies(endpoint: str, calls: int) -> dict[str, list[float]]:
    from tests.integration.gateway.gateway_harness import wait_until

    with tempfile.TemporaryDirectory(prefix="mcpfleet-bench-telemetry-") as folder:
        async with _gateways(Path(folder), endpoint) as clients:
            for client in clients.values():

                async def listed(client: Any = client) -> bool:
                    return "bench_echo" in {tool.name for tool in (await client.list_tools()).tools}

                await wait_until(listed, timeout_s=60)
                for _ in range(WARMUP):
                    await client.call_tool("bench_echo", ECHOED, meta={"traceparent": TRACEPARENT})
            latencies: dict[str, list[float]] = {name: [] for name in clients}
            for _ in range(calls):
                for name, client in clients.items():
                    started = time.perf_counter()
                    result = await client.call_tool("bench_echo", ECHOED, meta={"traceparent": TRACEPARENT})
                    latencies[name].append((time.perf_counter() - started) * 1000)
                    if result.is_error:
                        raise RuntimeError(f"{name}: the call failed: {result.content}")
            return latencies


def report(costs: dict[str, tuple[float, float]], latencies: dict[str, list[float]]) -> list[str]:
    lines = [f"{'start-up':<28} {'off ms':>8} {'on ms':>8} {'on/off':>7}"]
    for label, (off, on) in costs.items():
        lines.append(f"{label:<28} {off:>8.1f} {on:>8.1f} {on / off:>6.2f}x")
    off_p50, on_p50 = (statistics.median(latencies[name]) for name in ("off", "on"))
    lines.append(f"{'call (stdio gateway)':<28} {'p50 ms':>8} {'p90 ms':>8}")
    for name in ("off", "on"):
        p90 = statistics.quantiles(latencies[name], n=10)[-1]
        lines.append(f"{'telemetry ' + name:<28} {statistics.median(latencies[name]):>8.3f} {p90:>8.3f}")
    lines.append(
        f"added per call with tracing on: {(on_p50 - off_p50) * 1000:+.0f} µs "
        f"(on/off {on_p50 / off_p50:.2f}x); {len(latencies['off'])} calls each, interleaved; "
        f"load {os.getloadavg()[0]:.1f}"
    )
    return lines


def render(
    costs: dict[str, tuple[float, float]], latencies: dict[str, list[float]], runs: int, load: float
) -> str:
    """Section 14 of BENCHMARKS.md."""
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=False
    ).stdout.strip()
    off_p50, on_p50 = (statistics.median(latencies[name]) for name in ("off", "on"))
    lines = [
        HEADING,
        "",
        f"`python -m bench.telemetry --write`. Machine: {os.cpu_count()} CPUs, Python "
        f"{sys.version.split()[0]}, load average {load:.1f} before; commit {commit}. Off: no `OTEL_*` "
        "variable. On: `OTEL_EXPORTER_OTLP_ENDPOINT` set (traces and metrics over OTLP/HTTP to a local "
        "receiver that drops them; the batch processor's default delay). Start-up: each probe in a fresh "
        f"interpreter, {runs} runs beside a bare `python -c pass`, the median above it. Calls: two "
        "`mcpfleet serve --no-daemon` on stdio over the same fake stdio backend (`echo`), one SDK client "
        f"each, every call carrying a `_meta.traceparent`; {len(latencies['off'])} calls each, interleaved "
        "(the stdio fast path takes them, with its two spans when on). One run.",
        "",
        "| start-up | off | on | on/off |",
        "|---|---|---|---|",
        *(
            f"| {label} | {off:.1f} ms | {on:.1f} ms | {on / off:.2f}× |"
            for label, (off, on) in costs.items()
        ),
        "",
        "| call through the stdio gateway | p50 | p90 |",
        "|---|---|---|",
        *(
            f"| telemetry {name} | {statistics.median(latencies[name]):.3f} ms | "
            f"{statistics.quantiles(latencies[name], n=10)[-1]:.3f} ms |"
            for name in ("off", "on")
        ),
        "",
        f"- Tracing on adds {(on_p50 - off_p50) * 1000:.0f} µs to a call's p50 (on/off "
        f"{on_p50 / off_p50:.2f}×): two spans (the gateway's and the connection's) created, ended and "
        "batched, the trace context extracted and injected, three metric points; the OpenTelemetry "
        "SDK's span costs most of it.",
        "- `import mcpfleet` runs the same code off and on (telemetry is set up by the serving "
        "process, not at import), so its two figures differ by the machine only; off, nothing of "
        "OpenTelemetry is imported at all (`tests/integration/telemetry/test_cost.py`).",
        "- On, `telemetry.start()` imports the OpenTelemetry SDK, the OTLP/HTTP exporter, `requests` "
        "and protobuf once, when `mcpfleet serve`, the daemon or a team gateway starts.",
    ]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--smoke", action="store_true", help="fewer runs and calls: a few seconds")
    parser.add_argument("--write", action="store_true", help=f"put the section into {REPORT.name}")
    arguments = parser.parse_args()
    runs = SMOKE["import_runs"] if arguments.smoke else IMPORT_RUNS
    calls = SMOKE["calls"] if arguments.smoke else CALLS
    load = os.getloadavg()[0]
    with _dropping_receiver() as endpoint:
        costs = import_costs(endpoint, runs)
        latencies = anyio.run(call_latencies, endpoint, calls)
    for line in report(costs, latencies):
        print(line)
    if arguments.write:
        from bench.harness import sections

        sections.write_section(REPORT, HEADING, render(costs, latencies, runs, load))


if __name__ == "__main__":
    main()
