"""The daemon benchmark: host sessions sharing one fleet through the per-user daemon, in one run.

    python -m bench.daemon --write      # the "Daemon" section of BENCHMARKS.md (~2 min on 2 cores)
    python -m bench.daemon --smoke      # ~30 s: fewer runs, prints the figures only

Eight stdio servers (``bench/servers/synthetic_server.py``, 3 echo tools each) are configured at
user level in a private home; five host sessions use them in three set-ups:

- **direct**: each host starts its own copy of every server (what hosts do today): 40 processes;
- **in-process gateways**: each host launches ``mcpfleet serve --no-daemon``: 5 gateways, 40 servers;
- **mcp-hub** (npm, when Node is there): one hub process with the 8 servers, which the 5 hosts reach
  by URL (SSE at ``/mcp``); the hosts here are SDK clients in this process, not counted;
- **daemon**: each host launches ``mcpfleet serve`` (the shim): one daemon, 8 servers, 5 shims.

For each set-up: server processes and the resident memory of every process a host session costs
(hosts themselves excluded: they are the same in all three), once every session has listed its
tools and called one tool of each server. Then, with the daemon warm, the time from launching
``mcpfleet serve`` to its first answered ``tools/list`` holding every tool (against ``serve
--no-daemon`` with a warm tool cache), and the whole ``mcpfleet tools --json`` process with and
without a running daemon; and, with mcp-hub warm, the time from opening a new connection to it to
the first ``tools/list`` holding every tool (no process is launched for that one).

The host here is this process speaking JSON-RPC lines on each child's stdio (no SDK import, so
what is timed is the child, not the client); mcp-hub has no stdio side, so its hosts are the SDK's
SSE client, imported before any clock starts.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import selectors
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import AsyncExitStack, contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio

from bench.harness import sections
from bench.harness.gateway_peers import MCP_HUB_CLI, MCP_HUB_VERSION, ensure_mcp_hub
from bench.harness.peers import REPO_ROOT
from bench.harness.runner import isolated_env
from bench.peers.common import descendants, free_port, rss_bytes, seed_mcp_hub_marketplace

if TYPE_CHECKING:
    from mcp import Client

HEADING = "## 11. The daemon: one fleet for every host session"
SERVERS = 8
TOOLS_PER_SERVER = 3
SESSIONS = 5
ANSWER_TIMEOUT_S = 60.0
SYNTHETIC_SERVER = REPO_ROOT / "bench" / "servers" / "synthetic_server.py"
EVERYTHING_SERVER = (
    REPO_ROOT / ".tools/everything/node_modules/@modelcontextprotocol/server-everything/dist/index.js"
)
BIN = Path(sys.executable).parent
MCPFLEET = str(BIN / "mcpfleet")
HUB_TOOL = re.compile(r"s\d+__")
"""How mcp-hub's ``/mcp`` endpoint names a server's tool: ``<server>__<tool>``."""
HUB_STOP_GRACE_S = 10.0


@dataclass(frozen=True)
class ServerKind:
    """What the eight servers are: a stdlib Python echo server (the lightest there is), or the MCP
    project's reference server on Node (what the many ``npx`` servers weigh)."""

    key: str
    label: str
    marker: str
    """In a server's command line: how its processes are told from the rest."""
    call: tuple[str, dict[str, Any]]
    """A tool every server has, and its arguments."""

    def argv(self, index: int) -> list[str]:
        if self.key == "node":
            return [shutil.which("node") or "node", self.marker, "stdio"]
        return [sys.executable, self.marker, "--name", f"s{index}", "--tools", str(TOOLS_PER_SERVER)]


PYTHON_SERVERS = ServerKind(
    "python", "stdlib Python echo servers", str(SYNTHETIC_SERVER), ("tool_0", {"message": "x"})
)
NODE_SERVERS = ServerKind(
    "node", "the reference server-everything (Node)", str(EVERYTHING_SERVER), ("echo", {"message": "x"})
)


