"""A 2026-07-28 backend behind ``mcpfleet serve --http``, seen by a handshake-era SDK client.

The backend is ``tests/servers/conformance_backend.py`` over stdio, which the fleet connects in
the 2026-07-28 era. That era has no back-channel, no unsolicited log messages and no
unsolicited ``list_changed``: the backend asks with ``input_required`` (the relay puts the
question to the client whose call caused it), logs only for requests that opt in with a
``logLevel`` (the gateway opts in on its calls), and announces list changes only on a
``subscriptions/listen`` stream (the fleet opens one per connection).
"""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import httpx2
import mcp_types
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from tests.integration.gateway.http_gateway import HttpGateway, running_http_gateway, wait_until_listed
from tests.servers.fixtures import CONFORMANCE_BACKEND

pytestmark = pytest.mark.anyio

BACKEND = {"conformance": {"command": sys.executable, "args": [str(CONFORMANCE_BACKEND)]}}
SETTLE_S = 20.0
"""Bound of every wait for something the gateway does in the background."""


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HttpGateway]:
    with running_http_gateway(
        tmp_path_factory.mktemp("modern-backend"), BACKEND, "--prefix", "none"
    ) as served:
        wait_until_listed(served, "test_simple_text")
        yield served


@asynccontextmanager
async def handshake_client(gateway: HttpGateway, **callbacks: Any) -> AsyncIterator[Client]:
    http_client = httpx2.AsyncClient(headers=gateway.headers, timeout=httpx2.Timeout(20.0))
    transport = streamable_http_client(gateway.url, http_client=http_client)
    async with Client(transport, mode="legacy", **callbacks) as client:
        yield client


def text_of(result: mcp_types.CallToolResult) -> str:
    block = result.content[0]
    assert isinstance(block, mcp_types.TextContent), block
    return block.text


async def test_a_modern_backends_form_reaches_a_handshake_era_client_with_its_schema(
    gateway: HttpGateway,
) -> None:
    asked: list[mcp_types.ElicitRequestParams] = []

    async def elicit(context: Any, params: mcp_types.ElicitRequestParams) -> mcp_types.ElicitResult:
        asked.append(params)
        return mcp_types.ElicitResult(action="accept", content={"name": "Ada", "age": 36})

    async with handshake_client(gateway, elicitation_callback=elicit) as client:
        with anyio.fail_after(SETTLE_S):
            result = await client.call_tool("test_elicitation_sep1034_defaults", {})
    assert not result.is_error, result
    assert text_of(result) == 'Elicitation completed: action=accept, content={"name": "Ada", "age": 36}'
    [question] = asked
    assert isinstance(question, mcp_types.ElicitRequestFormParams)
    properties = question.requested_schema["properties"]
    assert properties["score"]["default"] == 95.5 and properties["status"]["default"] == "active"


async def test_a_modern_backends_sampling_reaches_a_handshake_era_client(gateway: HttpGateway) -> None:
    async def sample(
        context: Any, params: mcp_types.CreateMessageRequestParams
    ) -> mcp_types.CreateMessageResult:
        prompt = params.messages[0].content
        assert isinstance(prompt, mcp_types.TextContent)
        return mcp_types.CreateMessageResult(
            role="assistant",
            content=mcp_types.TextContent(type="text", text=f"answer to {prompt.text}"),
            model="m",
        )

    async with handshake_client(gateway, sampling_callback=sample) as client:
        with anyio.fail_after(SETTLE_S):
            result = await client.call_tool("test_sampling", {"prompt": "2+2"})
    assert text_of(result) == "LLM response: answer to 2+2"


async def test_a_modern_backends_logs_of_a_call_reach_the_calling_client(gateway: HttpGateway) -> None:
    logs: list[str] = []

    async def on_log(params: mcp_types.LoggingMessageNotificationParams) -> None:
        logs.append(str(params.data))

    async with handshake_client(gateway, logging_callback=on_log) as client:
        with anyio.fail_after(SETTLE_S):
            result = await client.call_tool("test_tool_with_logging", {})
    assert text_of(result) == "Tool with logging executed successfully"
    assert logs == ["Tool execution started", "Tool processing data", "Tool execution completed"]


async def test_a_modern_backends_list_changed_reaches_the_client_even_with_the_same_list(
    gateway: HttpGateway,
) -> None:
    announced: list[str] = []
    arrived = anyio.Event()

    async def on_message(message: Any) -> None:
        if isinstance(
            message, mcp_types.ToolListChangedNotification | mcp_types.PromptListChangedNotification
        ):
            announced.append(message.method)
            arrived.set()

    async with handshake_client(gateway, message_handler=on_message) as client:
        before = (await client.list_tools()).tools
        for trigger, method in (
            ("test_trigger_tool_change", "notifications/tools/list_changed"),
            ("test_trigger_prompt_change", "notifications/prompts/list_changed"),
        ):
            await client.call_tool(trigger, {})
            with anyio.fail_after(SETTLE_S):
                while method not in announced:
                    await arrived.wait()
                    arrived = anyio.Event()
        # The backend announced a change without changing anything: the list is the same.
        assert (await client.list_tools()).tools == before
