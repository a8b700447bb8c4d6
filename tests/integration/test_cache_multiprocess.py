"""Several processes hammering one tool-cache file at once (the issue's concurrency proof)."""

from __future__ import annotations

import json
import logging
import random
import sqlite3
import subprocess
import sys
from pathlib import Path

from mcpfleet.client.definitions import ToolDefinition
from mcpfleet.fleet.cache import MCPToolCache

PROCESSES = 6
OPERATIONS_PER_PROCESS = 200
SERVERS = 4
FINGERPRINT = "f" * 64


def tools_for(listed_at: float) -> tuple[ToolDefinition, ...]:
    """The catalog a worker stores for one answer: a reader can tell a torn or mixed row."""
    count = 1 + int(listed_at) % 5
    return tuple(
        ToolDefinition(name=f"tool_{index}_{listed_at!r}", description=repr(listed_at))
        for index in range(count)
    )


def run_worker(cache_path: Path, seed: int) -> None:
    """One hammering process (this file run as a script).

    It reports "ready", waits for "go" so every process opens the file and writes at the
    same time, then mixes puts of random ``listed_at`` with gets. Every read is checked on
    the spot: its tools and era must be exactly those derived from its ``listed_at``, and
    it must never be older than an answer this worker already stored.
    """
    logging.basicConfig(stream=sys.stderr, level=logging.WARNING)
    rng = random.Random(seed)
    print("ready", flush=True)
    sys.stdin.readline()
    attempts: dict[str, list[float]] = {}
    stored_by_me: dict[str, float] = {}
    bad_reads: list[str] = []
    reads = 0
    with MCPToolCache(cache_path) as cache:
        for _ in range(OPERATIONS_PER_PROCESS):
            server = f"server-{rng.randrange(SERVERS)}"
            listed_at = rng.uniform(1e9, 2e9)
            attempts.setdefault(server, []).append(listed_at)
            era = f"era-{listed_at!r}"
            if cache.put(
                server, FINGERPRINT, tools_for(listed_at), protocol_version=era, listed_at=listed_at
            ):
                stored_by_me[server] = max(stored_by_me.get(server, 0.0), listed_at)
            for probe in (server, f"server-{rng.randrange(SERVERS)}"):
                cached = cache.get(probe, FINGERPRINT)
                if cached is None:
                    if probe in stored_by_me:
                        bad_reads.append(f"{probe}: miss after a successful write")
                    continue
                reads += 1
                expected_era = f"era-{cached.listed_at!r}"
                if cached.tools != tools_for(cached.listed_at) or cached.protocol_version != expected_era:
                    bad_reads.append(f"{probe}: row inconsistent with its listed_at {cached.listed_at!r}")
                if cached.listed_at < stored_by_me.get(probe, 0.0):
                    bad_reads.append(f"{probe}: went back in time to {cached.listed_at!r}")
    print(json.dumps({"attempts": attempts, "bad_reads": bad_reads, "reads": reads}), flush=True)


def test_concurrent_writers_from_many_processes_keep_the_newest_answer(tmp_path: Path) -> None:
    cache_path = tmp_path / "cache" / "tools.sqlite3"
    workers = [
        subprocess.Popen(
            [sys.executable, __file__, str(cache_path), str(seed)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for seed in range(PROCESSES)
    ]
    try:
        for worker in workers:
            assert worker.stdout is not None
            assert worker.stdout.readline().strip() == "ready"
        for worker in workers:
            assert worker.stdin is not None
            worker.stdin.write("go\n")
            worker.stdin.flush()
        outputs = [worker.communicate(timeout=60) for worker in workers]
    finally:
        for worker in workers:
            if worker.poll() is None:
                worker.kill()
                worker.wait()

    newest_attempt: dict[str, float] = {}
    total_reads = 0
    for worker, (stdout, stderr) in zip(workers, outputs, strict=True):
        assert worker.returncode == 0, stderr
        # Any cache warning (a lock timeout, a corrupt file, a bad row) is a failure here.
        assert stderr == ""
        report = json.loads(stdout)
        assert report["bad_reads"] == []
        total_reads += report["reads"]
        for server, attempts in report["attempts"].items():
            newest_attempt[server] = max(newest_attempt.get(server, 0.0), *attempts)
    assert total_reads > PROCESSES * OPERATIONS_PER_PROCESS
    assert len(newest_attempt) == SERVERS

    with MCPToolCache(cache_path) as cache:
        for server, listed_at in newest_attempt.items():
            cached = cache.get(server, FINGERPRINT)
            assert cached is not None, server
            assert cached.listed_at == listed_at
            assert cached.tools == tools_for(listed_at)
            assert cached.protocol_version == f"era-{listed_at!r}"

    checker = sqlite3.connect(cache_path)
    try:
        assert checker.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
        assert checker.execute("PRAGMA journal_mode").fetchone() == ("wal",)
        assert checker.execute("SELECT count(*) FROM server_tools").fetchone() == (SERVERS,)
    finally:
        checker.close()


if __name__ == "__main__":
    run_worker(Path(sys.argv[1]), int(sys.argv[2]))
