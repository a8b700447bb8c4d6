"""The protocol-era figures of BENCHMARKS.md (section 7), measured in this process on the project's venv.

    python -m bench.protocol_eras                         # print the section
    python -m bench.protocol_eras --write                 # and put it into BENCHMARKS.md
    python -m bench.protocol_eras --write --conformance   # with the conformance pass counts (~3 min)

What is measured (medians):

1. A legacy stdio server that never answers unknown requests (``synthetic_server.py
   --drop-unknown``), one agent start each (``MCPManager.connect_servers``, gate 0: spawn,
   era, ``tools/list``): the first start (no cache: the ``server/discover`` probe runs to its
   bound, then ``initialize``) and the second (the cache's legacy verdict: ``initialize`` at
   once), against a normal start (the same server answering unknown requests at once, its
   legacy verdict remembered: what every start cost before eras were probed).
2. One dual-era server (the SDK's ``MCPServer`` over streamable HTTP on 127.0.0.1): the
   connection (``open``) and the connection plus ``tools/list``, in each era: first contact
   (probe, then 2026-07-28), 2026-07-28 from a remembered ``DiscoverResult`` (adopted, no
   traffic), and legacy (``initialize`` + ``notifications/initialized``).
3. With ``--conformance``: the verdicts of ``tests/conformance/test_conformance.py`` (each
   scenario alone, ``CONFORMANCE_JOBS`` at a time), as pass counts, and that run's wall time.

``make bench`` rewrites BENCHMARKS.md from its own results and carries this section over.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.harness import sections

REPO_ROOT = Path(__file__).resolve().parents[1]
BENCH_DIR = REPO_ROOT / "bench"
SYNTHETIC_SERVER = BENCH_DIR / "servers" / "synthetic_server.py"
DUAL_ERA_SERVER = BENCH_DIR / "servers" / "dual_era_server.py"
HEADING = "## 7. Protocol eras"
START_RUNS = 7
CONNECT_RUNS = 20


def _stdio_config(name: str, *flags: str) -> Any:
    from mcpfleet.config.model import ServerConfig, fingerprint_of

    config = ServerConfig(
        name=name,
        transport="stdio",
        command=os.path.realpath(sys.executable),
        args=("-S", str(SYNTHETIC_SERVER), "--name", name, *flags),
    )
    return _with_fingerprint(config, fingerprint_of(config))


def _with_fingerprint(config: Any, fingerprint: str) -> Any:
    from dataclasses import replace

    return replace(config, fingerprint=fingerprint)


async def _agent_start(config: Any, cache_path: Path) -> float:
    """Seconds for one start of one server through the manager, with the cache at ``cache_path``."""
    from mcpfleet.config.model import SourceInfo
    from mcpfleet.fleet.cache import MCPToolCache
    from mcpfleet.fleet.manager import MCPManager

    source = SourceInfo("bench", "bench", "/virtual.json", "user")
    with MCPToolCache(cache_path) as cache:
        async with MCPManager("/", cache=cache, startup_timeout_ms=0) as manager:
            started = time.perf_counter()
            loaded = await manager.connect_servers({config.name: config}, {config.name: source})
            elapsed = time.perf_counter() - started
            if loaded.errors:
                raise RuntimeError(f"{config.name} failed: {loaded.errors}")
    return elapsed


async def measure_legacy_starts(workspace: Path) -> dict[str, list[float]]:
    quiet = _stdio_config("quiet", "--drop-unknown")
    prompt = _stdio_config("prompt")
    normal_cache = workspace / "normal.sqlite3"
    await _agent_start(prompt, normal_cache)  # the normal start has its legacy verdict remembered
    figures: dict[str, list[float]] = {"first": [], "second": [], "normal": []}
    for run in range(START_RUNS):
        cache_path = workspace / f"quiet-{run}.sqlite3"
        figures["first"].append(await _agent_start(quiet, cache_path))
        figures["second"].append(await _agent_start(quiet, cache_path))
        figures["normal"].append(await _agent_start(prompt, normal_cache))
    return figures


def _start_dual_era_server() -> tuple[subprocess.Popen[str], str]:
    process = subprocess.Popen(
        [sys.executable, str(DUAL_ERA_SERVER)],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        start_new_session=True,
    )
    assert process.stdout is not None
    line = process.stdout.readline()
    if not line.startswith("READY "):
        process.kill()
        raise RuntimeError(f"dual_era_server.py did not start: {line!r}")
    return process, f"http://127.0.0.1:{line.split()[1]}/mcp"


async def measure_dual_era_connects() -> dict[str, dict[str, list[float]]]:
    from mcpfleet.client.definitions import LEGACY_ERA
    from mcpfleet.client.opening import connect_to_server
    from mcpfleet.config.model import ServerConfig

    process, url = _start_dual_era_server()
    try:
        config = ServerConfig(name="dual", transport="http", url=url)
        async with connect_to_server("dual", config, cwd=REPO_ROOT) as probe:
            remembered = probe.era_verdict
        eras: dict[str, Any] = {"probe": None, "modern": remembered, "legacy": LEGACY_ERA}
        figures: dict[str, dict[str, list[float]]] = {era: {"open": [], "list": []} for era in eras}
        for _ in range(CONNECT_RUNS):
            for era, verdict in eras.items():
                started = time.perf_counter()
                async with connect_to_server("dual", config, cwd=REPO_ROOT, era=verdict) as connection:
                    opened = time.perf_counter()
                    await connection.list_tools()
                    listed = time.perf_counter()
                    expected = "legacy" if era == "legacy" else "modern"
                    if connection.era != expected:
                        raise RuntimeError(f"{era}: connected as {connection.era}")
                figures[era]["open"].append(opened - started)
                figures[era]["list"].append(listed - started)
        return figures
    finally:
        process.kill()
        process.wait()


def measure_conformance() -> dict[str, Any]:
    """The three verdicts of the conformance test, as counts, from one run of its machinery."""
    sys.path.insert(0, str(REPO_ROOT))
    from tests.conformance import test_conformance as suite

    verdicts = suite.run_verdicts()
    outcomes = verdicts.outcomes
    counts: dict[str, Any] = {"wall_s": verdicts.wall_s, "runs": len(outcomes), "jobs": suite.JOBS}
    for revision in suite.REVISIONS:
        scenarios = suite.scored_client_scenarios(revision)
        passed = [s for s in scenarios if not outcomes[(s, revision)].failures]
        counts[revision] = (len(passed), len(scenarios))
    every = verdicts.all_scenarios
    passing_all = [s for s, version in every.items() if not outcomes[(s, version)].failures]
    counts["all"] = (len(passing_all), len(every))
    counts["failing_all"] = sorted(set(every) - set(passing_all))
    return counts


def _median_s(values: list[float]) -> str:
    return f"{statistics.median(values):.3f} s"


def _median_ms(values: list[float]) -> str:
    return f"{statistics.median(values) * 1000:.1f} ms"


def render(
    legacy: dict[str, list[float]],
    dual: dict[str, dict[str, list[float]]],
    conformance: dict[str, Any] | None,
    probe_bound_s: float,
) -> str:
    first, second, normal = (statistics.median(legacy[key]) for key in ("first", "second", "normal"))
    first_met = first <= probe_bound_s + normal
    # "Equal" within noise: 20 % of a start that is itself a process spawn.
    second_met = second <= normal * 1.2
    lines = [
        HEADING,
        "",
        "Measured by `python -m bench.protocol_eras` on the project's venv (not by `make bench`, "
        f"which carries this section over). Machine: {os.cpu_count()} CPUs, Python "
        f"{platform.python_version()}. Medians of {START_RUNS} starts and {CONNECT_RUNS} connects.",
        "",
        "A legacy stdio server that never answers unknown requests, so only the probe bound "
        f"({probe_bound_s * 1000:.0f} ms) ends the `server/discover` wait. One agent start = "
        "spawn, era, `tools/list` (`MCPManager.connect_servers`, gate 0). The normal start is the "
        "same server answering unknown requests at once, with its legacy verdict remembered.",
        "",
        "| start | median | goal | verdict |",
        "|---|---|---|---|",
        f"| first start (no cache: probe to its bound, then `initialize`) | {first:.3f} s | "
        f"≤ bound + normal = {probe_bound_s + normal:.3f} s | {'**met**' if first_met else '**missed**'} |",
        f"| second start (legacy verdict from the cache: `initialize` at once) | {second:.3f} s | "
        f"= normal | {'**met**' if second_met else '**missed**'} ({second / normal:.2f}×) |",
        f"| normal start | {normal:.3f} s | | |",
        "",
        "One dual-era server (the SDK's `MCPServer`, streamable HTTP on 127.0.0.1), one "
        "connection at a time: its opening, and its opening plus the first `tools/list`.",
        "",
        "| era of the connection | open | open + `tools/list` |",
        "|---|---|---|",
    ]
    labels = {
        "probe": "first contact: `server/discover` probe, then 2026-07-28",
        "modern": "2026-07-28 from the remembered `DiscoverResult` (no traffic)",
        "legacy": "legacy: `initialize` + `notifications/initialized`",
    }
    for era, label in labels.items():
        lines.append(f"| {label} | {_median_ms(dual[era]['open'])} | {_median_ms(dual[era]['list'])} |")
    lines.append("")
    if conformance is not None:
        lines += [
            "`@modelcontextprotocol/conformance` client scenarios (`tests/conformance/test_conformance.py`: "
            f"{conformance['runs']} distinct runs, each alone, {conformance['jobs']} at a time, "
            f"{conformance['wall_s']:.0f} s in all):",
            "",
            "| verdict | pass |",
            "|---|---|",
        ]
        for key, label in (
            ("2025-11-25", "2025-11-25 requirement set (no baseline)"),
            ("2026-07-28", "2026-07-28 requirement set (no baseline)"),
            ("all", "`--suite all` (baseline: " + (", ".join(conformance["failing_all"]) or "none") + ")"),
        ):
            passed, total = conformance[key]
            lines.append(f"| {label} | {passed}/{total} |")
        lines.append("")
    return "\n".join(lines)


def splice(report: str, section: str) -> str:
    """``report`` with its protocol-era section replaced by ``section`` (or inserted before the
    plots and findings that close the report)."""
    return sections.splice(report, HEADING, section, before=("![", "## Findings"))


def carry_over(previous: str | None, regenerated: str) -> str:
    """Keep the protocol-era section of the report being replaced (``make bench`` does not measure it)."""
    return sections.carry_over(previous, regenerated, HEADING, before=("![", "## Findings"))


async def _measure_connections(workspace: Path) -> tuple[dict[str, list[float]], dict[str, Any]]:
    return await measure_legacy_starts(workspace), await measure_dual_era_connects()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help="put the section into BENCHMARKS.md")
    parser.add_argument("--conformance", action="store_true", help="also run the conformance verdicts")
    options = parser.parse_args()
    import mcpfleet.client.connection as connection_module  # the SDK's import, before any clock

    with tempfile.TemporaryDirectory(prefix="mcpfleet-bench-eras-") as workspace:
        # Nothing of the real user is read or written (tokens, approvals, the default cache).
        os.environ["MCPFLEET_HOME"] = str(Path(workspace) / "home")
        legacy, dual = asyncio.run(_measure_connections(Path(workspace)))
    conformance = measure_conformance() if options.conformance else None
    section = render(legacy, dual, conformance, connection_module.DEFAULT_PROBE_TIMEOUT_MS / 1000)
    print(section)
    if options.write:
        target = REPO_ROOT / "BENCHMARKS.md"
        target.write_text(splice(target.read_text(encoding="utf-8"), section), encoding="utf-8")


if __name__ == "__main__":
    main()
