"""The manager's reads, event stream and snapshots against real subprocess servers."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import anyio
import pytest
from tests.servers.fixtures import fake_server_config

from mcpfleet.config.model import ServerConfig, SourceInfo
from mcpfleet.errors import ServerNotConnectedError
from mcpfleet.fleet.manager import MCPManager
from mcpfleet.fleet.supervision import ReconnectPolicy

pytestmark = pytest.mark.anyio

SOURCE = SourceInfo("mcpfleet", "mcpfleet", "/virtual/mcp.json", "user")


def fleet(*configs: ServerConfig) -> tuple[dict[str, ServerConfig], dict[str, SourceInfo]]:
    return {c.name: c for c in configs}, {c.name: SOURCE for c in configs}


def first_pid(pid_file: Path) -> int:
    return int(pid_file.read_text().split()[0])


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


async def test_reads_wait_for_a_server_still_starting_like_a_call() -> None:
    slow = fake_server_config("slow", "--tool", "echo", "--delay-start", "0.8")
    async with MCPManager("/", cache=None, startup_timeout_ms=50, on_uncached="late-join") as manager:
        report = await manager.connect_servers(*fleet(slow))
        assert report.late_servers == ["slow"]
        assert manager.get_connection_status("slow") == "connecting"
        with anyio.fail_after(20):
            resources = await manager.list_resources("slow")
        assert [r["uri"] for r in resources] == ["fake://readme"]
        read = await manager.read_resource("slow", "fake://readme")
        assert read["contents"][0]["text"] == "readme of slow"
        assert [p["name"] for p in await manager.list_prompts("slow")] == ["greet"]
        prompt = await manager.get_prompt("slow", "greet", {"who": "fleet"})
        assert prompt["messages"][0]["content"]["text"] == "Hello fleet"


async def test_a_read_of_an_unknown_server_says_so() -> None:
    async with MCPManager("/", cache=None) as manager:
        with pytest.raises(ServerNotConnectedError, match="MCP server not connected: ghost"):
            await manager.list_resources("ghost")


async def test_a_read_waits_for_a_server_being_reconnected(tmp_path: Path) -> None:
    pid_file = tmp_path / "pid"
    victim = fake_server_config("victim", "--tool", "echo", "--pid-file", str(pid_file))
    policy = ReconnectPolicy(ladder_s=(0.5,), call_wait_s=15.0)
    async with MCPManager("/", cache=None, startup_timeout_ms=0, reconnect_policy=policy) as manager:
        await manager.connect_servers(*fleet(victim))
        lost = first_pid(pid_file)
        reconnecting = anyio.Event()
        manager.subscribe(lambda e: reconnecting.set() if e.kind == "reconnecting" else None)
        os.kill(lost, signal.SIGKILL)
        with anyio.fail_after(10):
            await reconnecting.wait()
        with anyio.fail_after(20):
            prompts = await manager.list_prompts("victim")
        assert [p["name"] for p in prompts] == ["greet"]
        assert first_pid(pid_file) != lost
        assert manager.get_server_state("victim").state == "connected"


async def test_an_event_stream_follows_a_server_and_ends_when_the_manager_closes() -> None:
    received: list[tuple[str, str]] = []

    async def read(manager: MCPManager, listening: anyio.Event) -> None:
        async with manager.events() as stream:
            listening.set()
            async for event in stream:
                received.append((event.kind, event.server))

    # The reader's task outlives the manager: its iteration must end when the manager closes.
    with anyio.fail_after(30):
        async with (
            anyio.create_task_group() as readers,
            MCPManager("/", cache=None, startup_timeout_ms=0) as manager,
        ):
            listening = anyio.Event()
            readers.start_soon(read, manager, listening)
            await listening.wait()
            await manager.connect_servers(*fleet(fake_server_config("one", "--tool", "echo")))
    assert received == [
        ("connecting", "one"),
        ("connected", "one"),
        ("tools_changed", "one"),
        ("tools_changed", "one"),
        ("disconnected", "one"),
    ]


async def test_servers_is_a_read_only_snapshot(tmp_path: Path) -> None:
    pid_file = tmp_path / "pid"
    one = fake_server_config("one", "--tool", "echo", "--pid-file", str(pid_file))
    async with MCPManager("/", cache=None, startup_timeout_ms=0) as manager:
        await manager.connect_servers(*fleet(one))
        servers = manager.servers
        state = servers["one"]
        assert (state.state, state.status, state.pid, state.source) == (
            "connected",
            "connected",
            first_pid(pid_file),
            SOURCE,
        )
        assert state.timings_ms["total"] > 0 and not state.deferred
        assert "tools" in state.capabilities  # what /mcp resources and prompts ask before listing
        with pytest.raises(TypeError):
            servers["two"] = state  # type: ignore[index]
        await manager.disconnect_server("one")
        assert servers["one"].state == "connected"  # a snapshot does not move
        assert "one" not in manager.servers


async def test_disconnecting_a_server_withdraws_its_tools_before_closing_it(tmp_path: Path) -> None:
    pid_file = tmp_path / "pid"
    one = fake_server_config("one", "--tool", "echo", "--pid-file", str(pid_file))
    async with MCPManager("/", cache=None, startup_timeout_ms=0) as manager:
        await manager.connect_servers(*fleet(one))
        pid = first_pid(pid_file)
        at_tools_changed: list[tuple[list[str], bool]] = []
        manager.subscribe(
            lambda e: (
                at_tools_changed.append(([t.name for t in manager.get_tools()], alive(pid)))
                if e.kind == "tools_changed"
                else None
            )
        )
        await manager.disconnect_server("one")
        # No subscriber lists (or calls) a tool whose server is being closed.
        assert at_tools_changed == [([], True)]
        assert not alive(pid)
