"""mcpfleet against the MCP project's reference server, ``@modelcontextprotocol/server-everything``.

The server runs for real over stdio, streamable HTTP and SSE (``make test`` installs it into
``.tools/everything``); it is found through a config file like any user's server, connected by
the manager, and used through an agent session: tools with text, image and structured
results, resources, prompts, progress and ``list_changed`` notifications.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from tests.servers.fixtures import completed

from mcpfleet import create_agent_session
from mcpfleet.client import connect_to_server
from mcpfleet.config.model import ServerConfig
from mcpfleet.fleet.tools import mcp_tool_name

pytestmark = pytest.mark.anyio

ROOT = Path(__file__).resolve().parents[2]
ENTRY = ROOT / ".tools/everything/node_modules/@modelcontextprotocol/server-everything/dist/index.js"
NODE = shutil.which("node")
SERVER = "everything"
SERVER_START_TIMEOUT_S = 20.0

requires_everything = pytest.mark.skipif(
    NODE is None or not ENTRY.exists(),
    reason="server-everything is not installed in .tools/everything; run: make test",
)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


@pytest.fixture(scope="module")
def everything_urls() -> Iterator[dict[str, str]]:
    """server-everything in streamable-HTTP and in SSE mode, each on a free port, for this module."""
    if NODE is None or not ENTRY.exists():
        pytest.skip("server-everything is not installed in .tools/everything; run: make test")
    processes: list[subprocess.Popen[bytes]] = []
    urls: dict[str, str] = {}
    try:
        for mode, transport, path in (("streamableHttp", "http", "/mcp"), ("sse", "sse", "/sse")):
            port = free_port()
            processes.append(
                subprocess.Popen(
                    [NODE, str(ENTRY), mode],
                    env={**os.environ, "PORT": str(port)},
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                    start_new_session=True,
                )
            )
            wait_for_port(port, processes[-1])
            urls[transport] = f"http://127.0.0.1:{port}{path}"
        yield urls
    finally:
        for process in processes:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=10)


def wait_for_port(port: int, process: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + SERVER_START_TIMEOUT_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            pytest.fail(f"server-everything exited with {process.returncode} before listening on {port}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.1)
    pytest.fail(f"server-everything did not listen on port {port} within {SERVER_START_TIMEOUT_S}s")


def server_entry(transport: str, urls: dict[str, str]) -> dict[str, Any]:
    assert NODE is not None
    if transport == "stdio":
        return {"command": NODE, "args": [str(ENTRY), "stdio"]}
    return {"type": transport, "url": urls[transport]}


@requires_everything
@pytest.mark.parametrize("transport", ["stdio", "http", "sse"])
async def test_agent_session_uses_everything(
    transport: str, everything_urls: dict[str, str], tmp_path: Path
) -> None:
    config_file = tmp_path / "fleet.json"
    config_file.write_text(json.dumps({"mcpServers": {SERVER: server_entry(transport, everything_urls)}}))
    session = await create_agent_session(
        tmp_path, cache=None, enable_project_config=False, extra_config_paths=[config_file]
    )
    async with session:
        manager = session.mcp_manager
        assert manager.get_connection_status(SERVER) == "connected", manager.get_errors()
        source = manager.get_source(SERVER)
        assert source is not None and source.path == str(config_file)
        names = {tool.name for tool in session.tools}
        for tool in ("echo", "get-tiny-image", "get-structured-content", "trigger-long-running-operation"):
            assert mcp_tool_name(SERVER, tool) in names

        echoed = await session.call_tool(
            mcp_tool_name(SERVER, "echo"), {"message": f"hello over {transport}"}
        )
        assert not echoed.is_error and f"hello over {transport}" in echoed.text
        assert echoed.details["server"] == SERVER

        image = await session.call_tool(mcp_tool_name(SERVER, "get-tiny-image"), {})
        images = [block for block in image.content if block.get("type") == "image"]
        assert not image.is_error and images and images[0]["mimeType"] == "image/png" and images[0]["data"]

        weather = await session.call_tool(
            mcp_tool_name(SERVER, "get-structured-content"), {"location": "Chicago"}
        )
        assert not weather.is_error
        assert isinstance(weather.structured, dict) and {"temperature", "conditions", "humidity"} <= set(
            weather.structured
        )

        failed = await session.call_tool(mcp_tool_name(SERVER, "get-sum"), {"a": "not a number"})
        assert failed.is_error

        connection = manager.get_connection(SERVER)
        assert connection is not None
        resources = await connection.list_resources()
        assert resources
        read = await connection.read_resource(resources[0]["uri"])
        assert read["contents"] and read["contents"][0]["uri"] == resources[0]["uri"]

        prompts = {prompt["name"] for prompt in await connection.list_prompts()}
        assert {"simple-prompt", "args-prompt"} <= prompts
        prompt = await connection.get_prompt("args-prompt", {"city": "Paris", "state": "Texas"})
        assert "Paris" in json.dumps(prompt["messages"])

        progress: list[tuple[float, float | None]] = []
        done = completed(
            await connection.call_tool(
                "trigger-long-running-operation",
                {"duration": 1, "steps": 3},
                on_progress=lambda value, total, message: progress.append((value, total)),
            )
        )
        assert not done.is_error
        assert [value for value, _ in progress] == [1, 2, 3] and all(total == 3 for _, total in progress)
    assert manager.get_connection_status(SERVER) == "disconnected"


@requires_everything
async def test_list_changed_notifications_reach_the_host(tmp_path: Path) -> None:
    """server-everything registers its capability-dependent tools once initialised and says so."""
    assert NODE is not None
    received: list[str] = []
    changed = anyio.Event()

    def record(method: str, params: dict[str, Any] | None) -> None:
        received.append(method)
        if method == "notifications/tools/list_changed":
            changed.set()

    config = ServerConfig(name=SERVER, transport="stdio", command=NODE, args=(str(ENTRY), "stdio"))
    root_uri = (await anyio.Path(tmp_path).resolve()).as_uri()
    async with connect_to_server(SERVER, config, cwd=tmp_path, on_notification=record) as connection:
        with anyio.fail_after(10):
            await changed.wait()
        # The roots capability mcpfleet offers is what unlocks get-roots-list.
        names = {tool.name for tool in await connection.list_tools()}
        assert "get-roots-list" in names
        roots = await connection.call_tool("get-roots-list", {})
        assert root_uri in json.dumps(roots.model_dump(mode="json"))


@requires_everything
async def test_elicitation_requests_reach_the_host_handler(tmp_path: Path) -> None:
    """With an elicitation handler the client offers elicitation (so the server registers its
    elicitation tool) and relays the host's answer to the server's request."""
    assert NODE is not None
    requests: list[dict[str, Any]] = []
    tools_changed = anyio.Event()

    async def answer(request: dict[str, Any]) -> dict[str, Any]:
        requests.append(request)
        return {"action": "accept", "content": {"name": "Ada"}}

    def on_notification(method: str, params: dict[str, Any] | None) -> None:
        if method == "notifications/tools/list_changed":
            tools_changed.set()

    config = ServerConfig(name=SERVER, transport="stdio", command=NODE, args=(str(ENTRY), "stdio"))
    async with connect_to_server(
        SERVER, config, cwd=tmp_path, on_notification=on_notification, elicitation_handler=answer
    ) as connection:
        with anyio.fail_after(10):
            await tools_changed.wait()
        result = completed(await connection.call_tool("trigger-elicitation-request", {}))
        text = json.dumps(result.model_dump(mode="json"))
        assert not result.is_error and "Ada" in text and "provided the requested information" in text
        assert len(requests) == 1 and "name" in requests[0]["requestedSchema"]["properties"]
