"""Poisoning warnings against the reference servers running now: server-everything and
server-filesystem (``make test`` installs both into ``.tools``), connected for real, their
``tools/list`` read as the pinning review reads it. Not one of their tools may warn, even with
the two in one fleet (a reference to the other's tools would be a false alarm); the unit tests
hold a captured copy of these and of the memory and git servers, so this one catches a new
release that trips a rule."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from mcpfleet.client import connect_to_server
from mcpfleet.client.definitions import ToolDefinition
from mcpfleet.config.model import ServerConfig
from mcpfleet.fleet.poisoning import poisoning_warnings

pytestmark = pytest.mark.anyio

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ROOT / ".tools"
EVERYTHING = PACKAGES / "everything/node_modules/@modelcontextprotocol/server-everything/dist/index.js"
FILESYSTEM = PACKAGES / "filesystem/node_modules/@modelcontextprotocol/server-filesystem/dist/index.js"
NODE = shutil.which("node")


def wire_json(tool: ToolDefinition) -> dict[str, Any]:
    if tool.raw is not None:
        return tool.raw
    return {
        "name": tool.name,
        "title": tool.title,
        "description": tool.description,
        "inputSchema": tool.input_schema,
        "outputSchema": tool.output_schema,
        "annotations": tool.annotations,
    }


async def listed_tools(name: str, args: tuple[str, ...], cwd: Path) -> list[dict[str, Any]]:
    assert NODE is not None
    config = ServerConfig(name=name, transport="stdio", command=NODE, args=args)
    async with connect_to_server(name, config, cwd=cwd) as connection:
        return [wire_json(tool) for tool in await connection.list_tools()]


@pytest.mark.skipif(
    NODE is None or not EVERYTHING.exists() or not FILESYSTEM.exists(),
    reason="server-everything and server-filesystem are not installed in .tools; run: make test",
)
async def test_the_running_reference_servers_tools_give_no_warning(tmp_path: Path) -> None:
    fleet = {
        "everything": await listed_tools("everything", (str(EVERYTHING), "stdio"), tmp_path),
        "filesystem": await listed_tools("filesystem", (str(FILESYSTEM), str(tmp_path)), tmp_path),
    }
    assert len(fleet["everything"]) >= 10 and len(fleet["filesystem"]) >= 10

    for server, tools in fleet.items():
        others = {name: [tool["name"] for tool in listed] for name, listed in fleet.items() if name != server}
        for tool in tools:
            warnings = poisoning_warnings(tool, server=server, peers=tools, other_servers_tools=others)
            assert warnings == [], (server, tool["name"], warnings)
