"""The gateway over streamable HTTP: ``mcpfleet serve --http`` on loopback against a bare bridge.

    python -m bench.gateway_http                  # print the section (~2 min on 2 cores)
    python -m bench.gateway_http --write          # and put it into BENCHMARKS.md
    python -m bench.gateway_http --before main    # with another commit's gateway measured beside it
    python -m bench.gateway_http --smoke          # one short round, to see that it runs
    python -m bench.gateway_http --without-contextforge   # mcpfleet and the floor only

One stdio backend (``bench/servers/synthetic_server.py``, ``python -S``, echo tools) behind each
server: ``mcpfleet serve --http 127.0.0.1:0`` of this checkout, optionally the same of another
commit (``--before REV``: its ``src/`` taken out of git into a temporary folder, run on this
venv), and the *floor*, ``bench/peers/http_floor.py``: a stdio-to-HTTP bridge with no MCP library
that only rewrites ids. The clients are this process, raw HTTP/1.1 on keep-alive connections
(asyncio streams, no HTTP library), each sending what the SDK's client sends (``Accept:
application/json, text/event-stream``), in either era: the handshake era (``initialize``, then
``Mcp-Session-Id`` on every request) and 2026-07-28 (no session, the envelope in ``_meta`` and
the ``Mcp-Method``/``Mcp-Name`` headers on every request).

Per server and round: sequential ``tools/call`` (an echo, its answer checked) and ``ping`` on
one connection (p50 and p99 after a warm-up), then ``CLIENTS`` clients at once, each its own
connection and session, calling for ``THROUGHPUT_S`` seconds: correct answers per second, and
the server's CPU time per call (its own process, from /proc, the backend apart). The servers
are interleaved round by round; the figures are medians over the rounds.

Beside them, IBM ContextForge (``bench/harness/contextforge.py``, one worker, SQLite, offline)
with the same stdio backend behind its own stdio bridge (``mcpgateway.translate``), in its
default mode and with stateful sessions: handshake era only (it has no 2026-07-28), one
instance per mode for every round (its start takes ~20 s), fewer sequential calls, and its
wrong answers (an echo of another call's argument) and failed calls counted apart from the
correct ones instead of failing the run.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import platform
import secrets
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.harness import contextforge, sections

REPO_ROOT = Path(__file__).resolve().parents[1]
SYNTHETIC_SERVER = REPO_ROOT / "bench" / "servers" / "synthetic_server.py"
FLOOR = REPO_ROOT / "bench" / "peers" / "http_floor.py"
HEADING = "## 13. Gateway over streamable HTTP"
BACKEND = "s0"
TOOL = "tool_0"
CLIENTS = 16
ROUNDS = 3
WARMUP_CALLS = 100
SEQUENTIAL_CALLS = 1000
THROUGHPUT_S = 5.0
READY_TIMEOUT_S = 60.0
HANDSHAKE_VERSION = "2025-11-25"
MODERN_VERSION = "2026-07-28"
ACCEPT = b"application/json, text/event-stream"
ERAS = ("handshake", "2026-07-28")
PEER_SEQUENTIAL_CALLS = 100
PEER_WARMUP_CALLS = 10


class BenchError(Exception):
    """A server under test answered something other than what the benchmark asked for."""


# -- the client: raw HTTP/1.1 on one keep-alive connection -----------------------------------------


class HttpClient:
    """One MCP client on one connection, in one era, speaking HTTP/1.1 with no library."""

    def __init__(self, port: int, token: str | None, era: str, path: str = "/mcp") -> None:
        self.port = port
        self.path = path.encode()
        self.era = era
        self.session_id: bytes | None = None
        self.fixed_headers = b"host: 127.0.0.1:%d\r\naccept: %s\r\ncontent-type: application/json\r\n" % (
            port,
            ACCEPT,
        )
        if token is not None:
            self.fixed_headers += b"authorization: Bearer %s\r\n" % token.encode()
        self.next_id = 0
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None
        self.standalone: asyncio.StreamWriter | None = None
        self.draining: asyncio.Task[None] | None = None

    async def open(self) -> None:
        self.reader, self.writer = await asyncio.open_connection("127.0.0.1", self.port)
        if self.era == "handshake":
            init = {
                "protocolVersion": HANDSHAKE_VERSION,
                "capabilities": {},
                "clientInfo": {"name": "bench", "version": "1"},
            }
            await self.request("initialize", init)
            self.fixed_headers += b"mcp-protocol-version: %s\r\n" % HANDSHAKE_VERSION.encode()
            if self.session_id is not None:
                self.fixed_headers += b"mcp-session-id: %s\r\n" % self.session_id
            await self.exchange(b"", {"jsonrpc": "2.0", "method": "notifications/initialized"})
            if self.session_id is not None:
                await self._open_standalone_stream()

    async def _open_standalone_stream(self) -> None:
        """The GET stream the SDK's client holds open for its session (drained, never read)."""
        reader, self.standalone = await asyncio.open_connection("127.0.0.1", self.port)
        head = self.fixed_headers.replace(ACCEPT, b"text/event-stream")
        self.standalone.write(b"GET %s HTTP/1.1\r\n%s\r\n" % (self.path, head))
        status = (await reader.readuntil(b"\r\n\r\n")).split(b" ", 2)[1]
        if status != b"200":
            raise BenchError(f"the standalone GET stream was refused: HTTP {status.decode()}")
        self.draining = asyncio.create_task(_drain(reader))

    async def close(self) -> None:
        if self.draining is not None:
            self.draining.cancel()
        for writer in (self.writer, self.standalone):
            if writer is not None:
                writer.close()
                with contextlib.suppress(ConnectionError):
                    await writer.wait_closed()

    async def request(self, method: str, params: dict[str, Any], name: str | None = None) -> Any:
        self.next_id += 1
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params}
        extra = b""
        if self.era != "handshake":
            message["params"] = {
                **params,
                "_meta": {
                    "io.modelcontextprotocol/protocolVersion": MODERN_VERSION,
                    "io.modelcontextprotocol/clientCapabilities": {},
                    "io.modelcontextprotocol/clientInfo": {"name": "bench", "version": "1"},
                },
            }
            extra = b"mcp-protocol-version: %s\r\nmcp-method: %s\r\n" % (
                MODERN_VERSION.encode(),
                method.encode(),
            )
            if name is not None:
                extra += b"mcp-name: %s\r\n" % name.encode()
        status, headers, body = await self.exchange(extra, message)
        if status != 200:
            raise BenchError(f"{method}: HTTP {status}: {body[:300]!r}")
        if self.session_id is None and b"mcp-session-id" in headers:
            self.session_id = headers[b"mcp-session-id"]
        answer = _answer_in(headers.get(b"content-type", b""), body, self.next_id)
        if "result" not in answer:
            raise BenchError(f"{method}: {answer}")
        return answer["result"]

    async def call(self, tool: str, text: str) -> bool:
        """Call the echo ``tool``: whether its answer is the echo of ``text``."""
        result = await self.request("tools/call", {"name": tool, "arguments": {"message": text}}, name=tool)
        content = result.get("content") or [{}]
        return bool(content[0].get("text") == text and not result.get("isError"))

    async def exchange(self, extra: bytes, message: dict[str, Any]) -> tuple[int, dict[bytes, bytes], bytes]:
        assert self.reader is not None and self.writer is not None
        body = json.dumps(message).encode()
        self.writer.write(
            b"POST %s HTTP/1.1\r\n%s%scontent-length: %d\r\n\r\n%s"
            % (self.path, self.fixed_headers, extra, len(body), body)
        )
        head = await self.reader.readuntil(b"\r\n\r\n")
        status_line, *lines = head[:-4].split(b"\r\n")
        headers = {}
        for line in lines:
            key, _, value = line.partition(b":")
            headers[key.strip().lower()] = value.strip()
        status = int(status_line.split(b" ", 2)[1])
        if b"content-length" in headers:
            return status, headers, await self.reader.readexactly(int(headers[b"content-length"]))
        if headers.get(b"transfer-encoding", b"").lower() != b"chunked":
            raise BenchError(f"an answer with neither a length nor chunks: {head!r}")
        chunks: list[bytes] = []
        while True:
            size = int((await self.reader.readuntil(b"\r\n"))[:-2].split(b";")[0], 16)
            chunk = await self.reader.readexactly(size + 2)
            if size == 0:
                return status, headers, b"".join(chunks)
            chunks.append(chunk[:-2])


