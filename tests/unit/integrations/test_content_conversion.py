"""How a tool result's blocks reach each framework: text, structured content, an image, an
embedded text resource, an embedded blob and a resource link, from one ``tools/call`` result
shaped as a server sends it (converted by mcpfleet as for a real call)."""

from __future__ import annotations

import base64
from typing import Any

import pytest

from mcpfleet.fleet.tools import ToolResult, convert_call_result
from mcpfleet.integrations._framework import installed

PNG = base64.b64encode(b"\x89PNG pixels").decode()
BLOB = base64.b64encode(b"\x00\x01binary").decode()
RICH_CALL = {
    "content": [
        {"type": "text", "text": "a picture and two files"},
        {"type": "image", "data": PNG, "mimeType": "image/png"},
        {
            "type": "resource",
            "resource": {"uri": "file:///notes.md", "mimeType": "text/markdown", "text": "# notes"},
        },
        {
            "type": "resource",
            "resource": {"uri": "file:///data.bin", "mimeType": "application/x-data", "blob": BLOB},
        },
        {"type": "resource_link", "uri": "file:///later.txt", "name": "later"},
    ]
}
STRUCTURED_CALL = {"content": [{"type": "text", "text": "[1, 2]"}], "structuredContent": {"result": [1, 2]}}


def result_of(call: dict[str, Any]) -> ToolResult:
    return convert_call_result(call, server="files", tool="show", provider="mcpfleet")


def needs(module: str) -> pytest.MarkDecorator:
    return pytest.mark.skipif(
        not installed(module), reason=f"{module} is not installed (make test installs it)"
    )


@needs("pydantic_ai")
def test_pydantic_ai_gets_binary_content_for_binary_blocks_and_the_value_for_structured() -> None:
    from pydantic_ai import BinaryContent

    from mcpfleet.integrations.pydantic_ai import _for_the_model

    text, image, notes, blob, link = _for_the_model(result_of(RICH_CALL))
    assert text == "a picture and two files"
    assert isinstance(image, BinaryContent) and image.data == b"\x89PNG pixels"
    assert image.media_type == "image/png"
    assert notes == "# notes"
    assert isinstance(blob, BinaryContent) and blob.data == b"\x00\x01binary"
    assert blob.media_type == "application/x-data"
    assert link == "file:///later.txt"
    assert _for_the_model(result_of(STRUCTURED_CALL)) == [1, 2]


@needs("langchain_core")
def test_langchain_gets_standard_blocks_and_plain_text_when_all_is_text() -> None:
    from mcpfleet.integrations.langchain import _message_content

    assert _message_content(result_of(RICH_CALL)) == [
        {"type": "text", "text": "a picture and two files"},
        {"type": "image", "base64": PNG, "mime_type": "image/png"},
        {"type": "text", "text": "# notes"},
        {"type": "file", "base64": BLOB, "mime_type": "application/x-data"},
        {"type": "text", "text": "[Resource link: file:///later.txt]"},
    ]
    assert _message_content(result_of(STRUCTURED_CALL)) == "[1, 2]"


@needs("agents")
@pytest.mark.anyio
async def test_the_agents_sdk_gets_the_mcp_blocks_back_as_sdk_types(tmp_path: Any) -> None:
    from mcp_types import EmbeddedResource, ImageContent, ResourceLink, TextContent

    from mcpfleet.agent.session import AgentSession
    from mcpfleet.integrations.openai_agents import MCPFleetServer

    class RichTool:
        name = "mcp_files_show"
        description = "shows things"
        parameters: dict[str, Any] = {"type": "object"}  # noqa: RUF012

        async def execute(self, arguments: dict[str, Any] | None = None) -> ToolResult:
            return result_of(RICH_CALL)

    session = AgentSession(tmp_path, manager=None, owns_manager=False, tools=[RichTool()])
    async with MCPFleetServer(session=session) as fleet:
        answer = await fleet.call_tool("mcp_files_show", {})
    assert [type(block) for block in answer.content] == [
        TextContent,
        ImageContent,
        EmbeddedResource,
        EmbeddedResource,
        ResourceLink,
    ]
    assert answer.content[1].data == PNG  # type: ignore[union-attr]
    assert not answer.is_error
