"""The team gateway as a cluster: calls/s through HAProxy with 1, 2 and 3 replicas, and failover.

    python -m bench.team_cluster            # ~5 minutes on 2 cores; prints the figures
    python -m bench.team_cluster --smoke    # a few seconds: fewer calls
    python -m bench.team_cluster --remote   # one remote backend every replica shares, instead
    python -m bench.team_cluster --write    # and put its part of section 15 into BENCHMARKS.md

Three real ``mcpfleet serve --http --team`` replicas on real PostgreSQL and a real redis-server
(``tests/integration/team/cluster.py``, the cluster the tests run), each with its own copy of
the fake stdio backend (``tests/servers/fake_server.py``, ``echo``) or, with ``--remote``, one
remote backend all of them call (``tests/servers/http_server.py``, the SDK's ``MCPServer`` over
streamable HTTP, its ``echo``), and one HAProxy with three
frontends: round-robin over the first replica, the first two, and all three. Against each, in
turn for ``ROUNDS`` rounds, ``CLIENTS`` concurrent 2026-07-28 SDK clients (one service key
each) call ``echo`` with an argument of their own; every answer must carry its own request's
argument (a wrong one is counted, and fails the run). Also the same load on one replica
directly, without HAProxy (what the balancer adds), and, with ``--remote``, straight at the
backend with no gateway (the machine's own limit under this load: the baseline). Figures:
calls/s (the median of the rounds), p50 and p99 latency as each client sees it (over every
round). Each call is recorded in PostgreSQL (``fsync`` on) before it answers, as a team
gateway's calls are.

Beside them, in the same rounds under the same load, one worker of IBM ContextForge
(``bench/harness/contextforge.py``: its own venv, SQLite, offline on loopback) in front of the
same backend (the remote one, or the fake stdio backend through ContextForge's own stdio
bridge), once in its default mode and once with stateful sessions. Its clients speak
2025-11-25 (it has no 2026-07-28) with the admin's JWT; its wrong answers and failed calls
are counted apart from the correct ones (they do not fail the run: they are its figures).

Failover: a 2025-11-25 session opened on replica 0, which is then SIGKILLed; the figure is the
time from the kill to the next answered call of that session through the balancer.

On 2 cores the clients, HAProxy and every replica share the machine: more replicas cannot give
more calls/s here, and the ratio says what the cluster costs rather than what it scales to. Not
part of ``make test``.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import statistics
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio

from bench.harness import contextforge, sections

REPO_ROOT = Path(__file__).resolve().parents[1]
HEADING = "## 15. Team gateway replicas behind HAProxy"
"""Its section of BENCHMARKS.md, which ``make bench`` keeps (``bench.run``)."""
CLIENTS = 32
ROUNDS = 3
"""The setups take turns, round after round, so a change of the machine's load moves them alike."""
CALLS_PER_CLIENT = 20
"""Per client and round."""
SMOKE_CALLS_PER_CLIENT = 3
WARMUP_PER_CLIENT = 3
PEER_CALLS_PER_CLIENT = 5
PEER_WARMUP_PER_CLIENT = 1
"""ContextForge answers a few calls a second: fewer per client keep the run within minutes."""


def _haproxy_config(ports: dict[int, list[int]], public_host: str) -> str:
    """Three frontends (1, 2, 3 replicas); each sends the team's ``public_url`` host, as a
    balancer under that name would (the replicas accept no other)."""
    frontends = []
    for port, replicas in ports.items():
        servers = "\n".join(
            f"    server r{index} 127.0.0.1:{replica} check inter 300ms fall 1 rise 1"
            for index, replica in enumerate(replicas)
        )
        frontends.append(
            f"frontend f{port}\n    bind 127.0.0.1:{port}\n    http-request set-header Host {public_host}\n"
            f"    default_backend b{port}\n\n"
            f"backend b{port}\n    balance roundrobin\n{servers}\n"
        )
    return (
        "global\n    maxconn 4096\n\ndefaults\n    mode http\n    timeout connect 2s\n"
        "    timeout client 120s\n    timeout server 120s\n    retries 3\n    option redispatch 1\n"
        "    retry-on conn-failure empty-response\n\n" + "\n".join(frontends)
    )


def _carries(result: Any, message: str) -> bool:
    """Whether a tool result is the echo of ``message`` (structured, or as its first text)."""
    if result.is_error:
        return False
    if (result.structured_content or {}).get("message") == message:
        return True
    first = result.content[0] if result.content else None
    return getattr(first, "text", None) == message


