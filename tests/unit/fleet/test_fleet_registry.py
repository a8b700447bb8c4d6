"""One record per server, without any server: phases, enlisting again, and retiring."""

from __future__ import annotations

import pytest

from mcpfleet.client.definitions import ToolDefinition
from mcpfleet.config.model import ServerConfig, SourceInfo
from mcpfleet.fleet.events import EventHub, ManagerEvent
from mcpfleet.fleet.registry import Attempt, Phase, Reconnection, ServerRegistry, ServerSlot
from mcpfleet.fleet.supervision import ReconnectPolicy, Supervisor
from mcpfleet.fleet.tool_list import ToolSlice, build_tools

pytestmark = pytest.mark.anyio

SOURCE = SourceInfo("claude-code", "Claude Code", "/home/u/.claude.json", "user")


class _Backend:
    def get_provider_name(self, server_name: str) -> str | None:
        return None

    async def call_tool(self, server_name: str, tool_name: str, arguments: object, **_: object) -> object:
        raise AssertionError("not called in this test")

    async def wait_for_connection(self, server_name: str) -> None:
        raise AssertionError("not called in this test")


def registry() -> tuple[ServerRegistry, list[ManagerEvent]]:
    events = EventHub()
    seen: list[ManagerEvent] = []
    events.subscribe(seen.append)
    built = ServerRegistry(
        events,
        Supervisor(ReconnectPolicy(crash_limit=0)),
        lambda slices, provider_of: build_tools(slices, _Backend(), provider_of),
    )
    return built, seen


def phase_of(slot: ServerSlot) -> Phase:
    """Read afresh: the test changes the record between two reads."""
    return slot.phase


def config(name: str = "files") -> ServerConfig:
    return ServerConfig(name=name, transport="stdio", command="files-server")


async def test_a_new_slot_is_disconnected_then_connecting_with_an_attempt() -> None:
    servers, _ = registry()
    slot = servers.enlist("files", config(), SOURCE)
    assert (slot.phase, slot.connection_status, slot.running) == (Phase.DISCONNECTED, "disconnected", False)
    slot.attempt = Attempt(slot, slot.config)
    assert (slot.phase, slot.connection_status, slot.running) == (Phase.CONNECTING, "connecting", True)
    assert slot.phase == "connecting"  # the phase reads as its name


async def test_failed_suspended_and_reconnecting_are_derived_from_the_record() -> None:
    servers, seen = registry()
    slot = servers.enlist("files", config(), SOURCE)
    servers.fail(slot, "exited with code 3")
    assert phase_of(slot) is Phase.FAILED and slot.error == "exited with code 3"
    assert [(e.kind, e.error) for e in seen] == [("failed", "exited with code 3")]
    slot.breaker.record_crash()
    slot.breaker.suspension = "crashed too often"
    assert phase_of(slot) is Phase.SUSPENDED
    slot.reconnection = Reconnection()
    assert phase_of(slot) is Phase.RECONNECTING and slot.connection_status == "disconnected"
    snapshot = slot.snapshot()
    assert (snapshot.state, snapshot.status, snapshot.recent_crashes) == ("reconnecting", "disconnected", 1)
    assert snapshot.source == SOURCE and snapshot.last_error == "exited with code 3"


async def test_enlisting_a_stopped_server_again_clears_its_error_and_lifts_its_suspension() -> None:
    servers, _ = registry()
    slot = servers.enlist("files", config(), None)
    servers.fail(slot, "crashed")
    slot.breaker.suspension = "crashed too often"
    again = servers.enlist("files", config(), SOURCE)
    assert again is slot
    assert (again.error, again.breaker.suspension, again.source) == (None, None, SOURCE)


async def test_retire_cancels_the_work_in_flight_and_forgets_the_server() -> None:
    servers, _ = registry()
    slot = servers.enlist("files", config(), SOURCE)
    attempt = slot.attempt = Attempt(slot, slot.config)
    reconnection = slot.reconnection = Reconnection()
    slot.tools = ToolSlice((ToolDefinition(name="read"),), deferred=True)
    retired = servers.retire("files")
    assert retired is not None
    assert (retired.attempt, retired.had_tools, retired.was_running) == (attempt, True, True)
    assert attempt.scope.cancel_called and reconnection.scope.cancel_called
    assert slot.is_retired() and "files" not in servers
    assert servers.retire("files") is None
    fresh = servers.enlist("files", config(), SOURCE)
    assert fresh is not slot and not fresh.is_retired() and fresh.tools is None


async def test_tools_follow_their_slices_and_retiring_all_ends_every_server() -> None:
    servers, seen = registry()
    for name in ("b", "a"):
        servers.set_tools(
            servers.enlist(name, config(name), SOURCE), ToolSlice((ToolDefinition("x"),), False)
        )
    assert [t.name for t in servers.tools] == ["mcp_a_x", "mcp_b_x"]
    assert [t.provider_name for t in servers.tools] == ["Claude Code", "Claude Code"]
    assert [(e.kind, e.server) for e in seen] == [("tools_changed", "b"), ("tools_changed", "a")]
    retired = servers.retire_all()
    assert sorted(r.name for r in retired) == ["a", "b"] and len(servers) == 0
    await servers.close(*retired, within_s=1.0)
    assert servers.tools == []
    assert [(e.kind, e.server) for e in seen[2:]] == [("tools_changed", "a"), ("tools_changed", "b")]
