"""``mcpfleet serve --no-daemon`` and tool pinning (B15): a rug pull is withheld from the
gateway's clients, a call to it answers an ``MCP error:`` naming the review, and an approval
made by another process reaches the client as ``list_changed`` and the tool."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import mcp_types
import pytest
from tests.integration.gateway.gateway_harness import open_gateway, wait_until
from tests.integration.pinning_fleet import EVENT_BOUND_S, HOSTILE_DESCRIPTION, rug_pull_entry, run_cli

pytestmark = pytest.mark.anyio


class ListChanges:
    """Counts ``tools/list_changed`` as a handshake-era client receives it."""

    def __init__(self) -> None:
        self.tools = 0

    async def __call__(self, message: Any) -> None:
        if isinstance(message, mcp_types.ToolListChangedNotification):
            self.tools += 1


def _text(result: mcp_types.CallToolResult) -> str:
    text = getattr(result.content[0], "text", None)
    assert isinstance(text, str)
    return text


async def test_the_gateway_withholds_a_rug_pull_until_it_is_approved(isolated_home: Path) -> None:
    flag = isolated_home / "turn-hostile"
    changes = ListChanges()
    async with open_gateway(
        isolated_home, {"rug": rug_pull_entry(flag)}, serve_args=("--no-daemon",), message_handler=changes
    ) as run:
        client = run.client

        async def served() -> dict[str, mcp_types.Tool]:
            return {tool.name: tool for tool in (await client.list_tools()).tools}

        assert set(await served()) == {"rug_echo", "rug_read_notes"}
        flag.touch()

        async def only_the_unchanged_tool() -> bool:
            return set(await served()) == {"rug_echo"}

        await wait_until(only_the_unchanged_tool, timeout_s=EVENT_BOUND_S)
        result = await client.call_tool("rug_read_notes", {})
        assert result.is_error
        assert _text(result).startswith("MCP error:")
        assert "mcpfleet tools review rug" in _text(result)
        assert "withheld until reviewed (`mcpfleet tools review rug`)" in run.stderr

        told_before = changes.tools
        config = isolated_home / "gateway-servers.json"
        approve = run_cli("--config", str(config), "tools", "approve", "rug", cwd=isolated_home)
        assert approve.returncode == 0, approve.stderr

        async def every_tool() -> bool:
            return set(await served()) == {"rug_echo", "rug_read_notes", "rug_exfiltrate"}

        await wait_until(lambda: changes.tools > told_before, timeout_s=EVENT_BOUND_S)
        await wait_until(every_tool, timeout_s=EVENT_BOUND_S)
        assert (await served())["rug_read_notes"].description == HOSTILE_DESCRIPTION
        assert _text(await client.call_tool("rug_read_notes", {})) == "called read_notes"


async def test_call_tool_of_the_tool_budget_answers_why_a_tool_is_withheld(isolated_home: Path) -> None:
    """Under ``--tools search`` the model calls through ``call_tool``: a withheld name answers
    the review, not "Unknown tool"."""
    flag = isolated_home / "turn-hostile"
    async with open_gateway(
        isolated_home, {"rug": rug_pull_entry(flag)}, serve_args=("--no-daemon", "--tools", "search")
    ) as run:
        client = run.client
        first = await client.call_tool("call_tool", {"name": "rug_read_notes", "arguments": {}})
        assert _text(first) == "called read_notes"
        flag.touch()

        async def withheld() -> bool:
            result = await client.call_tool("call_tool", {"name": "rug_read_notes", "arguments": {}})
            return bool(result.is_error) and "mcpfleet tools review rug" in _text(result)

        await wait_until(withheld, timeout_s=EVENT_BOUND_S)
        result = await client.call_tool("call_tool", {"name": "rug_read_notes", "arguments": {}})
        assert _text(result).startswith("MCP error:")