async def _load(url: str, keys: list[str], calls: int, warmup: int, tool: str, mode: str) -> dict[str, Any]:
    import httpx2
    from mcp.client import Client
    from mcp.client.streamable_http import streamable_http_client

    latencies: list[float] = []
    counts = {"correct": 0, "wrong": 0, "failed": 0}

    async def one_client(number: int, key: str) -> None:
        http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {key}"}, timeout=httpx2.Timeout(60.0))
        async with Client(streamable_http_client(url, http_client=http), mode=mode) as client:
            for call in range(-warmup, calls):
                message = f"client {number} call {call}"
                started = time.perf_counter()
                try:
                    result = await client.call_tool(tool, {"message": message})
                except Exception:  # an HTTP or JSON-RPC error: a failed call, counted
                    outcome = "failed"
                else:
                    outcome = "correct" if _carries(result, message) else "wrong"
                elapsed = time.perf_counter() - started
                if call >= 0:
                    counts[outcome] += 1
                    if outcome != "failed":
                        latencies.append(elapsed * 1000)

    started = time.perf_counter()
    async with anyio.create_task_group() as group:
        for number in range(CLIENTS):
            group.start_soon(one_client, number, keys[number % len(keys)])
    wall = time.perf_counter() - started
    return {"calls_per_s": counts["correct"] / wall, "latencies": latencies, **counts}


def _combined(runs: list[dict[str, Any]]) -> dict[str, Any]:
    ordered = sorted(latency for run in runs for latency in run["latencies"]) or [float("nan")]
    return {
        "calls_per_s": statistics.median(run["calls_per_s"] for run in runs),
        "p50_ms": statistics.median(ordered),
        "p99_ms": ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))],
        "wrong": sum(run["wrong"] for run in runs),
        "failed": sum(run["failed"] for run in runs),
    }


def _failover_s(cluster: Any, url: str) -> float:
    import httpx2
    from tests.integration.team.cluster import headers_for, messages_of, open_session, tool_call

    key = next(iter(cluster.keys.values()))
    session = open_session(cluster.replicas[0].url, key)
    with httpx2.Client(timeout=60) as http:
        killed = time.perf_counter()
        cluster.kill(0)
        answer = http.post(
            url, json=tool_call(1, "bench_echo", {"message": "after"}), headers=headers_for(key, session)
        )
        answered = time.perf_counter()
    found = [message for message in messages_of(answer) if message.get("id") == 1]
    if answer.status_code != 200 or not found or "result" not in found[0]:
        raise SystemExit(f"bench.team_cluster: the session's call after the kill failed: {answer.text[:300]}")
    return answered - killed


@dataclass
class Setup:
    url: str
    keys: list[str]
    tool: str = "bench_echo"
    mode: str = "2026-07-28"
    peer: bool = False
    """ContextForge: its wrong answers and failed calls are figures, not a failed run."""


def _flavour(remote: bool) -> str:
    return "### One remote backend every replica shares" if remote else "### A stdio backend per replica"


def render(
    remote: bool, rows: list[tuple[str, dict[str, Any]]], failover_s: float, run: dict[str, Any]
) -> str:
    """This run's part of section 15: its backend's subsection, under the section's head."""
    backend = (
        "one remote backend every replica and ContextForge share (`tests/servers/http_server.py`, the "
        "SDK's `MCPServer` over streamable HTTP, its `echo`)"
        if remote
        else "a copy of the fake stdio backend (`tests/servers/fake_server.py`, `echo`) per replica, and "
        "one behind ContextForge's own stdio bridge (`mcpgateway.translate --expose-streamable-http`)"
    )
    lines = [
        _flavour(remote),
        "",
        f"`{run['command']}` in {run['seconds']:.0f} s on {run['date']}, commit {run['commit']}. Machine: "
        f"{os.cpu_count()} CPUs shared with other jobs, load average {run['load_before']:.1f} before and "
        f"{run['load_after']:.1f} after. Backend: {backend}. {run['calls']} calls per client and round "
        f"after {WARMUP_PER_CLIENT} (ContextForge: {PEER_CALLS_PER_CLIENT} after {PEER_WARMUP_PER_CLIENT}), "
        f"{ROUNDS} rounds; calls/s over each round's whole load, its sessions' opening included.",
        "",
        "| setup | correct calls/s | p50 | p99 | wrong answers | failed calls |",
        "|---|---|---|---|---|---|",
    ]
    for label, row in rows:
        lines.append(
            f"| {label} | {row['calls_per_s']:.1f} | {row['p50_ms']:.1f} ms | {row['p99_ms']:.1f} ms "
            f"| {row['wrong']} | {row['failed']} |"
        )
    lines += ["", f"Failover in this run: {failover_s * 1000:.0f} ms."]
    return "\n".join(lines)


