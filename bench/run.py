"""Benchmarks mcpfleet against the Python MCP client libraries, side by side, and writes BENCHMARKS.md.

    python -m bench.run            # everything: creates the peers' venvs, ~20-25 min on 2 cores
    python -m bench.run --smoke    # ~60 s: mcpfleet, the SDK raw floor and the no-library floor only

Both end with the gateway benchmark (``bench/gateway.py``: ``mcpfleet serve`` against the MCP
gateways, ~5 min; its smoke version: mcpfleet and direct calls only).

Every scenario runs each peer in a fresh subprocess from the peer's own virtualenv, against the
same synthetic stdio server (bench/servers/synthetic_server.py), interleaving the peers run by run
(A B C A B C …) and reporting medians. A run whose measured time exceeds ``REPEAT_LIMIT_S`` is not
repeated: those are the sequential peers at 50 servers, 5 s slow starts and stubborn shutdowns.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench import (
    daemon,
    gateway_http,
    integrations,
    protocol_eras,
    sandbox,
    team_cluster,
    team_gateway,
    telemetry,
    tool_budget,
)
from bench import gateway as gateway_bench
from bench.harness import gateway_report, report, sections
from bench.harness.peers import (
    COMPETITORS,
    FLOOR,
    LANGCHAIN_CLIENT,
    MCPFLEET,
    MCPFLEET_CONNECTION,
    MCPFLEET_PREIMPORTED,
    PEER_VENVS,
    PLOT,
    PROJECT,
    REPO_ROOT,
    SDK_RAW,
    VENVS_DIR,
    Peer,
    Venv,
    ensure_venv,
    installed_versions,
    with_project_sdk,
)
from bench.harness.runner import isolated_env, run_peer, time_command

REPEAT_LIMIT_S = 4.5
RUN_TIMEOUT_S = 150.0
TOOLS_PER_SERVER = 5
COLD_START_DELAY_S = 0.3
GATE_MS = 250


@dataclass
class Scenario:
    key: str
    kind: str
    """The driver in bench/peers/common.py: start, latency, throughput, callers or shutdown."""
    params: dict[str, Any]
    peers: list[Peer]
    reps: int
    peer_params: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Per-peer overrides (fewer calls for a peer that spawns a process per call)."""
    prime_cache: bool = False
    """Run mcpfleet once first so the persistent tool cache holds the server's tools."""
    held_after_priming: bool = False
    """Hold the servers down (they read nothing) for every run after the priming one: whether the
    tools came from the cache is then an event, not a race against a delay on a loaded machine."""


def build_plan(smoke: bool) -> list[Scenario]:
    if smoke:
        sdk_raw = with_project_sdk(SDK_RAW)
        fleet = [MCPFLEET, sdk_raw]
        return [
            Scenario("cold-1", "start", _cold(1), [FLOOR, *fleet], 1),
            Scenario("cold-10", "start", _cold(10), [FLOOR, *fleet], 1),
            Scenario("warm", "start", _warm(0.0), [MCPFLEET], 1, prime_cache=True, held_after_priming=True),
            Scenario("latency", "latency", _latency(200), fleet, 1),
            Scenario("throughput", "throughput", _throughput(1), fleet, 1),
            Scenario("callers-8", "callers", _callers(8, 40), [FLOOR, *fleet], 1),
            Scenario("shutdown-1", "shutdown", _shutdown(1), [MCPFLEET], 1),
            Scenario("shutdown-2", "shutdown", _shutdown(2), [MCPFLEET], 1),
        ]
    cold_peers = [FLOOR, MCPFLEET, MCPFLEET_PREIMPORTED, *COMPETITORS]
    call_peers = [FLOOR, MCPFLEET, MCPFLEET_CONNECTION, *COMPETITORS]
    closing_peers = [MCPFLEET, *(peer for peer in COMPETITORS if peer is not LANGCHAIN_CLIENT)]
    few_calls = {LANGCHAIN_CLIENT.key: {"warmup_calls": 2, "calls": 40}}
    one_burst = {LANGCHAIN_CLIENT.key: {"bursts": 1}}
    few_per_caller = {LANGCHAIN_CLIENT.key: {"warmup_calls": 1, "calls_per_caller": 3}}
    return [
        Scenario("cold-1", "start", _cold(1), cold_peers, 5),
        Scenario("cold-10", "start", _cold(10), cold_peers, 3),
        Scenario("cold-20", "start", _cold(20), cold_peers, 3),
        Scenario("cold-50", "start", _cold(50), cold_peers, 3),
        Scenario(
            "warm", "start", _warm(5.0), [MCPFLEET, MCPFLEET_PREIMPORTED, *COMPETITORS], 5, prime_cache=True
        ),
        Scenario("latency", "latency", _latency(1000), call_peers, 3, peer_params=few_calls),
        Scenario("throughput", "throughput", _throughput(5), call_peers, 3, peer_params=one_burst),
        Scenario("callers-8", "callers", _callers(8, 250), call_peers, 3, peer_params=few_per_caller),
        Scenario("shutdown-1", "shutdown", _shutdown(1), closing_peers, 3),
        Scenario("shutdown-10", "shutdown", _shutdown(10), closing_peers, 3),
    ]


