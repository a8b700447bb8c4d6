"""The framework-integration figures of BENCHMARKS.md (section 9): each framework's native MCP
integration against mcpfleet's, all four side by side in one run.

    python -m bench.integrations            # print the section (make bench-integrations: --write)
    python -m bench.integrations --write    # and put it into BENCHMARKS.md
    python -m bench.integrations --rendered-only --write   # the last run's results, text changes only

Ten synthetic stdio servers, one of which starts 5 s late (``bench/servers/synthetic_server.py``).
Every figure is one run of ``bench/integration_runs.py`` in a fresh process, as a user's program
starts: the framework (and mcpfleet's integration module) imported before the clock, then

- **first call**: from building the servers' objects and the agent until the model holds the
  answer of its first tool call (on a fast server), through the framework's real agent loop
  with a scripted model (no network);
- **cold**: nothing cached (mcpfleet's first start ever); **warm**: the same fleet again
  (mcpfleet has every tool in its cache, so the 5 s server is deferred);
- **close**: leaving the block (native: the framework's own close) until every server is gone.

Natives: the Agents SDK's ``MCPServerStdio`` × 10 under ``MCPServerManager`` (in parallel),
Pydantic AI's ``MCPToolset`` × 10 as ``load_mcp_toolsets`` builds them (fastmcp's stdio client),
LangChain's ``MultiServerMCPClient`` (langchain-mcp-adapters) and ADK's ``McpToolset`` × 10. The
Agents SDK and ADK carry their MCP clients, so both sides run in the project's venv; Pydantic
AI's and LangChain's natives run in venvs of their own under .tools/bench-venvs (fastmcp,
langchain-mcp-adapters on ``mcp`` 1.x, which mcpfleet's ``mcp`` 2.x excludes), with the same
framework versions as mcpfleet's extras.

Every home folder is fresh, so no configuration or cache of the user's is read.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any
from unittest import mock

from bench.harness import sections
from bench.harness.peers import PROJECT, REPO_ROOT, VENVS_DIR, Venv, ensure_venv, installed_versions
from bench.harness.runner import isolated_env
from mcpfleet.paths import user_config_file

HEADING = "## 9. Framework integrations"
RUN_SCRIPT = REPO_ROOT / "bench" / "integration_runs.py"
SYNTHETIC_SERVER = REPO_ROOT / "bench" / "servers" / "synthetic_server.py"
SERVERS = 10
TOOLS_PER_SERVER = 5
SLOW_START_S = 5.0
HOMES = 5
"""Fresh home folders per framework: each gives one run alone, one native and one cold."""
WARM_RUNS = 2
"""Warm runs per home (the figure the warm goal is judged on, so it gets more samples)."""
GATE_S = 0.25
"""mcpfleet's default start-up gate."""
RUN_TIMEOUT_S = 120

PYDANTIC_AI_NATIVE = Venv(
    "integrations-pydantic-ai",
    ("pydantic-ai-slim[mcp]==2.68.0", "fastmcp-slim==4.2.3"),
    ("pydantic-ai-slim", "fastmcp-slim", "mcp"),
)
LANGCHAIN_NATIVE = Venv(
    "integrations-langchain",
    ("langchain==1.5.2", "langchain-core==1.8.3", "langchain-mcp-adapters==0.3.2", "mcp==1.30.0"),
    ("langchain", "langchain-core", "langchain-mcp-adapters", "mcp"),
)


@dataclass(frozen=True)
class Framework:
    key: str
    """The name ``bench/integration_runs.py`` knows it by."""
    label: str
    native: str
    """The native integration, as the report names it."""
    native_venv: Venv
    package: str
    """The distribution whose version the report prints."""


FRAMEWORKS = (
    Framework("openai-agents", "OpenAI Agents SDK", "`MCPServerStdio` × 10", PROJECT, "openai-agents"),
    Framework("pydantic-ai", "Pydantic AI", "`MCPToolset` × 10", PYDANTIC_AI_NATIVE, "pydantic-ai-slim"),
    Framework("langchain", "LangChain", "`MultiServerMCPClient`", LANGCHAIN_NATIVE, "langchain"),
    Framework("google-adk", "Google ADK", "`McpToolset` × 10", PROJECT, "google-adk"),
)


def server_argv(index: int) -> list[str]:
    delay = SLOW_START_S if index == SERVERS - 1 else 0.0
    return [
        os.path.realpath(sys.executable),
        "-S",
        str(SYNTHETIC_SERVER),
        *("--name", f"s{index}", "--tools", str(TOOLS_PER_SERVER), "--init-delay", str(delay)),
    ]


