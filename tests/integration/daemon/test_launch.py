"""Starting the daemon: one daemon for any number of shims at once, stale sockets replaced,
and a daemon that fails to start reported with its log.

The daemon here is a stand-in (``stand_in_daemon.py``) given to ``connect_or_start`` as the
spawn command: the lock, the socket and the spawn are what is under test.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import stat
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tests.integration.daemon.shim_harness import WAIT_S

from mcpfleet.daemon_client import launch, paths

STAND_IN = Path(__file__).with_name("stand_in_daemon.py")
SHIMS = 10


def started(record: Path) -> list[dict[str, Any]]:
    """What each stand-in daemon recorded of its start."""
    if not record.exists():
        return []
    return [json.loads(line) for line in record.read_text(encoding="utf-8").splitlines()]


def gone(pid: int) -> bool:
    """Exited: no such process, or a zombie nobody reaped yet."""
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8") as status:
            return status.read().rsplit(")", 1)[1].split()[0] == "Z"
    except FileNotFoundError:
        return True


@pytest.fixture
def record(daemon_runtime: Path, tmp_path: Path) -> Iterator[Path]:
    """The stand-ins' record; every stand-in started is stopped at the end."""
    path = tmp_path / "started.jsonl"
    yield path
    for entry in started(path):
        try:
            os.kill(entry["pid"], signal.SIGTERM)
        except ProcessLookupError:
            continue
    deadline = time.monotonic() + WAIT_S
    while not all(gone(entry["pid"]) for entry in started(path)):
        assert time.monotonic() < deadline, "a stand-in daemon outlived its test"
        time.sleep(0.05)


def stand_in(record: Path, delay_s: float = 0.3) -> list[str]:
    return [sys.executable, str(STAND_IN), str(record), str(delay_s)]


def test_ten_shims_at_once_start_one_daemon(record: Path) -> None:
    script = (
        "import sys\n"
        "from mcpfleet.daemon_client.launch import connect_or_start\n"
        "connection = connect_or_start(command=sys.argv[1:])\n"
        "print('connected', flush=True)\n"
    )
    shims = [
        subprocess.Popen(
            [sys.executable, "-c", script, *stand_in(record)], stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )
        for _ in range(SHIMS)
    ]
    outcomes = [shim.communicate(timeout=WAIT_S * 2) for shim in shims]
    assert [shim.returncode for shim in shims] == [0] * SHIMS, [err.decode() for _, err in outcomes]
    assert all(out == b"connected\n" for out, _ in outcomes)
    assert len(started(record)) == 1


def test_the_daemon_is_detached_in_a_neutral_folder(
    record: Path, isolated_home: Path, tmp_path: Path
) -> None:
    project = tmp_path / "project"
    project.mkdir()
    os.chdir(project)
    connection = launch.connect_or_start(command=stand_in(record, 0))
    connection.close()
    [daemon] = started(record)
    assert daemon["sid"] == daemon["pid"]  # a session of its own: no terminal's signal reaches it
    assert daemon["cwd"] == str(isolated_home)  # never the shim's folder
    assert daemon["stdin"] == daemon["stdout"] == os.devnull


def test_a_stale_socket_is_replaced(record: Path, daemon_runtime: Path) -> None:
    socket_file = daemon_runtime / "daemon.sock"
    dead = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    dead.bind(str(socket_file))  # bound, never listening: what a killed daemon leaves
    dead.close()
    with pytest.raises(ConnectionRefusedError):
        socket.socket(socket.AF_UNIX).connect(str(socket_file))

    assert launch.start_daemon(command=stand_in(record, 0)) is True
    assert len(started(record)) == 1
    with socket.socket(socket.AF_UNIX) as probe:
        probe.connect(str(socket_file))  # the new daemon's
    # It runs now: asking again starts nothing.
    assert launch.start_daemon(command=stand_in(record, 0)) is False
    assert len(started(record)) == 1


def test_a_daemon_that_exits_before_it_listens_is_reported_with_its_log(daemon_runtime: Path) -> None:
    command = [sys.executable, "-c", "import sys; print('daemon trouble', file=sys.stderr); sys.exit(3)"]
    with pytest.raises(
        launch.DaemonStartError, match=r"exited \(code 3\) before it accepted connections"
    ) as caught:
        launch.connect_or_start(command=command)
    log_file = paths.log_path()
    assert str(log_file) in str(caught.value)
    assert "daemon trouble" in log_file.read_text(encoding="utf-8")
    assert stat.S_IMODE(log_file.stat().st_mode) == 0o600


def test_a_daemon_that_never_listens_is_stopped_after_the_bound(daemon_runtime: Path, tmp_path: Path) -> None:
    pid_file = tmp_path / "pid"
    command = [
        sys.executable,
        "-c",
        f"import os, time; open({str(pid_file)!r}, 'w').write(str(os.getpid())); time.sleep(60)",
    ]
    with pytest.raises(
        launch.DaemonStartError, match=r"did not accept connections within 1 s and was stopped"
    ):
        launch.connect_or_start(command=command, timeout_s=1.0)
    assert gone(int(pid_file.read_text()))


def test_the_daemon_command_keeps_the_working_folder_off_the_import_path() -> None:
    command = launch.daemon_command()
    assert command[0] == sys.executable
    assert command[1:] == ["-P", "-m", "mcpfleet", "daemon", "run"]
