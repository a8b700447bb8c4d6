"""The benchmark harness's smoke run (`make bench-smoke`) works end to end and its numbers are sane.

It runs mcpfleet, the SDK's raw floor (one ``Client`` per server, from the project's venv, which
pins the same ``mcp``) and the no-library floor against real synthetic servers, then the gateway
benchmark's smoke version (``mcpfleet serve`` cold and warm, and direct calls, before ten real
backends); the peers' own venvs are only built by the full ``make bench``. Bounds are about
behaviour, not speed.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent
SMOKE_BOUND_S = 240
pytestmark = pytest.mark.timeout(SMOKE_BOUND_S + 30)


@pytest.fixture(scope="module")
def smoke(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Any], str]:
    folder = tmp_path_factory.mktemp("bench")
    report, results = folder / "BENCHMARKS.md", folder / "results.json"
    command = [
        sys.executable,
        "-m",
        "bench.run",
        "--smoke",
        "--report",
        str(report),
        "--results",
        str(results),
    ]
    completed = subprocess.run(command, cwd=REPO_ROOT, capture_output=True, text=True, timeout=SMOKE_BOUND_S)
    assert completed.returncode == 0, completed.stdout[-3000:] + completed.stderr[-3000:]
    return json.loads(results.read_text()), report.read_text()


def only_run(data: dict[str, Any], scenario: str, peer: str) -> dict[str, Any]:
    runs = data["scenarios"][scenario][peer]
    assert len(runs) == 1
    run: dict[str, Any] = runs[0]
    return run


def test_every_run_succeeds_and_leaves_no_server_behind(smoke: tuple[dict[str, Any], str]) -> None:
    data, _ = smoke
    for scenario, peers in data["scenarios"].items():
        for peer, runs in peers.items():
            for run in runs:
                assert "error" not in run, (scenario, peer, run)
                assert run["orphans"] == 0, (scenario, peer)


def test_cold_start_waits_for_the_servers_and_connects_them_in_parallel(
    smoke: tuple[dict[str, Any], str],
) -> None:
    data, _ = smoke
    delay = data["cold_start_delay_s"]
    for peer in ("floor", "mcpfleet", "sdk-raw"):
        one = only_run(data, "cold-1", peer)
        ten = only_run(data, "cold-10", peer)
        assert one["tools"] == 5 and ten["tools"] == 50
        assert delay <= one["seconds"] < 10
        # Ten servers started one after another would take at least 9 × the delay more than one.
        # mcpfleet's figures include the SDK's lazy import (seconds when the cores are shared), so the
        # difference, where the import cancels out, is what tells parallel from sequential.
        assert delay <= ten["seconds"], peer
        assert ten["seconds"] - one["seconds"] < 9 * delay, peer
        assert 5 < ten["rss_mb"] < 1000


def test_warm_start_hands_out_cached_tools_before_the_slow_server_is_up(
    smoke: tuple[dict[str, Any], str],
) -> None:
    data, _ = smoke
    # The smoke's server answers nothing after the run that filled the cache (it is held, not slow),
    # so five tools handed out while it is alive and not up can only have come from the cache.
    warm = only_run(data, "warm", "mcpfleet")
    assert warm["tools"] == 5
    assert warm["servers_up_at_ready"] == 0


def test_calls_and_shutdown_numbers_are_sane(smoke: tuple[dict[str, Any], str]) -> None:
    data, _ = smoke
    for peer in ("mcpfleet", "sdk-raw"):
        latency = only_run(data, "latency", peer)
        assert 0 < latency["p50_ms"] <= latency["p99_ms"] < 100
        assert len(latency["samples_ms"]) == data["params"]["latency"]["calls"]
        assert only_run(data, "throughput", peer)["calls_per_second"] > 100
    for peer in ("floor", "mcpfleet", "sdk-raw"):
        callers = only_run(data, "callers-8", peer)
        assert callers["calls_per_second"] > 100
        assert 0 < callers["p50_ms"] <= callers["p99_ms"] < 1000
    # Stubborn servers need the whole kill ladder, and two close together, not one after the other.
    one = only_run(data, "shutdown-1", "mcpfleet")["seconds"]
    two = only_run(data, "shutdown-2", "mcpfleet")["seconds"]
    assert 1.0 <= one < 6.5
    assert 1.0 <= two < one + 1.5


def test_report_has_every_section(smoke: tuple[dict[str, Any], str]) -> None:
    data, report = smoke
    for heading in ("## Goals", "## 1. Cold start", "## 2. Warm start", "## 3. Tool calls", "## 4. Shutdown"):
        assert heading in report
    assert "## 5. Client memory" in report and "## 6. Import and CLI start-up" in report
    imports = data["imports"]
    assert all(sample > 0 for samples in imports.values() for sample in samples)
    assert "`import mcpfleet`" in imports


def test_the_gateway_serves_every_backend_tool_and_relays_calls(smoke: tuple[dict[str, Any], str]) -> None:
    data, report = smoke
    gateway = data["gateway"]
    tools = gateway["servers"] * gateway["tools_per_server"]
    for scenario, runs_by_gateway in gateway["scenarios"].items():
        for key, runs in runs_by_gateway.items():
            for run in runs:
                assert "error" not in run, (scenario, key, run)
                assert run["orphans"] == 0, (scenario, key)
                assert run["listed_tools"] == tools, (scenario, key)
                assert run["backend_processes"] == gateway["servers"], (scenario, key)
    slow = gateway["scenarios"]["slow"]
    for key in ("direct", "mcpfleet-cold", "mcpfleet-warm"):
        run = slow[key][0]
        assert run["calls"] == gateway["latency"]["slow"]["calls"]
        assert 0 < run["p50_ms"] <= run["p99_ms"] < 1000
    for key in ("mcpfleet-cold", "mcpfleet-warm"):
        assert 5 < slow[key][0]["gateway_rss_mb"] < 1000
        # Calls through the gateway alternate with direct calls, the reference of the added latency.
        assert 0 < slow[key][0]["direct_p50_ms"] < 1000
    # With no cache the gateway cannot list the slow backend's tools before that backend answers,
    # and it started after the clock did; with the cache filled, the first answer has every tool.
    assert slow["mcpfleet-cold"][0]["full_list_s"] >= gateway["slow_start_s"]
    assert slow["mcpfleet-warm"][0]["first_list_tools"] == tools
    assert gateway["scenarios"]["none"]["mcpfleet-warm"][0]["first_list_tools"] == tools
    assert "## 8. Gateway: `mcpfleet serve` and its peers" in report
