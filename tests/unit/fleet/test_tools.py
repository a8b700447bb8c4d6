"""MCPTool / DeferredMCPTool against a small backend that honours the ToolBackend protocol,
result conversion from both plain dicts and real SDK models, lookup by alias, and the
error/abort semantics of S12."""

from __future__ import annotations

import asyncio
import base64
import json
from collections.abc import Callable
from typing import Any

import anyio
import mcp_types
import pytest

from mcpfleet.client.definitions import ToolDefinition
from mcpfleet.errors import ConnectionClosedError, ConnectTimeoutError, ToolCallError
from mcpfleet.fleet.tools import (
    DeferredMCPTool,
    MCPTool,
    ToolResult,
    convert_call_result,
    resolve_tool_name,
)

pytestmark = pytest.mark.anyio

READ_SCHEMA = {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}
READ_FILE = ToolDefinition(name="read_file", description="Read a file", input_schema=READ_SCHEMA)


class RecordingBackend:
    """Answers calls with a fixed result (or error) and records what happened, in order.

    ``connection_ready`` (when given) holds ``wait_for_connection`` until it is set, the
    way the manager holds a deferred tool until its server has connected.
    """

    def __init__(
        self,
        *,
        result: Any = None,
        call_error: BaseException | None = None,
        connection_error: Exception | None = None,
        connection_ready: anyio.Event | None = None,
        providers: dict[str, str] | None = None,
    ) -> None:
        self.result = result if result is not None else {"content": [{"type": "text", "text": "ok"}]}
        self.call_error = call_error
        self.connection_error = connection_error
        self.connection_ready = connection_ready
        self.providers = providers or {}
        self.events: list[str] = []
        self.calls: list[tuple[str, str, dict[str, Any], int | None]] = []
        self.call_started = anyio.Event()
        self.connection_wait_started = anyio.Event()

    def get_provider_name(self, server_name: str) -> str | None:
        return self.providers.get(server_name)

    async def call_tool(
        self,
        server_name: str,
        tool_name: str,
        arguments: dict[str, Any],
        *,
        timeout_ms: int | None = None,
    ) -> Any:
        self.events.append("call")
        self.calls.append((server_name, tool_name, arguments, timeout_ms))
        self.call_started.set()
        if self.call_error is not None:
            raise self.call_error
        return self.result

    async def wait_for_connection(self, server_name: str) -> None:
        self.events.append("wait started")
        self.connection_wait_started.set()
        if self.connection_ready is not None:
            await self.connection_ready.wait()
        if self.connection_error is not None:
            raise self.connection_error
        self.events.append("connected")


class BlockingBackend(RecordingBackend):
    """A call that never answers until cancelled; remembers that it saw the cancellation."""

    def __init__(self) -> None:
        super().__init__()
        self.saw_cancellation = False

    async def call_tool(
        self,
        server_name: str,
        tool_name: str,
        arguments: dict[str, Any],
        *,
        timeout_ms: int | None = None,
    ) -> Any:
        self.call_started.set()
        try:
            await anyio.sleep_forever()
        except anyio.get_cancelled_exc_class():
            self.saw_cancellation = True
            raise


def as_plain_dict(result: dict[str, Any]) -> Any:
    return result


def as_sdk_model(result: dict[str, Any]) -> Any:
    return mcp_types.CallToolResult.model_validate(result)


@pytest.fixture(params=[as_plain_dict, as_sdk_model], ids=["dict", "sdk"])
def shape(request: pytest.FixtureRequest) -> Callable[[dict[str, Any]], Any]:
    converter: Callable[[dict[str, Any]], Any] = request.param
    return converter


def convert(result: Any) -> ToolResult:
    return convert_call_result(result, server="files", tool="read_file", provider="claude")


def b64(payload: bytes) -> str:
    return base64.b64encode(payload).decode()


# --- result conversion --------------------------------------------------------------------------