def _cold(servers: int) -> dict[str, Any]:
    return {"servers": servers, "tools": TOOLS_PER_SERVER, "init_delay": COLD_START_DELAY_S}


def _warm(delay: float) -> dict[str, Any]:
    return {"servers": 1, "tools": TOOLS_PER_SERVER, "init_delay": delay}


def _latency(calls: int) -> dict[str, Any]:
    return {"servers": 1, "tools": TOOLS_PER_SERVER, "warmup_calls": 50, "calls": calls}


def _throughput(bursts: int) -> dict[str, Any]:
    return {"servers": 10, "tools": TOOLS_PER_SERVER, "concurrent_calls": 200, "bursts": bursts}


def _callers(callers: int, calls_per_caller: int) -> dict[str, Any]:
    """``callers`` concurrent callers over 4 servers: two callers share each connection."""
    return {
        "servers": 4,
        "tools": TOOLS_PER_SERVER,
        "callers": callers,
        "warmup_calls": 10,
        "calls_per_caller": calls_per_caller,
    }


def _shutdown(servers: int) -> dict[str, Any]:
    return {"servers": servers, "tools": TOOLS_PER_SERVER, "stubborn": True}


def measured_seconds(result: dict[str, Any]) -> float:
    """The time a start or shutdown run measured (call scenarios are kept short by their parameters)."""
    return float(result.get("seconds", 0.0))


def run_scenario(scenario: Scenario, scratch: Path, log: Path) -> dict[str, list[dict[str, Any]]]:
    folder = scratch / scenario.key
    pid_dir = folder / "pids"
    pid_dir.mkdir(parents=True)
    cache_params: dict[str, Any] = {}
    scenario_params = dict(scenario.params)
    hold = folder / "held"
    if scenario.held_after_priming:
        scenario_params["held_while"] = str(hold)
    if scenario.prime_cache:
        cache_params = {"cache_path": str(folder / "tools.sqlite3")}
        primed = run_peer(
            MCPFLEET,
            "start",
            {**scenario_params, **cache_params},
            scratch=folder,
            pid_dir=pid_dir,
            log=log,
            timeout_s=RUN_TIMEOUT_S,
        )
        if "error" in primed:
            raise RuntimeError(f"priming the tool cache failed: {primed['error']}")
    if scenario.held_after_priming:
        hold.touch()
    runs: dict[str, list[dict[str, Any]]] = {peer.key: [] for peer in scenario.peers}
    finished: set[str] = set()
    for _ in range(scenario.reps):
        for peer in scenario.peers:
            if peer.key in finished:
                continue
            params = {**scenario_params, **scenario.peer_params.get(peer.key, {})}
            if peer.venv is PROJECT and peer.script == MCPFLEET.script:
                params.update(cache_params)
            result = run_peer(
                peer, scenario.kind, params, scratch=folder, pid_dir=pid_dir, log=log, timeout_s=RUN_TIMEOUT_S
            )
            runs[peer.key].append(result)
            if "error" in result or measured_seconds(result) > REPEAT_LIMIT_S:
                finished.add(peer.key)
            _print_run(scenario.key, peer, result)
    return runs


