"""What every peer's scenario script shares. It runs inside each peer's own virtualenv, so it
imports the standard library only.

A peer script defines one ``Fleet`` class per way of using its library (its *variants*) and
hands them to ``main``. The scenario drivers below do all the timing, so every peer is timed
by the same code; a fleet only starts servers, calls a tool and closes.

Invocation (by the harness): ``python peer_x.py --variant V --scenario S --params JSON --out FILE``.
The result is written as JSON to FILE (libraries and servers may print on stdout and stderr).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

PROCESS_STARTED = time.perf_counter()
"""Taken when the script imports this module, before it imports its library."""

MESSAGE = "ping from the benchmark"


class Fleet(Protocol):
    """One way of using a peer library to drive many servers."""

    async def start(self, servers: list[list[str]]) -> int:
        """Connect every server (one argv each) until its tools are usable; return the tool count."""

    async def call(self, server: int, tool: str, message: str) -> str:
        """Call ``tool`` of server number ``server`` and return the text it answered."""

    async def close(self) -> None:
        """Shut every server down."""


FleetFactory = Callable[[dict[str, Any]], Fleet]


def server_argvs(params: dict[str, Any]) -> list[list[str]]:
    """The command line of each synthetic server of this run."""
    argvs = []
    for index in range(params["servers"]):
        argv = [*params["server_command"], "--name", f"s{index}", "--tools", str(params["tools"])]
        argv += ["--init-delay", str(params.get("init_delay", 0.0)), "--pid-dir", params["pid_dir"]]
        if params.get("held_while"):
            argv += ["--held-while", params["held_while"]]
        if params.get("stubborn"):
            argv += ["--ignore-sigterm", "--ignore-stdin-eof"]
        argvs.append(argv)
    return argvs


PAGE_BYTES = os.sysconf("SC_PAGE_SIZE")


def rss_bytes(pid: int) -> int:
    """Resident memory of a process (Linux); 0 once it is gone."""
    try:
        with open(f"/proc/{pid}/statm") as statm:
            resident = int(statm.read().split()[1])
    except (OSError, IndexError, ValueError):
        return 0
    return resident * PAGE_BYTES


def rss_mb() -> float:
    """Resident memory of this process (Linux)."""
    return rss_bytes(os.getpid()) / 2**20


def descendants(root: int) -> list[int]:
    """Every live process below ``root``, from /proc's parent links (no helper library in a
    peer's venv)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as stat:
                parent = int(stat.read().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue  # gone meanwhile
        children.setdefault(parent, []).append(int(entry))
    found, pending = [], list(children.get(root, []))
    while pending:
        pid = pending.pop()
        found.append(pid)
        pending.extend(children.get(pid, []))
    return found


def free_port() -> int:
    """A loopback port free now (for a gateway that listens on HTTP)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def seed_mcp_hub_marketplace(data_home: Path) -> None:
    """mcp-hub fetches a marketplace catalog from the internet before it starts any server unless its
    cached copy (under ``data_home``, the XDG data folder it will see) is less than an hour old; a
    fresh (empty-entry) copy keeps the run offline, as a user who ran mcp-hub in the last hour has."""
    folder = data_home / "mcp-hub" / "cache"
    folder.mkdir(parents=True, exist_ok=True)
    entry = {"id": "none", "name": "none", "description": "", "tags": [], "url": ""}
    catalog = {"version": "1", "generatedAt": 0, "totalServers": 1, "servers": [entry]}
    cache = {"registry": catalog, "lastFetchedAt": int(time.time() * 1000), "serverDocumentation": {}}
    (folder / "registry.json").write_text(json.dumps(cache))


def percentile(samples: list[float], fraction: float) -> float:
    ordered = sorted(samples)
    index = min(len(ordered) - 1, max(0, round(fraction * (len(ordered) - 1))))
    return ordered[index]


async def expect_echo(fleet: Fleet, server: int, tool: str, message: str) -> None:
    text = await fleet.call(server, tool, message)
    if text != message:
        raise AssertionError(f"server s{server} {tool} answered {text!r}, expected {message!r}")


# -- scenarios ------------------------------------------------------------------------------------------


async def run_start(fleet: Fleet, params: dict[str, Any]) -> dict[str, Any]:
    """Time from the first call into the library until every tool is usable (cold or warm)."""
    argvs = server_argvs(params)
    rss_before = rss_mb()
    started = time.perf_counter()
    tools = await fleet.start(argvs)
    ready = time.perf_counter() - started
    rss_ready = rss_mb()
    up_at_ready = servers_up(params["pid_dir"])
    expected = params["servers"] * params["tools"]
    if tools != expected:
        raise AssertionError(f"{tools} tools usable, expected {expected}")
    closing = time.perf_counter()
    await fleet.close()
    return {
        "seconds": ready,
        "tools": tools,
        "rss_before_mb": rss_before,
        "rss_mb": rss_ready,
        "servers_up_at_ready": up_at_ready,
        "close_seconds": time.perf_counter() - closing,
    }


async def run_latency(fleet: Fleet, params: dict[str, Any]) -> dict[str, Any]:
    """Sequential calls on one connection: each call's round trip."""
    await fleet.start(server_argvs(params))
    try:
        for _ in range(params["warmup_calls"]):
            await expect_echo(fleet, 0, "tool_0", MESSAGE)
        samples = []
        for _ in range(params["calls"]):
            began = time.perf_counter()
            await expect_echo(fleet, 0, "tool_0", MESSAGE)
            samples.append((time.perf_counter() - began) * 1000)
    finally:
        await fleet.close()
    return {
        "p50_ms": percentile(samples, 0.5),
        "p99_ms": percentile(samples, 0.99),
        "mean_ms": statistics.fmean(samples),
        "samples_ms": [round(sample, 4) for sample in samples],
    }


async def run_throughput(fleet: Fleet, params: dict[str, Any]) -> dict[str, Any]:
    """Bursts of concurrent calls spread over every server: calls per second of the median burst."""
    servers = params["servers"]
    await fleet.start(server_argvs(params))
    try:
        await asyncio.gather(*(expect_echo(fleet, index, "tool_0", MESSAGE) for index in range(servers)))
        bursts = []
        for _ in range(params["bursts"]):
            began = time.perf_counter()
            await asyncio.gather(
                *(
                    expect_echo(fleet, call % servers, f"tool_{call % params['tools']}", f"{MESSAGE} {call}")
                    for call in range(params["concurrent_calls"])
                )
            )
            bursts.append(time.perf_counter() - began)
    finally:
        await fleet.close()
    burst = statistics.median(bursts)
    return {"burst_seconds": bursts, "calls_per_second": params["concurrent_calls"] / burst}


async def run_callers(fleet: Fleet, params: dict[str, Any]) -> dict[str, Any]:
    """``callers`` tasks at once, each making ``calls_per_caller`` sequential calls (caller ``i`` to
    server ``i mod servers``): calls per second in all, and each call's round trip."""
    servers, callers = params["servers"], params["callers"]
    await fleet.start(server_argvs(params))
    samples: list[float] = []

    async def caller(index: int, calls: int, timed: bool) -> None:
        for call in range(calls):
            began = time.perf_counter()
            await expect_echo(
                fleet, index % servers, f"tool_{call % params['tools']}", f"{MESSAGE} {index} {call}"
            )
            if timed:
                samples.append((time.perf_counter() - began) * 1000)

    try:
        warmup = params["warmup_calls"]
        await asyncio.gather(*(caller(index, warmup, False) for index in range(callers)))
        began = time.perf_counter()
        await asyncio.gather(*(caller(index, params["calls_per_caller"], True) for index in range(callers)))
        elapsed = time.perf_counter() - began
    finally:
        await fleet.close()
    return {
        "calls_per_second": len(samples) / elapsed,
        "p50_ms": percentile(samples, 0.5),
        "p99_ms": percentile(samples, 0.99),
    }


def _alive_server(pid: str) -> bool:
    """Whether ``pid`` is a live synthetic server (a zombie, dead but not yet reaped, is not)."""
    try:
        with open(f"/proc/{pid}/status") as status:
            state = next((line.split()[1] for line in status if line.startswith("State:")), "Z")
        with open(f"/proc/{pid}/cmdline", "rb") as cmdline:
            ours = b"synthetic_server" in cmdline.read()
    except OSError:
        return False
    return ours and state != "Z"


def running_servers(pid_dir: str) -> int:
    """How many synthetic servers of this run are alive."""
    return sum(_alive_server(name) for name in os.listdir(pid_dir))


def servers_up(pid_dir: str) -> int:
    """How many live synthetic servers have passed their init delay (each marks its pid file then);
    the scenario's earlier runs, gone by now, do not count."""
    up = 0
    for name in os.listdir(pid_dir):
        try:
            with open(os.path.join(pid_dir, name)) as marker:
                marked = marker.read() == "up"
        except OSError:
            continue
        up += marked and _alive_server(name)
    return up


async def run_shutdown(fleet: Fleet, params: dict[str, Any]) -> dict[str, Any]:
    """Time to close servers that ignore stdin EOF and SIGTERM (only SIGKILL ends them), and how
    many still run when the close returns (a library may leave them to be killed at exit)."""
    tools = await fleet.start(server_argvs(params))
    began = time.perf_counter()
    await fleet.close()
    closed = time.perf_counter() - began
    return {"seconds": closed, "tools": tools, "running_after_close": running_servers(params["pid_dir"])}


SCENARIOS = {
    "start": run_start,
    "latency": run_latency,
    "throughput": run_throughput,
    "callers": run_callers,
    "shutdown": run_shutdown,
}


def main(variants: dict[str, FleetFactory], *, library_imported: float) -> None:
    parser = argparse.ArgumentParser(description="Run one benchmark scenario with one peer variant")
    parser.add_argument("--variant", required=True, choices=sorted(variants))
    parser.add_argument("--scenario", required=True, choices=sorted(SCENARIOS))
    parser.add_argument("--params", required=True, help="JSON object")
    parser.add_argument("--out", required=True)
    options = parser.parse_args()
    params = json.loads(options.params)
    fleet = variants[options.variant](params)
    result = asyncio.run(SCENARIOS[options.scenario](fleet, params))
    result["import_seconds"] = library_imported - PROCESS_STARTED
    result["pid"] = os.getpid()
    with open(options.out, "w") as out:
        json.dump(result, out)
