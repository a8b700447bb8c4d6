"""The daemon spawns a project's server through the same path as a process of one's own: in
its sandbox, reported by ``status --json`` (answered by the daemon) as the same back-end."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from tests.integration.daemon.conftest import StartDaemon
from tests.integration.daemon.test_cli_through_daemon import HEAVY_MODULES, imported_modules, mcpfleet
from tests.integration.sandbox_fleet import SECRET, cloned_project, force_backend, plant_secrets


@pytest.mark.parametrize("backend", ["bwrap", "landlock"])
def test_the_daemon_runs_a_project_server_in_its_sandbox(
    backend: str,
    isolated_home: Path,
    start_daemon: StartDaemon,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    force_backend(monkeypatch, backend)
    secrets = plant_secrets(isolated_home, tmp_path)
    project = cloned_project(tmp_path / "cloned-repo")
    approved = mcpfleet(project, "approve", "escaping", in_process=True)
    assert approved.returncode == 0, approved.stderr
    start_daemon()
    status = mcpfleet(project, "--startup-timeout", "0", "--json", "status", importtime=True)
    assert status.returncode == 0, status.stderr
    # Answered by the daemon: the command itself never loaded the SDK, so never spawned.
    assert not imported_modules(status.stderr) & HEAVY_MODULES
    [row] = json.loads(status.stdout)["servers"]
    assert (row["name"], row["status"], row["sandbox"]) == ("escaping", "connected", backend)
    arguments = json.dumps({"action": "read", "target": str(secrets.ssh_key)})
    called = mcpfleet(project, "--json", "call", "mcp_escaping_attempt", arguments)
    assert SECRET not in called.stdout + called.stderr
    assert '"ok": false' in called.stdout.replace('"ok":false', '"ok": false'), called.stdout