def _print_run(scenario: str, peer: Peer, result: dict[str, Any]) -> None:
    if "error" in result:
        summary = f"ERROR {result['error']}"
    elif "p50_ms" in result:
        summary = f"p50 {result['p50_ms']:.3f} ms  p99 {result['p99_ms']:.3f} ms"
    elif "calls_per_second" in result:
        summary = f"{result['calls_per_second']:.0f} calls/s"
    else:
        summary = f"{result['seconds']:.3f} s"
    orphans = f"  ({result['orphans']} orphans)" if result.get("orphans") else ""
    print(f"  {scenario:<12} {peer.key:<22} {summary}{orphans}", flush=True)


def import_commands(smoke: bool) -> list[tuple[str, Venv, list[str]]]:
    project_bin = Path(sys.executable).parent
    commands: list[tuple[str, Venv, list[str]]] = [
        ("`python -c pass`", PROJECT, [sys.executable, "-c", "pass"]),
        ("`import mcpfleet`", PROJECT, [sys.executable, "-c", "import mcpfleet"]),
        ("`mcpfleet --help`", PROJECT, [str(project_bin / "mcpfleet"), "--help"]),
        (
            "`import mcpfleet.client.connection` (first connection: the SDK)",
            PROJECT,
            [sys.executable, "-c", "import mcpfleet.client.connection"],
        ),
    ]
    if smoke:
        return commands
    peer_imports = [
        ("mcp", PEER_VENVS[0]),
        ("fastmcp", PEER_VENVS[1]),
        ("agents.mcp", PEER_VENVS[2]),
        ("langchain_mcp_adapters.client", PEER_VENVS[3]),
        ("pydantic_ai.mcp", PEER_VENVS[4]),
    ]
    for module, venv in peer_imports:
        commands.append(
            (f"`import {module}` ({venv.name} venv)", venv, [str(venv.python), "-c", f"import {module}"])
        )
    return commands


def run_imports(smoke: bool, scratch: Path) -> dict[str, list[float]]:
    home = scratch / "import-home"
    home.mkdir()
    env = isolated_env(home)
    commands = import_commands(smoke)
    timings: dict[str, list[float]] = {label: [] for label, _, _ in commands}
    for _ in range(3 if smoke else 7):
        for label, _, command in commands:
            timings[label].append(time_command(command, env=env, cwd=scratch))
    for label, samples in timings.items():
        print(f"  import       {label:<62} {statistics.median(samples):.3f} s", flush=True)
    return timings


def machine_info() -> dict[str, str]:
    cpu = platform.processor() or ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {
        "nproc": str(os.cpu_count()),
        "cpu": cpu,
        "python": platform.python_version(),
        "platform": platform.platform(),
    }


