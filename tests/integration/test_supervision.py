"""Supervision beyond the seed, against real subprocess servers (B1–B4).

Reconnection after a crash with the tools kept, the crash breaker, calls during and across
a reconnection, ``list_changed`` reaching a session, reload by diff and config watching,
bounded parallel shutdown, and no process left behind a host killed with SIGKILL. The
supervisor's numbers are shrunk through ``ReconnectPolicy`` so a crash loop takes a second.
"""

from __future__ import annotations

import json
import logging
import os
import resource
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import anyio
import pytest
from tests.conftest import PYTHON, SERVERS_DIR
from tests.servers.fixtures import CONFORMANCE_BACKEND

from mcpfleet import paths
from mcpfleet.agent.session import create_agent_session
from mcpfleet.config.model import Pinning, ServerConfig, SourceInfo, fingerprint_of
from mcpfleet.fleet.cache import MCPToolCache
from mcpfleet.fleet.manager import ManagerEvent, MCPManager
from mcpfleet.fleet.supervision import ReconnectPolicy

pytestmark = pytest.mark.anyio

FAKE_SERVER = str(SERVERS_DIR / "fake_server.py")
FAST_POLICY = ReconnectPolicy(ladder_s=(0.1, 0.2, 0.4), call_wait_s=10.0)


# These servers' tools change while they run (tools/list_changed), which is what is followed
# here: pinning, which withholds a tool added later until it is approved, is off for them (it is
# tested in tests/integration/test_pinning.py).
UNPINNED: Pinning = "off"


def fake(name: str, *flags: str) -> ServerConfig:
    config = ServerConfig(
        name=name,
        transport="stdio",
        command=PYTHON,
        args=(FAKE_SERVER, "--name", name, *flags),
        pinning=UNPINNED,
    )
    return replace(config, fingerprint=fingerprint_of(config))


def fleet(*configs: ServerConfig) -> tuple[dict[str, ServerConfig], dict[str, SourceInfo]]:
    source = SourceInfo("mcpfleet", "mcpfleet", "/virtual/mcp.json", "user")
    return {c.name: c for c in configs}, {c.name: source for c in configs}


def write_user_config(servers: dict[str, list[str]]) -> Path:
    """mcpfleet's user config file (under the test's HOME) with one fake server per entry."""
    config_file = paths.user_config_file()
    config_file.parent.mkdir(parents=True, exist_ok=True)
    entries = {
        name: {"command": PYTHON, "args": [FAKE_SERVER, "--name", name, *flags], "pinning": UNPINNED}
        for name, flags in servers.items()
    }
    # Written whole and renamed into place, the way editors save.
    partial = config_file.with_suffix(".partial")
    partial.write_text(json.dumps({"mcpServers": entries}))
    partial.replace(config_file)
    return config_file


def recorder(manager: MCPManager) -> list[ManagerEvent]:
    events: list[ManagerEvent] = []
    manager.subscribe(events.append)
    return events


async def wait_until(condition: Callable[[], bool], within_s: float = 10.0) -> float:
    """Poll ``condition`` (it reads state no single event announces); return the seconds it took."""
    started = time.perf_counter()
    with anyio.fail_after(within_s):
        while not condition():  # noqa: ASYNC110
            await anyio.sleep(0.02)
    return time.perf_counter() - started


def pids_in(pid_file: Path) -> list[int]:
    return [int(line) for line in pid_file.read_text().split()]