def test_text_blocks_are_kept_and_joined(shape: Callable[[dict[str, Any]], Any]) -> None:
    blocks = [{"type": "text", "text": "hello"}, {"type": "text", "text": "world"}]

    result = convert(shape({"content": blocks}))

    assert result.content == blocks
    assert result.text == "hello\nworld"
    assert result.structured is None
    assert result.is_error is False
    assert result.details == {"server": "files", "tool": "read_file", "provider": "claude"}


@pytest.mark.parametrize("size", [0, 1, 2, 3, 1000])
def test_images_are_kept_as_blocks_and_summarised_in_text(
    shape: Callable[[dict[str, Any]], Any], size: int
) -> None:
    image = {"type": "image", "data": b64(bytes(size)), "mimeType": "image/png"}

    result = convert(shape({"content": [{"type": "text", "text": "a chart:"}, image]}))

    assert result.content == [{"type": "text", "text": "a chart:"}, image]
    assert result.text == f"a chart:\n[Image: image/png, {size} bytes]"


def test_audio_is_kept_as_a_block_and_summarised(shape: Callable[[dict[str, Any]], Any]) -> None:
    audio = {"type": "audio", "data": b64(b"\x00" * 4410), "mimeType": "audio/wav"}

    result = convert(shape({"content": [audio]}))

    assert result.content == [audio]
    assert result.text == "[Audio: audio/wav, 4410 bytes]"
    assert audio["data"] not in result.text


def test_text_resources_read_their_uri_then_their_text(shape: Callable[[dict[str, Any]], Any]) -> None:
    resource = {
        "type": "resource",
        "resource": {"uri": "file:///notes.md", "mimeType": "text/markdown", "text": "# Notes\nbuy milk"},
    }

    result = convert(shape({"content": [resource]}))

    assert result.content == [resource]
    assert result.text == "[Resource: file:///notes.md]\n# Notes\nbuy milk"


@pytest.mark.parametrize(
    ("mime_type", "expected_type"), [("application/pdf", "application/pdf"), (None, "binary")]
)
def test_binary_resources_are_summarised_not_dumped(
    shape: Callable[[dict[str, Any]], Any], mime_type: str | None, expected_type: str
) -> None:
    payload = b64(b"%PDF" + bytes(2044))
    inner: dict[str, Any] = {"uri": "file:///report.pdf", "blob": payload}
    if mime_type is not None:
        inner["mimeType"] = mime_type

    result = convert(shape({"content": [{"type": "resource", "resource": inner}]}))

    assert result.text == f"[Resource: file:///report.pdf] ({expected_type}, 2048 bytes)"
    assert payload not in result.text
    assert result.content[0]["resource"]["blob"] == payload


def test_resource_links_are_summarised_with_their_uri(shape: Callable[[dict[str, Any]], Any]) -> None:
    link = {"type": "resource_link", "uri": "file:///logs/big.log", "name": "big.log"}

    result = convert(shape({"content": [link]}))

    assert result.content == [link]
    assert result.text == "[Resource link: file:///logs/big.log] big.log"


def test_structured_content_is_kept_and_appended_as_json(shape: Callable[[dict[str, Any]], Any]) -> None:
    structured = {"count": 2, "items": ["a", "é"]}

    result = convert(
        shape({"content": [{"type": "text", "text": "found 2"}], "structuredContent": structured})
    )

    assert result.structured == structured
    assert len(result.content) == 2
    assert json.loads(result.content[1]["text"]) == structured
    assert result.text.startswith("found 2\n")
    assert json.loads(result.text.removeprefix("found 2\n")) == structured


def test_structured_content_already_in_a_text_block_is_not_repeated(
    shape: Callable[[dict[str, Any]], Any],
) -> None:
    # Same value, different spacing and key order: compared as parsed JSON, not as text.
    text_block = {"type": "text", "text": '{"items":["a"],   "count": 2}'}

    result = convert(shape({"content": [text_block], "structuredContent": {"count": 2, "items": ["a"]}}))

    assert result.content == [text_block]
    assert result.structured == {"count": 2, "items": ["a"]}
    assert result.text == text_block["text"]


