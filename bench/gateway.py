"""The gateway benchmark: ``mcpfleet serve`` against the gateways that do the same job, in one run.

    python -m bench.gateway --write          # the "Gateway" section of BENCHMARKS.md (~5 min on 2 cores)
    python -m bench.gateway --smoke          # ~30 s: direct and mcpfleet only, 1.5 s slow backend

``make bench`` (``python -m bench.run``) runs it too, after the client benchmarks, and ``make
bench-smoke`` runs its smoke version.

Ten stdio backends (``bench/servers/synthetic_server.py``, 3 echo tools each) behind each gateway,
in two scenarios: ``slow``, where the last backend sleeps ``SLOW_START_S`` before it reads stdin,
and ``none``, where none does. Each run is one fresh client process (``bench/peers/gateway_client.py``,
the SDK's ``Client`` in the project venv) that launches the gateway and measures from that moment.
mcpfleet runs cold (a fresh tool cache per run) and warm (one cache per scenario, filled by an
unmeasured start first). Gateways are interleaved run by run; a run whose first ``tools/list``
came after the slow backend's delay (or, with no slow backend, after ``REPEAT_LIMIT_S``) is not
repeated: those are the peers that wait for every backend, slowly.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.harness import gateway_report, sections
from bench.harness.gateway_peers import (
    DIRECT,
    FULL,
    MCP_HUB,
    MCP_HUB_VERSION,
    MCPFLEET_COLD,
    MCPFLEET_WARM,
    Gateway,
    ensure_mcp_hub,
    node_version,
)
from bench.harness.peers import PROJECT, REPO_ROOT, VENVS_DIR, ensure_venv, installed_versions
from bench.harness.runner import run_peer

SERVERS = 10
TOOLS_PER_SERVER = 3
SLOW_START_S = 5.0
SMOKE_SLOW_START_S = 1.5
REPEAT_LIMIT_S = 6.0
RUN_TIMEOUT_S = 150.0
LATENCY = {"warmup_calls": 30, "calls": 300, "call_budget_s": 10.0}
SMOKE_LATENCY = {"warmup_calls": 10, "calls": 50, "call_budget_s": 5.0}
NO_CALLS = {"warmup_calls": 0, "calls": 0, "call_budget_s": 0.0}


@dataclass(frozen=True)
class Scenario:
    key: str
    slow_start_s: float
    """How long the last backend sleeps before it reads stdin (0: no slow backend)."""
    latency: dict[str, float]
    """Calls are measured in the scenario with the slow backend only: the same steady state."""
    gateways: tuple[Gateway, ...]

    @property
    def repeat_limit_s(self) -> float:
        """A first list later than this waited for the slow backend (or is as slow as if it had)."""
        return self.slow_start_s or REPEAT_LIMIT_S


def plan(smoke: bool) -> tuple[list[Scenario], int]:
    """The scenarios and how many runs each gateway gets at most. The smoke run keeps what its test
    checks: mcpfleet cold and warm, the direct calls that the added latency is measured against,
    and mcpfleet warm without a slow backend, the other half of the warm-start ratio."""
    if smoke:
        slow = Scenario("slow", SMOKE_SLOW_START_S, SMOKE_LATENCY, (DIRECT, MCPFLEET_COLD, MCPFLEET_WARM))
        return [slow, Scenario("none", 0.0, NO_CALLS, (MCPFLEET_WARM,))], 1
    return [Scenario("slow", SLOW_START_S, LATENCY, FULL), Scenario("none", 0.0, NO_CALLS, FULL)], 3


def ensure_installed(gateways: tuple[Gateway, ...], log: Path) -> dict[str, dict[str, str]]:
    """Every peer's venv and npm package, and the versions the report prints."""
    versions = {"project": installed_versions(PROJECT)}
    for venv in dict.fromkeys(gateway.venv for gateway in gateways if not gateway.venv.is_project):
        ensure_venv(venv, log)
        versions[venv.name] = installed_versions(venv)
    if MCP_HUB in gateways:
        ensure_mcp_hub(log)
        versions["mcp-hub (npm)"] = {"mcp-hub": MCP_HUB_VERSION, "node": node_version()}
    return versions


def max_runs(gateway: Gateway, reps: int, smoke: bool) -> int:
    """The smoke run gives every gateway one run; the full run gives some more than ``reps``."""
    return reps if smoke else reps + gateway.extra_runs