def fresh_home(scratch: Path) -> dict[str, str]:
    """A home folder holding only the fleet's config (the user config mcpfleet discovers, and
    ``fleet.json`` for the native side); the environment that points a run at it."""
    home = Path(tempfile.mkdtemp(prefix="home-", dir=scratch))
    env = isolated_env(home)
    servers = {f"s{i}": {"command": server_argv(i)[0], "args": server_argv(i)[1:]} for i in range(SERVERS)}
    config = json.dumps({"mcpServers": servers})
    with mock.patch.dict(os.environ, env, clear=True):
        user_config = user_config_file()
    user_config.parent.mkdir(parents=True)
    user_config.write_text(config)
    (home / "fleet.json").write_text(config)
    (home / "project").mkdir()
    return env


def run_once(framework: Framework, side: str, env: dict[str, str]) -> dict[str, float]:
    """One run of ``bench/integration_runs.py`` in a fresh process: its result (seconds)."""
    home = Path(env["HOME"])
    # The framework alone runs where mcpfleet does: the same framework, no MCP client used.
    venv = framework.native_venv if side == "native" else PROJECT
    result = home / "result.json"
    result.unlink(missing_ok=True)
    command = [str(venv.python), str(RUN_SCRIPT), framework.key, side, str(home / "fleet.json"), str(result)]
    finished = subprocess.run(
        command, cwd=home / "project", env=env, capture_output=True, text=True, timeout=RUN_TIMEOUT_S
    )
    if finished.returncode != 0:
        raise RuntimeError(f"{framework.key} {side} failed:\n{finished.stderr[-4000:]}")
    measured: dict[str, float] = json.loads(result.read_text())
    return measured


def run_framework(framework: Framework, scratch: Path) -> dict[str, list[dict[str, float]]]:
    samples: dict[str, list[dict[str, float]]] = {"alone": [], "native": [], "cold": [], "warm": []}
    for _ in range(HOMES):
        env = fresh_home(scratch)
        samples["alone"].append(run_once(framework, "alone", env))
        samples["native"].append(run_once(framework, "native", env))
        samples["cold"].append(run_once(framework, "mcpfleet", env))
        samples["warm"].extend(run_once(framework, "mcpfleet", env) for _ in range(WARM_RUNS))
        print(f"  {framework.label}: {summary(samples)}", flush=True)
    return samples


def median(samples: list[dict[str, float]], key: str) -> float:
    return statistics.median(sample[key] for sample in samples)


def summary(samples: dict[str, list[dict[str, float]]]) -> str:
    return ", ".join(f"{kind} {median(runs, 'first_answer'):.2f} s" for kind, runs in samples.items() if runs)