def source_state() -> str:
    """Which mcpfleet was measured: the commit, and whether src/ differed from it."""
    try:
        commit = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=REPO_ROOT, capture_output=True, text=True, check=True
        ).stdout.strip()
        changes = subprocess.run(
            ["git", "status", "--porcelain", "--", "src"],
            cwd=REPO_ROOT,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown (not a git checkout)"
    return f"commit {commit}" + (" with uncommitted changes in src/" if changes else "")


def make_plots(results_path: Path, docs: Path, log: Path) -> list[str]:
    ensure_venv(PLOT, log)
    script = Path(__file__).parent / "harness" / "plots.py"
    command = [str(PLOT.python), str(script), str(results_path), str(docs)]
    output = subprocess.run(command, check=True, capture_output=True, text=True).stdout
    return [line for line in output.splitlines() if line.endswith(".png")]


def _write_report(target: Path, text: str) -> None:
    """Write the report, keeping the sections measured by their own commands (protocol eras,
    framework integrations, tool budget, daemon, sandbox, the gateway over HTTP, telemetry, the
    team gateway and its replicas), and the gateway section when ``text`` was rendered from
    results that have none."""
    previous = target.read_text(encoding="utf-8") if target.exists() else None
    text = protocol_eras.carry_over(previous, gateway_report.carry_over(previous, text))
    text = sections.carry_over(previous, text, integrations.HEADING)
    text = sections.carry_over(previous, text, tool_budget.HEADING)
    text = sections.carry_over(previous, text, daemon.HEADING)
    text = sections.carry_over(previous, text, sandbox.HEADING)
    text = sections.carry_over(previous, text, gateway_http.HEADING)
    text = sections.carry_over(previous, text, telemetry.HEADING)
    text = sections.carry_over(previous, text, team_cluster.HEADING)
    text = sections.carry_over(previous, text, team_gateway.HEADING)
    target.write_text(text, encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--smoke", action="store_true", help="the ~30 s version (no peer venvs, no plots)")
    parser.add_argument("--report", type=Path, help="where to write the report (default: BENCHMARKS.md)")
    parser.add_argument("--results", type=Path, help="where to write the raw JSON results")
    parser.add_argument("--docs", type=Path, default=REPO_ROOT / "docs", help="where the PNG plots go")
    parser.add_argument(
        "--render", type=Path, metavar="RESULTS_JSON", help="only rewrite the report from saved results"
    )
    options = parser.parse_args(argv)
    if options.render is not None:
        rendered = json.loads(options.render.read_text())
        plots = [] if rendered["smoke"] else make_plots(options.render, options.docs, Path(os.devnull))
        target: Path = options.report or REPO_ROOT / "BENCHMARKS.md"
        _write_report(target, report.render(rendered, plots=plots, report_dir=target.parent))
        print(f"wrote {target}")
        return 0
    smoke: bool = options.smoke
    default_report = VENVS_DIR.parent / "BENCHMARKS-smoke.md" if smoke else REPO_ROOT / "BENCHMARKS.md"
    report_path: Path = options.report or default_report
    results_path: Path = (
        options.results or VENVS_DIR.parent / f"bench-results{'-smoke' if smoke else ''}.json"
    )
    results_path.parent.mkdir(parents=True, exist_ok=True)
    log = results_path.with_suffix(".log")
    log.write_text("")
    started = time.perf_counter()
    source = source_state()

    venvs = [PROJECT] if smoke else [PROJECT, *PEER_VENVS]
    print("virtualenvs", flush=True)
    for venv in venvs:
        ensure_venv(venv, log)
    versions = {venv.name: installed_versions(venv) for venv in venvs}

    scratch = Path(tempfile.mkdtemp(prefix="mcpfleet-bench-"))
    try:
        plan = build_plan(smoke)
        scenarios: dict[str, Any] = {}
        for scenario in plan:
            print(f"scenario {scenario.key}", flush=True)
            scenarios[scenario.key] = run_scenario(scenario, scratch, log)
        print("import time", flush=True)
        imports = run_imports(smoke, scratch)
        gateway = gateway_bench.run(smoke, scratch, log)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)

    results: dict[str, Any] = {
        "smoke": smoke,
        "machine": machine_info(),
        "source": source,
        "versions": versions,
        "peers": {peer.key: peer.label for scenario in plan for peer in scenario.peers},
        "diagnostic": sorted({peer.key for scenario in plan for peer in scenario.peers if peer.diagnostic}),
        "params": {scenario.key: scenario.params for scenario in plan},
        "scenarios": scenarios,
        "imports": imports,
        "gateway": {**gateway, "machine": machine_info(), "source": source},
        "gate_ms": GATE_MS,
        "cold_start_delay_s": COLD_START_DELAY_S,
    }
    results["total_seconds"] = time.perf_counter() - started
    results_path.write_text(json.dumps(results, indent=1))
    plots = [] if smoke else make_plots(results_path, options.docs, log)
    results["total_seconds"] = time.perf_counter() - started
    _write_report(report_path, report.render(results, plots=plots, report_dir=report_path.parent))
    results_path.write_text(json.dumps(results, indent=1))
    print(f"wrote {report_path} and {results_path} in {results['total_seconds']:.0f} s", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
