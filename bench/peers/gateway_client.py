"""The one client of the gateway benchmark: the SDK's ``Client`` (``mode="legacy"``, the handshake a
host uses today), run from the project's venv against every gateway.

One run launches one gateway in front of N synthetic stdio backends (one of them possibly slow to
start) and measures, from the moment the gateway is launched:

- the first answered ``tools/list`` and how many backend tools it held;
- the first ``tools/list`` that held every backend tool (listing again on each
  ``notifications/tools/list_changed``, and every ``POLL_S`` in case none comes);
- the latency of sequential ``tools/call`` through the gateway, each followed by the same call
  straight to a backend of the same kind (what the gateway adds is their difference within the
  run, whatever else the machine is doing), bounded in count and in time;
- the resident memory of the gateway process (and of any helper process it started) apart from
  that of the backends it started.

Transports, as each gateway requires: ``stdio`` (the SDK launches the gateway), ``streamable-http``
and ``sse`` (the old HTTP+SSE transport) to a gateway launched here, on a free loopback port;
``direct`` connects one ``Client`` per backend, in parallel, with no gateway.

Invocation (by ``bench.harness.runner.run_peer``): ``python gateway_client.py --variant V
--scenario gateway --params JSON --out FILE``; the variant only names the gateway in the log, the
params say how to launch it (see ``bench/harness/gateway_peers.py``).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import signal
import statistics
import subprocess
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import anyio
from common import MESSAGE, descendants, free_port, percentile, rss_bytes, seed_mcp_hub_marketplace
from mcp import Client, StdioServerParameters
from mcp.client.sse import sse_client

POLL_S = 0.05
"""How often the tool list is asked again while a gateway says nothing (no ``list_changed``)."""
RETRY_S = 0.02
"""Pause between two attempts to reach an HTTP gateway that is not listening yet."""
FULL_LIST_BOUND_S = 60.0
"""How long a gateway gets to list every backend tool (the slowest peer needs about 25 s here)."""
STOP_GRACE_S = 5.0
BACKEND_TOOL = re.compile(r"tool_\d+$")
BACKEND_MARK = "synthetic_server"
"""In a backend's command line: how a process of the tree is told from the gateway's own."""


# -- the backends ---------------------------------------------------------------------------------------


def backend_argvs(params: dict[str, Any]) -> dict[str, list[str]]:
    """Each backend's command line, by server name; the last one is the slow one, if any."""
    count = params["servers"]
    argvs = {}
    for index in range(count):
        delay = params["slow_start_s"] if index == count - 1 else 0.0
        argv = [*params["server_command"], "--name", f"s{index}", "--tools", str(params["tools"])]
        argvs[f"s{index}"] = [*argv, "--init-delay", str(delay), "--pid-dir", params["pid_dir"]]
    return argvs


def write_config(params: dict[str, Any]) -> Path:
    """The ``mcpServers`` file every gateway reads (the shape all of them accept)."""
    entries = {name: {"command": argv[0], "args": argv[1:]} for name, argv in backend_argvs(params).items()}
    path = Path(params["work_dir"]) / "mcp.json"
    path.write_text(json.dumps({"mcpServers": entries}, indent=1))
    return path


# -- processes ------------------------------------------------------------------------------------------


def _is_backend(pid: int) -> bool:
    try:
        return BACKEND_MARK.encode() in Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False


def memory(gateway_pids: list[int]) -> dict[str, Any]:
    """RSS of the gateway's processes (its helpers included) and, apart, of the backends below them."""
    tree = set(gateway_pids)
    for pid in gateway_pids:
        tree.update(descendants(pid))
    backends = [pid for pid in tree if _is_backend(pid)]
    own = [pid for pid in tree if pid not in backends]
    return {
        "gateway_rss_mb": sum(rss_bytes(pid) / 2**20 for pid in own),
        "gateway_processes": len(own),
        "backends_rss_mb": sum(rss_bytes(pid) / 2**20 for pid in backends),
        "backend_processes": len(backends),
    }


