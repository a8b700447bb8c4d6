"""The daemon's shared fleet: who shares which backend, lifetimes, routing, status.

Everything runs in this process (``SharedFleet`` and a ``Gateway`` per view, SDK clients over
memory streams) with real subprocess servers from ``tests/servers``.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
from mcp import Client
from tests.servers.fixtures import FAKE_SERVER

from mcpfleet import paths
from mcpfleet.config.profiles import DaemonSettings
from mcpfleet.daemon.fleet import SharedFleet
from mcpfleet.daemon.wire import FleetSpec
from mcpfleet.gateway.core import Gateway
from mcpfleet.gateway.relay import Relay
from mcpfleet.gateway.server import build_server

pytestmark = pytest.mark.anyio


def fake(name: str, *flags: str, **fields: Any) -> dict[str, Any]:
    return {"command": sys.executable, "args": [str(FAKE_SERVER), "--name", name, *flags], **fields}


def write_user_servers(servers: dict[str, dict[str, Any]]) -> None:
    path = paths.user_config_file()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"mcpServers": servers}))


async def test_a_view_serves_the_users_servers(isolated_home: Path) -> None:
    write_user_servers({"alpha": fake("alpha", "--tool", "echo")})
    async with SharedFleet(DaemonSettings(), cache=None) as fleet:
        relay = Relay()
        spec = FleetSpec(cwd=str(isolated_home), startup_timeout_ms=0)
        async with (
            fleet.attach(spec, session_id="s1", host="test", relay=relay) as view,
            Gateway(view, relay=relay) as gateway,
            Client(build_server(gateway)) as client,
        ):
            tools = await client.list_tools()
            assert [tool.name for tool in tools.tools] == ["alpha_echo"]
            result = await client.call_tool("alpha_echo", {"message": "hi"})
            assert not result.is_error
