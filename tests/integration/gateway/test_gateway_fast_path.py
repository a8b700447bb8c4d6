"""The fast path of ``tools/call`` (``gateway.fast_path``) answers what the SDK path answers,
byte for byte.

One gateway, as ``mcpfleet serve`` builds it, over the reference backends on stdio: the
conformance backend (handshake era) and ``@modelcontextprotocol/server-everything`` (when
installed). A host speaks JSON-RPC lines to the gateway's stdio wire (``wire_streams``) in this
process, over real pipes: once with the fast path, once without (every call then goes through
the SDK's server and client), the same requests in the same order. Every tool of both backends
is called, with errors, large, structured and image content, unknown tools and invalid
arguments among them; the answer lines must be equal, and the fast run must have taken every
call of a served tool.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
from tests.integration.gateway.gateway_harness import wait_until
from tests.servers.fixtures import CONFORMANCE_BACKEND, FAKE_SERVER

from mcpfleet.fleet.manager import MCPManager
from mcpfleet.gateway.assembly import GatewayOptions, open_gateway
from mcpfleet.gateway.core import Gateway
from mcpfleet.gateway.fast_path import FastPath
from mcpfleet.gateway.handlers import build_server, initialization_options
from mcpfleet.gateway.naming import NamingPolicy
from mcpfleet.gateway.relay import Relay
from mcpfleet.gateway.stdio import wire_streams

pytestmark = pytest.mark.anyio

ROOT = Path(__file__).resolve().parents[3]
EVERYTHING = ROOT / ".tools/everything/node_modules/@modelcontextprotocol/server-everything/dist/index.js"
NODE = shutil.which("node")
ANSWER_TIMEOUT_S = 60.0

LARGE_TEXT = "fast path " * 200_000
"""About 2 MB: many reads of the backend's pipe, many writes of the host's."""

CONFORMANCE_CALLS: list[tuple[str, dict[str, Any] | None]] = [
    ("test_simple_text", {}),
    ("test_image_content", {}),
    ("test_audio_content", {}),
    ("test_embedded_resource", {}),
    ("test_multiple_content_types", {}),
    ("test_tool_with_logging", {}),
    ("test_logging_tool", {}),
    ("test_error_handling", {}),
    ("test_tool_with_progress", {}),
    ("test_sampling", {"prompt": "a question for a model"}),
    ("test_elicitation", {"message": "a question for a person"}),
    ("test_elicitation_sep1034_defaults", {}),
    ("test_elicitation_sep1330_enums", {}),
    ("json_schema_2020_12_tool", {"name": "Ada", "address": {"street": "1 Way", "city": "Here"}}),
    ("json_schema_2020_12_tool", {"name": 12}),
    ("test_custom_header", {"region": "eu-west"}),
    ("test_missing_capability", {}),
    ("test_streaming_elicitation", {}),
    ("test_input_required_result_elicitation", {}),
    ("test_input_required_result_multi_round", {}),
    ("test_input_required_result_tampered_state", {}),
    ("test_trigger_tool_change", {}),
    ("test_trigger_prompt_change", {}),
    ("test_simple_text", None),
    ("test_simple_text", {"unexpected": ["an", "argument", 1.5, None, True]}),
]
"""Every tool of the conformance backend whose answer does not depend on the transport: the
SSE-only ``test_reconnection`` is left out."""

EVERYTHING_CALLS: list[tuple[str, dict[str, Any] | None]] = [
    ("echo", {"message": "hello"}),
    ("echo", {"message": 'unicode: 日本語, emoji 🙂, escapes " \\ \n \t \u0000'}),
    ("echo", {"message": LARGE_TEXT}),
    ("echo", {}),
    ("echo", {"message": 42}),
    ("get-annotated-message", {"messageType": "error", "includeImage": True}),
    ("get-annotated-message", {"messageType": "success"}),
    ("get-annotated-message", {"messageType": "debug"}),
    ("get-annotated-message", {"messageType": "nonsense"}),
    ("get-env", {}),
    ("get-resource-links", {"count": 4}),
    # Its resources say when they were made (in text, and in base64, whatever the id): only a
    # refused one answers the same twice.
    ("get-resource-reference", {"resourceType": "Video", "resourceId": 2}),
    ("get-structured-content", {"location": "Chicago"}),
    ("get-structured-content", {"location": "Atlantis"}),
    ("get-sum", {"a": 1.5, "b": 2.25}),
    ("get-sum", {"a": 10**20, "b": -3e-7}),
    ("get-sum", {"a": "one", "b": 2}),
    ("get-tiny-image", {}),
    ("trigger-long-running-operation", {"duration": 0.2, "steps": 2}),
    # Toggled on and off again: each run leaves the backend as it found it.
    ("toggle-simulated-logging", {}),
    ("toggle-simulated-logging", {}),
    ("toggle-subscriber-updates", {}),
    ("toggle-subscriber-updates", {}),
    ("simulate-research-query", {"topic": "fast paths"}),
]
"""Every tool of server-everything but ``gzip-file-as-resource``, which downloads a file."""

UNKNOWN_CALLS: list[tuple[str, dict[str, Any] | None]] = [("no_such_tool", {}), ("", {})]


class Host:
    """A host on the gateway's stdio wire: JSON-RPC lines over two pipes, in this process."""

    def __init__(self, to_gateway: int, from_gateway: int) -> None:
        self._out = to_gateway
        self._in = from_gateway
        os.set_blocking(from_gateway, False)
        self._buffer = bytearray()
        self._ids = 0
        self.unsolicited: list[bytes] = []

    async def send(self, message: dict[str, Any]) -> None:
        data = json.dumps(message).encode() + b"\n"
        await anyio.to_thread.run_sync(os.write, self._out, data)

    async def request(self, method: str, params: dict[str, Any] | None = None) -> bytes:
        """Send a request; its answer line, exactly as the gateway wrote it."""
        self._ids += 1
        request_id = self._ids
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
        if params is not None:
            message["params"] = params
        await self.send(message)
        with anyio.fail_after(ANSWER_TIMEOUT_S):
            while True:
                line = await self._line()
                parsed = json.loads(line)
                if parsed.get("id") == request_id and "method" not in parsed:
                    return line
                self.unsolicited.append(line)

    async def _line(self) -> bytes:
        while b"\n" not in self._buffer:
            await anyio.wait_readable(self._in)
            try:
                chunk = os.read(self._in, 1 << 20)
            except BlockingIOError:
                continue
            if not chunk:
                raise EOFError("the gateway closed its stdout")
            self._buffer += chunk
        end = self._buffer.index(b"\n")
        line = bytes(self._buffer[:end])
        del self._buffer[: end + 1]
        return line