def alive(pid: int) -> bool:
    """True while ``pid`` runs; a zombie (dead, not yet reaped by whoever adopted it) is dead."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return False


def tool_names(manager: MCPManager, server: str | None = None) -> list[str]:
    return [t.name for t in manager.get_tools() if server is None or t.server_name == server]


# -- reconnection (B1) ------------------------------------------------------------------------


async def test_a_crash_is_reconnected_with_tools_intact(tmp_path: Path) -> None:
    pid_file = tmp_path / "pid"
    flaky = fake(
        "flaky", "--tool", "echo", "--tool", "crash", "--pid-file", str(pid_file), "--stderr-lines", "2"
    )
    async with MCPManager("/", cache=None, startup_timeout_ms=0, reconnect_policy=FAST_POLICY) as manager:
        await manager.connect_servers(*fleet(flaky))
        first_pid = pids_in(pid_file)[0]
        names_before = tool_names(manager)
        events = recorder(manager)
        crash = next(t for t in manager.get_tools() if t.mcp_tool_name == "crash")

        lost_at = time.perf_counter()
        result = await crash.execute({"code": 7})
        # The request reached the server (it is what killed it): its outcome is unknown, so not replayed.
        assert result.is_error and "may have run, so it was not repeated" in result.text
        await wait_until(lambda: ("connected", "flaky") in [(e.kind, e.server) for e in events])
        reconnect_s = time.perf_counter() - lost_at

        kinds = [e.kind for e in events if e.server == "flaky"]
        assert kinds.index("failed") < kinds.index("reconnecting") < kinds.index("connected")
        reconnecting = next(e for e in events if e.kind == "reconnecting")
        assert reconnecting.error is not None and "exited with code 7" in reconnecting.error
        assert tool_names(manager) == names_before
        state = manager.get_server_state("flaky")
        assert state.state == "connected" and state.last_error is None
        assert pids_in(pid_file)[0] == state.pid != first_pid
        echo = next(t for t in manager.get_tools() if t.mcp_tool_name == "echo")
        assert (await echo.execute({"message": "back"})).structured == {"message": "back"}
        assert not alive(first_pid)
    print(f"reconnect after a crash: {reconnect_s * 1000:.0f} ms")


async def test_a_call_during_reconnect_waits_and_runs_once_on_the_new_connection(tmp_path: Path) -> None:
    pid_file = tmp_path / "pid"
    policy = ReconnectPolicy(ladder_s=(0.6,), call_wait_s=10.0)
    async with MCPManager("/", cache=None, startup_timeout_ms=0, reconnect_policy=policy) as manager:
        await manager.connect_servers(*fleet(fake("victim", "--tool", "echo", "--pid-file", str(pid_file))))
        first_pid = pids_in(pid_file)[0]
        reconnecting = anyio.Event()
        manager.subscribe(lambda e: reconnecting.set() if e.kind == "reconnecting" else None)
        os.kill(first_pid, signal.SIGKILL)
        with anyio.fail_after(10):
            await reconnecting.wait()
        assert manager.get_server_state("victim").state == "reconnecting"
        # The stale tool is still registered; the call was never sent to the dead process.
        [echo] = manager.get_tools()
        started = time.perf_counter()
        result = await echo.execute({"message": "patient"})
        waited = time.perf_counter() - started
        assert not result.is_error, result.text
        assert result.structured == {"message": "patient"}
        assert waited > 0.3  # it did wait for the new process (first rung: 0.6 s)
        assert pids_in(pid_file)[0] != first_pid
        assert manager.get_server_state("victim").state == "connected"


async def test_a_call_during_reconnect_gives_up_after_its_bound(tmp_path: Path) -> None:
    policy = ReconnectPolicy(ladder_s=(5.0,), call_wait_s=0.3)
    pid_file = tmp_path / "pid"
    async with MCPManager("/", cache=None, startup_timeout_ms=0, reconnect_policy=policy) as manager:
        await manager.connect_servers(*fleet(fake("slowback", "--tool", "echo", "--pid-file", str(pid_file))))
        os.kill(pids_in(pid_file)[0], signal.SIGKILL)
        await wait_until(lambda: manager.get_server_state("slowback").state == "reconnecting")
        [echo] = manager.get_tools()
        result = await echo.execute({"message": "x"})
        assert result.is_error
        assert 'MCP server "slowback" is reconnecting' in result.text and "try again shortly" in result.text


async def test_a_crash_loop_is_suspended_with_its_reason(tmp_path: Path) -> None:
    policy = ReconnectPolicy(ladder_s=(0.05,), crash_limit=2, crash_window_s=30.0)
    looping = fake("looping", "--tool", "echo", "--exit-after", "0.3", "--exit-code", "5")
    async with MCPManager("/", cache=None, startup_timeout_ms=0, reconnect_policy=policy) as manager:
        suspended = anyio.Event()

        def on_event(event: ManagerEvent) -> None:
            if event.kind == "failed" and "suspended" in (event.error or ""):
                suspended.set()

        manager.subscribe(on_event)
        await manager.connect_servers(*fleet(looping))
        with anyio.fail_after(15):
            await suspended.wait()
        state = manager.get_server_state("looping")
        assert state.state == "suspended"
        assert state.last_error is not None
        assert "crashed more than 2 times within 30 s" in state.last_error
        assert "/mcp reconnect looping" in state.last_error
        assert "exiting as asked" in state.stderr_tail
        assert state.recent_crashes == 3
        assert manager.get_connection_status("looping") == "disconnected"
        # The tools stay registered and explain why they cannot answer.
        [echo] = manager.get_tools()
        result = await echo.execute({"message": "x"})
        assert result.is_error and "automatic reconnects are suspended" in result.text
        await anyio.sleep(0.5)
        assert manager.get_server_state("looping").state == "suspended"  # no respawn behind our back

        await manager.reconnect_server("looping")  # the manual reconnect lifts the suspension
        state = manager.get_server_state("looping")
        assert state.state == "connected" and state.recent_crashes == 0


async def test_a_stdio_server_that_cannot_restart_fails_after_its_ladder(tmp_path: Path) -> None:
    broken_flag = tmp_path / "broken"
    pid_file = tmp_path / "pid"
    script = (
        f'if [ -e "{broken_flag}" ]; then echo "cannot start: config gone" >&2; exit 3; fi; '
        f'exec "{PYTHON}" "{FAKE_SERVER}" --name fragile --tool echo --pid-file "{pid_file}"'
    )
    fragile = ServerConfig(name="fragile", transport="stdio", command="/bin/sh", args=("-c", script))
    policy = ReconnectPolicy(ladder_s=(0.05, 0.05, 0.05))
    async with MCPManager("/", cache=None, startup_timeout_ms=0, reconnect_policy=policy) as manager:
        await manager.connect_servers(*fleet(fragile))
        events = recorder(manager)
        broken_flag.touch()
        os.kill(pids_in(pid_file)[0], signal.SIGKILL)
        await wait_until(lambda: manager.get_server_state("fragile").state == "failed")
        error = manager.get_server_state("fragile").last_error or ""
        assert "could not be restarted after 3 attempts" in error and "cannot start: config gone" in error
        assert [e.kind for e in events].count("failed") == 2  # the loss, then the verdict
        assert tool_names(manager) == ["mcp_fragile_echo"]  # stale, but still known to the agent


async def test_a_call_whose_outcome_is_unknown_is_not_replayed(tmp_path: Path) -> None:
    async with MCPManager("/", cache=None, startup_timeout_ms=0, reconnect_policy=FAST_POLICY) as manager:
        await manager.connect_servers(*fleet(fake("once", "--tool", "echo", "--crash-after-calls", "2")))
        [echo] = manager.get_tools()
        assert (await echo.execute({"message": "one"})).structured == {"message": "one"}
        # The server dies on receiving the second call: a replay on the new process would succeed.
        result = await echo.execute({"message": "two"})
        assert result.is_error and "it was not repeated" in result.text
        await wait_until(lambda: manager.get_connection_status("once") == "connected")
        assert (await echo.execute({"message": "three"})).structured == {"message": "three"}


async def test_disconnect_during_a_call_ends_the_call_and_does_not_reconnect(tmp_path: Path) -> None:
    pid_file = tmp_path / "pid"
    async with MCPManager("/", cache=None, startup_timeout_ms=0, reconnect_policy=FAST_POLICY) as manager:
        await manager.connect_servers(*fleet(fake("busy", "--tool", "sleep", "--pid-file", str(pid_file))))
        events = recorder(manager)
        [sleep_tool] = manager.get_tools()
        outcome: list[str] = []

        async def call() -> None:
            outcome.append((await sleep_tool.execute({"seconds": 30})).text)

        started = time.perf_counter()
        async with anyio.create_task_group() as group:
            group.start_soon(call)
            await anyio.sleep(0.3)
            await manager.disconnect_server("busy")
        assert time.perf_counter() - started < 8
        assert outcome and outcome[0].startswith("MCP error: ")
        assert not alive(pids_in(pid_file)[0])
        await anyio.sleep(0.5)
        assert "reconnecting" not in [e.kind for e in events]
        assert manager.get_server_state("busy").state == "disconnected"


# -- catalog changes (B2, B7) -----------------------------------------------------------------


async def test_list_changed_reaches_the_session_without_a_host_call(tmp_path: Path) -> None:
    write_user_config(
        {
            "live": [
                "--tool",
                "echo",
                "--list-changed-after",
                "0.4",
                "--catalog-changed-after",
                "0.4",
                "--resource-updates",
            ]
        }
    )
    cache = MCPToolCache(tmp_path / "tools.sqlite3")
    session = await create_agent_session(tmp_path, cache=cache, startup_timeout_ms=0)
    async with session:
        changed: list[tuple[str, str]] = []
        session.on_resources_changed = lambda server: changed.append(("resources", server))
        session.on_prompts_changed = lambda server: changed.append(("prompts", server))
        updates: list[tuple[str, str]] = []
        await session.mcp_manager.subscribe_resource(
            "live", "fake://readme", lambda s, u: updates.append((s, u))
        )
        assert [t.name for t in session.tools] == ["mcp_live_echo"]
        await wait_until(lambda: session.get_tool("mcp_live_late_tool") is not None, within_s=10)
        assert sorted(t.name for t in session.tools) == ["mcp_live_echo", "mcp_live_late_tool"]
        await wait_until(lambda: len(changed) == 2)
        assert sorted(changed) == [("prompts", "live"), ("resources", "live")]
        assert updates == [("live", "fake://readme")]
        config = session.mcp_manager.get_server_config("live")
        assert config is not None
        entry = cache.get("live", config.fingerprint)
        assert entry is not None and sorted(t.name for t in entry.tools) == ["echo", "late_tool"]
        result = await session.call_tool("mcp_live_late_tool", {"message": "new"})
        assert result.structured == {"message": "new"}


async def test_a_modern_servers_list_changes_reach_the_fleet_through_its_listen_stream() -> None:
    """A 2026-07-28 server announces list changes only on a ``subscriptions/listen`` stream; each
    announcement is an ``announced`` event, the tools one even though the list stayed the same."""
    config = ServerConfig(name="modern", transport="stdio", command=PYTHON, args=(str(CONFORMANCE_BACKEND),))
    config = replace(config, fingerprint=fingerprint_of(config))
    async with MCPManager("/", cache=None, startup_timeout_ms=0) as manager:
        await manager.connect_servers(*fleet(config))
        connection = manager.get_connection("modern")
        assert connection is not None and connection.era == "modern"
        events: list[ManagerEvent] = []
        manager.subscribe(events.append)
        before = [tool.name for tool in manager.get_tools()]
        await manager.call_tool("modern", "test_trigger_tool_change", {})
        await manager.call_tool("modern", "test_trigger_prompt_change", {})
        await wait_until(
            lambda: {e.kind for e in events if e.announced} == {"tools_changed", "prompts_changed"}
        )
        assert [tool.name for tool in manager.get_tools()] == before


async def test_a_list_changed_flood_is_relisted_at_a_bounded_pace(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # A notification every millisecond, forever; its tools really change once, 0.5 s in.
    request_log = tmp_path / "requests.log"
    flooding = fake(
        "flood",
        "--tool",
        "echo",
        "--list-changed-every",
        "0.001",
        "--list-changed-after",
        "0.5",
        "--request-log",
        str(request_log),
    )
    window_s = 4.0
    caplog.set_level(logging.WARNING, logger="mcpfleet")
    async with MCPManager(tmp_path, cache=None, startup_timeout_ms=0) as manager:
        await manager.connect_servers(*fleet(flooding, fake("calm", "--tool", "add")))
        listed_before = request_log.read_text().count("tools/list")
        cpu_before, started = time.process_time(), time.perf_counter()
        calls = 0
        while time.perf_counter() - started < window_s:
            with anyio.fail_after(10):
                result = await manager.call_tool("calm", "add", {"a": calls, "b": 1})
            assert result.structured_content == {"sum": calls + 1}
            calls += 1
            await anyio.sleep(0.05)
        elapsed_s = time.perf_counter() - started
        cpu_s = time.process_time() - cpu_before
        relists = request_log.read_text().count("tools/list") - listed_before
        # The change is picked up during the flood: rate-limited, never starved.
        assert tool_names(manager, "flood") == ["mcp_flood_echo", "mcp_flood_late_tool"]
    # About one re-list a second (LIST_CHANGED_MIN_INTERVAL_S), not one per debounce period.
    assert 1 <= relists <= 6, relists
    assert calls >= 10
    # Reading the flood itself costs CPU; re-listing must not add a busy loop on top of it.
    assert cpu_s < 0.8 * elapsed_s, (cpu_s, elapsed_s)
    floods = [r.getMessage() for r in caplog.records if "list_changed notifications" in r.getMessage()]
    assert len(floods) == 1 and floods[0].startswith("MCP server flood sent "), floods


async def test_a_notification_flood_costs_little_cpu_and_its_last_change_is_seen(tmp_path: Path) -> None:
    # For 5 s the server announces a tools change and logs a message every millisecond, and a
    # call gets progress every millisecond; then its tools really change, announced once more
    # right after the flood's last announcement (so it is folded with it).
    flooding = fake(
        "flood",
        "--tool",
        "sleep",
        "--list-changed-every",
        "0.001",
        "--flood-logs",
        "--flood-for",
        "5",
    )
    async with MCPManager(tmp_path, cache=None, startup_timeout_ms=0) as manager:
        await manager.connect_servers(*fleet(flooding))
        usage_before, started = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
        # Only progress can keep this call alive past its 1 s timeout: folded, it still must.
        result = await manager.call_tool(
            "flood", "sleep", {"seconds": 2.5, "progress_interval": 0.001}, timeout_ms=1000
        )
        usage, elapsed_s = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter() - started
        assert result.content[0].text == "slept 2.5"
        cpu_s = (usage.ru_utime - usage_before.ru_utime) + (usage.ru_stime - usage_before.ru_stime)
        # The server is another process: this is mcpfleet's own work, 5-7 % of a core on a
        # loaded 2-core machine; parsing and dispatching every message took about 65 %.
        assert cpu_s < 0.15 * elapsed_s, (cpu_s, elapsed_s)
        await wait_until(lambda: "mcp_flood_late_tool" in tool_names(manager, "flood"), within_s=15)


# -- reload by diff (B3) ------------------------------------------------------------------------


async def test_reload_by_diff_keeps_unchanged_servers_running(tmp_path: Path) -> None:
    pid = {name: tmp_path / f"{name}.pid" for name in ("keep", "change", "drop", "new")}
    write_user_config(
        {
            "keep": ["--tool", "echo", "--pid-file", str(pid["keep"])],
            "change": ["--tool", "echo", "--pid-file", str(pid["change"])],
            "drop": ["--tool", "echo", "--pid-file", str(pid["drop"])],
        }
    )
    async with MCPManager(tmp_path, cache=None, startup_timeout_ms=0) as manager:
        await manager.discover_and_connect()
        before = {name: pids_in(pid[name])[0] for name in ("keep", "change", "drop")}
        kept_connection = manager.get_connection("keep")
        write_user_config(
            {
                "keep": ["--tool", "echo", "--pid-file", str(pid["keep"])],
                "change": ["--tool", "add", "--pid-file", str(pid["change"])],
                "new": ["--tool", "echo", "--pid-file", str(pid["new"])],
            }
        )
        started = time.perf_counter()
        result = await manager.reload()
        reload_s = time.perf_counter() - started
        assert not result.errors
        assert manager.get_connection("keep") is kept_connection
        assert pids_in(pid["keep"])[0] == before["keep"] and alive(before["keep"])
        assert pids_in(pid["change"])[0] != before["change"] and not alive(before["change"])
        assert not alive(before["drop"])
        assert tool_names(manager) == ["mcp_change_add", "mcp_keep_echo", "mcp_new_echo"]
        assert sorted(manager.get_connected_servers()) == ["change", "keep", "new"]
        assert manager.get_all_server_names() == ["change", "keep", "new"]

        kept_pid = pids_in(pid["keep"])[0]
        await manager.reload(full=True)  # the seed's cycle restarts everything
        assert pids_in(pid["keep"])[0] != kept_pid
    print(f"diff reload (1 added, 1 restarted, 1 removed, 1 kept): {reload_s * 1000:.0f} ms")


async def test_reload_while_connecting_keeps_the_pending_attempt(tmp_path: Path) -> None:
    slow_pid, moving_pid = tmp_path / "slow.pid", tmp_path / "moving.pid"
    slow_flags = ["--tool", "echo", "--delay-start", "1.0", "--pid-file", str(slow_pid)]
    write_user_config({"slow": slow_flags, "moving": ["--delay-start", "1.0", "--pid-file", str(moving_pid)]})
    async with MCPManager(tmp_path, cache=None, startup_timeout_ms=50, on_uncached="late-join") as manager:
        await manager.discover_and_connect()
        assert manager.get_connection_status("slow") == "connecting"
        await wait_until(lambda: slow_pid.exists() and moving_pid.exists())
        slow_first, moving_first = pids_in(slow_pid)[0], pids_in(moving_pid)[0]
        write_user_config({"slow": slow_flags, "moving": ["--tool", "add", "--pid-file", str(moving_pid)]})
        await manager.reload()
        await manager.wait_for_connection("slow")
        await manager.wait_for_connection("moving")
        assert pids_in(slow_pid)[0] == slow_first  # the attempt in flight was left alone
        assert not alive(moving_first) and pids_in(moving_pid)[0] != moving_first
        assert tool_names(manager) == ["mcp_moving_add", "mcp_slow_echo"]


async def test_list_changed_arriving_during_reload_is_applied(tmp_path: Path) -> None:
    live_flags = ["--tool", "echo", "--list-changed-after", "0.5", "--pid-file", str(tmp_path / "live.pid")]
    write_user_config({"live": live_flags, "other": ["--tool", "echo"]})
    async with MCPManager(tmp_path, cache=None, startup_timeout_ms=0) as manager:
        await manager.discover_and_connect()
        live_pid = pids_in(tmp_path / "live.pid")[0]
        # The restarted server takes a second to start, so the notification lands mid-reload.
        write_user_config({"live": live_flags, "other": ["--tool", "add", "--delay-start", "1.0"]})
        await manager.reload()
        await wait_until(lambda: "mcp_live_late_tool" in tool_names(manager), within_s=5)
        assert pids_in(tmp_path / "live.pid")[0] == live_pid
        assert tool_names(manager) == ["mcp_live_echo", "mcp_live_late_tool", "mcp_other_add"]


async def test_a_watched_config_edit_applies_within_two_seconds(tmp_path: Path) -> None:
    write_user_config({"first": ["--tool", "echo"]})
    async with MCPManager(tmp_path, cache=None, startup_timeout_ms=0, watch=True) as manager:
        await manager.discover_and_connect()
        first = manager.get_connection("first")
        write_user_config({"first": ["--tool", "echo"], "second": ["--tool", "add"]})
        applied_s = await wait_until(
            lambda: manager.get_connection_status("second") == "connected", within_s=5
        )
        assert applied_s < 2.5, applied_s
        assert manager.get_connection("first") is first
        assert tool_names(manager) == ["mcp_first_echo", "mcp_second_add"]
        write_user_config({"second": ["--tool", "add"]})
        await wait_until(lambda: tool_names(manager) == ["mcp_second_add"], within_s=5)
    print(f"watched config edit applied in {applied_s * 1000:.0f} ms")


# -- shutdown (B4) ------------------------------------------------------------------------------


async def test_five_stubborn_servers_close_in_about_the_time_of_one(tmp_path: Path) -> None:
    pid_files = [tmp_path / f"stubborn{i}.pid" for i in range(5)]
    stubborn = [
        fake(f"stubborn{i}", "--ignore-sigterm", "--ignore-stdin-eof", "--pid-file", str(pid_files[i]))
        for i in range(5)
    ]
    manager = MCPManager("/", cache=None, startup_timeout_ms=0)
    async with manager:
        await manager.connect_servers(*fleet(*stubborn))
        assert len(manager.get_connected_servers()) == 5
        started = time.perf_counter()
    close_s = time.perf_counter() - started
    # One such server needs the stdin grace (1 s) and the SIGTERM grace (1 s) before SIGKILL;
    # one after another, five would take over 10 s.
    assert close_s < 4.5, close_s
    assert not any(alive(pids_in(pid_file)[0]) for pid_file in pid_files)
    print(f"closing 5 SIGTERM-ignoring servers: {close_s * 1000:.0f} ms")


HOST_SCRIPT = """
import sys, anyio
from mcpfleet.config.model import ServerConfig, SourceInfo
from mcpfleet.fleet.manager import MCPManager

