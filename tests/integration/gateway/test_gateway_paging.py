"""The gateway's lists in pages, and its first list complete on a cold cache (issues 22, 23).

A real SDK client over the stdio of ``mcpfleet serve --no-daemon`` (this checkout's), real
fake servers behind it (``tests/servers/fake_server.py``), a fresh home: no tool cache.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import mcp_types
import pytest
from mcp.shared.exceptions import MCPError
from tests.integration.gateway.gateway_harness import fake, open_gateway

pytestmark = pytest.mark.anyio

CLIENT_TIMEOUT_S = 180.0
"""Upper bound of one test's client session on a loaded machine (never a verdict)."""
PAGE_SIZE = 1000
"""The gateway's fixed page size (``gateway.paging.PAGE_SIZE``)."""


async def walk_tools(client: Any) -> tuple[list[str], int]:
    """Every tool name of every page, in order, and how many pages there were."""
    names: list[str] = []
    cursor: str | None = None
    pages = 0
    while True:
        page = await client.list_tools(cursor=cursor) if cursor is not None else await client.list_tools()
        pages += 1
        names += [tool.name for tool in page.tools]
        cursor = page.next_cursor
        if cursor is None:
            return names, pages


async def test_a_client_walking_the_pages_gets_every_tool_once(isolated_home: Path) -> None:
    servers = {
        "alpha": fake("alpha", "--tool", "echo", "--tools", "1200"),
        "beta": fake("beta", "--tool", "echo", "--tools", "900"),
    }
    with anyio.fail_after(CLIENT_TIMEOUT_S):
        async with open_gateway(isolated_home, servers, serve_args=["--no-daemon"]) as run:
            first = await run.client.list_tools()
            assert len(first.tools) == PAGE_SIZE
            assert first.next_cursor is not None
            names, pages = await walk_tools(run.client)
    assert pages == 3
    assert len(names) == len(set(names)) == 1201 + 901
    assert {"alpha_echo", "alpha_tool_1199", "beta_echo", "beta_tool_899"} <= set(names)


async def test_a_cursor_the_gateway_did_not_give_is_invalid_params(isolated_home: Path) -> None:
    servers = {"alpha": fake("alpha", "--tool", "echo")}
    with anyio.fail_after(CLIENT_TIMEOUT_S):
        async with open_gateway(isolated_home, servers, serve_args=["--no-daemon"]) as run:
            client = run.client
            for cursor in ("not-a-cursor", "WyJ0b29scyIsMTAsImdob3N0Il0", "WyJwcm9tcHRzIiwxLCJ4Il0"):
                with pytest.raises(MCPError) as refused:
                    await client.list_tools(cursor=cursor)
                assert refused.value.error.code == mcp_types.INVALID_PARAMS
                assert "cursor" in refused.value.error.message
            for listing in (client.list_resources, client.list_prompts, client.list_resource_templates):
                with pytest.raises(MCPError) as refused:
                    await listing(cursor="not-a-cursor")
                assert refused.value.error.code == mcp_types.INVALID_PARAMS
            # The session goes on.
            assert [tool.name for tool in (await client.list_tools()).tools] == ["alpha_echo"]


async def test_the_first_list_of_a_cold_cache_holds_a_slow_starting_server(isolated_home: Path) -> None:
    # "slow" reads nothing for 3 s, far past the 250 ms gate; nothing is cached in a fresh
    # home, so before this fix the first list held only "fast".
    servers = {
        "fast": fake("fast", "--tool", "echo"),
        "slow": fake("slow", "--tool", "add", "--delay-start", "3"),
    }
    with anyio.fail_after(CLIENT_TIMEOUT_S):
        async with open_gateway(isolated_home, servers, serve_args=["--no-daemon"]) as run:
            first = await run.client.list_tools()
    assert sorted(tool.name for tool in first.tools) == ["fast_echo", "slow_add"]


async def test_a_chosen_startup_timeout_caps_the_first_lists_wait(isolated_home: Path) -> None:
    # "never" waits for a file that is never created: only the cap lets the first list go.
    servers = {
        "fast": fake("fast", "--tool", "echo"),
        "never": {**fake("never", "--start-when-exists", str(isolated_home / "never")), "timeout": 600_000},
    }
    with anyio.fail_after(CLIENT_TIMEOUT_S):
        async with open_gateway(
            isolated_home, servers, serve_args=["--no-daemon"], global_args=["--startup-timeout", "2000"]
        ) as run:
            first = await run.client.list_tools()
    assert "never_echo" not in [tool.name for tool in first.tools]
