"""The official MCP conformance suite's *server* scenarios: the backend alone, then behind the gateway.

``tests/servers/conformance_backend.py`` implements what the suite's server scenarios call.
It runs over streamable HTTP (``conformance server --url`` speaks only that), and three runs
of the suite judge it: the ``2025-11-25`` and the ``2026-07-28`` requirement sets
(``--requirements``, each scenario at its revision) and ``--suite all`` (every server
scenario, extensions included, at the version the suite picks for it). A scenario the backend
does not pass is listed in ``server_baseline.txt`` with its reason; an entry that starts
passing fails the test, so the list only shrinks.

Then the same three runs go through ``mcpfleet serve --http 127.0.0.1:PORT --prefix none``
with the backend (over stdio) as its only server: the gateway must pass every (scenario,
version) the backend passes, except the runs listed with their cause in ``gateway_baseline.txt``
(a list that only shrinks, like the backend's).

Unlike its ``client`` command, the suite's ``server`` command runs a whole set's scenarios one
after another in one Node process, so a set costs one Node start, not one per scenario (on two
busy cores, ~1 s of CPU each). A (scenario, version) that fails is run again alone before it
counts, when only a few failed (more is a real breakage, not load): a verdict must not depend
on how loaded the machine is.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from tests.conformance.test_conformance import (
    JOBS,
    LATEST_DATED,
    MAX_RERUNS,
    NODE,
    REQUIREMENTS,
    RESULT_DIR_SUFFIX,
    REVISIONS,
    SUITE_ENTRY,
    Outcome,
    Run,
    baseline_problems,
    describe,
    requires_suite,
    suite_environment,
)
from tests.integration.gateway.http_gateway import running_http_gateway, wait_until_listed
from tests.servers.fixtures import CONFORMANCE_BACKEND, HttpServer, start_http_server

HERE = Path(__file__).resolve().parent
SERVER_BASELINE = HERE / "server_baseline.txt"
GATEWAY_BASELINE = HERE / "gateway_baseline.txt"
SCENARIO_TIMEOUT_MS = 30_000
SET_TIMEOUT_S = 300
"""One whole set (66 scenarios at most) in one Node process; ~15 s when the machine is idle."""
WHOLE_RUN_TIMEOUT_S = 600
SCHEMA_CHECK = "wire-schema-valid"
"""Appended by the suite to every scenario that exchanged a message; it proves nothing by itself."""

SuiteSet = tuple[str, ...]
"""The options that select one set: ``("--requirements", revision)`` or ``("--suite", "all")``."""
SETS: tuple[SuiteSet, ...] = (
    *(("--requirements", revision) for revision in REVISIONS),
    ("--suite", "all"),
)


def scored_server_scenarios(revision: str) -> list[str]:
    """The server scenarios a revision's frozen requirement set scores."""
    data = yaml.safe_load((REQUIREMENTS / f"{revision}.yaml").read_text(encoding="utf-8"))
    return [str(scenario) for scenario in data["server"]]