def test_structured_content_differing_from_the_text_json_is_appended(
    shape: Callable[[dict[str, Any]], Any],
) -> None:
    result = convert(
        shape({"content": [{"type": "text", "text": '{"count": 1}'}], "structuredContent": {"count": 2}})
    )

    assert [json.loads(block["text"]) for block in result.content] == [{"count": 1}, {"count": 2}]


@pytest.mark.parametrize(
    ("texts", "wrapped"),
    [
        (["Saved note 'a'."], "Saved note 'a'."),
        (["42"], 42),
        (["a", "b"], ["a", "b"]),
    ],
)
def test_sdk_wrapped_result_carried_by_the_text_is_not_repeated(
    shape: Callable[[dict[str, Any]], Any], texts: list[str], wrapped: Any
) -> None:
    # SDK-built servers return {"result": value} as structuredContent, with the value as text.
    blocks = [{"type": "text", "text": text} for text in texts]

    result = convert(shape({"content": blocks, "structuredContent": {"result": wrapped}}))

    assert result.content == blocks
    assert result.structured == {"result": wrapped}


def test_sdk_wrapped_result_that_differs_from_the_text_is_appended(
    shape: Callable[[dict[str, Any]], Any],
) -> None:
    result = convert(
        shape({"content": [{"type": "text", "text": "a"}], "structuredContent": {"result": ["a", "b"]}})
    )

    assert json.loads(result.content[-1]["text"]) == {"result": ["a", "b"]}


def test_structured_content_alone_becomes_the_text(shape: Callable[[dict[str, Any]], Any]) -> None:
    result = convert(shape({"content": [], "structuredContent": {"ok": True}}))

    assert json.loads(result.text) == {"ok": True}
    assert result.content == [{"type": "text", "text": result.text}]


def test_empty_content_gives_an_empty_result(shape: Callable[[dict[str, Any]], Any]) -> None:
    result = convert(shape({"content": []}))

    assert result.content == []
    assert result.text == ""
    assert result.is_error is False


def test_tool_reported_errors_keep_their_content_and_set_is_error(
    shape: Callable[[dict[str, Any]], Any],
) -> None:
    result = convert(shape({"content": [{"type": "text", "text": "no such file: a.txt"}], "isError": True}))

    assert result.is_error is True
    assert result.text == "no such file: a.txt"


def test_sdk_models_built_in_python_convert_like_their_json() -> None:
    model = mcp_types.CallToolResult(
        content=[
            mcp_types.TextContent(text="shot"),
            mcp_types.ImageContent(data=b64(b"PNG!"), mime_type="image/png"),
        ],
        structured_content={"width": 1},
        is_error=False,
    )

    result = convert(model)

    assert result.content[:2] == [
        {"type": "text", "text": "shot"},
        {"type": "image", "data": b64(b"PNG!"), "mimeType": "image/png"},
    ]
    assert result.text.split("\n")[:2] == ["shot", "[Image: image/png, 4 bytes]"]
    assert result.structured == {"width": 1}


def test_malformed_results_never_raise() -> None:
    weird = convert({"content": "not a list", "isError": False})
    assert weird.content == []
    assert weird.is_error is False

    mixed = convert({"content": ["stray string", {"type": "text", "text": "kept"}, {"type": "future_kind"}]})
    assert mixed.text == "kept\n[future_kind content]"

    missing = convert(None)
    assert missing.is_error is True
    assert missing.text.startswith("MCP error: ")
    assert "read_file" in missing.text
    assert "files" in missing.text


# --- tools --------------------------------------------------------------------------------------


