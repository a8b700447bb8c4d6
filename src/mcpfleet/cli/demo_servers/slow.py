"""A server that takes its time to start, like an ``npx`` server fetching packages.

Run: ``python -m mcpfleet.cli.demo_servers.slow [--startup SECONDS]`` (stdio). It sleeps before
reading its first message, then offers a clock and a dice roller.
"""

from __future__ import annotations

import argparse
import random
import time
from datetime import UTC, datetime

from mcp.server.mcpserver import MCPServer


def build_server() -> MCPServer:
    server = MCPServer("slow")

    @server.tool(description="The current time in UTC, ISO 8601.")
    def clock_now() -> str:
        return datetime.now(UTC).isoformat(timespec="seconds")

    @server.tool(description="Roll `count` dice with `sides` sides each.")
    def roll_dice(count: int = 1, sides: int = 6) -> list[int]:
        return [random.randint(1, sides) for _ in range(count)]

    return server


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--startup", type=float, default=2.0, help="seconds to wait before serving")
    args = parser.parse_args()
    time.sleep(args.startup)
    build_server().run("stdio")


if __name__ == "__main__":
    main()
