"""The reference server ``@modelcontextprotocol/server-everything`` (npm), stdio and streamable HTTP.

Installed by: ``npm install --prefix .tools/everything @modelcontextprotocol/server-everything``
(the tests skip when it is absent).
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.servers.fixtures import first_text

from mcpfleet.client import connect_to_server
from mcpfleet.config.model import ServerConfig

pytestmark = pytest.mark.anyio

ROOT = Path(__file__).resolve().parents[3]
ENTRY = (
    ROOT
    / ".tools"
    / "everything"
    / "node_modules"
    / "@modelcontextprotocol"
    / "server-everything"
    / "dist"
    / "index.js"
)
NODE = shutil.which("node")

requires_everything = pytest.mark.skipif(
    NODE is None or not ENTRY.exists(),
    reason="run: npm install --prefix .tools/everything @modelcontextprotocol/server-everything",
)


@requires_everything
async def test_everything_over_stdio(tmp_path: Path) -> None:
    assert NODE is not None
    config = ServerConfig(name="everything", transport="stdio", command=NODE, args=(str(ENTRY), "stdio"))
    async with connect_to_server("everything", config, cwd=tmp_path) as connection:
        names = {tool.name for tool in await connection.list_tools()}
        assert "echo" in names
        result = await connection.call_tool("echo", {"message": "hello everything"})
        assert "hello everything" in first_text(result)
        assert await connection.list_resources()
        assert await connection.list_prompts()


@pytest.fixture
def everything_http_url() -> Iterator[str]:
    """server-everything in streamable-HTTP mode on a free port; killed after the test."""
    assert NODE is not None
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    process = subprocess.Popen(
        [NODE, str(ENTRY), "streamableHttp"],
        env={**os.environ, "PORT": str(port)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                    break
            except OSError:
                assert time.monotonic() < deadline, "server-everything did not listen"
                time.sleep(0.05)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()


@requires_everything
async def test_everything_over_streamable_http(tmp_path: Path, everything_http_url: str) -> None:
    config = ServerConfig(name="everything", transport="http", url=everything_http_url)
    async with connect_to_server("everything", config, cwd=tmp_path) as connection:
        assert connection.server_info.name
        result = await connection.call_tool("echo", {"message": "over http"})
        assert "over http" in first_text(result)
        assert await connection.list_tools()