async def _drain(reader: asyncio.StreamReader) -> None:
    while await reader.read(65536):
        pass


def _answer_in(content_type: bytes, body: bytes, request_id: int) -> dict[str, Any]:
    """The JSON-RPC answer to ``request_id`` in a JSON body or an SSE stream."""
    if content_type.startswith(b"application/json"):
        answer: dict[str, Any] = json.loads(body)
        return answer
    for line in body.replace(b"\r\n", b"\n").split(b"\n"):
        if line.startswith(b"data:") and line[5:].strip():
            message = json.loads(line[5:])
            if message.get("id") == request_id and ("result" in message or "error" in message):
                return dict(message)
    raise BenchError(f"no answer to request {request_id} in the stream: {body[:300]!r}")


# -- the servers under test --------------------------------------------------------------------------------


@dataclass
class Target:
    key: str
    label: str
    source: Path | None = None
    """The ``src/`` folder of another commit's mcpfleet (``None``: this checkout's)."""
    floor: bool = False
    tool: str = f"{BACKEND}_{TOOL}"
    rounds: list[dict[str, Any]] = field(default_factory=list)
    profile: Path | None = None
    """Where to write a cProfile of the server's process (``--profile``), or ``None``."""
    contextforge: bool = False
    stateful: bool = False
    """ContextForge's ``USE_STATEFUL_SESSIONS``."""

    @property
    def eras(self) -> tuple[str, ...]:
        return ("handshake",) if self.contextforge else ERAS


