"""``mcpfleet daemon start|stop|status|logs|run``: what they print, in text and JSON, and how
they exit, with and without a running daemon."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from tests.integration.daemon.daemon_harness import (
    MCPFLEET,
    fake,
    fleet_spec,
    ping,
    processes_of_home,
    server_processes,
    session,
    user_config,
    wait_until_gone,
)

from mcpfleet.daemon_client import paths


def mcpfleet(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(MCPFLEET), *args], cwd=cwd, capture_output=True, text=True, timeout=120)


def test_without_a_daemon_status_and_stop_say_so_and_exit_0(isolated_home: Path) -> None:
    status = mcpfleet("daemon", "status", cwd=isolated_home)
    assert status.returncode == 0
    assert "no mcpfleet daemon runs" in status.stdout
    as_json = mcpfleet("--json", "daemon", "status", cwd=isolated_home)
    assert as_json.returncode == 0
    assert json.loads(as_json.stdout) == {
        "running": False,
        "socket": str(paths.socket_path()),
        "log": str(paths.log_path()),
    }
    stop = mcpfleet("daemon", "stop", cwd=isolated_home)
    assert stop.returncode == 0 and "no mcpfleet daemon runs" in stop.stdout
    logs = mcpfleet("daemon", "logs", cwd=isolated_home)
    assert logs.returncode == 1 and "no daemon log yet" in logs.stderr


def test_start_status_logs_stop(isolated_home: Path) -> None:
    user_config({"alpha": fake("alpha")})
    started = mcpfleet("--json", "daemon", "start", cwd=isolated_home)
    assert started.returncode == 0, started.stderr
    first = json.loads(started.stdout)
    assert first["started"] is True
    found = ping()
    assert found is not None and found["pid"] == first["pid"]
    again = mcpfleet("--json", "daemon", "start", cwd=isolated_home)
    assert json.loads(again.stdout) == {"pid": first["pid"], "started": False}

    with session(fleet_spec(isolated_home), host="codex"):
        status = mcpfleet("--json", "daemon", "status", cwd=isolated_home)
        text = mcpfleet("daemon", "status", cwd=isolated_home)
    assert status.returncode == 0
    document = json.loads(status.stdout)
    assert document["running"] is True and document["pid"] == first["pid"]
    assert [entry["host"] for entry in document["sessions"]] == ["codex"]
    assert [server["name"] for server in document["servers"]] == ["alpha"]
    assert text.returncode == 0
    assert f"pid {first['pid']}," in text.stdout and "codex" in text.stdout and "alpha" in text.stdout

    logs = mcpfleet("daemon", "logs", "-n", "3", cwd=isolated_home)
    assert logs.returncode == 0
    assert len(logs.stdout.splitlines()) == 3
    everything = mcpfleet("daemon", "logs", "-n", "1000", cwd=isolated_home).stdout
    assert f"daemon (pid {first['pid']}) serving on {paths.socket_path()}" in everything
    assert "session s" in everything and "ended" in everything

    stop = mcpfleet("--json", "daemon", "stop", cwd=isolated_home)
    assert stop.returncode == 0, stop.stderr
    assert json.loads(stop.stdout) == {"stopped": True, "pid": first["pid"]}
    assert not wait_until_gone([first["pid"]], timeout_s=0.1), "stop returns once the daemon is gone"
    assert ping() is None


def test_status_counts_every_process_a_server_started(isolated_home: Path) -> None:
    """A server that forks (``npx`` is npm exec, a shell, node) is as many processes as there
    are: its row and the totals count them, as its memory already did."""
    user_config({"forking": fake("forking", "--tool", "echo", "--spawn-grandchild")})
    assert mcpfleet("daemon", "start", cwd=isolated_home).returncode == 0
    with session(fleet_spec(isolated_home, startup_timeout_ms=0)) as host:
        assert host.tool_names() == ["forking_echo"]
        [server] = server_processes(isolated_home, "forking")
        document = json.loads(mcpfleet("--json", "daemon", "status", cwd=isolated_home).stdout)
        everything = processes_of_home(isolated_home)  # the daemon, its watchdog, the server, its child
    [row] = document["servers"]
    # The --json twin keeps every field it had; "processes" is added.
    assert list(row) == [
        "name",
        "state",
        "share",
        "sessions",
        "pid",
        "rss_bytes",
        "processes",
        "idle_s",
        "project",
        "keep_warm",
    ]
    assert row["pid"] == server and row["processes"] == 2
    assert document["totals"]["processes"] == len(everything), everything
    assert document["totals"]["rss_bytes"] >= document["rss_bytes"] + row["rss_bytes"]


def test_run_refuses_a_timeout_that_is_not_a_positive_number(isolated_home: Path) -> None:
    for value in ("0", "-5", "soon"):
        refused = mcpfleet("daemon", "run", "--daemon-idle-timeout", value, cwd=isolated_home)
        assert refused.returncode == 2
        assert "--daemon-idle-timeout" in refused.stderr
    assert ping() is None