def test_tool_exposes_the_shared_interface() -> None:
    backend = RecordingBackend()

    live = MCPTool(backend, "files", READ_FILE)
    deferred = DeferredMCPTool(backend, "files", READ_FILE, name="mcp_files_read_file_1")

    assert live.name == "mcp_files_read_file"
    assert deferred.name == "mcp_files_read_file_1"
    for tool in (live, deferred):
        assert tool.label == "files/read_file"
        assert tool.description == "Read a file"
        assert tool.parameters == READ_SCHEMA
        assert tool.server_name == "files"
        assert tool.mcp_tool_name == "read_file"
        assert tool.definition is READ_FILE
    assert live.deferred is False
    assert deferred.deferred is True


@pytest.mark.parametrize("description", [None, ""])
def test_description_falls_back_to_the_server(description: str | None) -> None:
    tool = MCPTool(RecordingBackend(), "files", ToolDefinition(name="ping", description=description))

    assert tool.description == "MCP tool from files"


async def test_execute_passes_arguments_and_timeout_and_converts_the_result() -> None:
    backend = RecordingBackend(
        result=mcp_types.CallToolResult(content=[mcp_types.TextContent(text="contents")]),
        providers={"files": "claude"},
    )
    tool = MCPTool(backend, "files", READ_FILE)

    result = await tool.execute({"path": "README.md"}, timeout_ms=1500)

    assert backend.calls == [("files", "read_file", {"path": "README.md"}, 1500)]
    assert result.text == "contents"
    assert result.is_error is False
    assert result.details == {"server": "files", "tool": "read_file", "provider": "claude"}


async def test_missing_arguments_are_sent_as_an_empty_object() -> None:
    backend = RecordingBackend()

    await MCPTool(backend, "files", READ_FILE).execute()

    assert backend.calls == [("files", "read_file", {}, None)]


async def test_explicit_provider_name_wins_over_the_backend() -> None:
    backend = RecordingBackend(providers={"files": "cursor"})

    result = await MCPTool(backend, "files", READ_FILE, provider_name="vscode").execute({"path": "x"})

    assert result.details["provider"] == "vscode"


@pytest.mark.parametrize(
    ("error", "expected_text"),
    [
        (ToolCallError("unknown tool read_file", server="files", tool="read_file"), "unknown tool read_file"),
        (ConnectionClosedError("MCP server files closed its connection", server="files"), "closed"),
        (RuntimeError("stream broke"), "stream broke"),
        (TimeoutError(), "TimeoutError"),
    ],
)
async def test_backend_failures_become_mcp_error_results(error: Exception, expected_text: str) -> None:
    backend = RecordingBackend(call_error=error, providers={"files": "claude"})

    result = await MCPTool(backend, "files", READ_FILE).execute({"path": "x"})

    assert result.is_error is True
    assert result.text.startswith("MCP error: ")
    assert expected_text in result.text
    assert result.content == [{"type": "text", "text": result.text}]
    assert result.details == {"server": "files", "tool": "read_file", "provider": "claude"}


@pytest.mark.parametrize("abort", [asyncio.CancelledError, KeyboardInterrupt])
async def test_aborts_raised_by_the_backend_are_not_turned_into_results(abort: type[BaseException]) -> None:
    backend = RecordingBackend(call_error=abort())

    with pytest.raises(abort):
        await MCPTool(backend, "files", READ_FILE).execute({"path": "x"})


@pytest.mark.parametrize("tool_class", [MCPTool, DeferredMCPTool])
async def test_cancelling_a_call_propagates_the_cancellation(tool_class: type[MCPTool]) -> None:
    backend = BlockingBackend()
    tool = tool_class(backend, "files", READ_FILE)
    outcomes: list[str] = []

    async def call() -> None:
        try:
            result = await tool.execute({"path": "x"})
        except anyio.get_cancelled_exc_class():
            outcomes.append("cancelled")
            raise
        outcomes.append(f"returned {result.text}")

    with anyio.fail_after(10):
        with anyio.CancelScope() as scope:
            async with anyio.create_task_group() as task_group:
                task_group.start_soon(call)
                await backend.call_started.wait()
                scope.cancel()

    assert scope.cancelled_caught
    assert outcomes == ["cancelled"]
    assert backend.saw_cancellation