@dataclass
class Running:
    process: subprocess.Popen[bytes]
    port: int
    token: str | None
    path: str = "/mcp"
    tool: str | None = None
    """The tool's name when the server renames it (ContextForge), else the target's."""

    def client(self, era: str) -> HttpClient:
        return HttpClient(self.port, self.token, era, self.path)


def _expect(target: Target, correct: bool, tool: str, text: str) -> bool:
    """A wrong echo fails the run, except ContextForge's (its wrong answers are its figures)."""
    if not correct and not target.contextforge:
        raise BenchError(f"tools/call {tool}: the answer is not the echo of {text!r}")
    return correct


@contextmanager
def running_contextforge(target: Target, folder: Path) -> Iterator[Running]:
    with contextforge.running_contextforge(
        folder, stateful=target.stateful, stdio_backend=_backend_argv(), tool=TOOL
    ) as cf:
        yield Running(cf.process, cf.port, cf.token, f"/servers/{cf.server_id}/mcp", cf.tool)


def _backend_argv() -> list[str]:
    return [sys.executable, "-S", str(SYNTHETIC_SERVER), "--name", BACKEND, "--tools", "3"]


@contextmanager
def running(target: Target, folder: Path) -> Iterator[Running]:
    folder.mkdir(parents=True, exist_ok=True)
    stderr_path = folder / "stderr.log"
    env = {**os.environ, "MCPFLEET_HOME": str(folder / "home"), "PYTHONDONTWRITEBYTECODE": "1"}
    token: str | None = None
    if target.floor:
        port_file = folder / "port"
        command = [sys.executable, "-S", str(FLOOR), str(port_file), "--", *_backend_argv()]
    else:
        config = folder / "servers.json"
        config.write_text(
            json.dumps(
                {"mcpServers": {BACKEND: {"command": _backend_argv()[0], "args": _backend_argv()[1:]}}}
            )
        )
        token = secrets.token_urlsafe(16)
        env["MCPFLEET_GATEWAY_TOKEN"] = token
        if target.source is not None:
            env["PYTHONPATH"] = str(target.source)
        profiling = ["-m", "cProfile", "-o", str(target.profile)] if target.profile is not None else []
        command = [sys.executable, *profiling, "-m", "mcpfleet", "--cwd", str(folder), "--no-project-config"]
        command += ["--config", str(config), "serve", "--http", "127.0.0.1:0"]
    with stderr_path.open("wb") as stderr:
        process = subprocess.Popen(
            command, cwd=folder, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=stderr
        )
    try:
        deadline = time.monotonic() + READY_TIMEOUT_S
        port = None
        while port is None:
            if process.poll() is not None or time.monotonic() > deadline:
                raise BenchError(
                    f"{target.key} did not start: {stderr_path.read_text(errors='replace')[-2000:]}"
                )
            time.sleep(0.02)
            if target.floor:
                text = port_file.read_text() if port_file.exists() else ""
                port = int(text) if text else None
            else:
                for line in stderr_path.read_text(errors="replace").splitlines():
                    if "serving on http://" in line:
                        port = int(line.rsplit(":", 1)[1].split("/", 1)[0])
        yield Running(process, port, token)
    finally:
        process.terminate()
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