SECTION_HEAD = "\n\n".join(
    [
        HEADING,
        (
            "`make bench-cluster` (`python -m bench.team_cluster --remote --write`; without `--remote`, "
            "the stdio subsection). Three `mcpfleet serve --http --team` replicas on one PostgreSQL "
            "(`fsync` on: each call's audit record is durable before it answers) and one redis-server; "
            "HAProxy 2.6 round-robin, no stickiness, with a frontend over the first replica, the first "
            "two, and all three; and, in the same rounds under the same load, one worker of IBM "
            f"ContextForge {contextforge.VERSION} (PyPI `mcp-contextforge-gateway`, Python 3.12, SQLite, "
            "offline on "
            "loopback; `bench/harness/contextforge.py`) in front of the same backend, as a virtual "
            "server of one tool, in its default (stateless) mode and with `USE_STATEFUL_SESSIONS=true`. "
            f"{CLIENTS} concurrent SDK clients in one process (2026-07-28 to mcpfleet with 8 service "
            "accounts; 2025-11-25 to ContextForge, which has no 2026-07-28, with the admin's JWT), "
            "every call's argument its own and every answer checked for it: correct calls/s is the "
            "median of the rounds, counting only answers that carry their own request's argument; "
            "p50/p99 over every answered call; a wrong answer (another call's result, or an error "
            "result) and a failed call (an HTTP or JSON-RPC error) are counted apart. ContextForge's "
            "rate limiter, on by default (100 MCP requests a minute per client, 20 more in a burst), is "
            "turned off: with it every ContextForge figure would be that limit."
        ),
        (
            "Failover: SIGKILL of the replica that opened a 2025-11-25 session to the session's next "
            "answered call through HAProxy (HAProxy retries the refused connection on another replica, which "
            "loads the session's record from Redis and re-creates it)."
        ),
    ]
)

SECTION_NOTES = (
    "- On 2 cores the 32 SDK clients (one Python process), HAProxy, PostgreSQL, Redis, the replicas "
    "and ContextForge share two CPUs: the ratio says what the cluster costs, not what it scales to; "
    "the no-gateway row (with the remote backend) is the baseline, the no-HAProxy row what the "
    "balancer adds. Each mcpfleet call also waits for its audit record's "
    "durable write in PostgreSQL; ContextForge buffers its per-call metrics and writes them to SQLite "
    "in batches (every 60 s by default).\n"
    "- ContextForge in its default mode opens a new client session to the backend for every call "
    "(`initialize`, `tools/call`, close); with stateful sessions it keeps one per client session "
    "(section 13 says what else it does per call)."
)


def section(previous: str | None, remote: bool, part: str) -> str:
    """Section 15 with this run's subsection, the other backend's kept from ``previous``."""
    kept = {}
    old = sections.section_of(previous, HEADING) if previous else None
    if old is not None:
        for flavour in (_flavour(True), _flavour(False)):
            if flavour in old:
                rest = old.split(flavour, 1)[1]
                kept[flavour] = flavour + rest.split("\n### ", 1)[0].split("\n- ", 1)[0].rstrip()
    kept[_flavour(remote)] = part
    parts = [kept[flavour] for flavour in (_flavour(True), _flavour(False)) if flavour in kept]
    return "\n\n".join([SECTION_HEAD.rstrip(), *parts, SECTION_NOTES]) + "\n"