def section(results: dict[str, Any]) -> str:
    runs: dict[str, dict[str, list[dict[str, float]]]] = results["frameworks"]
    versions: dict[str, dict[str, str]] = results["versions"]
    load = results["load_average"]
    lines = [
        HEADING,
        "",
        f"`make bench-integrations` ({results['source']}; Python {results['python']}, "
        f"{results['cores']} cores, load average {load['before']:.1f} before and {load['after']:.1f} "
        "after: the cores were shared with other work). "
        f"{SERVERS} stdio servers ({TOOLS_PER_SERVER} tools each), one of them starting "
        f"{SLOW_START_S:.0f} s late. Every figure is a median of runs in fresh processes, as a user's "
        "program starts: the framework and the integration module are imported first (the *imports* "
        "column, not counted in the others), then the clock runs from building the servers' objects "
        "and the agent until the model holds the answer of its first tool call (a fast server's "
        "tool), through the framework's own agent loop with a scripted model; *close* is the time to "
        "leave the block. *Framework alone* is the same agent with a local function as its tool and "
        "no MCP at all: what the framework's first run costs by itself. "
        f"{HOMES} runs each, mcpfleet warm {HOMES * WARM_RUNS} (every tool cached, the 5 s server "
        "deferred); cold is mcpfleet's first start (empty cache). mcpfleet's start-up gate is 250 ms.",
        "",
        "| framework | native integration | framework alone | native first call | mcpfleet cold "
        "| mcpfleet warm | native close | mcpfleet close | imports native / mcpfleet |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    verdicts = []
    goal = GATE_S + 0.1
    for framework in FRAMEWORKS:
        samples = runs.get(framework.key)
        if samples is None:
            continue
        alone, native, cold, warm = samples["alone"], samples["native"], samples["cold"], samples["warm"]
        lines.append(
            f"| {framework.label} {versions[framework.key].get(framework.package, '?')} | {framework.native} "
            f"| {median(alone, 'first_answer'):.2f} s | {median(native, 'first_answer'):.2f} s "
            f"| {median(cold, 'first_answer'):.2f} s | {median(warm, 'first_answer'):.2f} s "
            f"| {median(native, 'close'):.2f} s | {median(warm + cold, 'close'):.2f} s "
            f"| {median(native, 'imports'):.2f} / {median(warm + cold, 'imports'):.2f} s |"
        )
        warm_first = median(warm, "first_answer")
        entered = median(warm, "entered")
        framework_part = statistics.median(run["first_answer"] - run["entered"] for run in warm)
        live = median(warm, "connected_at_entry")
        alone_first = median(alone, "first_answer")
        net = warm_first - alone_first
        collected = sum(1 for run in warm if run["full_gc"] > 0)
        cold_over = median(cold, "first_answer") - median(native, "first_answer")
        cold_over_from_start = statistics.median(
            run["imports"] + run["first_answer"] for run in cold
        ) - statistics.median(run["imports"] + run["first_answer"] for run in native)
        verdicts.append(
            f"- {framework.label}: warm {warm_first:.2f} s against the goal of gate + 0.1 s = {goal:.2f} s "
            f"({'met' if warm_first <= goal else 'missed'}); without the framework's own first run "
            f"(alone: {alone_first:.2f} s), {net:.2f} s ({'met' if net <= goal else 'missed'}). Of the "
            f"warm time, {entered:.2f} s went to entering mcpfleet's block (the {GATE_S:.2f} s gate and "
            f"{entered - GATE_S:.2f} s before and after it; then a median of {live:.0f} of {SERVERS} servers "
            f"were live, the others deferred) and {framework_part:.2f} s to the agent's run "
            f"to the answer; a full garbage collection landed in {collected} of {len(warm)} warm runs. "
            f"Cold {cold_over:+.2f} s against native ({'met' if cold_over <= 0 else 'missed'}: never "
            f"slower), {cold_over_from_start:+.2f} s counting the imports."
        )
    return "\n".join([*lines, "", *verdicts, "", WHERE_THE_TIME_GOES]) + "\n"


WHERE_THE_TIME_GOES = (
    "Where a warm start's time goes: mcpfleet's own work before and after the gate (discovery, the "
    "tool cache, the spawns; with anything else that blocks the process meanwhile), the gate, then "
    "the agent's run. Servers not yet live when the gate ends (ten interpreters starting at once on "
    "a loaded machine take longer than 250 ms) are deferred, and the first call waits for its "
    "server. The Agents SDK and ADK leave a full garbage collection pending after their imports "
    "(over 150,000 objects to scan); the first few thousand allocations of any start set it off, "
    "mcpfleet's or a native client's (where it lands in the wait for the slow server), and it "
    "blocks the process for its length: `gc.freeze()` after the imports spares it (see "
    "docs/integrations.md). ADK imports much of itself on its first run (*framework alone*); its "
    "native side loads that with `google.adk.tools.mcp_tool`, before the clock, hence the cold "
    "figure counting the imports as well."
)


def run(frameworks: tuple[Framework, ...], scratch: Path, log: Path) -> dict[str, Any]:
    from bench.run import source_state

    versions: dict[str, dict[str, str]] = {}
    for framework in frameworks:
        ensure_venv(framework.native_venv, log)
        reported = (framework.package, *framework.native_venv.reported_packages)
        venv = replace(framework.native_venv, reported_packages=reported)
        versions[framework.key] = installed_versions(venv)
    load_before = os.getloadavg()[0]
    started = time.perf_counter()
    measured = {}
    for framework in frameworks:
        print(f"{framework.label}:", flush=True)
        measured[framework.key] = run_framework(framework, scratch)
    return {
        "frameworks": measured,
        "versions": versions,
        "source": source_state(),
        "python": sys.version.split()[0],
        "cores": os.cpu_count(),
        "load_average": {"before": load_before, "after": os.getloadavg()[0]},
        "seconds": time.perf_counter() - started,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help="put the section into BENCHMARKS.md")
    parser.add_argument(
        "--framework", action="append", choices=[f.key for f in FRAMEWORKS], help="only these (repeatable)"
    )
    parser.add_argument(
        "--rendered-only", action="store_true", help="render the last run's results again, measuring nothing"
    )
    options = parser.parse_args()
    frameworks = tuple(f for f in FRAMEWORKS if not options.framework or f.key in options.framework)
    results_path = VENVS_DIR.parent / "integrations-results.json"
    if options.rendered_only:
        results = json.loads(results_path.read_text())
    else:
        results_path.parent.mkdir(parents=True, exist_ok=True)
        log = results_path.with_suffix(".log")
        log.write_text("")
        scratch = Path(tempfile.mkdtemp(prefix="mcpfleet-bench-integrations-"))
        try:
            results = run(frameworks, scratch, log)
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
        results_path.write_text(json.dumps(results, indent=1))
    text = section(results)
    print(text)
    if options.write:
        sections.write_section(REPO_ROOT / "BENCHMARKS.md", HEADING, text)
        print("wrote BENCHMARKS.md" + ("" if options.rendered_only else f" and {results_path}"), flush=True)


if __name__ == "__main__":
    main()