def run_scenario(
    scenario: Scenario, reps: int, smoke: bool, scratch: Path, log: Path
) -> dict[str, list[dict[str, Any]]]:
    gateways = scenario.gateways
    folder = scratch / f"gateway-{scenario.key}"
    pid_dir = folder / "pids"
    pid_dir.mkdir(parents=True)
    # One cache for every warm run of the scenario; the backends' command lines (pid_dir
    # included) stay the same from run to run, so the cache's fingerprints match.
    warm_home = folder / "mcpfleet-warm-home"
    base = {"servers": SERVERS, "tools": TOOLS_PER_SERVER, "slow_start_s": scenario.slow_start_s}

    def params_for(gateway: Gateway, latency: dict[str, float]) -> dict[str, Any]:
        spec = gateway.spec()
        if gateway.warm:
            spec["env"] = {**spec["env"], "MCPFLEET_HOME": str(warm_home)}
        latency = {**latency, **gateway.call_params} if latency["calls"] else latency
        return {**base, **latency, "gateway": spec}

    warm = next((gateway for gateway in gateways if gateway.warm), None)
    if warm is not None:
        primed = run_peer(
            warm.peer,
            "gateway",
            params_for(warm, NO_CALLS),
            scratch=folder,
            pid_dir=pid_dir,
            log=log,
            timeout_s=RUN_TIMEOUT_S,
        )
        if "error" in primed:
            raise RuntimeError(f"priming mcpfleet's tool cache failed: {primed['error']} (see {log})")
    runs: dict[str, list[dict[str, Any]]] = {gateway.key: [] for gateway in gateways}
    finished: set[str] = set()
    for rep in range(max(max_runs(gateway, reps, smoke) for gateway in gateways)):
        for gateway in gateways:
            if gateway.key in finished or rep >= max_runs(gateway, reps, smoke):
                continue
            result = run_peer(
                gateway.peer,
                "gateway",
                params_for(gateway, scenario.latency),
                scratch=folder,
                pid_dir=pid_dir,
                log=log,
                timeout_s=RUN_TIMEOUT_S,
            )
            runs[gateway.key].append(result)
            if "error" in result or result.get("first_list_s", 0.0) > scenario.repeat_limit_s:
                finished.add(gateway.key)
            _print_run(scenario.key, gateway, result)
    return runs


def _print_run(scenario: str, gateway: Gateway, result: dict[str, Any]) -> None:
    if "error" in result:
        summary = f"ERROR {result['error']}"
    else:
        summary = (
            f"first list {result['first_list_s']:.3f} s ({result['first_list_tools']} tools), "
            f"all {result['full_list_s']:.3f} s"
        )
        if "p50_ms" in result:
            summary += f", p50 {result['p50_ms']:.3f} ms p99 {result['p99_ms']:.3f} ms"
    orphans = f"  ({result['orphans']} orphans)" if result.get("orphans") else ""
    print(f"  gateway-{scenario:<5} {gateway.key:<15} {summary}{orphans}", flush=True)


def run(smoke: bool, scratch: Path, log: Path) -> dict[str, Any]:
    """Install what is missing, measure every scenario, and return the results for the report."""
    scenarios, reps = plan(smoke)
    gateways = tuple(
        {gateway.key: gateway for scenario in scenarios for gateway in scenario.gateways}.values()
    )
    print("gateway benchmark", flush=True)
    started = time.perf_counter()
    load_before = os.getloadavg()
    versions = ensure_installed(gateways, log)
    measured = {scenario.key: run_scenario(scenario, reps, smoke, scratch, log) for scenario in scenarios}
    return {
        "smoke": smoke,
        "servers": SERVERS,
        "tools_per_server": TOOLS_PER_SERVER,
        "slow_start_s": scenarios[0].slow_start_s,
        "repeat_limit_s": {scenario.key: scenario.repeat_limit_s for scenario in scenarios},
        "reps": reps,
        "latency": {scenario.key: scenario.latency for scenario in scenarios},
        "gateways": {
            gateway.key: {
                "label": gateway.label,
                "transport": gateway.transport,
                "warm": gateway.warm,
                "max_runs": max_runs(gateway, reps, smoke),
            }
            for gateway in gateways
        },
        "versions": versions,
        "scenarios": measured,
        "load_average": {"before": list(load_before), "after": list(os.getloadavg())},
        "seconds": time.perf_counter() - started,
    }


def main(argv: list[str] | None = None) -> int:
    # bench.run imports this module to run the benchmark inside ``make bench``.
    from bench.run import machine_info, source_state

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--smoke", action="store_true", help="direct and mcpfleet only, shorter slow start")
    parser.add_argument("--write", action="store_true", help="put the section into the report")
    parser.add_argument("--report", type=Path, default=REPO_ROOT / "BENCHMARKS.md")
    parser.add_argument("--results", type=Path, help="where the raw JSON goes (default under .tools/)")
    options = parser.parse_args(argv)
    suffix = "-smoke" if options.smoke else ""
    results_path: Path = options.results or VENVS_DIR.parent / f"gateway-results{suffix}.json"
    results_path.parent.mkdir(parents=True, exist_ok=True)
    log = results_path.with_suffix(".log")
    log.write_text("")
    scratch = Path(tempfile.mkdtemp(prefix="mcpfleet-bench-gateway-"))
    try:
        results = run(options.smoke, scratch, log)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    results.update(machine=machine_info(), source=source_state())
    results_path.write_text(json.dumps(results, indent=1))
    section = gateway_report.render(results)
    print(section)
    if options.write:
        target: Path = options.report
        sections.write_section(target, gateway_report.HEADING, section)
        print(f"wrote {target} and {results_path}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
