"""The fleet against real subprocess servers: parallel start, the gate, the cache,
deferred tools, failure isolation and shutdown (S3–S9, S16–S19, every row of the
failure-modes table)."""

from __future__ import annotations

import json
import logging
import os
import time
from pathlib import Path

import anyio
import pytest
from tests.conftest import PYTHON
from tests.servers.fixtures import FAKE_SERVER as FAKE_SERVER_PATH
from tests.servers.fixtures import fake_server_config

import mcpfleet.client.connection  # noqa: F401  (pay the SDK's import before any gate is timed)
from mcpfleet import paths
from mcpfleet.agent.loader import discover_and_load_mcp_tools
from mcpfleet.config.model import ServerConfig, SourceInfo, fingerprint_of
from mcpfleet.errors import ServerNotConnectedError
from mcpfleet.fleet.cache import MCPToolCache
from mcpfleet.fleet.manager import ManagerEvent, MCPManager

pytestmark = pytest.mark.anyio

FAKE_SERVER = str(FAKE_SERVER_PATH)
LOADED_GATE_MS = 5000
"""A start-up gate that a fake server makes even on a loaded machine (a test that needs a
server inside the gate must not bet on 100 ms)."""


def fake(
    name: str, *flags: str, timeout_ms: int | None = None, env: dict[str, str] | None = None
) -> ServerConfig:
    return _fingerprinted(fake_server_config(name, *flags, timeout_ms=timeout_ms, env=env or {}))


def delayed(name: str, *flags: str) -> ServerConfig:
    """A server whose start-up delay comes from $DELAY_<NAME> (and which exits with code 4
    after it when $FAIL_<NAME> is set), so its fingerprint stays the same between a cold and a
    warm run: the cache key must not change with the test's scenario."""
    upper = name.upper()
    script = (
        f'sleep "${{DELAY_{upper}:-0}}"; '
        f'if [ -n "${{FAIL_{upper}:-}}" ]; then echo "{name}: cannot start" >&2; exit 4; fi; '
        f'exec "{PYTHON}" "{FAKE_SERVER}" --name {name} {" ".join(flags)}'
    )
    return _fingerprinted(ServerConfig(name=name, transport="stdio", command="/bin/sh", args=("-c", script)))


def _fingerprinted(config: ServerConfig) -> ServerConfig:
    from dataclasses import replace

    return replace(config, fingerprint=fingerprint_of(config))


def source(name: str) -> SourceInfo:
    return SourceInfo("mcpfleet", "mcpfleet", f"/virtual/{name}.json", "user")


def fleet(*configs: ServerConfig) -> tuple[dict[str, ServerConfig], dict[str, SourceInfo]]:
    return {c.name: c for c in configs}, {c.name: source(c.name) for c in configs}


@pytest.fixture
def cache(tmp_path: Path) -> MCPToolCache:
    return MCPToolCache(tmp_path / "tools.sqlite3")


def _event_waiter(manager: MCPManager, kind: str, server: str) -> anyio.Event:
    """An event set when the manager emits ``kind`` for ``server``."""
    seen = anyio.Event()

    def listener(event: ManagerEvent) -> None:
        if event.kind == kind and event.server == server:
            seen.set()

    manager.subscribe(listener)
    return seen


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


async def test_servers_start_in_parallel() -> None:
    configs = [fake(f"s{i}", "--delay-start", "1.5") for i in range(5)]
    async with MCPManager("/", cache=None, startup_timeout_ms=0) as manager:
        started = time.perf_counter()
        result = await manager.connect_servers(*fleet(*configs))
        elapsed = time.perf_counter() - started
    assert sorted(result.connected_servers) == [f"s{i}" for i in range(5)]
    assert not result.errors
    # One after another, five 1.5 s starts would take 7.5 s (the first connection also pays
    # the SDK's import, about a second on a small machine).
    assert elapsed < 5.0, elapsed


async def test_tools_are_sorted_and_named_whatever_the_order() -> None:
    async with MCPManager("/", cache=None, startup_timeout_ms=0) as manager:
        await manager.connect_servers(*fleet(fake("beta", "--tool", "echo"), fake("alpha", "--tool", "add")))
        names = [tool.name for tool in manager.get_tools()]
        assert names == ["mcp_alpha_add", "mcp_beta_echo"]
        assert manager.get_connection_status("alpha") == "connected"
        assert manager.get_source("alpha") == source("alpha")
        assert manager.get_all_server_names() == ["alpha", "beta"]