# -- the measurements --------------------------------------------------------------------------------


async def _ready(server: Running, target: Target) -> None:
    """Until the backend's tool is served (the gateway lists at once, the backend joins later)."""
    deadline = time.monotonic() + READY_TIMEOUT_S
    client = server.client("handshake")
    await client.open()
    try:
        while time.monotonic() < deadline:
            listed = await client.request("tools/list", {})
            if (server.tool or target.tool) in {tool["name"] for tool in listed["tools"]}:
                return
            await asyncio.sleep(0.05)
        raise BenchError(f"{target.key} never listed {server.tool or target.tool}")
    finally:
        await client.close()


def _percentiles(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)
    return {
        "p50_ms": statistics.median(ordered) * 1000,
        "p99_ms": ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))] * 1000,
    }


async def _sequential(server: Running, target: Target, era: str, calls: int) -> dict[str, Any]:
    client = server.client(era)
    tool = server.tool or target.tool
    await client.open()
    try:
        # 2026-07-28 has no ping: a client's liveness is its request's stream.
        pings = calls if era == "handshake" else 0
        for index in range(PEER_WARMUP_CALLS if target.contextforge else WARMUP_CALLS):
            _expect(target, await client.call(tool, f"warm {index}"), tool, f"warm {index}")
            if pings:
                await client.request("ping", {})
        call_times, ping_times = [], []
        for index in range(calls):
            started = time.perf_counter()
            _expect(target, await client.call(tool, f"call {index}"), tool, f"call {index}")
            call_times.append(time.perf_counter() - started)
        for _ in range(pings):
            started = time.perf_counter()
            await client.request("ping", {})
            ping_times.append(time.perf_counter() - started)
    finally:
        await client.close()
    return {"call": _percentiles(call_times), "ping": _percentiles(ping_times) if ping_times else None}


async def _throughput(server: Running, target: Target, era: str, seconds: float) -> dict[str, Any]:
    clients = [server.client(era) for _ in range(CLIENTS)]
    await asyncio.gather(*(client.open() for client in clients))
    counting = False
    stop = False
    counted = [0] * CLIENTS
    wrong = failed = 0
    tool = server.tool or target.tool

    async def keep_calling(index: int, client: HttpClient) -> None:
        nonlocal wrong, failed
        sequence = 0
        while not stop:
            sequence += 1
            text = f"client {index} call {sequence}"
            try:
                correct = _expect(target, await client.call(tool, text), tool, text)
            except BenchError:
                if not target.contextforge:
                    raise
                correct, failed = False, failed + counting
            else:
                wrong += counting and not correct
            if counting and correct:
                counted[index] += 1

    tasks = [asyncio.create_task(keep_calling(index, client)) for index, client in enumerate(clients)]
    try:
        await asyncio.sleep(min(1.0, seconds / 5))  # every client past its first calls
        cpu_before, own_before = _cpu_seconds(server.process.pid), time.process_time()
        counting, started = True, time.perf_counter()
        await asyncio.sleep(seconds)
        counting = False
        elapsed = time.perf_counter() - started
        cpu = _cpu_seconds(server.process.pid) - cpu_before
        own = time.process_time() - own_before
        stop = True
        await asyncio.gather(*tasks)
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*(client.close() for client in clients), return_exceptions=True)
    total = sum(counted)
    return {
        "calls_per_s": total / elapsed,
        "server_cpu_us_per_call": cpu / total * 1e6 if total else None,
        "client_cpu_us_per_call": own / total * 1e6 if total else None,
        "wrong": wrong,
        "failed": failed,
    }


async def measure(server: Running, target: Target, calls: int, seconds: float) -> dict[str, Any]:
    await _ready(server, target)
    figures: dict[str, Any] = {}
    for era in target.eras:
        figures[era] = await _sequential(
            server, target, era, PEER_SEQUENTIAL_CALLS if target.contextforge else calls
        )
        figures[era]["throughput"] = await _throughput(server, target, era, seconds)
    return figures


# -- the report --------------------------------------------------------------------------------------