@asynccontextmanager
async def reference_gateway(home: Path) -> AsyncIterator[Gateway]:
    servers: dict[str, Any] = {
        "conformance": {"command": sys.executable, "args": [str(CONFORMANCE_BACKEND), "--handshake-only"]}
    }
    if NODE is not None and EVERYTHING.exists():
        servers["everything"] = {"command": NODE, "args": [str(EVERYTHING), "stdio"]}
    config = home / "servers.json"
    config.write_text(json.dumps({"mcpServers": servers}))

    def own_fleet(relay: Relay) -> contextlib.nullcontext[MCPManager]:
        manager = MCPManager(
            home,
            cache=None,
            startup_timeout_ms=0,
            extra_config_paths=[config],
            server_requests=relay,
            log_level="debug",
        )
        return contextlib.nullcontext(manager)

    async with open_gateway(own_fleet, GatewayOptions(naming=NamingPolicy(prefix="none"))) as gateway:
        yield gateway


@asynccontextmanager
async def host_session(gateway: Gateway, fast_path: FastPath | None) -> AsyncIterator[Host]:
    """A host connected to ``gateway``'s stdio wire (with ``fast_path``, or none), past its
    handshake; the session ends, and is gone from the gateway, when the block ends."""
    gateway_in, to_gateway = os.pipe()
    from_gateway, gateway_out = os.pipe()
    server = build_server(gateway)

    async def serve() -> None:
        async with wire_streams(gateway_in, gateway_out, fast_path=fast_path) as (reads, writes):
            await server.run(reads, writes, initialization_options(server))

    try:
        async with anyio.create_task_group() as task_group:
            task_group.start_soon(serve)
            host = Host(to_gateway, from_gateway)
            capabilities: dict[str, Any] = {}
            await host.request(
                "initialize",
                {
                    "protocolVersion": "2025-11-25",
                    "capabilities": capabilities,
                    "clientInfo": {"name": "host"},
                },
            )
            await host.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
            await host.request("tools/list")
            yield host
            os.close(to_gateway)
            to_gateway = -1
    finally:
        for fd in (to_gateway, gateway_in, from_gateway, gateway_out):
            if fd >= 0:
                os.close(fd)
    await wait_until(lambda: len(gateway.sessions) == 0, timeout_s=ANSWER_TIMEOUT_S, interval_s=0.01)


