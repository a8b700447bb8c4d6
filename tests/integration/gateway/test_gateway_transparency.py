"""What a backend says reaches the client as the backend said it: its JSON-RPC errors (code,
message, ``data``), and the gateway's own refusals in the shape the protocol asks for.

Each test here fails without the fix it is named for; ``tests/conformance/test_server_scenarios.py``
judges the same behaviour through the official suite, these pin it with the SDK's ``Client``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import mcp_types
import pytest
from mcp.shared.exceptions import MCPError
from tests.integration.gateway.gateway_harness import ERAS, fake, open_gateway

pytestmark = pytest.mark.anyio

WAIT_FOR_ALL = ("--startup-timeout", "0")


@pytest.mark.parametrize("mode", ERAS)
async def test_a_backend_json_rpc_error_on_a_call_reaches_the_client_unchanged(
    isolated_home: Path, mode: str
) -> None:
    servers = {"alpha": fake("alpha", "--tool", "refuse")}
    needs_sampling: dict[str, Any] = {"requiredCapabilities": {"sampling": {}}}
    async with open_gateway(isolated_home, servers, mode=mode, global_args=WAIT_FOR_ALL) as run:
        with pytest.raises(MCPError) as refused:
            await run.client.call_tool(
                "alpha_refuse", {"code": -32021, "message": "needs sampling", "data": needs_sampling}
            )
    # Not an "MCP error:" result: the backend answered, and its answer is a JSON-RPC error.
    expected = mcp_types.ErrorData(code=-32021, message="needs sampling", data=needs_sampling)
    assert refused.value.error == expected


async def test_a_resource_the_gateway_does_not_serve_is_invalid_params_naming_the_uri(
    isolated_home: Path,
) -> None:
    async with open_gateway(isolated_home, {"alpha": fake("alpha")}, global_args=WAIT_FOR_ALL) as run:
        with pytest.raises(MCPError) as unknown:
            await run.client.read_resource("test://nonexistent")
    assert unknown.value.error.code == mcp_types.INVALID_PARAMS
    assert unknown.value.error.data == {"uri": "test://nonexistent"}  # SEP-2164


async def test_a_backend_resource_error_keeps_its_data_with_the_uri_served_by_the_gateway(
    isolated_home: Path,
) -> None:
    async with open_gateway(isolated_home, {"alpha": fake("alpha")}, global_args=WAIT_FOR_ALL) as run:
        with pytest.raises(MCPError) as missing:
            await run.client.read_resource("mcpfleet://alpha/fake://nothing-here")
    assert missing.value.error.code == -32002
    assert missing.value.error.message == "Resource not found: fake://nothing-here"
    # The backend's URI in data, under the name the client asked for (--prefix always).
    assert missing.value.error.data == {"uri": "mcpfleet://alpha/fake://nothing-here"}