def _median(rounds: list[dict[str, Any]], *path: str) -> float:
    values = []
    for figures in rounds:
        value: Any = figures
        for key in path:
            value = value[key]
        values.append(float(value))
    return statistics.median(values)


def render(targets: list[Target], results: dict[str, Any]) -> str:
    mcpfleet = next(target for target in targets if target.key == "mcpfleet")
    call_p50 = _median(mcpfleet.rounds, "handshake", "call", "p50_ms")
    rate = _median(mcpfleet.rounds, "handshake", "throughput", "calls_per_s")
    lines = [
        HEADING,
        "",
        f"`make bench-http` (`python -m bench.gateway_http --write`) in {results['seconds']:.0f} s. "
        f"Machine: {results['machine']}, load average {results['load_before']:.1f} before and "
        f"{results['load_after']:.1f} after; commit {results['commit']}. One stdio backend "
        "(`bench/servers/synthetic_server.py`, `python -S`, echo tools) behind each server on 127.0.0.1. "
        "The clients are the benchmark process, raw HTTP/1.1 on keep-alive connections (no HTTP library), "
        "sending what the SDK's client sends (`Accept: application/json, text/event-stream`): handshake era "
        f"(`initialize`, then `Mcp-Session-Id`, and the standalone GET stream the SDK's client opens) and "
        f"{MODERN_VERSION} (no session, the envelope in `_meta` and "
        "`Mcp-Method`/`Mcp-Name`). Sequential: "
        f"{results['calls']} `tools/call` (an echo, its answer checked) then as many `ping` on one "
        "connection, "
        f"after {WARMUP_CALLS} of each. Throughput: {CLIENTS} clients at once, each its own connection and "
        f"session, calling for {results['throughput_s']:g} s: correct answers per second, and the CPU time "
        "per call of the server's own process (the backend apart) and of the clients. The *floor* is "
        "`bench/peers/http_floor.py`, a stdio-to-HTTP bridge with no MCP library that rewrites ids and "
        f"nothing else. Medians of {results['rounds']} interleaved rounds.",
        "",
        *_contextforge_note(targets),
        "| goal (mcpfleet serve --http, handshake era) | measured | verdict |",
        "|---|---|---|",
        f"| call p50 ≤ 1.5 ms | {call_p50:.2f} ms | {'**met**' if call_p50 <= 1.5 else '**missed**'} |",
        f"| ≥ 1 500 calls/s with {CLIENTS} clients | {rate:,.0f} calls/s | "
        f"{'**met**' if rate >= 1500 else '**missed**'} |",
        "",
        f"| server | era | call p50 | call p99 | ping p50 | ping p99 | calls/s, {CLIENTS} clients | "
        "wrong / failed | server CPU per call | client CPU per call |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for target in targets:
        for era in target.eras:
            rounds = target.rounds

            def figure(*path: str, rounds: list[dict[str, Any]] = rounds, era: str = era) -> float:
                return _median(rounds, era, *path)

            pings = (
                f"{figure('ping', 'p50_ms'):.2f} ms | {figure('ping', 'p99_ms'):.2f} ms"
                if era == "handshake"
                else "— | —"
            )
            lines.append(
                f"| {target.label} | {era} | {figure('call', 'p50_ms'):.2f} ms "
                f"| {figure('call', 'p99_ms'):.2f} ms "
                f"| {pings} "
                f"| {figure('throughput', 'calls_per_s'):,.0f} "
                f"| {sum(r[era]['throughput']['wrong'] for r in rounds)} / "
                f"{sum(r[era]['throughput']['failed'] for r in rounds)} "
                f"| {_cpu(rounds, era, 'server')} | {_cpu(rounds, era, 'client')} |"
            )
    lines.append("")
    lines.append(
        "The floor's `ping` is answered by the backend (it forwards everything); the gateway answers its "
        f"own. {MODERN_VERSION} has no `ping`."
    )
    lines.append("")
    lines.extend(_findings(targets))
    return "\n".join(lines) + "\n"


def _cpu(rounds: list[dict[str, Any]], era: str, side: str) -> str:
    """The median CPU per correct call, or a dash when a round had none."""
    values = [figures[era]["throughput"][f"{side}_cpu_us_per_call"] for figures in rounds]
    return "—" if None in values else f"{statistics.median(values):.0f} µs"


def _contextforge_note(targets: list[Target]) -> list[str]:
    if not any(target.contextforge for target in targets):
        return []
    return [
        (
            f"ContextForge {contextforge.VERSION} (PyPI `mcp-contextforge-gateway`, "
            "`bench/harness/contextforge.py`): one "
            "worker on Python 3.12, SQLite in a temporary folder, offline on 127.0.0.1, the same "
            "stdio backend behind its own bridge (`mcpgateway.translate --expose-streamable-http`) "
            "registered as a gateway, its tool in a virtual server whose `/servers/<id>/mcp` the "
            "clients call with the admin's JWT; its rate limiter (on by default: 100 MCP requests a "
            "minute per client) off. Default mode (`USE_STATEFUL_SESSIONS=false`) and stateful "
            "sessions. Handshake era only (it has no 2026-07-28), "
            f"{PEER_SEQUENTIAL_CALLS} sequential calls after {PEER_WARMUP_CALLS}, one "
            "instance per mode for every round; calls/s counts only answers that carry their own "
            "request's argument, and *wrong / failed* sums, over the rounds, the answers that carried "
            "another (or an error result) and the calls that got an HTTP or JSON-RPC error."
        ),
        "",
    ]


CONTEXTFORGE_FINDINGS = [
    "- What ContextForge does per call (read in its 1.1.0 source, not profiled): in its default mode "
    "each POST is a session of its own in the SDK's stateless streamable HTTP server, and the call "
    "goes to the backend through a new client session (`initialize`, `tools/call`, close): "
    "`services/tool_service.py` reuses an upstream session only when the request carries an "
    "`Mcp-Session-Id`, which is what `USE_STATEFUL_SESSIONS` gives. Around it, on every call: the "
    "JWT's check (its user, teams and revocation through an in-memory cache), the tool's and "
    "gateway's rows read through SQLAlchemy, a structured log call, a buffered metrics point, and "
    "the stack of ASGI middlewares `main.py` adds, all in one Python worker.",
    "- Its wrong answers come from its stdio bridge: `mcpgateway.translate` writes every request to "
    "the one stdio pipe with the id it came with, and answers each with the first line from the "
    "backend that has that id. Every upstream session numbers its requests from the same start, so "
    "concurrent calls share ids and take each other's answers; one client at a time gets its own.",
]


def _findings(targets: list[Target]) -> list[str]:
    """Where the time goes, from the figures above: the gateway's own CPU per call is what a
    sequential call waits for on a busy machine, and what caps the calls per second."""
    by_key = {target.key: target for target in targets}

    def cpu(key: str) -> float:
        return _median(by_key[key].rounds, "handshake", "throughput", "server_cpu_us_per_call")

    after, floor = cpu("mcpfleet"), cpu("floor")
    text = (
        f"- Per call (handshake era, {CLIENTS} clients) the gateway's process spends {after:.0f} µs of CPU, "
        f"the floor's {floor:.0f} µs ({after / floor:.1f}×)"
    )
    if "before" in by_key:
        before = cpu("before")
        text += (
            f"; before, {before:.0f} µs ({before / after:.1f}× now): the SDK's SSE framing (a task group of "
            "four tasks per POST), the event store, the session's message loop and dispatcher, the SDK's "
            "client towards the backend, and h11 parsing in Python"
        )
    return [
        text + ".",
        *(CONTEXTFORGE_FINDINGS if "contextforge" in by_key else []),
        "- A call that needs no stream is now one JSON body (`gateway/http_fast.py`) and, on a stdio "
        "backend, goes straight to its pipe (`gateway/fast_path.py`); the rest of the gateway's CPU is "
        "uvicorn's request cycle (a task per request), the socket and pipe writes, and the backend's "
        "answer read back through its connection.",
        "- On a loaded machine a sequential call waits for the CPU its processes need, so latency "
        "grows with the CPU per call: compare rows of one run, and the load it ran at.",
    ]


def _baseline_source(revision: str, scratch: Path) -> tuple[Path, str]:
    """``src/`` of ``revision``, taken out of git into ``scratch``, and its short commit."""
    commit = subprocess.run(
        ["git", "rev-parse", "--short", revision], cwd=REPO_ROOT, check=True, capture_output=True, text=True
    ).stdout.strip()
    folder = scratch / f"src-{commit}"
    folder.mkdir()
    archive = subprocess.run(
        ["git", "archive", revision, "src"], cwd=REPO_ROOT, check=True, capture_output=True
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(folder)], input=archive, check=True)
    return folder / "src", commit