async def test_gate_returns_cached_tools_as_deferred_before_a_slow_server_is_up(
    cache: MCPToolCache, monkeypatch: pytest.MonkeyPatch
) -> None:
    slow = delayed("slow", "--tool", "echo")
    async with MCPManager("/", cache=cache, startup_timeout_ms=250) as manager:
        await manager.connect_servers(*fleet(slow))
    assert cache.get("slow", slow.fingerprint) is not None

    monkeypatch.setenv("DELAY_SLOW", "3")
    async with MCPManager("/", cache=cache, startup_timeout_ms=250) as manager:
        started = time.perf_counter()
        result = await manager.connect_servers(*fleet(slow))
        gate_elapsed = time.perf_counter() - started
        assert gate_elapsed < 2.0, gate_elapsed
        assert result.deferred_servers == ["slow"]
        assert manager.get_connection_status("slow") == "connecting"
        [tool] = result.tools
        assert tool.name == "mcp_slow_echo"
        assert tool.deferred

        call = await tool.execute({"message": "late"})
        assert time.perf_counter() - started >= 2.9  # the call waited for the connection
        assert not call.is_error
        assert "late" in call.text
        assert manager.get_connection_status("slow") == "connected"
        assert [t.deferred for t in manager.get_tools()] == [False]


async def test_gate_waits_for_servers_without_cache(cache: MCPToolCache) -> None:
    slow = fake("slow", "--delay-start", "1.0", "--tool", "echo")
    async with MCPManager("/", cache=cache, startup_timeout_ms=100) as manager:
        started = time.perf_counter()
        result = await manager.connect_servers(*fleet(slow))
        elapsed = time.perf_counter() - started
    assert elapsed >= 0.9
    assert [t.name for t in result.tools] == ["mcp_slow_echo"]
    assert not result.tools[0].deferred
    assert result.connected_servers == ["slow"]


async def test_late_join_announces_the_server_when_it_arrives(tmp_path: Path) -> None:
    events: list[ManagerEvent] = []
    # Late for sure: it starts only once the gate has answered. The gate is long enough for
    # "fast" to make it on a loaded machine.
    arrive = tmp_path / "arrive"
    slow = fake("slow", "--start-when-exists", str(arrive), "--tool", "echo")
    async with MCPManager(
        "/", cache=None, startup_timeout_ms=LOADED_GATE_MS, on_uncached="late-join"
    ) as manager:
        manager.subscribe(events.append)
        result = await manager.connect_servers(*fleet(slow, fake("fast", "--tool", "add")))
        assert result.late_servers == ["slow"]
        assert [t.name for t in result.tools] == ["mcp_fast_add"]
        arrive.touch()
        with anyio.fail_after(30):
            await manager.wait_for_connection("slow")
        assert [t.name for t in manager.get_tools()] == ["mcp_fast_add", "mcp_slow_echo"]
    kinds = [(e.kind, e.server) for e in events]
    assert ("tools_changed", "slow") in kinds
    assert kinds.index(("connecting", "slow")) < kinds.index(("connected", "slow"))


async def test_one_failing_server_never_fails_the_others() -> None:
    crashing = fake("crashing", "--exit-before-handshake", "--exit-code", "3", "--stderr-lines", "2")
    async with MCPManager("/", cache=None, startup_timeout_ms=0) as manager:
        result = await manager.connect_servers(*fleet(crashing, fake("good", "--tool", "echo")))
        assert result.connected_servers == ["good"]
        assert "code 3" in result.errors["crashing"]
        assert "stderr line" in result.errors["crashing"]
        assert [t.name for t in result.tools] == ["mcp_good_echo"]
        assert manager.get_connection_status("crashing") == "disconnected"


