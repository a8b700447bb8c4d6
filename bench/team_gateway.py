"""The team gateway benchmark: what sign-in, policy and audit add to one ``tools/call``, end to end.

    python -m bench.team_gateway            # ~1 minute on 2 cores; prints the figures
    python -m bench.team_gateway --smoke    # a few seconds: fewer calls
    python -m bench.team_gateway --write    # and put its section into BENCHMARKS.md

Four real ``mcpfleet serve --http 127.0.0.1:0`` processes serve the same fake stdio backend
(``tests/servers/fake_server.py``, its ``echo`` tool), each to one SDK client (handshake era,
one session) over loopback HTTP:

- **plain**: ``--insecure-no-auth``, the local gateway with nothing in front of it (the baseline);
- **team, no audit**: ``--team`` with a service-account key checked on every request and one
  policy allowing the call (``audit: {store: false}``): the identity check and the policy;
- **team, SQLite**: the same, every call recorded in the SQLite state before it answers
  (``audit.sync: each``, ``synchronous=FULL``: each record synced to disk);
- **team, PostgreSQL**: the same, recorded in PostgreSQL on loopback (a server of the bench's own,
  ``tests/postgres.py``, ``fsync`` on, ``synchronous_commit`` on);
- **…, background**: the same two with ``audit.sync: background`` (SQLite ``synchronous=NORMAL``,
  PostgreSQL ``synchronous_commit`` off): each record in the store before the call answers, on
  disk within a second.

The calls go round the six gateways in turn (one call each per round), so a change of the
machine's load moves every figure alike; each gateway has ``WARMUP`` unmeasured calls first. The
figure is the median (p50) latency of a call as the client sees it, and the difference to the
plain gateway's. The key is a service key, not a JWT: ``bench.team_identity`` measures a JWT's
check on its own (the part of it that differs). Not part of ``make test``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import AsyncExitStack, ExitStack, asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

import anyio

HEADING = "## 16. The team gateway: sign-in, policy and audit per call"
"""Its section of BENCHMARKS.md, which ``make bench`` keeps (``bench.run``)."""
REPO_ROOT = Path(__file__).resolve().parents[1]
CALLS = 1000
WARMUP = 100
SMOKE_CALLS = 100
ECHOED = {"message": "hello from the bench"}
GOALS_MS = {
    "team, SQLite": 0.5,
    "team, PostgreSQL": 2.0,
    "team, SQLite, background": 0.5,
    "team, PostgreSQL, background": 2.0,
}
"""The issue's goals for the added latency of token check + policy + audit."""


def _fake_server() -> dict[str, Any]:
    from tests.servers.fixtures import FAKE_SERVER

    return {"command": sys.executable, "args": [str(FAKE_SERVER), "--name", "bench", "--tool", "echo"]}


def _team_file(folder: Path, environ: dict[str, str], **more: Any) -> Path:
    from tests.integration.team.team_gateway import add_key, team_document, write_team_file

    folder.mkdir(parents=True)
    policies = [{"users": ["bench"], "allow": ["bench/*"]}]
    path = write_team_file(folder / "team.json", team_document({"bench": _fake_server()}, policies, **more))
    (folder / "key").write_text(add_key(path, "bench", environ))
    return path


@contextmanager
def _gateways(folder: Path, postgres_dsn: str) -> Iterator[dict[str, tuple[str, dict[str, str]]]]:
    """Each gateway's URL and the headers its client sends, running for the block."""
    from tests.integration.gateway.http_gateway import running_http_gateway
    from tests.integration.team.team_gateway import running_team_gateway

    environ = {**os.environ, "BENCH_POSTGRES_DSN": postgres_dsn}
    postgres = {"postgres": "${BENCH_POSTGRES_DSN}"}
    background = {"sync": "background"}
    teams = {
        "team, no audit": _team_file(folder / "no-audit", environ, audit={"store": False}),
        "team, SQLite": _team_file(folder / "sqlite", environ),
        "team, PostgreSQL": _team_file(folder / "postgres", environ, state=postgres),
        "team, SQLite, background": _team_file(folder / "sqlite-bg", environ, audit=background),
        "team, PostgreSQL, background": _team_file(
            folder / "postgres-bg", environ, state=postgres, audit=background
        ),
    }
    plain_home = folder / "plain"
    plain_home.mkdir()
    with ExitStack() as stack:
        plain = stack.enter_context(
            running_http_gateway(plain_home, {"bench": _fake_server()}, "--insecure-no-auth", "--no-cache")
        )
        found: dict[str, tuple[str, dict[str, str]]] = {"plain": (plain.url, {})}
        for name, team_file in teams.items():
            gateway = stack.enter_context(running_team_gateway(team_file, "--no-cache", environ=environ))
            key = (team_file.parent / "key").read_text()
            found[name] = (gateway.url, {"Authorization": f"Bearer {key}"})
        yield found


@asynccontextmanager
async def _clients(gateways: dict[str, tuple[str, dict[str, str]]]) -> AsyncIterator[dict[str, Any]]:
    import httpx2
    from mcp.client import Client
    from mcp.client.streamable_http import streamable_http_client

    async with AsyncExitStack() as stack:
        clients: dict[str, Any] = {}
        for name, (url, headers) in gateways.items():
            http = httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30.0))
            client = Client(streamable_http_client(url, http_client=http), mode="legacy")
            clients[name] = await stack.enter_async_context(client)
        yield clients


