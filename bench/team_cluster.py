"""The team gateway as a cluster: calls/s through HAProxy with 1, 2 and 3 replicas, and failover.

    python -m bench.team_cluster            # ~5 minutes on 2 cores; prints the figures
    python -m bench.team_cluster --smoke    # a few seconds: fewer calls
    python -m bench.team_cluster --remote   # one remote backend every replica shares, instead

Three real ``mcpfleet serve --http --team`` replicas on real PostgreSQL and a real redis-server
(``tests/integration/team/cluster.py``, the cluster the tests run), each with its own copy of
the fake stdio backend (``tests/servers/fake_server.py``, ``echo``) or, with ``--remote``, one
remote backend all of them call (``tests/servers/http_server.py``, the SDK's ``MCPServer`` over
streamable HTTP, its ``echo``), and one HAProxy with three
frontends: round-robin over the first replica, the first two, and all three. Against each, in
turn for ``ROUNDS`` rounds, ``CLIENTS`` concurrent 2026-07-28 SDK clients (one service key
each) call ``echo`` with an argument of their own; every answer must carry its own request's
argument (a wrong one is counted, and fails the run). Also the same load on one replica
directly, without HAProxy (what the balancer adds). Figures: calls/s (the median of the
rounds), p50 and p99 latency as each client sees it (over every round). Each call is recorded
in PostgreSQL (``fsync`` on) before it answers, as a team gateway's calls are.

Failover: a 2025-11-25 session opened on replica 0, which is then SIGKILLed; the figure is the
time from the kill to the next answered call of that session through the balancer.

On 2 cores the clients, HAProxy and every replica share the machine: more replicas cannot give
more calls/s here, and the ratio says what the cluster costs rather than what it scales to. Not
part of ``make test``.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio

HEADING = "## 15. Team gateway replicas behind HAProxy"
"""Its section of BENCHMARKS.md, which ``make bench`` keeps (``bench.run``)."""
CLIENTS = 32
ROUNDS = 3
"""The setups take turns, round after round, so a change of the machine's load moves them alike."""
CALLS_PER_CLIENT = 20
"""Per client and round."""
SMOKE_CALLS_PER_CLIENT = 3
WARMUP_PER_CLIENT = 3


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


async def _load(url: str, keys: list[str], calls: int) -> dict[str, Any]:
    import httpx2
    from mcp.client import Client
    from mcp.client.streamable_http import streamable_http_client

    latencies: list[float] = []
    wrong = 0

    async def one_client(number: int, key: str) -> None:
        nonlocal wrong
        http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {key}"}, timeout=httpx2.Timeout(60.0))
        async with Client(streamable_http_client(url, http_client=http), mode="2026-07-28") as client:
            for call in range(-WARMUP_PER_CLIENT, calls):
                message = f"client {number} call {call}"
                started = time.perf_counter()
                result = await client.call_tool("bench_echo", {"message": message})
                elapsed = time.perf_counter() - started
                if call >= 0:
                    latencies.append(elapsed * 1000)
                if result.is_error or (result.structured_content or {}).get("message") != message:
                    wrong += 1

    started = time.perf_counter()
    async with anyio.create_task_group() as group:
        for number in range(CLIENTS):
            group.start_soon(one_client, number, keys[number % len(keys)])
    wall = time.perf_counter() - started
    return {"calls_per_s": len(latencies) / wall, "latencies": latencies, "wrong": wrong}


def _combined(runs: list[dict[str, Any]]) -> dict[str, Any]:
    ordered = sorted(latency for run in runs for latency in run["latencies"])
    return {
        "calls_per_s": statistics.median(run["calls_per_s"] for run in runs),
        "p50_ms": statistics.median(ordered),
        "p99_ms": ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))],
        "wrong": sum(run["wrong"] for run in runs),
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--smoke", action="store_true", help="a few calls per client only")
    parser.add_argument("--remote", action="store_true", help="one shared remote backend, not stdio ones")
    arguments = parser.parse_args()
    calls = SMOKE_CALLS_PER_CLIENT if arguments.smoke else CALLS_PER_CLIENT
    from tests.integration.team.cluster import TeamCluster, free_port
    from tests.integration.team.team_gateway import fake
    from tests.postgres import start_postgres
    from tests.servers.fixtures import HttpServer, start_http_server

    postgres = start_postgres(durable=True)
    folder = Path(tempfile.mkdtemp(prefix="mcpfleet-bench-cluster-"))
    haproxy: subprocess.Popen[bytes] | None = None
    cluster: TeamCluster | None = None
    remote: HttpServer | None = None
    try:
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
        setups = {"1 replica, no HAProxy": cluster.replicas[0].url}
        for port, replicas in fronts.items():
            label = f"{len(replicas)} replica{'s' if len(replicas) > 1 else ''} behind HAProxy"
            setups[label] = f"http://127.0.0.1:{port}/mcp"
        load_before = os.getloadavg()[0]
        backend_name = "one remote backend" if arguments.remote else "a stdio backend per replica"
        runs: dict[str, list[dict[str, Any]]] = {label: [] for label in setups}
        for _ in range(ROUNDS):
            for label, url in setups.items():
                runs[label].append(anyio.run(_load, url, keys, calls))
        rows = [(label, _combined(found)) for label, found in runs.items()]
        failover = _failover_s(cluster, f"http://127.0.0.1:{list(fronts)[-1]}/mcp")
        print(
            f"{CLIENTS} concurrent 2026-07-28 clients, {calls} calls each per round, {ROUNDS} rounds "
            f"(echo, {backend_name}); load average {load_before:.1f} before, "
            f"{os.getloadavg()[0]:.1f} after"
        )
        print("| setup | calls/s | p50 ms | p99 ms | wrong answers |")
        print("|---|---|---|---|---|")
        for label, row in rows:
            figures = f"{row['calls_per_s']:.0f} | {row['p50_ms']:.1f} | {row['p99_ms']:.1f}"
            print(f"| {label} | {figures} | {row['wrong']} |")
        failover_ms = f"{failover * 1000:.0f} ms"
        print(f"failover: SIGKILL of a 2025 session's replica to its next answered call: {failover_ms}")
        if any(row["wrong"] for _, row in rows):
            raise SystemExit("bench.team_cluster: some answers did not carry their own request's argument")
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
