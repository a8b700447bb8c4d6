"""A 2026-07-28 client calling a 2026-07-28 backend through ``mcpfleet serve``: the backend
deals with the client itself.

It is told the client's own capabilities (not the fleet's), and its ``input_required``
results reach the client as they are (its keys, a new ``requestState`` each round), the
client's retries going back to it. The backend is ``tests/servers/conformance_backend.py``
(on stdio) behind this checkout's ``mcpfleet serve`` (on stdio); the client is the SDK's,
driving the rounds by hand.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import mcp_types
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.shared.exceptions import MCPError
from tests.servers.fixtures import CONFORMANCE_BACKEND

pytestmark = pytest.mark.anyio

MODERN = "2026-07-28"
MCPFLEET = Path(sys.executable).parent / "mcpfleet"


@asynccontextmanager
async def gateway_client(home: Path, **callbacks: Any) -> AsyncIterator[Client]:
    """A 2026-07-28 SDK client of ``mcpfleet serve --prefix none`` with the conformance backend,
    the backend waited for at start-up."""
    config = home / "conformance-servers.json"
    config.write_text(
        json.dumps(
            {"mcpServers": {"backend": {"command": sys.executable, "args": [str(CONFORMANCE_BACKEND)]}}}
        )
    )
    args = ["--config", str(config), "--startup-timeout", "0", "--no-cache", "serve", "--prefix", "none"]
    params = StdioServerParameters(command=str(MCPFLEET), args=args, env=dict(os.environ), cwd=str(home))
    with (home / "gateway-stderr.log").open("w") as errlog:
        async with Client(stdio_client(params, errlog=errlog), mode=MODERN, **callbacks) as client:
            yield client


async def elicit_name(context: Any, params: mcp_types.ElicitRequestParams) -> mcp_types.ElicitResult:
    return mcp_types.ElicitResult(action="accept", content={"name": "Ada"})


def accept(content: dict[str, Any]) -> mcp_types.ElicitResult:
    return mcp_types.ElicitResult(action="accept", content=content)


def text_of(result: object) -> str:
    assert isinstance(result, mcp_types.CallToolResult), result
    block = result.content[0]
    assert isinstance(block, mcp_types.TextContent), block
    return block.text


async def test_the_backend_is_told_the_calling_clients_capabilities(isolated_home: Path) -> None:
    """The fleet declares sampling to every backend; a client that did not is refused by the
    backend itself (-32021), and one that declared elicitation only is asked only that."""
    async with gateway_client(isolated_home, elicitation_callback=elicit_name) as client:
        with pytest.raises(MCPError) as refused:
            await client.session.call_tool("test_missing_capability", {}, allow_input_required=True)
        assert refused.value.code == mcp_types.MISSING_REQUIRED_CLIENT_CAPABILITY
        asked = await client.session.call_tool(
            "test_input_required_result_capabilities", {}, allow_input_required=True
        )
        assert isinstance(asked, mcp_types.InputRequiredResult)
        assert set(asked.input_requests or {}) == {"user_name"}


async def test_the_backends_rounds_reach_the_client_as_they_are(isolated_home: Path) -> None:
    """Each round carries the backend's own keys and a new ``requestState``; extra answers
    the client sends along are the backend's to ignore."""
    async with gateway_client(isolated_home, elicitation_callback=elicit_name) as client:
        tool = "test_input_required_result_multi_round"
        first = await client.session.call_tool(tool, {}, allow_input_required=True)
        assert isinstance(first, mcp_types.InputRequiredResult)
        assert set(first.input_requests or {}) == {"step1"}
        assert first.request_state is not None
        second = await client.session.call_tool(
            tool,
            {},
            input_responses={"step1": accept({"name": "Ada"}), "unasked": accept({"x": "ignored"})},
            request_state=first.request_state,
            allow_input_required=True,
        )
        assert isinstance(second, mcp_types.InputRequiredResult)
        assert set(second.input_requests or {}) == {"step2"}
        # The backend's state of the next round (the SDK seals it, so it reads differently).
        assert second.request_state not in (None, first.request_state)
        final = await client.session.call_tool(
            tool,
            {},
            input_responses={"step2": accept({"color": "green"})},
            request_state=second.request_state,
            allow_input_required=True,
        )
        assert text_of(final) == "Ada likes green"
