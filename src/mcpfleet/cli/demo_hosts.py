"""The demo's second act: host sessions through ``mcpfleet serve`` and the per-user daemon.

This is the job most users come for: every MCP host (an editor, a coding agent) launches
``mcpfleet serve`` on a pipe, and all of them share one fleet. The demo plays two such hosts
itself, speaking MCP's JSON-RPC lines on the pipes as any host does, and shows that

* the first ``serve`` starts the daemon and the second reaches the same one;
* both sessions use one process per server (``daemon status``);
* a server added to the config while they run is announced to both by ``list_changed``;
* ``daemon stop`` closes every server, and no process is left.

The daemon runs in the demo's throw-away home, on a runtime folder of its own
(``MCPFLEET_RUNTIME_DIR``), so a daemon the user already runs is never touched.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
from anyio.abc import Process
from anyio.streams.buffered import BufferedByteReceiveStream

from mcpfleet.contract import notifications

if TYPE_CHECKING:
    from mcpfleet.cli.demo import _Narrator

WAIT_S = 60.0
"""Bound of every wait on a host's pipe or on the daemon: generous, the machine may be busy."""
MAX_LINE_BYTES = 16 * 1024 * 1024
PROTOCOL_VERSION = "2025-11-25"
LATE_SERVER = "clock"
"""The server added to the config while both host sessions run."""