def all_server_scenarios() -> dict[str, str]:
    """Every server scenario of ``--suite all`` → the version that mode runs it at.

    As for clients: a scenario introduced in 2026-07-28, or an extension, runs at 2026-07-28,
    every other one at the latest dated release.
    """
    listing = subprocess.run(
        [str(NODE), str(SUITE_ENTRY), "list", "--server"],
        env=suite_environment(),
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout
    scenarios: dict[str, str] = {}
    for name, versions in re.findall(r"^\s+- (\S+) \[([^\]]*)\]", listing, flags=re.MULTILINE):
        first = versions.split(",")[0]
        scenarios[name] = "2026-07-28" if first in ("2026-07-28", "extension") else LATEST_DATED
    return scenarios


def read_server_baseline() -> dict[str, str]:
    """Scenario → reason, from ``server_baseline.txt`` (``scenario  # reason`` lines)."""
    entries: dict[str, str] = {}
    for line in SERVER_BASELINE.read_text(encoding="utf-8").splitlines():
        if line.startswith("#"):
            continue
        scenario, _, reason = line.partition("#")
        if scenario.strip():
            assert reason.strip(), f"server_baseline.txt: entry {scenario.strip()} has no reason"
            entries[scenario.strip()] = reason.strip()
    return entries


def read_gateway_baseline() -> dict[Run, str]:
    """(scenario, version) → reason, from ``gateway_baseline.txt`` (``scenario@version  # reason``)."""
    entries: dict[Run, str] = {}
    for line in GATEWAY_BASELINE.read_text(encoding="utf-8").splitlines():
        if line.startswith("#") or not line.strip():
            continue
        run, _, reason = line.partition("#")
        scenario, at, version = run.strip().partition("@")
        assert at and reason.strip(), f"gateway_baseline.txt: {line!r} is not `scenario@version  # reason`"
        entries[(scenario, version)] = reason.strip()
    return entries


def verdict(checks: list[dict[str, object]]) -> Outcome:
    """Failed checks (``FAILURE`` or ``WARNING``), and "no check succeeded" when only skips were left."""
    failures = [
        f"{check.get('id')}: {check.get('errorMessage') or check.get('description')}"
        for check in checks
        if check.get("status") in ("FAILURE", "WARNING")
    ]
    if not any(check.get("status") == "SUCCESS" and check.get("id") != SCHEMA_CHECK for check in checks):
        failures.append("no check succeeded")
    return Outcome(failures)


def run_suite(url: str, selection: SuiteSet, output: Path) -> tuple[dict[str, Outcome], str]:
    """One set against ``url`` in one Node process: scenario → outcome, and the tail of its output."""
    output.mkdir(parents=True)
    command = [str(NODE), str(SUITE_ENTRY), "server", "--url", url, *selection]
    command += ["--timeout", str(SCENARIO_TIMEOUT_MS), "-o", str(output)]
    try:
        completed = subprocess.run(
            command,
            env=suite_environment(),
            cwd=output,
            capture_output=True,
            text=True,
            timeout=SET_TIMEOUT_S,
        )
        tail = "\n".join((completed.stdout + completed.stderr).splitlines()[-8:])
    except subprocess.TimeoutExpired:
        tail = f"the suite did not finish {' '.join(selection)} within {SET_TIMEOUT_S} s"
    outcomes: dict[str, Outcome] = {}
    for checks_file in output.glob("server-*/checks.json"):
        scenario = RESULT_DIR_SUFFIX.sub("", checks_file.parent.name.removeprefix("server-"))
        outcomes[scenario] = verdict(json.loads(checks_file.read_text(encoding="utf-8")))
    return outcomes, tail


def run_alone(url: str, run: Run, output: Path) -> Outcome:
    """One scenario at one version, alone: how a failure is confirmed before it counts."""
    scenario, version = run
    selection = ("--scenario", scenario, "--spec-version", version, "--force")
    outcomes, tail = run_suite(url, selection, output)
    outcome = outcomes.get(scenario, Outcome(["no checks.json written"], tail))
    outcome.attempts = 2
    return outcome


@dataclass
class SuiteResults:
    outcomes: dict[Run, Outcome]
    """Every (scenario, version) any set ran; a run two sets share fails if either saw it fail."""
    every: dict[str, str]
    """``--suite all``'s scenarios → their version."""
    wall_s: float

    def passing(self) -> set[Run]:
        return {run for run, outcome in self.outcomes.items() if not outcome.failures}


def judge(url: str, workspace: Path, expected_failures: set[str]) -> SuiteResults:
    """The three sets against ``url``, then the unexpected failures again, alone."""
    started = time.monotonic()
    every = all_server_scenarios()

    def run_set(selection: SuiteSet) -> dict[Run, Outcome]:
        outcomes, tail = run_suite(url, selection, workspace / "-".join(selection).strip("-"))
        assert outcomes, f"conformance server {' '.join(selection)} against {url} wrote no results:\n{tail}"
        if selection[0] == "--requirements":
            return {(scenario, selection[1]): outcome for scenario, outcome in outcomes.items()}
        return {(scenario, every[scenario]): outcome for scenario, outcome in outcomes.items()}

    merged: dict[Run, Outcome] = {}
    with ThreadPoolExecutor(max_workers=JOBS) as pool:
        for outcomes in pool.map(run_set, SETS):
            for run, outcome in outcomes.items():
                if run not in merged or outcome.failures:
                    merged[run] = outcome
    failing = [run for run, outcome in merged.items() if outcome.failures and run[0] not in expected_failures]
    if len(failing) <= MAX_RERUNS:
        for index, run in enumerate(failing):
            merged[run] = run_alone(url, run, workspace / f"again-{index}")
    return SuiteResults(merged, every, time.monotonic() - started)


@pytest.fixture(scope="module")
def backend() -> Iterator[HttpServer]:
    server = start_http_server(script=CONFORMANCE_BACKEND)
    yield server
    server.stop()


@pytest.fixture(scope="module")
def backend_results(backend: HttpServer) -> SuiteResults:
    with tempfile.TemporaryDirectory(prefix="mcpfleet-server-scenarios-") as workspace:
        return judge(backend.url, Path(workspace), set(read_server_baseline()))


def test_gateway_baseline_is_well_formed() -> None:
    for scenario, version in read_gateway_baseline():
        assert re.fullmatch(r"[\w./-]+", scenario), f"not a scenario name: {scenario}"
        assert re.fullmatch(r"\d{4}-\d{2}-\d{2}", version), f"not a revision: {version}"


def test_server_baseline_is_well_formed() -> None:
    for scenario in read_server_baseline():
        assert re.fullmatch(r"[\w./-]+", scenario), f"not a scenario name: {scenario}"


@requires_suite
@pytest.mark.timeout(WHOLE_RUN_TIMEOUT_S)
@pytest.mark.parametrize("revision", REVISIONS)
def test_backend_passes_every_server_requirement_of_the_revision(
    backend_results: SuiteResults, revision: str
) -> None:
    required = scored_server_scenarios(revision)
    assert len(required) >= 25, f"the {revision} requirement set lists too few server scenarios"
    missing = Outcome(["the requirement set did not run it"])
    outcomes = {
        (scenario, revision): backend_results.outcomes.get((scenario, revision), missing)
        for scenario in required
    }
    failing = {run: outcome for run, outcome in outcomes.items() if outcome.failures}
    report = [f"{len(required) - len(failing)}/{len(required)} server requirements of {revision} pass"]
    assert not failing, "\n".join(report + describe(failing))


@requires_suite
@pytest.mark.timeout(WHOLE_RUN_TIMEOUT_S)
def test_backend_passes_every_server_scenario_or_is_in_the_baseline(backend_results: SuiteResults) -> None:
    every = backend_results.every
    assert len(every) >= 50, f"the suite listed too few server scenarios: {sorted(every)}"
    baseline = read_server_baseline()
    missing = Outcome(["--suite all did not run it"])
    outcomes = {
        scenario: backend_results.outcomes.get((scenario, version), missing)
        for scenario, version in every.items()
    }
    required = {scenario for revision in REVISIONS for scenario in scored_server_scenarios(revision)}
    problems = baseline_problems(outcomes, every, baseline, required, "server_baseline.txt")
    passing = sum(1 for outcome in outcomes.values() if not outcome.failures)
    report = [
        f"{passing}/{len(every)} server scenarios pass against the backend ({len(baseline)} in the baseline)"
    ]
    assert not problems, "\n".join(report + problems)


@pytest.fixture(scope="module")
def gateway_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """``mcpfleet serve --http --prefix none`` with the backend (over stdio) as its only server.

    ``conformance server --url`` sends no header of ours, so this gateway is a throw-away one:
    ``--insecure-no-auth``, on loopback, for the length of the run.
    """
    backend_entry = {"command": sys.executable, "args": [str(CONFORMANCE_BACKEND)]}
    home = tmp_path_factory.mktemp("gateway")
    with running_http_gateway(
        home, {"conformance": backend_entry}, "--prefix", "none", "--insecure-no-auth"
    ) as gateway:
        wait_until_listed(gateway, "test_simple_text")
        yield gateway.url


@requires_suite
@pytest.mark.timeout(2 * WHOLE_RUN_TIMEOUT_S)
def test_gateway_passes_every_server_scenario_the_backend_passes(
    backend_results: SuiteResults, gateway_url: str
) -> None:
    baseline = read_gateway_baseline()
    with tempfile.TemporaryDirectory(prefix="mcpfleet-gateway-scenarios-") as workspace:
        through_gateway = judge(gateway_url, Path(workspace), {scenario for scenario, _ in baseline})
    expected = backend_results.passing()
    missing = Outcome(["the gateway run did not run it"])
    outcomes = {run: through_gateway.outcomes.get(run, missing) for run in sorted(expected)}
    failing = {run: outcome for run, outcome in outcomes.items() if outcome.failures}
    unexpected = {run: outcome for run, outcome in failing.items() if run not in baseline}
    now_passing = [run for run in baseline if run in outcomes and not outcomes[run].failures]
    not_expected = [run for run in baseline if run not in expected]
    report = [
        f"{len(expected) - len(failing)}/{len(expected)} backend-passing runs pass through the gateway "
        f"({len(baseline)} in gateway_baseline.txt), the three sets in {through_gateway.wall_s:.0f} s"
    ]
    report += describe(unexpected)
    report += [f"NOW PASSING, remove it from gateway_baseline.txt: {s}@{v}" for s, v in now_passing]
    report += [
        f"NOT A BACKEND-PASSING RUN, remove it from gateway_baseline.txt: {s}@{v}" for s, v in not_expected
    ]
    assert not (unexpected or now_passing or not_expected), "\n".join(report)