def _commit() -> str:
    found = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], cwd=REPO_ROOT, capture_output=True, text=True
    )
    return found.stdout.strip() or "unknown"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--smoke", action="store_true", help="a few calls per client only")
    parser.add_argument("--remote", action="store_true", help="one shared remote backend, not stdio ones")
    parser.add_argument("--write", action="store_true", help="put this run's figures into BENCHMARKS.md")
    parser.add_argument("--report", type=Path, default=REPO_ROOT / "BENCHMARKS.md")
    parser.add_argument("--without-contextforge", action="store_true", help="mcpfleet's rows only")
    arguments = parser.parse_args()
    calls = SMOKE_CALLS_PER_CLIENT if arguments.smoke else CALLS_PER_CLIENT
    if not arguments.without_contextforge:
        contextforge.require_installed()
    from tests.integration.team.cluster import TeamCluster, free_port
    from tests.integration.team.team_gateway import fake
    from tests.postgres import start_postgres
    from tests.servers.fixtures import HttpServer, start_http_server

    run_started, load_before = time.perf_counter(), os.getloadavg()[0]
    postgres = start_postgres(durable=True)
    folder = Path(tempfile.mkdtemp(prefix="mcpfleet-bench-cluster-"))
    haproxy: subprocess.Popen[bytes] | None = None
    cluster: TeamCluster | None = None
    remote: HttpServer | None = None
    try:
        with contextlib.ExitStack() as stack:
            users = tuple(f"bench{index}" for index in range(8))
            backend: dict[str, Any] = fake("bench", "echo")
            if arguments.remote:
                remote = start_http_server("--name", "bench")
                backend = {"url": remote.url}
            cluster = TeamCluster.start(
                folder, {"bench": backend}, [{"allow": ["*"]}], postgres.dsn(), users=users
            )
            replica_ports = [replica.port for replica in cluster.replicas]
            fronts = {free_port(): replica_ports[:count] for count in (1, 2, 3)}
            config = folder / "bench-haproxy.cfg"
            config.write_text(_haproxy_config(fronts, f"127.0.0.1:{cluster.port}"))
            binary = shutil.which("haproxy", path=f"{os.environ.get('PATH', '')}:/usr/sbin")
            if binary is None:
                raise SystemExit("bench.team_cluster: HAProxy is not installed (make haproxy)")
            haproxy = subprocess.Popen(
                [binary, "-f", str(config), "-db"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
            )
            time.sleep(1)
            keys = list(cluster.keys.values())
            setups: dict[str, Setup] = {}
            if remote is not None:
                # The same clients and load with no gateway at all: what this machine gives
                # before any replica, balancer or audit write costs anything.
                setups["no gateway: the clients straight at the backend"] = Setup(remote.url, keys, "echo")
            setups["1 replica, no HAProxy"] = Setup(cluster.replicas[0].url, keys)
            for port, replicas in fronts.items():
                label = f"{len(replicas)} replica{'s' if len(replicas) > 1 else ''} behind HAProxy"
                setups[label] = Setup(f"http://127.0.0.1:{port}/mcp", keys)
            if not arguments.without_contextforge:
                for stateful in (False, True):
                    where: dict[str, Any] = (
                        {"backend_url": remote.url}
                        if remote is not None
                        else {"stdio_backend": [backend["command"], *backend["args"]]}
                    )
                    peer = stack.enter_context(
                        contextforge.running_contextforge(
                            folder / f"contextforge-{'stateful' if stateful else 'default'}",
                            stateful=stateful,
                            **where,
                        )
                    )
                    label = "ContextForge, one worker" + (", stateful sessions" if stateful else "")
                    setups[label] = Setup(peer.url, [peer.token], peer.tool, "legacy", peer=True)
            backend_name = "one remote backend" if arguments.remote else "a stdio backend per replica"
            runs: dict[str, list[dict[str, Any]]] = {label: [] for label in setups}
            for round_number in range(ROUNDS):
                for label, setup in setups.items():
                    counts = (
                        (PEER_CALLS_PER_CLIENT, PEER_WARMUP_PER_CLIENT)
                        if setup.peer
                        else (calls, WARMUP_PER_CLIENT)
                    )
                    found = anyio.run(_load, setup.url, setup.keys, *counts, setup.tool, setup.mode)
                    runs[label].append(found)
                    print(
                        f"  round {round_number + 1} {label}: {found['calls_per_s']:.1f} correct/s, "
                        f"{found['wrong']} wrong, {found['failed']} failed",
                        flush=True,
                    )
            rows = [(label, _combined(found)) for label, found in runs.items()]
            failover = _failover_s(cluster, f"http://127.0.0.1:{list(fronts)[-1]}/mcp")
        load_after = os.getloadavg()[0]
        print(
            f"{CLIENTS} concurrent clients, {calls} calls each per round, {ROUNDS} rounds "
            f"(echo, {backend_name}); load average {load_before:.1f} before, {load_after:.1f} after"
        )
        print("| setup | correct calls/s | p50 ms | p99 ms | wrong answers | failed calls |")
        print("|---|---|---|---|---|---|")
        for label, row in rows:
            figures = f"{row['calls_per_s']:.1f} | {row['p50_ms']:.1f} | {row['p99_ms']:.1f}"
            print(f"| {label} | {figures} | {row['wrong']} | {row['failed']} |")
        failover_ms = f"{failover * 1000:.0f} ms"
        print(f"failover: SIGKILL of a 2025 session's replica to its next answered call: {failover_ms}")
        if any(row["wrong"] or row["failed"] for label, row in rows if not setups[label].peer):
            raise SystemExit(
                "bench.team_cluster: some mcpfleet answers did not carry their own request's argument"
            )
        if arguments.write:
            command = "python -m bench.team_cluster" + (" --remote" if arguments.remote else "") + " --write"
            run = {
                "command": command,
                "seconds": time.perf_counter() - run_started,
                "date": time.strftime("%Y-%m-%d"),
                "commit": _commit(),
                "load_before": load_before,
                "load_after": load_after,
                "calls": calls,
            }
            previous = arguments.report.read_text(encoding="utf-8") if arguments.report.exists() else None
            text = section(previous, arguments.remote, render(arguments.remote, rows, failover, run))
            sections.write_section(arguments.report, HEADING, text)
            print(f"wrote {arguments.report}")
    finally:
        if haproxy is not None:
            haproxy.kill()
            haproxy.wait()
        if cluster is not None:
            cluster.stop()
        if remote is not None:
            remote.stop()
        postgres.stop()
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