async def test_deferred_tool_waits_for_the_connection_before_calling() -> None:
    connection_ready = anyio.Event()
    backend = RecordingBackend(connection_ready=connection_ready)
    tool = DeferredMCPTool(backend, "files", READ_FILE)
    results: list[ToolResult] = []

    async def call() -> None:
        results.append(await tool.execute({"path": "x"}))

    with anyio.fail_after(10):
        async with anyio.create_task_group() as task_group:
            task_group.start_soon(call)
            await backend.connection_wait_started.wait()
            # Give the tool every chance to call early: it must not.
            await anyio.sleep(0.05)
            assert backend.calls == []
            connection_ready.set()

    assert backend.events == ["wait started", "connected", "call"]
    assert [result.text for result in results] == ["ok"]


async def test_deferred_tool_whose_server_never_connects_returns_an_mcp_error() -> None:
    backend = RecordingBackend(
        connection_error=ConnectTimeoutError("MCP server files did not answer within 30 s", server="files")
    )

    result = await DeferredMCPTool(backend, "files", READ_FILE).execute({"path": "x"})

    assert result.is_error is True
    assert result.text == "MCP error: MCP server files did not answer within 30 s"
    assert backend.calls == []


async def test_live_tool_does_not_wait_for_a_connection() -> None:
    backend = RecordingBackend()

    await MCPTool(backend, "files", READ_FILE).execute({"path": "x"})

    assert backend.events == ["call"]


# --- lookup -------------------------------------------------------------------------------------


def make_tools(*pairs: tuple[str, str]) -> list[MCPTool]:
    backend = RecordingBackend()
    return [MCPTool(backend, server, ToolDefinition(name=tool)) for server, tool in pairs]


def test_lookup_by_registered_name_label_and_claude_style() -> None:
    issue, search, read = make_tools(("github", "create_issue"), ("my docs", "search.pages"), ("a__b", "c"))

    tools = [issue, search, read]
    assert resolve_tool_name("mcp_github_create_issue", tools) is issue
    assert resolve_tool_name("github/create_issue", tools) is issue
    assert resolve_tool_name("mcp__github__create_issue", tools) is issue
    assert resolve_tool_name("my docs/search.pages", tools) is search
    assert resolve_tool_name("mcp__my_docs__search_pages", tools) is search
    # A server name containing the separator still resolves: every split is tried.
    assert resolve_tool_name("mcp__a__b__c", tools) is read
    assert resolve_tool_name("mcp__github__delete_repo", tools) is None
    assert resolve_tool_name("github/delete_repo", tools) is None
    assert resolve_tool_name("mcp__github", tools) is None


def test_lookup_finds_deferred_tools() -> None:
    deferred = DeferredMCPTool(RecordingBackend(), "files", READ_FILE)

    assert resolve_tool_name("mcp__files__read_file", [deferred]) is deferred


def test_ambiguous_claude_style_names_resolve_to_nothing() -> None:
    dotted, underscored = make_tools(("a.b", "c"), ("a_b", "c"))

    assert resolve_tool_name("mcp__a_b__c", [dotted, underscored]) is None
    assert resolve_tool_name("a.b/c", [dotted, underscored]) is dotted


def test_ambiguous_labels_resolve_to_nothing() -> None:
    backend = RecordingBackend()
    first = MCPTool(backend, "files", READ_FILE, name="mcp_files_read_file")
    second = MCPTool(backend, "files", READ_FILE, name="mcp_files_read_file_2")

    assert resolve_tool_name("files/read_file", [first, second]) is None
    assert resolve_tool_name("mcp_files_read_file_2", [first, second]) is second


def test_registered_name_wins_over_an_alias_of_another_tool() -> None:
    backend = RecordingBackend()
    aliased = MCPTool(backend, "x", ToolDefinition(name="y"))
    named = MCPTool(backend, "other", ToolDefinition(name="z"), name="mcp__x__y")

    assert resolve_tool_name("mcp__x__y", [aliased, named]) is named