async def test_connect_timeout_is_a_per_server_error() -> None:
    hanging = fake("hanging", "--delay-start", "30", timeout_ms=500)
    async with MCPManager("/", cache=None, startup_timeout_ms=0) as manager:
        started = time.perf_counter()
        result = await manager.connect_servers(*fleet(hanging, fake("good", "--tool", "echo")))
        assert time.perf_counter() - started < 10
    assert result.errors["hanging"] == 'Connection to MCP server "hanging" timed out after 500ms'
    assert result.connected_servers == ["good"]


async def test_invalid_config_is_skipped_with_a_validation_error(tmp_path: Path) -> None:
    config_file = paths.user_config_file()
    config_file.parent.mkdir(parents=True)
    config_file.write_text(
        json.dumps(
            {
                "mcpServers": {
                    "broken": {"command": "x", "url": "http://127.0.0.1:1/mcp"},
                    "good": {"command": PYTHON, "args": [FAKE_SERVER, "--tool", "echo"]},
                }
            }
        )
    )
    async with MCPManager(tmp_path, cache=None, startup_timeout_ms=0) as manager:
        result = await manager.discover_and_connect()
    assert result.connected_servers == ["good"]
    assert "broken" in result.errors
    assert "command" in result.errors["broken"] and "url" in result.errors["broken"]


async def test_discovery_that_raises_gives_no_tools_and_one_synthetic_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def explode(*args: object, **kwargs: object) -> None:
        raise RuntimeError("disk on fire")

    monkeypatch.setattr("mcpfleet.fleet.manager.load_all_mcp_configs", explode)
    result = await discover_and_load_mcp_tools(tmp_path, cache=None)
    assert result.manager is not None
    await result.manager.aclose()
    assert result.tools == []
    assert [(e.path, e.error) for e in result.errors] == [(".mcp.json", "disk on fire")]