@dataclass
class Home:
    """A private user (home, config, cache, runtime folder) whose user config holds the servers."""

    root: Path
    runtime: Path
    kind: ServerKind
    projects: list[Path] = field(default_factory=list)
    tools_per_server: int = 0
    """Counted on the first direct connection."""

    @property
    def tool_total(self) -> int:
        return SERVERS * self.tools_per_server

    @property
    def env(self) -> dict[str, str]:
        return {
            **isolated_env(self.root),
            "MCPFLEET_RUNTIME_DIR": str(self.runtime),
            "PYTHONDONTWRITEBYTECODE": "1",
        }


@contextmanager
def private_home(kind: ServerKind) -> Iterator[Home]:
    root = Path(tempfile.mkdtemp(prefix="mcpfleet-bench-daemon-"))
    runtime = Path(tempfile.mkdtemp(prefix="mfb-", dir="/tmp"))
    home = Home(root, runtime, kind)
    config_dir = root / ".config" / "mcpfleet"
    config_dir.mkdir(parents=True)
    servers = {}
    for index in range(SERVERS):
        command, *args = kind.argv(index)
        # Eight entries of one command would be one server (discovery folds identical
        # connections): each gets a variable of its own.
        servers[f"s{index}"] = {"command": command, "args": args, "env": {"BENCH_SERVER": str(index)}}
    (config_dir / "mcp.json").write_text(json.dumps({"mcpServers": servers}), encoding="utf-8")
    for name in ("project-a", "project-b"):
        project = root / name
        project.mkdir()
        home.projects.append(project)
    try:
        yield home
    finally:
        subprocess.run([MCPFLEET, "daemon", "stop"], env=home.env, capture_output=True, timeout=60)
        shutil.rmtree(root, ignore_errors=True)
        shutil.rmtree(runtime, ignore_errors=True)


# -- one host session: JSON-RPC lines on a child's stdio ------------------------------------------------