@contextlib.contextmanager
def launched(command: list[str], env: dict[str, str], log_path: Path) -> Iterator[subprocess.Popen[bytes]]:
    """An HTTP gateway's process, stopped at the end (SIGTERM, then SIGKILL after a grace)."""
    with log_path.open("a") as log:
        process = subprocess.Popen(command, env=env, stdin=subprocess.DEVNULL, stdout=log, stderr=log)
    try:
        yield process
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(STOP_GRACE_S)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


# -- listing --------------------------------------------------------------------------------------------


class ToolListWatch:
    """Counts ``notifications/tools/list_changed`` and wakes the lister on each."""

    def __init__(self) -> None:
        self.changed = anyio.Event()
        self.notifications = 0

    async def handle(self, message: Any) -> None:
        if getattr(message, "method", None) == "notifications/tools/list_changed":
            self.notifications += 1
            self.changed.set()

    async def wait(self) -> None:
        with anyio.move_on_after(POLL_S):
            await self.changed.wait()
        self.changed = anyio.Event()


async def list_names(client: Client) -> list[str]:
    names: list[str] = []
    cursor: str | None = None
    while True:
        page = await client.list_tools(cursor=cursor, cache_mode="bypass")
        names += [tool.name for tool in page.tools]
        cursor = page.next_cursor
        if not cursor:
            return names


def backend_tools(names: list[str]) -> int:
    return sum(1 for name in names if BACKEND_TOOL.search(name))


async def until_full(client: Client, watch: ToolListWatch, expected: int, started: float) -> dict[str, Any]:
    """First answered list, then list again on every change (or poll) until every tool is there."""
    names = await list_names(client)
    first = {"first_list_s": time.perf_counter() - started, "first_list_tools": backend_tools(names)}
    lists = 1
    with anyio.move_on_after(FULL_LIST_BOUND_S):
        while backend_tools(names) < expected:
            await watch.wait()
            names = await list_names(client)
            lists += 1
    if backend_tools(names) < expected:
        listed = f"{backend_tools(names)} of {expected} backend tools listed"
        raise AssertionError(f"{listed} after {FULL_LIST_BOUND_S:g} s: {names}")
    full = time.perf_counter() - started
    return {**first, "full_list_s": full, "listed_tools": len(names), "lists": lists}


# -- calls ----------------------------------------------------------------------------------------------


async def call_latency(
    call: Callable[[str], Awaitable[str]],
    params: dict[str, Any],
    reference: Callable[[str], Awaitable[str]] | None = None,
) -> dict[str, Any]:
    """Sequential calls after a warm-up, as many as ``calls`` or as fit in ``call_budget_s``.

    With a ``reference`` (the same tool of a backend reached with no gateway) each call through
    the gateway is followed by one to the reference, so both see the same load on the machine and
    the latency the gateway adds is their difference within the run.
    """
    if not params["calls"]:
        return {}
    calls = [call] if reference is None else [call, reference]
    budget_end = time.perf_counter() + params["call_budget_s"]
    for _ in range(params["warmup_calls"]):
        if time.perf_counter() > budget_end:
            break
        for each in calls:
            await expect_echo(each)
    samples: list[list[float]] = [[] for _ in calls]
    while len(samples[0]) < params["calls"] and (len(samples[0]) < 2 or time.perf_counter() < budget_end):
        for each, taken in zip(calls, samples, strict=True):
            began = time.perf_counter()
            await expect_echo(each)
            taken.append((time.perf_counter() - began) * 1000)
    figures = {
        "calls": len(samples[0]),
        "p50_ms": percentile(samples[0], 0.5),
        "p99_ms": percentile(samples[0], 0.99),
        "mean_ms": statistics.fmean(samples[0]),
    }
    if reference is not None:
        figures["direct_p50_ms"] = percentile(samples[1], 0.5)
        figures["direct_p99_ms"] = percentile(samples[1], 0.99)
        figures["added_p50_ms"] = figures["p50_ms"] - figures["direct_p50_ms"]
    return figures


@contextlib.asynccontextmanager
async def direct_reference(params: dict[str, Any]) -> AsyncIterator[Callable[[str], Awaitable[str]]]:
    """``tool_0`` of one more backend like ``s0``, reached with no gateway in between."""
    argv = backend_argvs(params)["s0"]
    server = StdioServerParameters(command=argv[0], args=argv[1:], env=dict(os.environ))
    async with Client(server, mode="legacy", cache=None) as client:
        yield tool_caller(client, "tool_0")


