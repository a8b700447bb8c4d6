"""Running ``mcpfleet serve`` (this checkout's, as a subprocess) for the gateway tests.

``open_gateway`` writes an ``mcpServers`` config into the test's home, starts
``mcpfleet --config FILE serve …`` on stdio and yields the SDK's ``Client`` connected to it,
in the era asked for (``legacy``: the ``initialize`` handshake; ``2026-07-28``: per-request
``_meta``). The gateway's stderr goes to a file the test can read (``GatewayRun.stderr``).
``fake(name, *flags)`` is one ``tests/servers/fake_server.py`` entry.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client
from tests.servers.fixtures import FAKE_SERVER

BIN_DIR = Path(sys.executable).parent
MCPFLEET = BIN_DIR / "mcpfleet"
MODERN = "2026-07-28"
ERAS = ("legacy", MODERN)


def fake(name: str, *flags: str) -> dict[str, Any]:
    """The config entry of one fake stdio server."""
    return {"command": sys.executable, "args": [str(FAKE_SERVER), "--name", name, *flags]}


def write_config(home: Path, servers: dict[str, dict[str, Any]]) -> Path:
    config = home / "gateway-servers.json"
    config.write_text(json.dumps({"mcpServers": servers}))
    return config


def serve_command(config: Path, *serve_args: str, global_args: Sequence[str] = ()) -> list[str]:
    return [str(MCPFLEET), "--config", str(config), *global_args, "serve", *serve_args]


@dataclass
class GatewayRun:
    client: Client
    stderr_path: Path

    @property
    def stderr(self) -> str:
        return self.stderr_path.read_text(errors="replace")


@asynccontextmanager
async def open_gateway(
    home: Path,
    servers: dict[str, dict[str, Any]],
    *,
    mode: str = "legacy",
    serve_args: Sequence[str] = (),
    global_args: Sequence[str] = (),
    cwd: Path | None = None,
    **client_options: Any,
) -> AsyncIterator[GatewayRun]:
    """``mcpfleet serve`` over stdio with ``servers`` configured, and a client connected to it."""
    config = write_config(home, servers)
    command = serve_command(config, *serve_args, global_args=global_args)
    params = StdioServerParameters(
        command=command[0], args=command[1:], env=dict(os.environ), cwd=str(cwd or home)
    )
    stderr_path = home / f"gateway-stderr-{anyio.current_time():.6f}.log"
    with stderr_path.open("w") as errlog:
        async with Client(stdio_client(params, errlog=errlog), mode=mode, **client_options) as client:
            yield GatewayRun(client, stderr_path)


async def wait_until(predicate: Any, *, timeout_s: float = 20.0, interval_s: float = 0.05) -> None:
    """Poll an async (or plain) predicate until it holds; fail after ``timeout_s``."""
    with anyio.fail_after(timeout_s):
        while True:
            outcome = predicate()
            if hasattr(outcome, "__await__"):
                outcome = await outcome
            if outcome:
                return
            await anyio.sleep(interval_s)