async def test_late_failure_of_a_deferred_server_is_logged_after_the_gate(
    cache: MCPToolCache, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    flaky = delayed("flaky", "--tool", "echo")
    async with MCPManager("/", cache=cache, startup_timeout_ms=0) as manager:
        await manager.connect_servers(*fleet(flaky))
    # Next time the same config starts slowly and then dies before the handshake.
    monkeypatch.setenv("DELAY_FLAKY", "0.8")
    monkeypatch.setenv("FAIL_FLAKY", "1")
    with caplog.at_level(logging.WARNING, logger="mcpfleet.fleet.manager"):
        async with MCPManager("/", cache=cache, startup_timeout_ms=200) as manager:
            failed = _event_waiter(manager, "failed", "flaky")
            result = await manager.connect_servers(*fleet(flaky))
            assert result.deferred_servers == ["flaky"]
            assert not caplog.records
            with anyio.fail_after(10):
                await failed.wait()
            assert manager.get_connection_status("flaky") == "disconnected"
            assert manager.get_tools() == []
    assert any("flaky" in r.getMessage() and "after start-up" in r.getMessage() for r in caplog.records)


async def test_disconnect_during_connect_never_registers_the_server(tmp_path: Path) -> None:
    pid_file = tmp_path / "pid"
    slow = fake("slow", "--delay-start", "1.0", "--pid-file", str(pid_file))
    async with MCPManager("/", cache=None, startup_timeout_ms=50, on_uncached="late-join") as manager:
        await manager.connect_servers(*fleet(slow))
        assert manager.get_connection_status("slow") == "connecting"
        await manager.disconnect_server("slow")
        await anyio.sleep(1.5)
        assert manager.get_connection_status("slow") == "disconnected"
        assert manager.get_tools() == []
        assert manager.get_source("slow") is None
        with pytest.raises(ServerNotConnectedError, match="MCP server not connected: slow"):
            await manager.wait_for_connection("slow")
    if pid_file.exists():
        pid = int(pid_file.read_text().split()[0])
        assert not _alive(pid)


async def test_disconnect_server_removes_only_its_tools(tmp_path: Path) -> None:
    pid_file = tmp_path / "pid"
    async with MCPManager("/", cache=None, startup_timeout_ms=0) as manager:
        await manager.connect_servers(
            *fleet(fake("one", "--tool", "echo", "--pid-file", str(pid_file)), fake("two", "--tool", "add"))
        )
        await manager.disconnect_server("one")
        assert [t.name for t in manager.get_tools()] == ["mcp_two_add"]
        assert manager.get_connection_status("one") == "disconnected"
        assert not _alive(int(pid_file.read_text().split()[0]))
        result = await manager.get_tools()[0].execute({"a": 2, "b": 3})
        assert "5" in result.text


async def test_disconnect_all_closes_stubborn_servers_together(tmp_path: Path) -> None:
    pid_files = [tmp_path / f"pid{i}" for i in range(3)]
    stubborn = [
        fake(f"stubborn{i}", "--ignore-sigterm", "--ignore-stdin-eof", "--pid-file", str(pid_files[i]))
        for i in range(3)
    ]
    async with MCPManager("/", cache=None, startup_timeout_ms=0) as manager:
        await manager.connect_servers(*fleet(*stubborn))
        started = time.perf_counter()
        await manager.disconnect_all()
        elapsed = time.perf_counter() - started
        assert manager.get_tools() == []
        assert manager.get_connected_servers() == []
    # One stubborn server takes the grace period plus SIGTERM wait; three in a row would triple it.
    assert elapsed < 5.0, elapsed
    for pid_file in pid_files:
        assert not _alive(int(pid_file.read_text().split()[0]))


async def test_a_failing_listener_does_not_starve_the_others() -> None:
    seen: list[str] = []

    def broken(event: ManagerEvent) -> None:
        raise ValueError("listener bug")

    async with MCPManager("/", cache=None, startup_timeout_ms=0) as manager:
        manager.subscribe(broken)
        manager.subscribe(lambda event: seen.append(event.kind))
        await manager.connect_servers(*fleet(fake("one", "--tool", "echo")))
    assert "connected" in seen


async def test_wait_for_unknown_server_raises() -> None:
    async with MCPManager("/", cache=None) as manager:
        with pytest.raises(ServerNotConnectedError, match="MCP server not connected: ghost"):
            await manager.wait_for_connection("ghost")


async def test_a_dropped_transport_is_reported_and_keeps_other_tools(tmp_path: Path) -> None:
    async with MCPManager("/", cache=None, startup_timeout_ms=0) as manager:
        await manager.connect_servers(
            *fleet(fake("fragile", "--tool", "crash"), fake("steady", "--tool", "echo"))
        )
        failed = _event_waiter(manager, "failed", "fragile")
        crash = next(t for t in manager.get_tools() if t.server_name == "fragile")
        result = await crash.execute({"code": 9})
        assert result.is_error and result.text.startswith("MCP error: ")
        with anyio.fail_after(10):
            await failed.wait()
        assert manager.get_connection_status("fragile") == "disconnected"
        assert "exited with code 9" in manager.get_errors()["fragile"]
        steady = next(t for t in manager.get_tools() if t.server_name == "steady")
        assert "hi" in (await steady.execute({"message": "hi"})).text


async def test_a_server_still_starting_is_stopped_without_waiting_for_it_to_read_stdin() -> None:
    # It never answered, so it is not reading stdin: no stdin grace period before SIGTERM.
    starting = fake("starting", "--delay-start", "30")
    async with MCPManager("/", cache=None, startup_timeout_ms=50, on_uncached="late-join") as manager:
        await manager.connect_servers(*fleet(starting))
        await anyio.sleep(0.3)  # let the process spawn
        started = time.perf_counter()
        await manager.disconnect_server("starting")
        elapsed = time.perf_counter() - started
    assert elapsed < 0.8, elapsed


async def test_the_negotiated_protocol_version_is_remembered_in_the_cache(cache: MCPToolCache) -> None:
    server = fake("era", "--tool", "echo")
    async with MCPManager("/", cache=cache, startup_timeout_ms=0) as manager:
        await manager.connect_servers(*fleet(server))
        connection = manager.get_connection("era")
        assert connection is not None and connection.protocol_version
        negotiated = connection.protocol_version
    remembered = cache.get("era", server.fingerprint)
    assert remembered is not None
    assert remembered.protocol_version == negotiated
    # The next connection of the same config starts from what was remembered (B8).
    async with MCPManager("/", cache=cache, startup_timeout_ms=0) as manager:
        await manager.connect_servers(*fleet(server))
        again = manager.get_connection("era")
        assert again is not None and again.protocol_version == negotiated