async def main() -> None:
    fake, *pid_files = sys.argv[1:]
    configs = {
        f"s{i}": ServerConfig(
            name=f"s{i}", transport="stdio", command=sys.executable,
            args=(fake, "--spawn-grandchild", "--ignore-sigterm", "--pid-file", pid_file),
        )
        for i, pid_file in enumerate(pid_files)
    }
    source = SourceInfo("mcpfleet", "mcpfleet", "/virtual", "user")
    async with MCPManager("/", cache=None, startup_timeout_ms=0) as manager:
        result = await manager.connect_servers(configs, {name: source for name in configs})
        assert sorted(result.connected_servers) == sorted(configs), result.errors
        print("READY", flush=True)
        await anyio.sleep(300)

anyio.run(main)
"""


def test_no_process_outlives_a_host_killed_with_sigkill(tmp_path: Path) -> None:
    host_file = tmp_path / "host.py"
    host_file.write_text(HOST_SCRIPT)
    pid_files = [tmp_path / f"server{i}.pid" for i in range(2)]
    host = subprocess.Popen(
        [sys.executable, str(host_file), FAKE_SERVER, *map(str, pid_files)],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert host.stdout is not None
        assert host.stdout.readline().strip() == "READY"
        pids = [pid for pid_file in pid_files for pid in pids_in(pid_file)]
        assert len(pids) == 4 and all(alive(pid) for pid in pids)  # two servers, two grandchildren
        host.send_signal(signal.SIGKILL)
        host.wait(timeout=10)
        deadline = time.monotonic() + 5
        while any(alive(pid) for pid in pids) and time.monotonic() < deadline:
            time.sleep(0.05)
        survivors = [pid for pid in pids if alive(pid)]
        assert not survivors, f"processes outlived their host: {survivors}"
    finally:
        if host.poll() is None:
            host.kill()
            host.wait()
        if host.stdout is not None:
            host.stdout.close()
        for pid_file in pid_files:
            for pid in pids_in(pid_file) if pid_file.exists() else []:
                if alive(pid):
                    os.kill(pid, signal.SIGKILL)
