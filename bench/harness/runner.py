"""Runs one scenario of one peer in a fresh subprocess, isolated, bounded, and leaving nothing behind."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.harness.peers import BENCH_DIR, PEERS_DIR, Peer
from mcpfleet.contract.wire import CONFIG_ENVIRONMENT

SERVER_SCRIPT = BENCH_DIR / "servers" / "synthetic_server.py"
SERVER_COMMAND = [os.path.realpath(sys.executable), "-S", str(SERVER_SCRIPT)]
"""Every peer spawns the same server with the same interpreter (``-S``: no site, fast start)."""


NOT_INHERITED = (*CONFIG_ENVIRONMENT, "MCPFLEET_NO_DAEMON", "MCPFLEET_RUNTIME_DIR", "PYTHONPATH")
"""What a run never takes from the benchmark's own environment: the variables that choose the
user's config, approval and cache files (mcpfleet's, Codex's, Claude Code's), those that change
how mcpfleet runs its fleet, and a path that would mix another venv's packages into a peer's."""


def isolated_env(home: Path) -> dict[str, str]:
    """The environment of a run: HOME and every user dir in ``home`` (no real user file is read or
    written), the rest of this process's environment but ``NOT_INHERITED``."""
    env = {name: value for name, value in os.environ.items() if name not in NOT_INHERITED}
    env.update(
        HOME=str(home),
        XDG_CONFIG_HOME=str(home / ".config"),
        XDG_STATE_HOME=str(home / ".local" / "state"),
        XDG_CACHE_HOME=str(home / ".cache"),
        XDG_DATA_HOME=str(home / ".local" / "share"),
    )
    return env


def _is_running(pid: int) -> bool:
    """True for a live process that is one of our synthetic servers (a zombie or a reused pid is not)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False
    state = next((line.split()[1] for line in status.splitlines() if line.startswith("State:")), "")
    return state != "Z" and SERVER_SCRIPT.name.encode() in cmdline


def reap_orphans(pid_dir: Path) -> int:
    """SIGKILL every synthetic server of this run still alive; return how many there were."""
    orphans = 0
    for entry in pid_dir.iterdir():
        pid = int(entry.name)
        if _is_running(pid):
            orphans += 1
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
    return orphans


def run_peer(
    peer: Peer,
    scenario: str,
    params: dict[str, Any],
    *,
    scratch: Path,
    pid_dir: Path,
    log: Path,
    timeout_s: float,
) -> dict[str, Any]:
    """One run: the peer's JSON result plus ``wall_seconds`` and ``orphans``, or ``{"error": ...}``.

    ``pid_dir`` is shared by the runs of one scenario: it is part of each server's command line,
    so it must not change between runs for a config fingerprint (the tool cache key) to match.
    """
    with tempfile.TemporaryDirectory(dir=scratch, prefix=f"{peer.key}-") as folder:
        run_dir = Path(folder)
        work_dir = run_dir / "work"
        home = run_dir / "home"
        for path in (work_dir, home):
            path.mkdir()
        full_params = {
            "server_command": SERVER_COMMAND,
            "pid_dir": str(pid_dir),
            "work_dir": str(work_dir),
            **params,
        }
        out = run_dir / "result.json"
        command = [
            str(peer.venv.python),
            str(PEERS_DIR / peer.script),
            "--variant",
            peer.variant,
            "--scenario",
            scenario,
            "--params",
            json.dumps(full_params),
            "--out",
            str(out),
        ]
        started = time.perf_counter()
        error: str | None = None
        with log.open("a") as log_file:
            log_file.write(f"\n=== {peer.key} {scenario} {json.dumps(params)}\n")
            log_file.flush()
            process = subprocess.Popen(
                command,
                cwd=PEERS_DIR,
                env=isolated_env(home),
                stdin=subprocess.DEVNULL,
                stdout=log_file,
                stderr=log_file,
                start_new_session=True,
            )
            try:
                returncode = process.wait(timeout=timeout_s)
                if returncode != 0:
                    error = f"exited with code {returncode} (see {log.name})"
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(process.pid, signal.SIGKILL)
                process.wait()
                error = f"did not finish within {timeout_s:.0f} s"
        wall = time.perf_counter() - started
        orphans = reap_orphans(pid_dir)
        if error is None and not out.is_file():
            error = "wrote no result"
        if error is not None:
            return {"error": error, "wall_seconds": wall, "orphans": orphans}
        result: dict[str, Any] = json.loads(out.read_text())
        result.update(wall_seconds=wall, orphans=orphans)
        return result


def time_command(command: list[str], *, env: dict[str, str], cwd: Path) -> float:
    """Wall time of one process from spawn to exit (output discarded); raises if it fails."""
    started = time.perf_counter()
    subprocess.run(
        command, env=env, cwd=cwd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    return time.perf_counter() - started
