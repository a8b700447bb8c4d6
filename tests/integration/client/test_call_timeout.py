"""Every tool call is bounded: 10 minutes unless the server's ``toolTimeout`` or the call
says otherwise. A call that runs out ends in an ``MCP error:`` result naming the server,
the tool and the limit; the server is told (``notifications/cancelled``) and the connection
stays up for the next call."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest
from tests.servers.fixtures import fake_server_config

from mcpfleet.config import model
from mcpfleet.config.model import ServerConfig, SourceInfo
from mcpfleet.fleet.manager import AnyTool, MCPManager

pytestmark = pytest.mark.anyio

SOURCE = SourceInfo("mcpfleet", "mcpfleet", "/virtual/mcp.json", "user")


async def connected(manager: MCPManager, config: ServerConfig) -> None:
    result = await manager.connect_servers({config.name: config}, {config.name: SOURCE})
    assert config.name in result.connected_servers, result.errors


def tool(manager: MCPManager, name: str) -> AnyTool:
    return next(candidate for candidate in manager.get_tools() if candidate.name == name)


async def cancellation_reached(manager: MCPManager, name: str) -> bool:
    """Whether the server logged a ``notifications/cancelled`` (polled: it arrives a moment later)."""
    for _ in range(250):
        if any(line.startswith("cancelled request") for line in manager.get_server_state(name).stderr_tail):
            return True
        await anyio.sleep(0.02)
    return False


@pytest.mark.parametrize("tool_name", ["hang", "wrong_id"])
async def test_a_call_past_the_server_tool_timeout_is_an_mcp_error_and_the_server_is_told(
    tool_name: str,
) -> None:
    config = fake_server_config("stuck", "--hostile-tools", tool_timeout_ms=500)
    async with MCPManager("/", cache=None, startup_timeout_ms=0) as manager:
        await connected(manager, config)
        with anyio.fail_after(30):
            result = await tool(manager, f"mcp_stuck_{tool_name}").execute({})
        assert result.is_error
        assert result.text.startswith("MCP error: ")
        assert f'MCP tool {tool_name} on server "stuck" timed out' in result.text
        assert "(timeout 500ms" in result.text
        assert 'raise "toolTimeout" in its config or pass a longer timeout to the call' in result.text
        assert await cancellation_reached(manager, "stuck")
        echo = await tool(manager, "mcp_stuck_echo").execute({"message": "next call"})
        assert not echo.is_error and echo.structured == {"message": "next call"}


async def test_a_call_without_any_configured_bound_gets_the_default(monkeypatch: pytest.MonkeyPatch) -> None:
    assert model.DEFAULT_TOOL_TIMEOUT_MS == 10 * 60 * 1000
    assert ServerConfig(name="s", transport="stdio", command="x").effective_tool_timeout_ms == 600_000
    # The default itself is ten minutes; the test shortens it to see it end a call.
    monkeypatch.setattr(model, "DEFAULT_TOOL_TIMEOUT_MS", 400)
    async with MCPManager("/", cache=None, startup_timeout_ms=0) as manager:
        await connected(manager, fake_server_config("unbounded", "--hostile-tools"))
        with anyio.fail_after(30):
            result = await tool(manager, "mcp_unbounded_hang").execute({})
        assert result.is_error and "(timeout 400ms" in result.text
        assert await cancellation_reached(manager, "unbounded")


async def test_the_bound_of_one_call_wins_and_zero_means_none(tmp_path: Path) -> None:
    config = fake_server_config("percall", "--hostile-tools", tool_timeout_ms=60_000)
    async with MCPManager(tmp_path, cache=None, startup_timeout_ms=0) as manager:
        await connected(manager, config)
        with anyio.fail_after(30):
            result = await tool(manager, "mcp_percall_hang").execute({}, timeout_ms=300)
        assert result.is_error and "(timeout 300ms" in result.text
        unbounded = fake_server_config("nolimit", "--tool", "sleep", tool_timeout_ms=0)
        await connected(manager, unbounded)
        slept = await tool(manager, "mcp_nolimit_sleep").execute({"seconds": 0.3})
        assert not slept.is_error and slept.text == "slept 0.3"