async def answers(host: Host, calls: list[tuple[str, dict[str, Any] | None]]) -> list[bytes]:
    lines = []
    for name, arguments in calls:
        params: dict[str, Any] = {"name": name}
        if arguments is not None:
            params["arguments"] = arguments
        lines.append(await host.request("tools/call", params))
    return lines


async def test_the_fast_path_answers_every_tool_byte_for_byte_as_the_sdk_path(isolated_home: Path) -> None:
    async with reference_gateway(isolated_home) as gateway:
        served = {tool["name"] for tool in gateway.catalog.tools}
        calls = CONFORMANCE_CALLS + (EVERYTHING_CALLS if "echo" in served else []) + UNKNOWN_CALLS
        assert {name for name, _ in CONFORMANCE_CALLS} <= served

        fast_path = FastPath(gateway)
        async with host_session(gateway, fast_path) as host:
            fast = await answers(host, calls)
        async with host_session(gateway, None) as host:
            through_sdk = await answers(host, calls)

    for (name, arguments), fast_line, sdk_line in zip(calls, fast, through_sdk, strict=True):
        shown = f"{name}({json.dumps(arguments)[:80]})"
        assert fast_line == sdk_line, f"{shown} answers differently: {fast_line[:600]!r} {sdk_line[:600]!r}"
    assert fast_path.taken == sum(1 for name, _ in calls if name in served)
    large = json.loads(fast[calls.index(("echo", {"message": LARGE_TEXT}))]) if "echo" in served else None
    assert large is None or large["result"]["content"][0]["text"].endswith(LARGE_TEXT)


@asynccontextmanager
async def fake_gateway(home: Path, *flags: str, tool_timeout_ms: int | None = None) -> AsyncIterator[Gateway]:
    """A gateway over one fake server ``fake`` (``tests/servers/fake_server.py``) with ``flags``."""
    entry: dict[str, Any] = {"command": sys.executable, "args": [str(FAKE_SERVER), "--name", "fake", *flags]}
    if tool_timeout_ms is not None:
        entry["toolTimeout"] = tool_timeout_ms
    config = home / "fake.json"
    config.write_text(json.dumps({"mcpServers": {"fake": entry}}))

    def own_fleet(relay: Relay) -> contextlib.nullcontext[MCPManager]:
        manager = MCPManager(
            home, cache=None, startup_timeout_ms=0, extra_config_paths=[config], server_requests=relay
        )
        return contextlib.nullcontext(manager)

    async with open_gateway(own_fleet, GatewayOptions(naming=NamingPolicy(prefix="none"))) as gateway:
        yield gateway


def call(name: str, arguments: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"name": name, "arguments": arguments, **extra}


async def test_a_backends_refusals_and_failures_answer_alike_on_both_paths(isolated_home: Path) -> None:
    calls = [
        call("refuse", {"code": -32021, "message": "needs more", "data": {"required": ["sampling"]}}),
        call("refuse", {"code": -32602, "message": "no such thing"}),
        call("fail", {"message": "it went wrong"}),
        call("big", {"bytes": 3_000_000}),
        call("add", {"a": 2, "b": 3}),
    ]
    async with fake_gateway(
        isolated_home, "--tool", "refuse", "--tool", "fail", "--tool", "add", "--hostile-tools"
    ) as gateway:
        fast_path = FastPath(gateway)
        async with host_session(gateway, fast_path) as host:
            fast = [await host.request("tools/call", params) for params in calls]
        async with host_session(gateway, None) as host:
            through_sdk = [await host.request("tools/call", params) for params in calls]
    assert fast == through_sdk
    assert fast_path.taken == len(calls)
    refused = json.loads(fast[0])
    assert refused["error"] == {"code": -32021, "message": "needs more", "data": {"required": ["sampling"]}}