async def _listed(client: Any) -> None:
    """Until the backend has joined (its tools are not cached: ``--no-cache``)."""
    from tests.integration.gateway.gateway_harness import wait_until

    async def echo_listed() -> bool:
        return "bench_echo" in {tool.name for tool in (await client.list_tools()).tools}

    await wait_until(echo_listed, timeout_s=60)


async def _measure(gateways: dict[str, tuple[str, dict[str, str]]], calls: int) -> dict[str, list[float]]:
    async with _clients(gateways) as clients:
        for client in clients.values():
            await _listed(client)
            for _ in range(WARMUP):
                await client.call_tool("bench_echo", ECHOED)
        latencies: dict[str, list[float]] = {name: [] for name in clients}
        for _ in range(calls):
            for name, client in clients.items():
                started = time.perf_counter()
                result = await client.call_tool("bench_echo", ECHOED)
                latencies[name].append((time.perf_counter() - started) * 1000)
                if result.is_error:
                    raise RuntimeError(f"{name}: the call failed: {result.content}")
        return latencies


def _report(latencies: dict[str, list[float]]) -> list[str]:
    baseline = statistics.median(latencies["plain"])
    lines = [f"{'gateway':<30} {'p50 ms':>8} {'p90 ms':>8} {'added p50 ms':>13}  goal"]
    for name, values in latencies.items():
        p50 = statistics.median(values)
        p90 = statistics.quantiles(values, n=10)[-1]
        added = "" if name == "plain" else f"{p50 - baseline:+.3f}"
        goal = f"<= {GOALS_MS[name]} ms" if name in GOALS_MS else ""
        lines.append(f"{name:<30} {p50:>8.3f} {p90:>8.3f} {added:>13}  {goal}")
    lines.append(f"({len(latencies['plain'])} calls per gateway, interleaved; load {os.getloadavg()[0]:.1f})")
    return lines


def _added(latencies: dict[str, list[float]], name: str, base: str) -> str:
    """How much more ``name``'s p50 is than ``base``'s, in ms."""
    return f"{statistics.median(latencies[name]) - statistics.median(latencies[base]):+.3f} ms"


def _section(latencies: dict[str, list[float]], load_before: float, commit: str) -> str:
    """The BENCHMARKS.md section of one run."""
    baseline = statistics.median(latencies["plain"])
    lines = [
        HEADING,
        "",
        f"`python -m bench.team_gateway --write`. Machine: {os.cpu_count()} CPUs, load average "
        f"{load_before:.1f} before and {os.getloadavg()[0]:.1f} after; commit {commit}. Six real "
        "`mcpfleet serve --http` processes over the same fake stdio backend (`echo`), one SDK client "
        "each (handshake era, its standalone stream open, so calls take the HTTP fast path): the "
        "plain gateway (`--insecure-no-auth`) and five team gateways with a service key and one "
        "policy, without audit, with the SQLite or the PostgreSQL state (a server of the bench's own, "
        "`fsync` on), each with `audit.sync` `each` (a disk flush per record) and `background`. "
        f"{len(latencies['plain'])} calls each, interleaved round by round. One run.",
        "",
        "| gateway | call p50 | call p90 | added p50 | goal (added) |",
        "|---|---|---|---|---|",
    ]
    for name, values in latencies.items():
        p50 = statistics.median(values)
        p90 = statistics.quantiles(values, n=10)[-1]
        added = "" if name == "plain" else f"{p50 - baseline:+.3f} ms"
        goal = f"≤ {GOALS_MS[name]} ms" if name in GOALS_MS else ""
        lines.append(f"| {name} | {p50:.3f} ms | {p90:.3f} ms | {added} | {goal} |")
    lines += [
        "",
        "- The service key's check costs microseconds (`bench.team_identity`): the team gateway's "
        "cost over the plain one is the gateway's own request path, which the team's guard needs (the "
        "plain gateway's call goes straight to the backend's pipe), and the audit record's write.",
        "- `each` waits for a disk flush per record: "
        f"{_added(latencies, 'team, SQLite', 'team, SQLite, background')} (SQLite) and "
        f"{_added(latencies, 'team, PostgreSQL', 'team, PostgreSQL, background')} (PostgreSQL) "
        "over `background` in this run (`bench.team_state` measures the disk's own fsync); "
        "`background` still writes each record before the answer, through a worker thread "
        "(SQLite) or a pooled connection (PostgreSQL).",
        "- On a loaded machine every figure grows with the CPU a call needs: compare rows of one run.",
        "",
    ]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--smoke", action="store_true", help="fewer calls: a few seconds")
    parser.add_argument("--json", action="store_true", help="print the latencies' medians as JSON")
    parser.add_argument("--write", action="store_true", help="put the section into BENCHMARKS.md")
    arguments = parser.parse_args()
    from tests.postgres import start_postgres

    load_before = os.getloadavg()[0]
    server = start_postgres(durable=True)
    try:
        with (
            tempfile.TemporaryDirectory(prefix="mcpfleet-bench-team-gateway-") as folder,
            _gateways(Path(folder), server.dsn()) as gateways,
        ):
            calls = SMOKE_CALLS if arguments.smoke else CALLS
            latencies = anyio.run(_measure, gateways, calls)
        if arguments.json:
            print(json.dumps({name: statistics.median(values) for name, values in latencies.items()}))
        else:
            for line in _report(latencies):
                print(line)
        if arguments.write:
            import subprocess

            from bench.harness import sections

            commit = subprocess.run(
                ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=REPO_ROOT
            ).stdout.strip()
            sections.write_section(
                REPO_ROOT / "BENCHMARKS.md", HEADING, _section(latencies, load_before, commit)
            )
    finally:
        server.stop()


if __name__ == "__main__":
    main()
