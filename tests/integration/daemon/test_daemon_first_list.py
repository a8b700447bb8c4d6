"""Through the daemon, a session's first list waits for servers with nothing cached, and lists
are served in pages (issues 22, 23): a real SDK client over ``mcpfleet serve`` (the shim), the
daemon it starts, real fake servers, a fresh home with no tool cache."""

from __future__ import annotations

from pathlib import Path

import anyio
import mcp_types
import pytest
from mcp.shared.exceptions import MCPError
from tests.integration.daemon.daemon_harness import fake, user_config
from tests.integration.daemon.test_shim_daemon import shim_client
from tests.integration.gateway.test_gateway_paging import CLIENT_TIMEOUT_S, PAGE_SIZE, walk_tools

pytestmark = pytest.mark.anyio


async def test_a_sessions_first_list_holds_a_slow_starting_server(isolated_home: Path) -> None:
    user_config(
        {
            "fast": fake("fast", "--tool", "echo"),
            "slow": fake("slow", "--tool", "add", "--delay-start", "3"),
        }
    )
    with anyio.fail_after(CLIENT_TIMEOUT_S):
        async with shim_client(isolated_home) as client:
            first = await client.list_tools()
    assert sorted(tool.name for tool in first.tools) == ["fast_echo", "slow_add"]


async def test_a_session_walks_the_pages_and_an_unknown_cursor_is_invalid_params(isolated_home: Path) -> None:
    user_config({"big": fake("big", "--tool", "echo", "--tools", "1500")})
    with anyio.fail_after(CLIENT_TIMEOUT_S):
        async with shim_client(isolated_home) as client:
            first = await client.list_tools()
            assert len(first.tools) == PAGE_SIZE
            names, pages = await walk_tools(client)
            with pytest.raises(MCPError) as refused:
                await client.list_tools(cursor="not-a-cursor")
    assert pages == 2
    assert len(names) == len(set(names)) == 1501
    assert refused.value.error.code == mcp_types.INVALID_PARAMS