def _commit() -> str:
    found = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], cwd=REPO_ROOT, capture_output=True, text=True
    )
    dirty = subprocess.run(
        ["git", "status", "--porcelain", "src"], cwd=REPO_ROOT, capture_output=True, text=True
    )
    return found.stdout.strip() + (" (with uncommitted changes)" if dirty.stdout.strip() else "")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help="put the section into BENCHMARKS.md")
    parser.add_argument("--report", type=Path, default=REPO_ROOT / "BENCHMARKS.md")
    parser.add_argument("--before", metavar="REV", help="measure this commit's gateway as well")
    parser.add_argument("--smoke", action="store_true", help="one short round")
    parser.add_argument(
        "--only",
        choices=("floor", "before", "mcpfleet", "contextforge", "contextforge-stateful"),
        action="append",
    )
    parser.add_argument("--without-contextforge", action="store_true", help="mcpfleet and the floor only")
    parser.add_argument(
        "--profile", type=Path, metavar="DIR", help="a cProfile of each gateway run, into DIR"
    )
    options = parser.parse_args(argv)
    rounds, calls, seconds = (1, 200, 1.0) if options.smoke else (ROUNDS, SEQUENTIAL_CALLS, THROUGHPUT_S)
    scratch = Path(tempfile.mkdtemp(prefix="mcpfleet-bench-http-"))
    started, load_before = time.perf_counter(), os.getloadavg()[0]
    try:
        targets = [Target("floor", "floor: bare stdio-to-HTTP bridge", floor=True, tool=TOOL)]
        if options.before:
            source, commit = _baseline_source(options.before, scratch)
            targets.append(Target("before", f"`mcpfleet serve --http`, {commit}", source=source))
        targets.append(Target("mcpfleet", "**`mcpfleet serve --http`**"))
        if not options.without_contextforge:
            contextforge.require_installed()
            targets.append(Target("contextforge", "ContextForge, one worker", contextforge=True))
            targets.append(
                Target(
                    "contextforge-stateful",
                    "ContextForge, one worker, stateful sessions",
                    contextforge=True,
                    stateful=True,
                )
            )
        if options.only:
            targets = [target for target in targets if target.key in options.only or target.key == "mcpfleet"]
        peer_servers: dict[str, Running] = {}
        with contextlib.ExitStack() as peers:
            for target in targets:
                if target.contextforge:
                    started_peer = peers.enter_context(running_contextforge(target, scratch / target.key))
                    peer_servers[target.key] = started_peer
            for round_number in range(rounds):
                for target in targets:
                    if options.profile is not None and not target.floor and not target.contextforge:
                        options.profile.mkdir(parents=True, exist_ok=True)
                        target.profile = options.profile / f"{target.key}-{round_number}.prof"
                    if target.contextforge:
                        figures = asyncio.run(measure(peer_servers[target.key], target, calls, seconds))
                    else:
                        with running(target, scratch / f"{target.key}-{round_number}") as server:
                            figures = asyncio.run(measure(server, target, calls, seconds))
                    target.rounds.append(figures)
                    summary = ", ".join(
                        f"{era}: call p50 {figures[era]['call']['p50_ms']:.2f} ms, "
                        f"{figures[era]['throughput']['calls_per_s']:.0f}/s"
                        f" ({figures[era]['throughput']['wrong']} wrong, "
                        f"{figures[era]['throughput']['failed']} failed)"
                        for era in target.eras
                    )
                    summary += f", ping p50 {figures['handshake']['ping']['p50_ms']:.2f} ms"
                    print(f"  round {round_number + 1} {target.key:<9} {summary}", flush=True)
    finally:
        if not os.environ.get("BENCH_KEEP"):
            shutil.rmtree(scratch, ignore_errors=True)
    results = {
        "seconds": time.perf_counter() - started,
        "machine": f"{os.cpu_count()} CPUs, Python {platform.python_version()}",
        "load_before": load_before,
        "load_after": os.getloadavg()[0],
        "commit": _commit(),
        "calls": calls,
        "throughput_s": seconds,
        "rounds": rounds,
    }
    section = render(targets, results)
    print(section)
    if options.write:
        sections.write_section(options.report, HEADING, section)
        print(f"wrote {options.report}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
