"""A gateway request is resolved once (``gateway.forward.Forward``) and goes one way.

The gateway is built by ``open_gateway``, as ``mcpfleet serve`` builds it, over a real fake
server; clients are SDK ``Client``s on the gateway's ``Server`` in this process.
"""

from __future__ import annotations

import contextlib
import json
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from mcp import Client
from tests.servers.fixtures import FAKE_SERVER, first_text

from mcpfleet.fleet.manager import MCPManager
from mcpfleet.gateway.assembly import GatewayOptions, open_gateway
from mcpfleet.gateway.budget import CALL_TOOL, ToolBudget
from mcpfleet.gateway.core import Gateway
from mcpfleet.gateway.forward import Forward
from mcpfleet.gateway.handlers import build_server
from mcpfleet.gateway.relay import Relay

pytestmark = pytest.mark.anyio


@asynccontextmanager
async def counted_gateway(home: Path, options: GatewayOptions) -> AsyncIterator[tuple[Gateway, list[str]]]:
    """A gateway over one fake server ``notes``, and the names each of its lookups asked for."""
    config = home / "servers.json"
    entry = {"command": sys.executable, "args": [str(FAKE_SERVER), "--name", "notes"]}
    config.write_text(json.dumps({"mcpServers": {"notes": entry}}))

    def own_fleet(relay: Relay) -> contextlib.nullcontext[MCPManager]:
        manager = MCPManager(
            home, cache=None, startup_timeout_ms=0, extra_config_paths=[config], server_requests=relay
        )
        return contextlib.nullcontext(manager)

    async with open_gateway(own_fleet, options) as gateway:
        looked_up: list[str] = []
        find_target = gateway.find_target

        async def counting(kind: Any, name: str) -> tuple[str, str] | None:
            looked_up.append(name)
            return await find_target(kind, name)

        gateway.find_target = counting  # type: ignore[method-assign]
        yield gateway, looked_up


async def test_a_call_resolves_its_tool_once_directly_and_through_call_tool(isolated_home: Path) -> None:
    """Before the Forward, a call looked its tool up in the handler and again in the core (and
    ``call_tool`` once more in the budget): now one lookup per call, by either route, with the
    same answer."""
    options = GatewayOptions(budget=ToolBudget("search"))
    async with (
        counted_gateway(isolated_home, options) as (gateway, looked_up),
        Client(build_server(gateway)) as client,
    ):
        direct = await client.call_tool("notes_echo", {"message": "hi"})
        assert first_text(direct) == "hi" and not direct.is_error
        assert looked_up == ["notes_echo"]

        looked_up.clear()
        inner = {"name": "notes_echo", "arguments": {"message": "through the pair"}}
        paired = await client.call_tool(CALL_TOOL, inner)
        assert first_text(paired) == "through the pair" and not paired.is_error
        assert looked_up == ["notes_echo"]


async def test_a_forward_names_the_server_its_connection_and_the_backend_name(isolated_home: Path) -> None:
    async with (
        counted_gateway(isolated_home, GatewayOptions()) as (gateway, _),
        Client(build_server(gateway), mode="legacy") as client,
    ):
        await client.list_tools()
        session = next(iter(gateway.sessions))
        forward = await gateway.resolve_call(session, "notes_echo", {"message": "x"})
        assert isinstance(forward, Forward)
        assert (forward.server, forward.backend_name, forward.answer) == ("notes", "echo", None)
        assert forward.connection is gateway.fleet.get_connection("notes")
        assert forward.client is session and dict(forward.arguments) == {"message": "x"}
        unknown = await gateway.resolve_call(session, "notes_nothing", {})
        assert unknown.server is None and unknown.served_name == "notes_nothing"
