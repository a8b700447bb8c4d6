"""fastmcp's proxy kept connected: ``create_proxy`` over a ``Client`` of an ``mcpServers`` config that
is connected before the proxy serves (fastmcp's documented way to reuse backend sessions), served
on stdio. ``fastmcp run mcp.json`` instead opens a fresh session, hence fresh backends, per request.

Run from the fastmcp venv by the gateway benchmark: ``python fastmcp_proxy.py CONFIG_JSON``.
"""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

from fastmcp import Client
from fastmcp.server import create_proxy


async def serve(config: dict[str, Any]) -> None:
    async with Client(config) as backends:
        await create_proxy(backends).run_stdio_async(show_banner=False)


if __name__ == "__main__":
    with open(sys.argv[1]) as config_file:
        asyncio.run(serve(json.load(config_file)))