class HostSession:
    """One MCP host session as an editor runs it: ``mcpfleet serve`` on a pipe, one JSON-RPC
    message a line. Notifications that arrive while waiting for an answer are kept in
    ``notifications`` (their methods, in order)."""

    def __init__(self, name: str, process: Process) -> None:
        self.name = name
        self.process = process
        assert process.stdin is not None and process.stdout is not None
        self._stdin = process.stdin
        self._stdout = BufferedByteReceiveStream(process.stdout)
        self._next_id = 0
        self.notifications: list[str] = []

    async def _send(self, message: dict[str, Any]) -> None:
        await self._stdin.send(json.dumps({"jsonrpc": "2.0", **message}).encode() + b"\n")

    async def _receive(self) -> dict[str, Any]:
        line = await self._stdout.receive_until(b"\n", MAX_LINE_BYTES)
        message = json.loads(line)
        if not isinstance(message, dict):
            raise RuntimeError(f"{self.name}: `mcpfleet serve` wrote a line that is not a JSON-RPC message")
        return message

    async def request(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        """The result of ``method``; a JSON-RPC error becomes ``RuntimeError``."""
        self._next_id += 1
        request_id = self._next_id
        await self._send({"id": request_id, "method": method, "params": params or {}})
        with anyio.fail_after(WAIT_S):
            while True:
                message = await self._receive()
                if message.get("id") == request_id and "method" not in message:
                    if "error" in message:
                        raise RuntimeError(f"{self.name}: {method} failed: {message['error']}")
                    result = message.get("result")
                    return result if isinstance(result, dict) else {}
                await self._take(message)

    async def notify(self, method: str) -> None:
        await self._send({"method": method})

    async def wait_for(self, method: str) -> None:
        """Until a notification ``method`` has arrived (perhaps already)."""
        with anyio.fail_after(WAIT_S):
            while method not in self.notifications:
                await self._take(await self._receive())

    async def _take(self, message: dict[str, Any]) -> None:
        method = message.get("method")
        if not isinstance(method, str):
            return
        if "id" in message:
            # This host declared no capabilities, so the gateway has nothing to ask it; a
            # request all the same gets the answer a host without the feature gives.
            await self._send({"id": message["id"], "error": {"code": -32601, "message": "not supported"}})
        else:
            self.notifications.append(method)

    async def open(self) -> list[str]:
        """The handshake, then the names of the tools the fleet serves this session."""
        client = {"name": self.name, "version": "1.0"}
        await self.request(
            "initialize", {"protocolVersion": PROTOCOL_VERSION, "capabilities": {}, "clientInfo": client}
        )
        await self.notify(notifications.INITIALIZED)
        return await self.tool_names()

    async def tool_names(self) -> list[str]:
        names: list[str] = []
        cursor: str | None = None
        while True:
            page = await self.request("tools/list", {"cursor": cursor} if cursor else {})
            names.extend(str(tool.get("name")) for tool in page.get("tools", []))
            cursor = page.get("nextCursor")
            if not cursor:
                return names


@contextlib.asynccontextmanager
async def host_session(name: str, project: Path) -> AsyncIterator[HostSession]:
    """``mcpfleet serve`` launched in ``project`` as a host launches it; closing its stdin at
    the end is how a host says goodbye, and the shim exits on it (killed if it does not)."""
    process = await anyio.open_process(
        [sys.executable, "-m", "mcpfleet", "serve"],
        cwd=project,
        env=_serve_environment(),
        stderr=subprocess.DEVNULL,
    )
    try:
        yield HostSession(name, process)
    finally:
        with anyio.CancelScope(shield=True):
            assert process.stdin is not None
            await process.stdin.aclose()
            with anyio.move_on_after(WAIT_S):
                await process.wait()
            if process.returncode is None:
                process.kill()
                await process.wait()


def _serve_environment() -> dict[str, str]:
    environment = dict(os.environ)
    # The demo shows the daemon; a user's MCPFLEET_NO_DAEMON=1 would hide it.
    environment.pop("MCPFLEET_NO_DAEMON", None)
    return environment


def _mcpfleet(*arguments: str) -> subprocess.CompletedProcess[str]:
    """The real command line, as a user types it in a shell."""
    return subprocess.run(
        [sys.executable, "-m", "mcpfleet", *arguments],
        capture_output=True,
        text=True,
        timeout=WAIT_S,
        env=_serve_environment(),
        check=False,
    )


def _daemon_status() -> dict[str, Any]:
    completed = _mcpfleet("--json", "daemon", "status")
    if completed.returncode != 0:
        raise RuntimeError(f"`mcpfleet daemon status` failed: {completed.stderr.strip()}")
    document = json.loads(completed.stdout)
    return document if isinstance(document, dict) else {}


def _add_late_server(config_file: Path, late_server: dict[str, Any]) -> None:
    """Add one entry to the user's config the way an editor saves a file: whole, then renamed."""
    document = json.loads(config_file.read_text())
    document["mcpServers"][LATE_SERVER] = late_server
    staged = config_file.with_name(config_file.name + ".demo-edit")
    staged.write_text(json.dumps(document, indent=2))
    staged.replace(config_file)


def alive(pids: list[int]) -> list[int]:
    """Those of ``pids`` whose process still runs (a zombie does not count: the daemon is a
    grandchild of the demo, reaped by whoever inherits it)."""
    from mcpfleet.cli.daemon_commands import process_alive

    return [pid for pid in pids if process_alive(pid)]


async def host_sessions_act(
    show: _Narrator,
    project: Path,
    config_file: Path,
    late_server: dict[str, Any],
    steps: list[dict[str, Any]],
) -> bool:
    """Run the second act, narrating it and recording it in ``steps``; ``True`` when both
    sessions saw the fleet, shared its processes, heard of the late server, and nothing
    outlived ``daemon stop``."""
    show.say(
        ("\n5. two host sessions through `mcpfleet serve`", "bold"),
        " (each host launches the shim; the first one starts the per-user daemon)",
    )
    step: dict[str, Any] = {"step": "host sessions"}
    steps.append(step)
    pids: list[int] = []
    try:
        async with host_session("editor-a", project) as first, host_session("editor-b", project) as second:
            for host in (first, second):
                started = time.perf_counter()
                tools = await host.open()
                took_ms = (time.perf_counter() - started) * 1000
                step[host.name] = {"tools": len(tools), "first_list_ms": round(took_ms, 1)}
                show.say(f"   {host.name}: {len(tools)} tools in {took_ms:.0f} ms from launch")
            pids.extend(await _show_sharing(show, step))
            await _announce_late_server(show, step, (first, second), config_file, late_server)
            show.say(("\n6. mcpfleet daemon status", "bold"))
            table = await anyio.to_thread.run_sync(_mcpfleet, "daemon", "status")
            show.say(table.stdout.rstrip())
            status = await anyio.to_thread.run_sync(_daemon_status)
            pids.extend(int(row["pid"]) for row in status.get("servers", []) if row.get("pid"))
    finally:
        stopped = await anyio.to_thread.run_sync(_mcpfleet, "daemon", "stop")
    step["daemon_stop"] = {"exit_code": stopped.returncode}
    left = alive(sorted(set(pids)))
    step["processes_left"] = left
    said = stopped.stdout.strip() or stopped.stderr.strip()
    show.say(("\n7. mcpfleet daemon stop", "bold"), f": {said}; processes left: {left or 'none'}")
    late = step.get("late_server", {})
    return (
        stopped.returncode == 0
        and not left
        and step.get("sessions") == 2
        and bool(late.get("new_tools"))
        and not late.get("call", {}).get("is_error", True)
    )


async def _show_sharing(show: _Narrator, step: dict[str, Any]) -> list[int]:
    """What ``daemon status`` says of the two sessions: one process per server for both.
    Returns the daemon's pid and its servers', which must all be gone after ``daemon stop``."""
    status = await anyio.to_thread.run_sync(_daemon_status)
    running = [row for row in status.get("servers", []) if row.get("pid")]
    step["daemon_pid"] = status.get("pid")
    step["sessions"] = len(status.get("sessions", []))
    step["servers"] = [
        {"name": row.get("name"), "pid": row.get("pid"), "sessions": row.get("sessions")} for row in running
    ]
    for row in running:
        show.say(
            ("   ●", "green"),
            f" {row.get('name')}: one process (pid {row.get('pid')}) for {row.get('sessions')} sessions",
        )
    return [int(status["pid"]), *(int(row["pid"]) for row in running)]


async def _announce_late_server(
    show: _Narrator,
    step: dict[str, Any],
    hosts: tuple[HostSession, HostSession],
    config_file: Path,
    late_server: dict[str, Any],
) -> None:
    """Add a server to the config while both sessions run: the daemon starts it and tells
    both sessions ``tools/list_changed``; the first then calls one of its tools."""
    first, second = hosts
    show.say(f"   adding server {LATE_SERVER!r} to {config_file.name} while both sessions run…")
    before = set(await second.tool_names())
    await anyio.to_thread.run_sync(_add_late_server, config_file, late_server)
    for host in hosts:
        await host.wait_for(notifications.TOOLS_LIST_CHANGED)
    added = sorted(set(await second.tool_names()) - before)
    late: dict[str, Any] = {"announced_to": [host.name for host in hosts], "new_tools": added}
    step["late_server"] = late
    show.say(f"   both sessions were told tools/list_changed; new tools: {', '.join(added) or 'none'}")
    if not added:
        return
    # The late server is the demo's slow one: its clock takes no arguments.
    tool = next((name for name in added if name.endswith("clock_now")), added[0])
    result = await first.request("tools/call", {"name": tool, "arguments": {}})
    blocks = [block for block in result.get("content", []) if isinstance(block, dict)]
    text = " ".join(str(block.get("text", "")) for block in blocks)
    late["call"] = {"tool": tool, "is_error": bool(result.get("isError"))}
    show.say(f"   {first.name} calls {tool} → {text}")