class Host:
    """One MCP host's connection to one child process it launched (a server or ``mcpfleet serve``)."""

    def __init__(self, argv: list[str], env: dict[str, str], cwd: Path) -> None:
        self.started = time.perf_counter()
        self.name = Path(argv[1] if Path(argv[0]).name.startswith(("python", "node")) else argv[0]).name
        self.process = subprocess.Popen(
            argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=env,
            cwd=cwd,
            start_new_session=True,
        )
        self._selector = selectors.DefaultSelector()
        assert self.process.stdout is not None
        self._selector.register(self.process.stdout, selectors.EVENT_READ)
        self._buffer = b""
        self._next_id = 0

    def request(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        self._next_id += 1
        request_id = self._next_id
        self._send({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params or {}})
        deadline = time.monotonic() + ANSWER_TIMEOUT_S
        while True:
            message = self._receive(deadline)
            if message.get("id") == request_id and "method" not in message:
                if "error" in message:
                    raise RuntimeError(f"{method}: {message['error']}")
                result: dict[str, Any] = message["result"]
                return result

    def notify(self, method: str) -> None:
        self._send({"jsonrpc": "2.0", "method": method})

    def initialize(self) -> dict[str, Any]:
        result = self.request(
            "initialize",
            {
                "protocolVersion": "2025-11-25",
                "capabilities": {},
                "clientInfo": {"name": "bench-host", "version": "1"},
            },
        )
        self.notify("notifications/initialized")
        return result

    def tools_until(self, count: int) -> list[dict[str, Any]]:
        """``tools/list`` until it holds ``count`` tools (a gateway may list what is up first)."""
        deadline = time.monotonic() + ANSWER_TIMEOUT_S
        while True:
            tools: list[dict[str, Any]] = self.request("tools/list")["tools"]
            if len(tools) >= count:
                return tools
            if time.monotonic() > deadline:
                # A short list would be measured as if it were the whole one.
                raise TimeoutError(
                    f"{self.name} listed {len(tools)} of {count} tools in {ANSWER_TIMEOUT_S:.0f} s"
                )
            time.sleep(0.02)

    def close(self) -> None:
        if self.process.poll() is None:
            assert self.process.stdin is not None
            self.process.stdin.close()
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait()
        self._selector.close()
        assert self.process.stdout is not None
        self.process.stdout.close()

    def start_call(self, name: str, arguments: dict[str, Any]) -> None:
        """Send a ``tools/call`` without waiting for its answer (``answers`` reads it)."""
        self._next_id += 1
        params = {"name": name, "arguments": arguments}
        self._send({"jsonrpc": "2.0", "id": self._next_id, "method": "tools/call", "params": params})

    @property
    def stdout_fd(self) -> int:
        assert self.process.stdout is not None
        return self.process.stdout.fileno()

    def answers(self) -> int:
        """Read what is there (the caller saw the pipe readable); how many answers it held."""
        chunk = os.read(self.stdout_fd, 1 << 16)
        if not chunk:
            raise RuntimeError(f"{self.name} closed its stdout (exit {self.process.wait()})")
        *lines, self._buffer = (self._buffer + chunk).split(b"\n")
        answered = 0
        for line in lines:
            message = json.loads(line)
            if "method" in message:
                continue  # a notification (a list change) or a request from the server
            if "error" in message or message["result"].get("isError"):
                raise RuntimeError(f"{self.name}: {message}")
            answered += 1
        return answered

    def _send(self, message: dict[str, Any]) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(json.dumps(message).encode() + b"\n")
        self.process.stdin.flush()

    def _receive(self, deadline: float) -> dict[str, Any]:
        assert self.process.stdout is not None
        while b"\n" not in self._buffer:
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not self._selector.select(remaining):
                raise TimeoutError(f"no answer from {self.name} in {ANSWER_TIMEOUT_S:.0f} s")
            chunk = os.read(self.process.stdout.fileno(), 1 << 16)
            if not chunk:
                raise RuntimeError(f"{self.name} closed its stdout (exit {self.process.wait()})")
            self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\n", 1)
        message: dict[str, Any] = json.loads(line)
        return message


# -- processes and memory -------------------------------------------------------------------------------


def live_servers(home: Home) -> list[int]:
    """The processes of the home's servers alive now (told by their command line)."""
    alive = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            command_line = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        if home.kind.marker.encode() in command_line:
            alive.append(int(entry.name))
    return alive


def daemon_pid(home: Home) -> int | None:
    done = subprocess.run(
        [MCPFLEET, "--json", "daemon", "status"], env=home.env, capture_output=True, text=True, timeout=30
    )
    if done.returncode != 0:
        return None
    pid = json.loads(done.stdout).get("pid")
    return pid if isinstance(pid, int) else None


@dataclass(frozen=True)
class Footprint:
    setup: str
    server_processes: int
    processes: int
    rss_bytes: int
    servers_rss_bytes: int
    """Of ``rss_bytes``, what the servers hold; the rest is mcpfleet's (gateways, daemon, shims)."""


def footprint(home: Home, setup: str, roots: list[int]) -> Footprint:
    servers = live_servers(home)
    pids = sorted({pid for root in roots for pid in (root, *descendants(root))} | set(servers))
    return Footprint(
        setup,
        len(servers),
        len(pids),
        sum(rss_bytes(pid) for pid in pids),
        sum(rss_bytes(pid) for pid in servers),
    )


def wait_servers_gone(home: Home, bound_s: float = 30.0) -> None:
    deadline = time.monotonic() + bound_s
    while live_servers(home) and time.monotonic() < deadline:
        time.sleep(0.05)


def measure_direct(home: Home) -> Footprint:
    hosts = [
        Host(home.kind.argv(index), home.env, home.projects[session % 2])
        for session in range(SESSIONS)
        for index in range(SERVERS)
    ]
    tool, arguments = home.kind.call
    try:
        for host in hosts:
            host.initialize()
            home.tools_per_server = len(host.request("tools/list")["tools"])
            host.request("tools/call", {"name": tool, "arguments": arguments})
        return footprint(home, "direct", [host.process.pid for host in hosts])
    finally:
        for host in hosts:
            host.close()
        wait_servers_gone(home)


def _sessions(home: Home, argv: list[str]) -> list[Host]:
    hosts = [Host(argv, home.env, home.projects[session % 2]) for session in range(SESSIONS)]
    called, arguments = home.kind.call
    for host in hosts:
        host.initialize()
        for tool in host.tools_until(home.tool_total):
            if tool["name"].endswith(f"_{called}"):
                host.request("tools/call", {"name": tool["name"], "arguments": arguments})
    return hosts


def measure_gateways(home: Home) -> Footprint:
    hosts = _sessions(home, [MCPFLEET, "serve", "--no-daemon"])
    try:
        return footprint(home, "in-process gateways", [host.process.pid for host in hosts])
    finally:
        for host in hosts:
            host.close()
        wait_servers_gone(home)


def measure_daemon(home: Home) -> Footprint:
    hosts = _sessions(home, [MCPFLEET, "serve"])
    try:
        pid = daemon_pid(home)
        roots = [host.process.pid for host in hosts] + ([pid] if pid is not None else [])
        return footprint(home, "daemon", roots)
    finally:
        for host in hosts:
            host.close()


# -- mcp-hub: one shared hub process, reached by URL ----------------------------------------------------


@contextmanager
def mcp_hub(home: Home) -> Iterator[tuple[subprocess.Popen[bytes], str]]:
    """mcp-hub running the home's servers (its own config file), and the URL hosts reach it at."""
    seed_mcp_hub_marketplace(Path(home.env["XDG_DATA_HOME"]))
    port = free_port()
    config = home.root / ".config" / "mcpfleet" / "mcp.json"
    log = (home.root / "mcp-hub.log").open("ab")
    command = [shutil.which("node") or "node", str(MCP_HUB_CLI), "--port", str(port), "--config", str(config)]
    process = subprocess.Popen(
        command, env=home.env, stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True
    )
    try:
        yield process, f"http://127.0.0.1:{port}/mcp"
    finally:
        process.terminate()
        try:
            process.wait(HUB_STOP_GRACE_S)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        # Whatever the hub left of its servers is in its process group.
        with suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        log.close()
        wait_servers_gone(home)


async def hub_tools(client: Client) -> list[str]:
    names: list[str] = []
    cursor: str | None = None
    while True:
        page = await client.list_tools(cursor=cursor, cache_mode="bypass")
        names += [tool.name for tool in page.tools if HUB_TOOL.match(tool.name)]
        cursor = page.next_cursor
        if not cursor:
            return names


async def hub_tools_until(client: Client, count: int) -> list[str]:
    """The hub's server tools, listed until all ``count`` are there (it starts its servers itself)."""
    with anyio.fail_after(ANSWER_TIMEOUT_S):
        while True:
            names = await hub_tools(client)
            if len(names) >= count:
                return names
            await anyio.sleep(0.02)


async def hub_client(stack: AsyncExitStack, url: str) -> Client:
    """A client connected to the hub, retried while the hub is still coming up."""
    # The SDK only for mcp-hub, the one set-up whose hosts need it; the untimed sessions import
    # it before the timed ones.
    from mcp import Client
    from mcp.client.sse import sse_client

    deadline = time.monotonic() + ANSWER_TIMEOUT_S
    while True:
        client = Client(sse_client(url), mode="legacy", cache=None)
        try:
            return await stack.enter_async_context(client)
        except Exception:
            if time.monotonic() > deadline:
                raise
        await anyio.sleep(0.05)


async def _hub_sessions(
    home: Home, url: str, hub_pid: int, new_sessions: int
) -> tuple[Footprint, list[float]]:
    called, arguments = home.kind.call
    async with AsyncExitStack() as sessions:
        for _ in range(SESSIONS):
            client = await hub_client(sessions, url)
            for name in await hub_tools_until(client, home.tool_total):
                if name.endswith(f"__{called}"):
                    result = await client.call_tool(name, arguments)
                    if result.is_error:
                        raise RuntimeError(f"{name} through mcp-hub: {result.content}")
        measured = footprint(home, "mcp-hub (one shared hub)", [hub_pid])
    opened = []
    for _ in range(new_sessions):
        async with AsyncExitStack() as session:
            started = time.perf_counter()
            await hub_tools_until(await hub_client(session, url), home.tool_total)
            opened.append(time.perf_counter() - started)
    return measured, opened


def measure_mcp_hub(home: Home, new_sessions: int) -> tuple[Footprint, list[float]]:
    """The 5 sessions' footprint on one hub, then ``new_sessions`` new connections to it, timed."""
    with mcp_hub(home) as (process, url):
        return anyio.run(_hub_sessions, home, url, process.pid, new_sessions)


# -- a call through the daemon, and many sessions calling one shared server --------------------------

RAW_RELAY = REPO_ROOT / "bench" / "servers" / "raw_relay.py"
CALLERS = 8
"""Host sessions calling one shared server through the daemon at once."""
DIRECT = "direct (the host launches the server)"
ONE_RELAY = "floor: one raw relay"
TWO_RELAYS = "floor: two raw relays (the daemon's shape: shim, daemon)"
THROUGH_DAEMON = "through the daemon (`mcpfleet serve`)"


def call_paths(home: Home) -> dict[str, Host]:
    """One host for each path to server ``s0``: direct, through the raw relays, through the
    daemon (warm), each initialized; with the name ``s0``'s echo tool has on it."""
    server = home.kind.argv(0)
    relay = [sys.executable, str(RAW_RELAY)]
    hosts = {
        DIRECT: Host(server, home.env, home.projects[0]),
        ONE_RELAY: Host([*relay, *server], home.env, home.projects[0]),
        TWO_RELAYS: Host([*relay, *relay, *server], home.env, home.projects[0]),
        THROUGH_DAEMON: Host([MCPFLEET, "serve"], home.env, home.projects[0]),
    }
    for host in hosts.values():
        host.initialize()
    hosts[THROUGH_DAEMON].tools_until(home.tool_total)
    return hosts


def s0_tool(home: Home, host: Host, through_fleet: bool) -> str:
    called, _ = home.kind.call
    if not through_fleet:
        return called
    names: list[str] = [tool["name"] for tool in host.tools_until(home.tool_total)]
    return next(name for name in names if name.startswith("s0") and name.endswith(f"_{called}"))


def measure_call_latency(home: Home, rounds: int, calls: int) -> dict[str, list[float]]:
    """Seconds per ``tools/call`` on each path, the paths interleaved round by round (so a
    burst of load on the machine falls on all of them), after an unmeasured warm-up."""
    hosts = call_paths(home)
    _, arguments = home.kind.call
    names = {path: s0_tool(home, host, path == THROUGH_DAEMON) for path, host in hosts.items()}
    samples: dict[str, list[float]] = {path: [] for path in hosts}
    try:
        for round_number in range(rounds + 1):
            for path, host in hosts.items():
                for _ in range(calls):
                    started = time.perf_counter()
                    host.request("tools/call", {"name": names[path], "arguments": arguments})
                    if round_number:  # round 0 warms every path up
                        samples[path].append(time.perf_counter() - started)
        return samples
    finally:
        for host in hosts.values():
            host.close()


def calls_per_second(hosts: list[Host], name: str, arguments: dict[str, Any], duration_s: float) -> float:
    """Answered calls per second, each host keeping one call in flight for ``duration_s``."""
    with selectors.DefaultSelector() as selector:
        for host in hosts:
            selector.register(host.stdout_fd, selectors.EVENT_READ, host)
            host.start_call(name, arguments)
        answered = 0
        started = time.perf_counter()
        deadline = started + duration_s
        while (now := time.perf_counter()) < deadline:
            for key, _ in selector.select(deadline - now):
                host = key.data
                for _ in range(host.answers()):
                    answered += 1
                    host.start_call(name, arguments)
        elapsed = time.perf_counter() - started
        # The calls still in flight are read off, so each host is left idle.
        for host in hosts:
            host.request("ping")
    return answered / elapsed


def measure_shared_throughput(home: Home, duration_s: float) -> dict[str, float]:
    """One direct sequential client to a server of its own, against ``CALLERS`` host sessions
    calling that server's echo tool at once through the (warm) daemon, which shares it."""
    called, arguments = home.kind.call
    relay = [sys.executable, str(RAW_RELAY)]
    direct = Host(home.kind.argv(0), home.env, home.projects[0])
    relayed = [Host([*relay, *relay, *home.kind.argv(0)], home.env, home.projects[0]) for _ in range(CALLERS)]
    sessions = [Host([MCPFLEET, "serve"], home.env, home.projects[index % 2]) for index in range(CALLERS)]
    hosts = [direct, *relayed, *sessions]
    try:
        for host in hosts:
            host.initialize()
        # Each session lists its tools before calling one, as a host does.
        names = {s0_tool(home, session, True) for session in sessions}
        [name] = names  # one shared server: one name in every session
        for host in hosts:
            tool = name if host in sessions else called
            for _ in range(20):  # warm
                host.request("tools/call", {"name": tool, "arguments": arguments})
        return {
            "direct": calls_per_second([direct], called, arguments, duration_s),
            "relays": calls_per_second(relayed, called, arguments, duration_s),
            "daemon": calls_per_second(sessions, name, arguments, duration_s),
        }
    finally:
        for host in hosts:
            host.close()


def python_floor_bytes() -> int:
    """The resident memory of a Python process that does nothing (``python -I -S``): what any
    shim written in Python costs at least."""
    code = "import sys; sys.stdout.write('up\\n'); sys.stdout.flush(); sys.stdin.read()"
    process = subprocess.Popen(
        [sys.executable, "-I", "-S", "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE
    )
    assert process.stdin is not None and process.stdout is not None
    try:
        process.stdout.readline()  # up
        return rss_bytes(process.pid)
    finally:
        process.stdin.close()
        process.wait()
        process.stdout.close()


def shim_rss_bytes(home: Home) -> int:
    """The resident memory of one ``mcpfleet serve`` shim serving a session (daemon warm)."""
    host = Host([MCPFLEET, "serve"], home.env, home.projects[0])
    try:
        host.initialize()
        host.tools_until(home.tool_total)
        return rss_bytes(host.process.pid)
    finally:
        host.close()


# -- time to a new session's first list, and the CLI ---------------------------------------------------


def first_list_s(home: Home, argv: list[str]) -> float:
    """From launching ``argv`` to its first answered ``tools/list`` holding every tool."""
    host = Host(argv, home.env, home.projects[0])
    try:
        host.initialize()
        host.tools_until(home.tool_total)
        return time.perf_counter() - host.started
    finally:
        host.close()


def command_s(home: Home, argv: list[str], env: dict[str, str] | None = None) -> float:
    """The whole run of one command, from launch to exit."""
    started = time.perf_counter()
    done = subprocess.run(argv, env=env or home.env, cwd=home.projects[0], capture_output=True, timeout=120)
    elapsed = time.perf_counter() - started
    if done.returncode != 0:
        raise RuntimeError(f"{argv} exited {done.returncode}: {done.stderr.decode(errors='replace')[-400:]}")
    return elapsed


def median_ms(samples: list[float]) -> float:
    return statistics.median(samples) * 1000


@dataclass
class Results:
    footprints: dict[str, list[Footprint]] = field(default_factory=dict)
    """By server kind: direct, in-process gateways, daemon."""
    first_list: dict[str, list[float]] = field(default_factory=dict)
    tools_command: dict[str, list[float]] = field(default_factory=dict)
    tool_total: int = 0
    call_latency: dict[str, list[float]] = field(default_factory=dict)
    """Seconds per call, by path to one server (``measure_call_latency``)."""
    throughput: dict[str, float] = field(default_factory=dict)
    """Calls per second: one direct sequential client, and ``CALLERS`` sessions through the daemon."""
    shim_rss_bytes: int = 0
    python_floor_bytes: int = 0


def run(smoke: bool) -> Results:
    runs = 3 if smoke else 15
    results = Results()
    has_node = shutil.which("node") is not None
    has_node_servers = EVERYTHING_SERVER.is_file() and has_node
    if has_node:
        ensure_mcp_hub(Path(tempfile.gettempdir()) / "mcpfleet-bench-mcp-hub-install.log")
    kinds = [PYTHON_SERVERS, NODE_SERVERS] if has_node_servers else [PYTHON_SERVERS]
    for kind in kinds:
        with private_home(kind) as home:
            footprints = results.footprints[kind.key] = [measure_direct(home)]
            footprints.append(measure_gateways(home))  # also fills the tool cache
            if has_node:
                # Before the daemon, which keeps its servers running once measured.
                hub_sessions = runs if kind is PYTHON_SERVERS else 0
                hub, opened = measure_mcp_hub(home, hub_sessions)
                footprints.append(hub)
                if opened:
                    results.first_list["mcp-hub"] = opened
            footprints.append(measure_daemon(home))  # leaves the daemon running, warm
            if kind is not PYTHON_SERVERS:
                continue
            results.tool_total = home.tool_total
            results.call_latency = measure_call_latency(
                home, rounds=3 if smoke else 10, calls=100 if smoke else 200
            )
            results.throughput = measure_shared_throughput(home, duration_s=2.0 if smoke else 5.0)
            results.shim_rss_bytes = shim_rss_bytes(home)
            results.python_floor_bytes = python_floor_bytes()
            tools = [MCPFLEET, "--json", "tools"]
            results.first_list["daemon"] = [first_list_s(home, [MCPFLEET, "serve"]) for _ in range(runs)]
            results.tools_command["daemon"] = [command_s(home, tools) for _ in range(runs)]
            subprocess.run([MCPFLEET, "daemon", "stop"], env=home.env, capture_output=True, timeout=60)
            wait_servers_gone(home)
            # In-process runs take a second or more each: fewer of them.
            in_process_runs = max(3, runs // 3)
            no_daemon = {**home.env, "MCPFLEET_NO_DAEMON": "1"}
            results.first_list["in-process"] = [
                first_list_s(home, [MCPFLEET, "serve", "--no-daemon"]) for _ in range(in_process_runs)
            ]
            results.tools_command["in-process"] = [
                command_s(home, tools, no_daemon) for _ in range(in_process_runs)
            ]
    return results


# -- the report -----------------------------------------------------------------------------------------


def section(results: Results) -> str:
    lines = [
        HEADING,
        "",
        f"`make bench-daemon` (`python -m bench.daemon --write`). {SESSIONS} host sessions "
        f"(two projects) × {SERVERS} user-level stdio servers; each session lists its tools and "
        "calls one tool of every server before anything is counted. The host is the benchmark "
        "process itself, speaking JSON-RPC lines on each child's stdio; mcp-hub (npm "
        f"{MCP_HUB_VERSION}, one hub process with the {SERVERS} servers) has no stdio side, so its "
        f"{SESSIONS} hosts are the SDK's SSE client in the benchmark process, not counted. Resident "
        "memory is the sum of the RSS of every process a session set-up costs (shared pages counted "
        "in each one); the part in brackets is what is not a server (gateways, daemon, shims, hub).",
        "",
        "| servers | set-up | server processes | processes in all | resident memory (beyond the servers) "
        "| vs direct |",
        "|---|---|---|---|---|---|",
    ]
    labels = {PYTHON_SERVERS.key: PYTHON_SERVERS.label, NODE_SERVERS.key: NODE_SERVERS.label}
    for key, footprints in results.footprints.items():
        direct = footprints[0]
        for footprint in footprints:
            lines.append(
                f"| {labels[key]} | {footprint.setup} | {footprint.server_processes} | "
                f"{footprint.processes} | {footprint.rss_bytes / 2**20:.0f} MiB "
                f"({(footprint.rss_bytes - footprint.servers_rss_bytes) / 2**20:.0f} MiB) | "
                f"{footprint.rss_bytes / direct.rss_bytes:.0%} |"
            )
    daemon_list = median_ms(results.first_list["daemon"])
    in_process_list = median_ms(results.first_list["in-process"])
    daemon_tools = median_ms(results.tools_command["daemon"])
    in_process_tools = median_ms(results.tools_command["in-process"])
    lines += [
        "",
        "| measure (median, Python servers) | with the daemon warm | without it (warm tool cache) | goal |",
        "|---|---|---|---|",
        f"| launch `mcpfleet serve` → first `tools/list` with all {results.tool_total} tools | "
        f"{daemon_list:.0f} ms | {in_process_list:.0f} ms (`--no-daemon`) | ≤ 100 ms |",
        f"| `mcpfleet --json tools`, whole process | {daemon_tools:.0f} ms | "
        f"{in_process_tools:.0f} ms | ≤ 200 ms |",
        *hub_lines(results),
        *call_lines(results),
        "",
        f"Goals: {SERVERS} server processes for {SESSIONS} sessions (vs {SERVERS * SESSIONS} direct), "
        "resident memory ≤ 30 % of the direct set-up.",
        "",
    ]
    return "\n".join(lines)


def hub_lines(results: Results) -> list[str]:
    if "mcp-hub" not in results.first_list:
        return []
    return [
        "",
        f"With mcp-hub warm, a new session (SDK imported, SSE client) takes "
        f"{median_ms(results.first_list['mcp-hub']):.0f} ms (median) from opening its connection to "
        f"the first `tools/list` holding all {results.tool_total} tools. That excludes any process "
        "launch, since hosts reach mcp-hub by URL; the daemon's figure above includes launching "
        "`mcpfleet serve`, the process a host starts for its session. Likewise in the memory table: "
        f"mcp-hub's hosts launch nothing, while the daemon's part counts the {SESSIONS} shims its stdio "
        "hosts launch as well as the daemon.",
    ]


def percentile_ms(samples: list[float], fraction: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))] * 1000


def call_lines(results: Results) -> list[str]:
    if not results.call_latency:
        return []
    latency = results.call_latency
    direct_p50 = percentile_ms(latency[DIRECT], 0.5)
    lines = [
        "",
        f"A `tools/call` to one server (`s0`'s echo tool), {len(latency[DIRECT])} calls per path, the "
        "paths interleaved 200 calls at a time; the host is the benchmark process, one call at a "
        "time. The floor rows are a relay written for the benchmark "
        "(`bench/servers/raw_relay.py`, stdlib: reads a line, writes it on): what the process hops "
        "alone cost on this machine.",
        "",
        "| path | p50 | p99 | p99 / p50 | added p50 over direct | goal |",
        "|---|---|---|---|---|---|",
    ]
    for path, samples in latency.items():
        p50, p99 = percentile_ms(samples, 0.5), percentile_ms(samples, 0.99)
        added = "" if path == DIRECT else f"+{p50 - direct_p50:.2f} ms"
        goal = "added ≤ 0.5 ms, p99 ≤ 2× p50" if path == THROUGH_DAEMON else ""
        lines.append(f"| {path} | {p50:.2f} ms | {p99:.2f} ms | {p99 / p50:.1f}× | {added} | {goal} |")
    direct, daemon = results.throughput["direct"], results.throughput["daemon"]
    lines += [
        "",
        "| callers of one server (Python echo server) | calls/s in all | × one direct sequential client "
        "| goal |",
        "|---|---|---|---|",
        f"| one direct sequential client (its own server) | {direct:.0f} | 1.00× | |",
        f"| floor: {CALLERS} hosts, each through two raw relays to a server of its own | "
        f"{results.throughput['relays']:.0f} | {results.throughput['relays'] / direct:.2f}× | |",
        f"| {CALLERS} host sessions through the daemon, one call in flight each (the daemon shares "
        f"the server) | {daemon:.0f} | {daemon / direct:.2f}× | ≥ 1.0× |",
        "",
        f"One `mcpfleet serve` shim serving a session: {results.shim_rss_bytes / 2**20:.1f} MiB "
        f"resident (goal ≤ 6 MiB); a Python process that does nothing (`python -I -S`) is "
        f"{results.python_floor_bytes / 2**20:.1f} MiB on this machine, the floor of any shim "
        "written in Python.",
    ]
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--smoke", action="store_true", help="fewer runs; print the section only")
    parser.add_argument("--write", action="store_true", help="write the section into BENCHMARKS.md")
    args = parser.parse_args()
    text = section(run(args.smoke))
    print(text)
    if args.write:
        sections.write_section(REPO_ROOT / "BENCHMARKS.md", HEADING, text)


if __name__ == "__main__":
    main()