async def gateway_latency(client: Client, gateway: dict[str, Any], params: dict[str, Any]) -> dict[str, Any]:
    """Calls through the gateway, paired with direct calls to a backend of the same kind."""
    if not params["calls"]:
        return {}
    async with direct_reference(params) as reference:
        return await call_latency(tool_caller(client, gateway["call_tool"]), params, reference)


async def expect_echo(call: Callable[[str], Awaitable[str]]) -> None:
    text = await call(MESSAGE)
    if text != MESSAGE:
        raise AssertionError(f"the call answered {text!r}, expected {MESSAGE!r}")


def tool_caller(client: Client, tool: str) -> Callable[[str], Awaitable[str]]:
    async def call(message: str) -> str:
        result = await client.call_tool(tool, {"message": message})
        if result.is_error:
            raise RuntimeError(f"{tool} failed: {result.content}")
        return str(getattr(result.content[0], "text", ""))

    return call


# -- one run per transport ------------------------------------------------------------------------------


def gateway_env(gateway: dict[str, Any]) -> dict[str, str]:
    return {**os.environ, **gateway.get("env", {})}


def fill(template: list[str], **values: Any) -> list[str]:
    return [part.format(**values) for part in template]


async def run_stdio(params: dict[str, Any], started_at: list[float]) -> dict[str, Any]:
    gateway = params["gateway"]
    command = fill(gateway["command"], config=write_config(params))
    server = StdioServerParameters(command=command[0], args=command[1:], env=gateway_env(gateway))
    watch = ToolListWatch()
    started = time.perf_counter()
    started_at.append(started)
    async with Client(server, mode="legacy", cache=None, message_handler=watch.handle) as client:
        figures = await until_full(client, watch, params["servers"] * params["tools"], started)
        figures.update(memory(descendants(os.getpid())))
        figures.update(await gateway_latency(client, gateway, params))
        figures["list_changed"] = watch.notifications
        closing = time.perf_counter()
    figures["close_s"] = time.perf_counter() - closing
    return figures


async def wait_for_port(port: int) -> None:
    """Until the gateway accepts connections: a refused TCP connect costs far less than a refused
    ``Client``, so the moment it listens is not blurred by the client's own set-up."""
    with anyio.fail_after(FULL_LIST_BOUND_S):
        while True:
            try:
                stream = await anyio.connect_tcp("127.0.0.1", port)
            except OSError:
                await anyio.sleep(RETRY_S / 4)
                continue
            await stream.aclose()
            return


@contextlib.asynccontextmanager
async def http_client(url: str, transport: str, watch: ToolListWatch) -> AsyncIterator[Client]:
    """A connected client, retried until the gateway completes the handshake."""
    deadline = time.perf_counter() + FULL_LIST_BOUND_S
    async with contextlib.AsyncExitStack() as lifetime:
        while True:
            target: Any = sse_client(url) if transport == "sse" else url
            client = Client(target, mode="legacy", cache=None, message_handler=watch.handle)
            try:
                await lifetime.enter_async_context(client)
                break
            except Exception:
                if time.perf_counter() > deadline:
                    raise
            await anyio.sleep(RETRY_S)
        yield client