async def test_the_backends_log_of_a_call_reaches_the_host_before_its_answer(isolated_home: Path) -> None:
    async with fake_gateway(isolated_home, "--tool", "log") as gateway:
        fast_path = FastPath(gateway)
        async with host_session(gateway, fast_path) as host:
            answer = json.loads(await host.request("tools/call", call("log", {"message": "on the way"})))
            logs = [json.loads(line) for line in host.unsolicited]
    assert fast_path.taken == 1 and answer["result"]["isError"] is False
    assert [entry["params"]["data"] for entry in logs if entry["method"] == "notifications/message"] == [
        "on the way"
    ]


async def test_a_call_the_host_cancels_is_cancelled_at_the_backend_and_never_answered(
    isolated_home: Path,
) -> None:
    cancel_log = isolated_home / "cancelled.log"
    async with fake_gateway(isolated_home, "--hostile-tools", "--cancel-log", str(cancel_log)) as gateway:
        fast_path = FastPath(gateway)
        async with host_session(gateway, fast_path) as host:
            await host.send(
                {"jsonrpc": "2.0", "id": "hung", "method": "tools/call", "params": call("hang", {})}
            )
            await wait_until(lambda: fast_path.taken == 1, timeout_s=ANSWER_TIMEOUT_S, interval_s=0.01)
            cancel = {"requestId": "hung", "reason": "the user pressed stop"}
            await host.send({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": cancel})
            await wait_until(lambda: cancel_log.exists() and "cancelled" in cancel_log.read_text())
            echoed = json.loads(await host.request("tools/call", call("echo", {"message": "still here"})))
            unsolicited = [json.loads(line) for line in host.unsolicited]
    assert echoed["result"]["content"][0]["text"] == "still here"
    assert not any(message.get("id") == "hung" for message in unsolicited)
    assert cancel_log.read_text().startswith("cancelled mcpfleet-")


async def test_a_fast_call_past_its_deadline_is_cancelled_and_answered_as_a_timeout(
    isolated_home: Path,
) -> None:
    cancel_log = isolated_home / "cancelled.log"
    async with fake_gateway(
        isolated_home, "--hostile-tools", "--cancel-log", str(cancel_log), tool_timeout_ms=300
    ) as gateway:
        fast_path = FastPath(gateway)
        async with host_session(gateway, fast_path) as host:
            answer = json.loads(await host.request("tools/call", call("hang", {})))
    assert fast_path.taken == 1
    text = answer["result"]["content"][0]["text"]
    assert answer["result"]["isError"] is True
    assert (
        text.startswith('MCP error: MCP tool hang on server "fake" timed out after ')
        and "(timeout 300ms" in text
    )
    assert cancel_log.read_text().startswith("cancelled mcpfleet-")


async def test_a_backend_that_dies_during_a_fast_call_answers_that_the_call_may_have_run(
    isolated_home: Path,
) -> None:
    async with fake_gateway(isolated_home) as gateway:
        fast_path = FastPath(gateway)
        async with host_session(gateway, fast_path) as host:
            answer = json.loads(await host.request("tools/call", call("crash", {"code": 3})))
    assert fast_path.taken == 1
    text = answer["result"]["content"][0]["text"]
    assert answer["result"]["isError"] is True
    assert 'MCP server "fake" lost the connection during the call to crash' in text
    assert "the call may have run, so it was not repeated" in text


async def test_what_needs_the_sdk_server_is_left_to_it(isolated_home: Path) -> None:
    """A call with a progress token, a tool the gateway does not serve, a malformed call: not
    taken (the SDK's server answers them, progress included)."""
    async with fake_gateway(isolated_home) as gateway:
        fast_path = FastPath(gateway)
        async with host_session(gateway, fast_path) as host:
            sleep = call("sleep", {"seconds": 0.3, "progress_interval": 0.1}, _meta={"progressToken": "p"})
            slept = json.loads(await host.request("tools/call", sleep))
            unknown = json.loads(await host.request("tools/call", call("nothing", {})))
            malformed = json.loads(await host.request("tools/call", {"name": "echo", "arguments": [1]}))
            progress = [json.loads(line) for line in host.unsolicited]
    assert fast_path.taken == 0
    assert slept["result"]["isError"] is False
    assert any(message.get("method") == "notifications/progress" for message in progress)
    assert unknown["error"]["code"] == -32602 and malformed["error"]["code"] == -32602
