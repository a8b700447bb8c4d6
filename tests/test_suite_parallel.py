"""The suite runs under pytest-xdist (``make test``): what ``tests/conftest.py`` does for that.

Every report a worker sends must cross its channel, and the suite's scheduler keeps each file,
and the conformance files together, on one worker.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import execnet
import pytest
from _pytest.reports import TestReport

from tests.conftest import TESTS_DIR

LONE_SURROGATE_LOG = "WARNING mcpfleet.fleet.tools:tools.py:162 MCP tool name collision: \ud800/a"

RECORDING_TEST = """
import json, os

import pytest

@pytest.fixture(scope="module")
def module_setup():
    with open(os.environ["RECORD"], "a") as record:
        record.write(json.dumps(["setup", __name__, os.environ["PYTEST_XDIST_WORKER"]]) + "\\n")

@pytest.mark.parametrize("case", range(2))
def test_case(module_setup, case):
    with open(os.environ["RECORD"], "a") as record:
        record.write(json.dumps(["test", __name__, os.environ["PYTEST_XDIST_WORKER"]]) + "\\n")
"""


def test_a_report_whose_captured_log_has_a_lone_surrogate_crosses_the_worker_channel(
    pytestconfig: pytest.Config,
) -> None:
    report = TestReport(
        nodeid="tests/unit/cli/test_fuzz_tool_text.py::test_tool_names",
        location=("tests/unit/cli/test_fuzz_tool_text.py", 73, "test_tool_names"),
        keywords={},
        outcome="passed",
        longrepr=None,
        when="call",
        sections=[("Captured log call", LONE_SURROGATE_LOG)],
    )
    data = pytestconfig.hook.pytest_report_to_serializable(config=pytestconfig, report=report)
    received = pytestconfig.hook.pytest_report_from_serializable(
        config=pytestconfig, data=execnet.loads(execnet.dumps(data))
    )
    assert received.passed
    assert received.sections == [("Captured log call", LONE_SURROGATE_LOG.replace("\ud800", "\\ud800"))]


def test_each_file_and_the_conformance_files_together_run_on_one_worker(tmp_path: Path) -> None:
    suite = tmp_path / "tests"
    (suite / "conformance").mkdir(parents=True)
    shutil.copy(TESTS_DIR / "conftest.py", suite / "conftest.py")
    for engine in ("postgres.py", "redis.py", "shared_servers.py"):  # the conftest stops their servers
        shutil.copy(TESTS_DIR / engine, suite / engine)
    files = ["conformance/test_client_side.py", "conformance/test_server_side.py"]
    files += ["test_other_a.py", "test_other_b.py"]
    for name in files:
        (suite / name).write_text(RECORDING_TEST)
    record = tmp_path / "record.jsonl"
    completed = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-n",
            "2",
            "-p",
            "no:cacheprovider",
            "-p",
            "no:langsmith_plugin",
            f"--basetemp={tmp_path / 'basetemp'}",
            "tests",
        ],
        cwd=tmp_path,
        env={**_environment(), "RECORD": str(record)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert completed.returncode == 0, completed.stdout + completed.stderr
    events = [json.loads(line) for line in record.read_text().splitlines()]
    assert len([event for event in events if event[0] == "test"]) == 2 * len(files)
    setups = [module for kind, module, _ in events if kind == "setup"]
    assert sorted(setups) == sorted(Path(name).stem for name in files), "a module fixture was set up twice"
    workers_of = {module: {worker for _, where, worker in events if where == module} for module in setups}
    assert all(len(workers) == 1 for workers in workers_of.values()), workers_of
    assert workers_of["test_client_side"] == workers_of["test_server_side"]
    # One after the other: the second conformance file starts when the first is done.
    conformance = [module for kind, module, _ in events if kind == "test" and module.endswith("_side")]
    assert conformance == [conformance[0]] * 2 + [conformance[-1]] * 2 and conformance[0] != conformance[-1]


def _environment() -> dict[str, str]:
    """This process's environment without pytest's own variables (an xdist worker's among them)."""
    return {name: value for name, value in os.environ.items() if not name.startswith("PYTEST_")}