async def run_http(params: dict[str, Any], started_at: list[float]) -> dict[str, Any]:
    """One endpoint for every backend, or (``endpoint_per_server``) one per backend."""
    gateway = params["gateway"]
    config = write_config(params)
    port = free_port()
    command = fill(gateway["command"], config=config, port=port)
    if gateway.get("seed_mcp_hub_marketplace"):
        data_home = os.environ.get("XDG_DATA_HOME", str(Path(os.environ["HOME"]) / ".local" / "share"))
        seed_mcp_hub_marketplace(Path(data_home))
    log_path = Path(params["work_dir"]) / "gateway.log"
    expected = params["servers"] * params["tools"]
    watch = ToolListWatch()
    started = time.perf_counter()
    started_at.append(started)
    with launched(command, gateway_env(gateway), log_path) as process:
        await wait_for_port(port)
        if not gateway.get("endpoint_per_server"):
            url = gateway["url"].format(port=port)
            async with http_client(url, gateway["transport"], watch) as client:
                figures = await until_full(client, watch, expected, started)
                figures.update(memory([process.pid]))
                figures.update(await gateway_latency(client, gateway, params))
                figures["list_changed"] = watch.notifications
            return figures
        names = list(backend_argvs(params))
        first_url = gateway["url"].format(port=port, server=names[0])
        async with http_client(first_url, gateway["transport"], watch) as client:
            first_names = await list_names(client)
            first = time.perf_counter() - started
            counts = await _list_every_endpoint(gateway, port, names)
            figures = {
                "first_list_s": first,
                "first_list_tools": backend_tools(first_names),
                "full_list_s": time.perf_counter() - started,
                "listed_tools": sum(counts),
                "endpoints": len(names),
            }
            if backend_tools(first_names) + sum(counts[1:]) < expected:
                raise AssertionError(f"{sum(counts)} tools over {len(names)} endpoints, expected {expected}")
            figures.update(memory([process.pid]))
            figures.update(await gateway_latency(client, gateway, params))
        return figures


async def _list_every_endpoint(gateway: dict[str, Any], port: int, names: list[str]) -> list[int]:
    """The backend tools behind each server's own endpoint, all listed at once."""
    counts = [0] * len(names)

    async def list_one(index: int, name: str) -> None:
        url = gateway["url"].format(port=port, server=name)
        async with http_client(url, gateway["transport"], ToolListWatch()) as client:
            counts[index] = backend_tools(await list_names(client))

    async with anyio.create_task_group() as group:
        for index, name in enumerate(names):
            group.start_soon(list_one, index, name)
    return counts


async def run_direct(params: dict[str, Any], started_at: list[float]) -> dict[str, Any]:
    """No gateway: one ``Client`` per backend, all connected at once; calls go to the first."""
    argvs = backend_argvs(params)
    listed: list[float] = []
    counts: list[int] = []
    clients: dict[str, Client] = {}
    ready = anyio.Event()
    done = anyio.Event()
    started = time.perf_counter()
    started_at.append(started)

    async def own(name: str, argv: list[str]) -> None:
        server = StdioServerParameters(command=argv[0], args=argv[1:], env=dict(os.environ))
        async with Client(server, mode="legacy", cache=None) as client:
            counts.append(backend_tools(await list_names(client)))
            listed.append(time.perf_counter() - started)
            clients[name] = client
            if len(clients) == len(argvs):
                ready.set()
            await done.wait()

    async with anyio.create_task_group() as group:
        for name, argv in argvs.items():
            group.start_soon(own, name, argv)
        with anyio.fail_after(FULL_LIST_BOUND_S):
            await ready.wait()
        figures: dict[str, Any] = {
            "first_list_s": min(listed),
            "first_list_tools": counts[0],
            "full_list_s": max(listed),
            "listed_tools": sum(counts),
        }
        figures.update(memory([]))
        backends = descendants(os.getpid())
        figures["backends_rss_mb"] = sum(rss_bytes(pid) / 2**20 for pid in backends if _is_backend(pid))
        figures["backend_processes"] = sum(1 for pid in backends if _is_backend(pid))
        figures.update(await call_latency(tool_caller(clients["s0"], "tool_0"), params))
        done.set()
    return figures


RUNNERS = {"stdio": run_stdio, "streamable-http": run_http, "sse": run_http, "direct": run_direct}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--variant", required=True, help="the gateway's key (for the log)")
    parser.add_argument("--scenario", required=True, choices=["gateway"])
    parser.add_argument("--params", required=True, help="JSON object")
    parser.add_argument("--out", required=True)
    options = parser.parse_args()
    params = json.loads(options.params)
    started_at: list[float] = []
    result = anyio.run(RUNNERS[params["gateway"]["transport"]], params, started_at)
    result["pid"] = os.getpid()
    with open(options.out, "w") as out:
        json.dump(result, out)


if __name__ == "__main__":
    main()
