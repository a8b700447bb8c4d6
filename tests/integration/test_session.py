"""The agent session over real servers: loading, naming, refresh, late connections,
sub-agents, and every /mcp command (S1, S3, S10-S15, S20, S21)."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import anyio
import pytest
from tests.conftest import PYTHON
from tests.servers.fixtures import FAKE_SERVER

from mcpfleet import (
    ToolResult,
    create_agent_session,
    discover_and_load_mcp_tools,
    discover_mcp_servers,
)
from mcpfleet.cli.slash import MCPCommandController
from mcpfleet.errors import ToolNotFoundError
from mcpfleet.fleet.tools import MCPTool
from mcpfleet.paths import user_config_file

pytestmark = pytest.mark.anyio
LOADED_GATE_MS = 5000
"""A start-up gate that a fake server makes even on a loaded machine (a test that needs a
server inside the gate must not bet on 100 ms)."""


def fake_entry(name: str, *flags: str) -> dict[str, Any]:
    return {"command": PYTHON, "args": [str(FAKE_SERVER), "--name", name, *flags]}


def write_user_config(servers: dict[str, dict[str, Any]]) -> Path:
    path = user_config_file()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"mcpServers": servers}))
    return path


class HostTool:
    """A tool of the host agent itself, which MCP refreshes must leave alone."""

    name = "read_file"
    description = "Read a file of the project"
    parameters: dict[str, Any] = {"type": "object"}  # noqa: RUF012

    async def execute(self, arguments: dict[str, Any] | None = None) -> ToolResult:
        return ToolResult(content=[], text="host", details={})


async def test_session_exposes_mcp_tools_with_their_names_and_lookups(tmp_path: Path) -> None:
    write_user_config({"files": fake_entry("files", "--tool", "echo", "--tool", "add")})
    session = await create_agent_session(tmp_path, cache=None, tools=[HostTool()])
    async with session:
        assert [tool.name for tool in session.tools] == ["mcp_files_add", "mcp_files_echo", "read_file"]
        by_name = session.get_tool("mcp_files_echo")
        assert by_name is not None
        assert session.get_tool("files/echo") is by_name
        assert session.get_tool("mcp__files__echo") is by_name
        assert session.get_tool("mcp_nothing_here") is None
        result = await by_name.execute({"message": "hello"})
        assert not result.is_error
        assert "hello" in result.text
        assert result.details["server"] == "files"
        assert result.details["provider"] == "mcpfleet"
        assert session.mcp_manager.get_connection_status("files") == "connected"


async def test_loader_paths_and_per_server_errors(tmp_path: Path) -> None:
    write_user_config(
        {
            "good": fake_entry("good", "--tool", "echo"),
            "broken": fake_entry("broken", "--exit-before-handshake", "--exit-code", "2"),
        }
    )
    result = await discover_and_load_mcp_tools(tmp_path, cache=None)
    assert result.manager is not None
    await result.manager.aclose()
    assert [(t.path, t.resolved_path) for t in result.tools] == [
        ("mcp:good via mcpfleet", "mcp:mcp_good_echo")
    ]
    assert [e.path for e in result.errors] == ["mcp:broken"]
    assert "exited with code 2" in result.errors[0].error
    assert result.connected_servers == ["good"]


async def test_discover_mcp_servers_has_the_loader_shape(tmp_path: Path) -> None:
    write_user_config({"good": fake_entry("good", "--tool", "echo")})
    result = await discover_mcp_servers(tmp_path)
    assert result.manager is not None
    await result.manager.aclose()
    assert [t.tool.name for t in result.tools] == ["mcp_good_echo"]


async def test_mcp_disabled_skips_discovery_entirely(tmp_path: Path) -> None:
    write_user_config({"good": fake_entry("good", "--tool", "echo")})
    session = await create_agent_session(tmp_path, enable_mcp=False, tools=[HostTool()])
    async with session:
        assert [t.name for t in session.tools] == ["read_file"]
        with pytest.raises(RuntimeError, match="MCP is disabled"):
            _ = session.mcp_manager


async def test_refresh_replaces_every_mcp_tool_and_keeps_host_tools(tmp_path: Path) -> None:
    write_user_config({"one": fake_entry("one", "--tool", "echo"), "two": fake_entry("two", "--tool", "add")})
    session = await create_agent_session(tmp_path, cache=None, tools=[HostTool()])
    async with session:
        manager = session.mcp_manager
        only_two = [t for t in manager.get_tools() if t.server_name == "two"]
        await session.refresh_mcp_tools(only_two)
        assert [t.name for t in session.tools] == ["mcp_two_add", "read_file"]
        await session.refresh_mcp_tools(manager.get_tools())
        assert [t.name for t in session.tools] == ["mcp_one_echo", "mcp_two_add", "read_file"]


async def test_late_connection_joins_the_session_by_itself(tmp_path: Path) -> None:
    # Late for sure: "slow" starts only once the gate has answered; the gate is long enough
    # for "fast" to make it on a loaded machine.
    arrive = tmp_path / "arrive"
    write_user_config(
        {
            "slow": fake_entry("slow", "--start-when-exists", str(arrive), "--tool", "echo"),
            "fast": fake_entry("fast", "--tool", "add"),
        }
    )
    session = await create_agent_session(
        tmp_path, cache=None, startup_timeout_ms=LOADED_GATE_MS, on_uncached="late-join"
    )
    async with session:
        assert [t.name for t in session.tools] == ["mcp_fast_add"]
        assert session.mcp_manager.get_connection_status("slow") == "connecting"
        arrive.touch()
        with anyio.fail_after(30):
            assert await session.wait_for_mcp_server("slow")
        assert [t.name for t in session.tools] == ["mcp_fast_add", "mcp_slow_echo"]


async def test_tools_changed_events_rebind_the_session_without_a_call(tmp_path: Path) -> None:
    write_user_config({"slow": fake_entry("slow", "--delay-start", "0.8", "--tool", "echo")})
    session = await create_agent_session(tmp_path, cache=None, startup_timeout_ms=50, on_uncached="late-join")
    async with session:
        assert session.tools == []
        changed = anyio.Event()
        session.mcp_manager.subscribe(lambda event: changed.set() if event.kind == "tools_changed" else None)
        with anyio.fail_after(10):
            await changed.wait()
        # The session's listener subscribed first and applies the change in place.
        assert [t.name for t in session.tools] == ["mcp_slow_echo"]


async def test_disconnects_return_with_the_session_already_in_step(tmp_path: Path) -> None:
    write_user_config({"one": fake_entry("one", "--tool", "echo"), "two": fake_entry("two", "--tool", "add")})
    session = await create_agent_session(tmp_path, cache=None, tools=[HostTool()])
    async with session:
        manager = session.mcp_manager
        child = session.create_subagent()
        await manager.disconnect_server("two")
        assert [t.name for t in session.tools] == ["mcp_one_echo", "read_file"]
        assert [t.name for t in child.tools] == ["mcp_one_echo"]
        await manager.disconnect_all()
        assert manager.get_tools() == []
        assert [t.name for t in session.tools] == ["read_file"]
        assert child.tools == []
        with pytest.raises(ToolNotFoundError):
            await session.call_tool("mcp_one_echo", {"message": "stale"})


async def test_subagent_shares_the_parent_connections(tmp_path: Path) -> None:
    pid_file = tmp_path / "pid"
    write_user_config({"files": fake_entry("files", "--tool", "echo", "--pid-file", str(pid_file))})
    parent = await create_agent_session(tmp_path, cache=None)
    async with parent:
        child = parent.create_subagent()
        assert child.mcp_manager is parent.mcp_manager
        assert [t.name for t in child.tools] == ["mcp_files_echo"]
        connection = parent.mcp_manager.get_connection("files")
        assert connection is not None
        assert connection.pid == int(pid_file.read_text().split()[0])
        async with child:
            result = await child.call_tool("mcp_files_echo", {"message": "from child"})
            assert "from child" in result.text
        # Closing the child left the parent's manager and server untouched.
        assert parent.mcp_manager.get_connection("files") is connection
        again = await parent.call_tool("mcp_files_echo", {"message": "parent"})
        assert "parent" in again.text


async def test_tool_error_and_transport_error_are_results_not_exceptions(tmp_path: Path) -> None:
    write_user_config({"box": fake_entry("box", "--tool", "fail", "--tool", "crash")})
    session = await create_agent_session(tmp_path, cache=None)
    async with session:
        failed = await session.call_tool("mcp_box_fail", {"message": "nope"})
        assert failed.is_error
        assert "nope" in failed.text
        crashed = await session.call_tool("mcp_box_crash", {"code": 5})
        assert crashed.is_error
        assert crashed.text.startswith("MCP error: ")


async def test_a_cancelled_call_stays_a_cancellation_and_the_connection_survives(tmp_path: Path) -> None:
    write_user_config({"box": fake_entry("box", "--tool", "sleep", "--tool", "echo")})
    session = await create_agent_session(tmp_path, cache=None)
    async with session:
        sleeper = session.get_tool("mcp_box_sleep")
        assert sleeper is not None
        with anyio.move_on_after(0.3) as scope:
            await sleeper.execute({"seconds": 5})
        assert scope.cancelled_caught
        result = await session.call_tool("mcp_box_echo", {"message": "still here"})
        assert "still here" in result.text


async def test_disabled_servers_are_skipped_silently_never_reported_as_failures(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    write_user_config(
        {
            "files": fake_entry("files", "--tool", "echo"),
            "off": {**fake_entry("off", "--tool", "add"), "enabled": False},
        }
    )
    with caplog.at_level(logging.INFO, logger="mcpfleet"):
        session = await create_agent_session(tmp_path, cache=None)
        async with session:
            assert session.mcp_errors == []
            assert not [r for r in caplog.records if "mcp:off" in r.getMessage() or '"off"' in r.getMessage()]
            controller = MCPCommandController(session)
            reloaded = await controller.handle("/mcp reload")
            assert "failed" not in reloaded
            assert session.mcp_errors == []
            listing = await controller.handle("/mcp list")
            assert "○ off: disabled [mcpfleet, user]" in listing
            assert "● files: connected" in listing

            # With every server switched off, the list still says what is there and why it is quiet.
            assert await controller.handle("/mcp disable files") == "files disabled."
            listing = await controller.handle("/mcp list")
            assert listing.splitlines() == [
                "○ files: disabled [mcpfleet, user]",
                "○ off: disabled [mcpfleet, user]",
            ]
            assert session.mcp_errors == []
            assert "failed" not in await controller.handle("/mcp reload --full")
            assert session.mcp_errors == []


# -- /mcp commands ----------------------------------------------------------------------


@pytest.fixture
async def controller(tmp_path: Path) -> Any:
    write_user_config(
        {
            "files": fake_entry("files", "--tool", "echo"),
            "broken": fake_entry("broken", "--exit-before-handshake", "--exit-code", "7"),
        }
    )
    session = await create_agent_session(tmp_path, cache=None)
    async with session:
        yield MCPCommandController(session)


async def test_mcp_help_and_unknown_subcommands(controller: MCPCommandController) -> None:
    assert "/mcp reload" in await controller.handle("/mcp")
    assert "/mcp reload" in await controller.handle("/mcp help")
    assert (
        await controller.handle("/mcp frobnicate")
        == "Unknown subcommand: frobnicate. Type /mcp help for usage."
    )
    assert await controller.handle("/mcp reconnect") == "Usage: /mcp reconnect NAME"
    assert "Unknown option: --bogus" in await controller.handle("/mcp reload --bogus")
    assert "Could not parse" in await controller.handle("/mcp test 'unclosed")


async def test_mcp_list_shows_states_counts_and_errors(controller: MCPCommandController) -> None:
    listing = await controller.handle("/mcp list")
    assert "● files: connected, 1 tool [mcpfleet, user]" in listing
    assert "broken: failed" in listing
    assert "exited with code 7" in listing


async def test_mcp_reload_keeps_unchanged_servers_and_full_reload_restarts_them(
    controller: MCPCommandController,
) -> None:
    session = controller.session
    before = session.mcp_manager.get_connection("files")
    text = await controller.handle("/mcp reload")
    assert "MCP reload complete" in text
    assert "broken: " in text
    assert session.mcp_manager.get_connection("files") is before  # unchanged config: same process
    text = await controller.handle("/mcp reload --full")
    assert "1 connected" in text
    after = session.mcp_manager.get_connection("files")
    assert after is not None and after is not before
    assert [t.name for t in session.tools] == ["mcp_files_echo"]


async def test_mcp_reconnect_and_test(controller: MCPCommandController) -> None:
    manager = controller.session.mcp_manager
    before = manager.get_connection("files")
    assert await controller.handle("/mcp reconnect files") == 'Reconnected to "files". Tools: 1'
    assert manager.get_connection("files") is not before
    tested = await controller.handle("/mcp test files")
    assert tested.startswith("Connection successful in ")
    assert "1 tool: echo" in tested
    assert "No active MCP server" in await controller.handle("/mcp test ghost")


async def test_mcp_disable_then_enable_is_persisted(controller: MCPCommandController) -> None:
    session = controller.session
    assert await controller.handle("/mcp disable files") == "files disabled."
    assert session.get_tool("mcp_files_echo") is None
    # The server lives in mcpfleet's own user file, so the decision is written into its entry.
    assert json.loads(user_config_file().read_text())["mcpServers"]["files"]["enabled"] is False
    assert await controller.handle("/mcp enable files") == "files enabled."
    assert session.get_tool("mcp_files_echo") is not None


async def test_mcp_add_and_remove(controller: MCPCommandController) -> None:
    session = controller.session
    added = await controller.handle(f"/mcp add extra -- {PYTHON} {FAKE_SERVER} --name extra --tool add")
    assert added.startswith('+ Added server "extra" to ')
    assert "extra" in json.loads(user_config_file().read_text())["mcpServers"]
    assert session.get_tool("mcp_extra_add") is not None
    assert "exactly one" in await controller.handle("/mcp add nothing")
    assert await controller.handle("/mcp add web --transport ftp --url x") == (
        "Invalid --transport value. Use http or sse."
    )
    removed = await controller.handle("/mcp remove extra")
    assert removed.startswith('- Removed server "extra" from ')
    assert session.get_tool("mcp_extra_add") is None
    assert "extra" not in json.loads(user_config_file().read_text())["mcpServers"]


async def test_mcp_resources_and_prompts(controller: MCPCommandController) -> None:
    resources = await controller.handle("/mcp resources")
    prompts = await controller.handle("/mcp prompts")
    assert resources.startswith("files: ")
    assert prompts.startswith("/files:")


def test_deferred_tools_are_mcp_tools() -> None:
    # The whole public surface is pinned in tests/unit/test_public_surface.py.
    import mcpfleet

    assert issubclass(mcpfleet.DeferredMCPTool, MCPTool)
