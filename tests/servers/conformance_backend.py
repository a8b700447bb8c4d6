"""The server the official conformance suite's *server* scenarios expect, on the SDK's lowlevel ``Server``.

Usage: ``python conformance_backend.py [--transport stdio|streamable-http] [--port N]``: stdio
by default; streamable HTTP binds 127.0.0.1 (``--port 0``, the default, picks a free port),
serves ``/mcp`` and prints ``READY <port>`` on stdout once it listens, as ``http_server.py``
does, so ``tests/servers/fixtures.py`` starts either.

``@modelcontextprotocol/conformance`` (``server --url …``) names, in each scenario's
description, the tools, resources and prompts it calls: ``test_simple_text``,
``test://static-text``, ``test_prompt_with_arguments`` and so on. This backend implements
them exactly as described, so that a run against it directly and a run against
``mcpfleet serve --prefix none`` in front of it can be compared scenario by scenario: what
the backend passes, the gateway must pass too (``tests/conformance/test_server_scenarios.py``).

The lowlevel ``Server`` rather than ``MCPServer``, because several scenarios check the exact
wire shape (a JSON Schema 2020-12 ``inputSchema``, ``x-mcp-header`` annotations, the
``inputRequests`` keys of a 2026-07-28 ``input_required`` result) that ``MCPServer`` derives
from Python signatures and would not reproduce verbatim. Both protocol eras are served: the
handshake scenarios send server-to-client requests mid-call (sampling, elicitation), the
2026-07-28 ones return ``input_required`` results whose ``requestState`` the SDK's
``RequestStateBoundary`` seals, so a tampered echo is refused without code here.

Not implemented, on purpose: the tasks and skills *extensions* (``tasks-*``,
``sep-2640-*``), which the SDK has no server side for; those scenarios are listed with
their reason in ``tests/conformance/server_baseline.txt``.
"""

from __future__ import annotations

import argparse
import base64
import io
import itertools
import json
import socket
import struct
import warnings
import wave
import zlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import anyio
import mcp_types as types
import uvicorn
from mcp.server.caching import CacheHint
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel.server import NotificationOptions, Server
from mcp.server.request_state import RequestStateBoundary, RequestStateSecurity
from mcp.server.stdio import stdio_server
from mcp.server.streamable_http import EventCallback, EventMessage, EventStore
from mcp.server.subscriptions import (
    InMemorySubscriptionBus,
    ListenHandler,
    PromptsListChanged,
    ToolsListChanged,
)
from mcp.shared.exceptions import MCPDeprecationWarning, MCPError
from mcp.shared.message import SessionMessage

SERVER_NAME = "conformance-backend"
Context = ServerRequestContext[Any, Any]
ToolResult = types.CallToolResult | types.InputRequiredResult
SSE_RETRY_INTERVAL_MS = 500
"""How soon a client reconnects after ``test_reconnection`` closes its stream (SEP-1699)."""


def one_pixel_png() -> str:
    """A 1x1 red PNG, base64, built from its chunks so that no opaque blob sits in the source."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    header = struct.pack(">IIBBBBB", 1, 1, 8, 2, 0, 0, 0)  # 1x1, 8-bit RGB
    pixels = zlib.compress(b"\x00\xff\x00\x00")  # filter byte, then one red pixel
    png = b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", pixels) + chunk(b"IEND", b"")
    return base64.b64encode(png).decode()


def short_silence_wav() -> str:
    """A tenth of a second of 8 kHz mono silence, base64."""
    buffer = io.BytesIO()
    with wave.open(buffer, "wb") as audio:
        audio.setnchannels(1)
        audio.setsampwidth(1)
        audio.setframerate(8000)
        audio.writeframes(b"\x80" * 800)
    return base64.b64encode(buffer.getvalue()).decode()


PNG = one_pixel_png()
WAV = short_silence_wav()
NO_ARGUMENTS: dict[str, Any] = {"type": "object", "properties": {}}

JSON_SCHEMA_2020_12 = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "$defs": {
        "address": {
            "$anchor": "addressDef",
            "type": "object",
            "properties": {"street": {"type": "string"}, "city": {"type": "string"}},
        }
    },
    "properties": {
        "name": {"type": "string"},
        "address": {"$ref": "#/$defs/address"},
        "contactMethod": {"type": "string", "enum": ["phone", "email"]},
        "phone": {"type": "string"},
        "email": {"type": "string"},
    },
    "allOf": [{"anyOf": [{"required": ["phone"]}, {"required": ["email"]}]}],
    "if": {"properties": {"contactMethod": {"const": "phone"}}, "required": ["contactMethod"]},
    "then": {"required": ["phone"]},
    "else": {"required": ["email"]},
    "additionalProperties": False,
}
"""The focal schema of ``json-schema-2020-12``: every keyword must reach the client unchanged."""

SEP1034_DEFAULTS_SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "default": "John Doe"},
        "age": {"type": "integer", "default": 30},
        "score": {"type": "number", "default": 95.5},
        "status": {"type": "string", "enum": ["active", "inactive", "pending"], "default": "active"},
        "verified": {"type": "boolean", "default": True},
    },
}

SEP1330_ENUMS_SCHEMA = {
    "type": "object",
    "properties": {
        "untitledSingle": {"type": "string", "enum": ["option1", "option2", "option3"]},
        "titledSingle": {
            "type": "string",
            "oneOf": [
                {"const": "value1", "title": "First Option"},
                {"const": "value2", "title": "Second Option"},
                {"const": "value3", "title": "Third Option"},
            ],
        },
        "legacyEnum": {
            "type": "string",
            "enum": ["opt1", "opt2", "opt3"],
            "enumNames": ["Option One", "Option Two", "Option Three"],
        },
        "untitledMulti": {
            "type": "array",
            "items": {"type": "string", "enum": ["option1", "option2", "option3"]},
        },
        "titledMulti": {
            "type": "array",
            "items": {
                "anyOf": [
                    {"const": "value1", "title": "First Choice"},
                    {"const": "value2", "title": "Second Choice"},
                    {"const": "value3", "title": "Third Choice"},
                ]
            },
        },
    },
}


def text_result(text: str, *, is_error: bool = False) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)], is_error=is_error)


def elicit_request(message: str, properties: dict[str, Any], required: list[str]) -> types.ElicitRequest:
    schema = {"type": "object", "properties": properties, "required": required}
    return types.ElicitRequest(params=types.ElicitRequestFormParams(message=message, requested_schema=schema))


def sampling_request(prompt: str, max_tokens: int) -> types.CreateMessageRequest:
    message = types.SamplingMessage(role="user", content=types.TextContent(type="text", text=prompt))
    return types.CreateMessageRequest(
        params=types.CreateMessageRequestParams(messages=[message], max_tokens=max_tokens)
    )


def accepted_content(response: types.InputResponse | None) -> dict[str, Any] | None:
    """The form an elicitation answer carries, when it is one and was accepted."""
    if isinstance(response, types.ElicitResult) and response.action == "accept":
        return dict(response.content or {})
    return None


def answers(params: types.InputResponseRequestParams) -> dict[str, types.InputResponse]:
    return dict(params.input_responses or {})


# Tools of the handshake-era scenarios: plain results, logs, progress, and requests to the client.
# A dual-era server: on a 2026-07-28 request the same tools ask by input_required under these keys.

SAMPLING_KEY = "sampling"
ELICITATION_KEY = "elicitation"


async def simple_text(ctx: Context, params: types.CallToolRequestParams) -> ToolResult:
    return text_result("This is a simple text response for testing.")


async def image_content(ctx: Context, params: types.CallToolRequestParams) -> ToolResult:
    return types.CallToolResult(content=[types.ImageContent(type="image", data=PNG, mime_type="image/png")])


async def audio_content(ctx: Context, params: types.CallToolRequestParams) -> ToolResult:
    return types.CallToolResult(content=[types.AudioContent(type="audio", data=WAV, mime_type="audio/wav")])


async def embedded_resource(ctx: Context, params: types.CallToolRequestParams) -> ToolResult:
    resource = types.TextResourceContents(
        uri="test://embedded-resource", mime_type="text/plain", text="This is an embedded resource content."
    )
    return types.CallToolResult(content=[types.EmbeddedResource(type="resource", resource=resource)])


async def multiple_content_types(ctx: Context, params: types.CallToolRequestParams) -> ToolResult:
    resource = types.TextResourceContents(
        uri="test://mixed-content-resource",
        mime_type="application/json",
        text=json.dumps({"test": "data", "value": 123}),
    )
    return types.CallToolResult(
        content=[
            types.TextContent(type="text", text="Multiple content types test:"),
            types.ImageContent(type="image", data=PNG, mime_type="image/png"),
            types.EmbeddedResource(type="resource", resource=resource),
        ]
    )


async def tool_with_logging(ctx: Context, params: types.CallToolRequestParams) -> ToolResult:
    for step, message in enumerate(
        ("Tool execution started", "Tool processing data", "Tool execution completed")
    ):
        if step:
            await anyio.sleep(0.05)
        await ctx.session.send_log_message(
            "info", message, logger=SERVER_NAME, related_request_id=ctx.request_id
        )
    return text_result("Tool with logging executed successfully")


async def error_handling(ctx: Context, params: types.CallToolRequestParams) -> ToolResult:
    return text_result("This tool intentionally returns an error for testing", is_error=True)


async def tool_with_progress(ctx: Context, params: types.CallToolRequestParams) -> ToolResult:
    for step, progress in enumerate((0, 50, 100)):
        if step:
            await anyio.sleep(0.05)
        await ctx.session.report_progress(progress, 100)
    return text_result("Tool with progress executed successfully")


async def sampling(ctx: Context, params: types.CallToolRequestParams) -> ToolResult:
    if not ctx.session.check_client_capability(types.ClientCapabilities(sampling=types.SamplingCapability())):
        return text_result(
            "test_sampling needs a client that declares the sampling capability", is_error=True
        )
    prompt = str((params.arguments or {}).get("prompt", ""))
    request = sampling_request(prompt, 100)
    if ctx.protocol_version in MODERN_VERSIONS:
        # No back-channel at 2026-07-28: the question goes out as input_required and the
        # client's retry carries the answer.
        answer = answers(params).get(SAMPLING_KEY)
        if not isinstance(answer, types.CreateMessageResult):
            return types.InputRequiredResult(input_requests={SAMPLING_KEY: request})
        reply = answer
    else:
        reply = await ctx.session.create_message(
            request.params.messages, max_tokens=request.params.max_tokens, related_request_id=ctx.request_id
        )
    text = reply.content.text if isinstance(reply.content, types.TextContent) else json.dumps(reply.content)
    return text_result(f"LLM response: {text}")


async def elicit_and_report(
    ctx: Context, params: types.CallToolRequestParams, message: str, schema: dict[str, Any], prefix: str
) -> ToolResult:
    if not ctx.session.check_client_capability(
        types.ClientCapabilities(elicitation=types.ElicitationCapability())
    ):
        return text_result("this tool needs a client that declares the elicitation capability", is_error=True)
    if ctx.protocol_version in MODERN_VERSIONS:
        # As in sampling: at 2026-07-28 the form is asked by input_required, not mid-call.
        answer = answers(params).get(ELICITATION_KEY)
        if not isinstance(answer, types.ElicitResult):
            question = types.ElicitRequest(
                params=types.ElicitRequestFormParams(message=message, requested_schema=schema)
            )
            return types.InputRequiredResult(input_requests={ELICITATION_KEY: question})
        reply = answer
    else:
        reply = await ctx.session.elicit_form(message, schema, related_request_id=ctx.request_id)
    return text_result(f"{prefix}action={reply.action}, content={json.dumps(reply.content or {})}")


async def elicitation(ctx: Context, params: types.CallToolRequestParams) -> ToolResult:
    message = str((params.arguments or {}).get("message", ""))
    request = elicit_request(
        message,
        {
            "username": {"type": "string", "description": "User's response"},
            "email": {"type": "string", "description": "User's email address"},
        },
        ["username", "email"],
    )
    assert isinstance(request.params, types.ElicitRequestFormParams)
    schema = request.params.requested_schema
    return await elicit_and_report(ctx, params, message, schema, "User response: ")


async def elicitation_defaults(ctx: Context, params: types.CallToolRequestParams) -> ToolResult:
    message = "Please review and update the form fields with defaults"
    return await elicit_and_report(ctx, params, message, SEP1034_DEFAULTS_SCHEMA, "Elicitation completed: ")


async def elicitation_enums(ctx: Context, params: types.CallToolRequestParams) -> ToolResult:
    return await elicit_and_report(
        ctx, params, "Choose from each kind of enum", SEP1330_ENUMS_SCHEMA, "Elicitation completed: "
    )


async def json_schema_tool(ctx: Context, params: types.CallToolRequestParams) -> ToolResult:
    return text_result("ok")


async def custom_header(ctx: Context, params: types.CallToolRequestParams) -> ToolResult:
    return text_result(f"region={(params.arguments or {}).get('region')}")


async def reconnection(ctx: Context, params: types.CallToolRequestParams) -> ToolResult:
    """Close this call's SSE stream mid-call; the client resumes it with ``Last-Event-ID`` (SEP-1699)."""
    await anyio.sleep(0.1)
    if ctx.close_sse_stream is not None:
        await ctx.close_sse_stream()
    await anyio.sleep(0.2)
    return text_result("Reconnection test completed")


# Tools of the 2026-07-28 scenarios: input_required rounds, capability checks, list changes.


async def missing_capability(ctx: Context, params: types.CallToolRequestParams) -> ToolResult:
    """Needs sampling; a client that did not declare it gets -32021 naming the capability."""
    if ctx.session.check_client_capability(types.ClientCapabilities(sampling=types.SamplingCapability())):
        return text_result("the client declared sampling")
    raise MCPError(
        code=types.MISSING_REQUIRED_CLIENT_CAPABILITY,
        message="test_missing_capability needs the sampling capability",
        data={"requiredCapabilities": {"sampling": {}}},
    )


async def logging_tool(ctx: Context, params: types.CallToolRequestParams) -> ToolResult:
    await ctx.session.send_log_message("info", "test_logging_tool ran", logger=SERVER_NAME)
    return text_result("logged")


async def streaming_elicitation(ctx: Context, params: types.CallToolRequestParams) -> ToolResult:
    name = accepted_content(answers(params).get("user_name"))
    if name is None:
        return types.InputRequiredResult(
            input_requests={
                "user_name": elicit_request("What is your name?", {"name": {"type": "string"}}, ["name"])
            }
        )
    return text_result(f"Hello, {name.get('name')}!")


async def trigger_tool_change(ctx: Context, params: types.CallToolRequestParams) -> ToolResult:
    await SUBSCRIPTIONS.publish(ToolsListChanged())
    if ctx.protocol_version not in MODERN_VERSIONS:
        await ctx.session.send_tool_list_changed()
    return text_result("tools/list_changed sent")


async def trigger_prompt_change(ctx: Context, params: types.CallToolRequestParams) -> ToolResult:
    await SUBSCRIPTIONS.publish(PromptsListChanged())
    if ctx.protocol_version not in MODERN_VERSIONS:
        await ctx.session.send_prompt_list_changed()
    return text_result("prompts/list_changed sent")


async def input_required_elicitation(ctx: Context, params: types.CallToolRequestParams) -> ToolResult:
    return await streaming_elicitation(ctx, params)


async def input_required_sampling(ctx: Context, params: types.CallToolRequestParams) -> ToolResult:
    reply = answers(params).get("capital_question")
    if not isinstance(reply, types.CreateMessageResult):
        return types.InputRequiredResult(
            input_requests={"capital_question": sampling_request("What is the capital of France?", 100)}
        )
    text = reply.content.text if isinstance(reply.content, types.TextContent) else ""
    return text_result(f"The model said: {text}")


async def input_required_list_roots(ctx: Context, params: types.CallToolRequestParams) -> ToolResult:
    reply = answers(params).get("client_roots")
    if not isinstance(reply, types.ListRootsResult):
        return types.InputRequiredResult(input_requests={"client_roots": types.ListRootsRequest()})
    return text_result("Roots: " + ", ".join(str(root.uri) for root in reply.roots))


async def input_required_request_state(ctx: Context, params: types.CallToolRequestParams) -> ToolResult:
    confirmed = accepted_content(answers(params).get("confirm"))
    if confirmed is None or params.request_state != "awaiting-confirmation":
        return types.InputRequiredResult(
            input_requests={"confirm": elicit_request("Please confirm", {"ok": {"type": "boolean"}}, ["ok"])},
            request_state="awaiting-confirmation",
        )
    return text_result(f"state-ok: confirmed={confirmed.get('ok')}")


async def input_required_multi_round(ctx: Context, params: types.CallToolRequestParams) -> ToolResult:
    """Three rounds; the state names the round, so each answer is read against the right question."""
    state = params.request_state or ""
    name = accepted_content(answers(params).get("step1"))
    color = accepted_content(answers(params).get("step2"))
    if state.startswith("step2:") and color is not None:
        return text_result(f"{state.removeprefix('step2:')} likes {color.get('color')}")
    if state == "step1" and name is not None:
        return types.InputRequiredResult(
            input_requests={
                "step2": elicit_request(
                    "Step 2: What is your favorite color?", {"color": {"type": "string"}}, ["color"]
                )
            },
            request_state=f"step2:{name.get('name')}",
        )
    return types.InputRequiredResult(
        input_requests={
            "step1": elicit_request("Step 1: What is your name?", {"name": {"type": "string"}}, ["name"])
        },
        request_state="step1",
    )


MULTIPLE_INPUTS: dict[str, types.InputRequest] = {
    "user_name": elicit_request("What is your name?", {"name": {"type": "string"}}, ["name"]),
    "greeting": sampling_request("Generate a greeting", 50),
    "client_roots": types.ListRootsRequest(),
}


async def input_required_multiple_inputs(ctx: Context, params: types.CallToolRequestParams) -> ToolResult:
    if params.request_state != "three-questions" or not set(MULTIPLE_INPUTS) <= set(answers(params)):
        return types.InputRequiredResult(input_requests=MULTIPLE_INPUTS, request_state="three-questions")
    return text_result("all three answers received")


async def input_required_capabilities(ctx: Context, params: types.CallToolRequestParams) -> ToolResult:
    """Ask only for what the client declared it can answer."""
    requests: dict[str, types.InputRequest] = {}
    if ctx.session.check_client_capability(types.ClientCapabilities(sampling=types.SamplingCapability())):
        requests["greeting"] = sampling_request("Generate a greeting", 50)
    if ctx.session.check_client_capability(
        types.ClientCapabilities(elicitation=types.ElicitationCapability())
    ):
        requests["user_name"] = elicit_request("What is your name?", {"name": {"type": "string"}}, ["name"])
    if not requests or set(requests) <= set(answers(params)):
        return text_result("nothing more to ask")
    return types.InputRequiredResult(input_requests=requests)


async def input_required_tampered_state(ctx: Context, params: types.CallToolRequestParams) -> ToolResult:
    # The SDK's RequestStateBoundary refuses a tampered echo before this handler runs.
    if params.request_state == "sealed" and accepted_content(answers(params).get("confirm")) is not None:
        return text_result("state verified")
    return types.InputRequiredResult(
        input_requests={"confirm": elicit_request("Please confirm", {"ok": {"type": "boolean"}}, ["ok"])},
        request_state="sealed",
    )


@dataclass(frozen=True)
class ToolSpec:
    description: str
    handler: Callable[[Context, types.CallToolRequestParams], Awaitable[ToolResult]]
    input_schema: dict[str, Any]


def string_argument(name: str, description: str) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {name: {"type": "string", "description": description}},
        "required": [name],
    }


TOOLS: dict[str, ToolSpec] = {
    "test_simple_text": ToolSpec("Returns simple text content", simple_text, NO_ARGUMENTS),
    "test_image_content": ToolSpec("Returns a 1x1 PNG image", image_content, NO_ARGUMENTS),
    "test_audio_content": ToolSpec("Returns a short WAV clip", audio_content, NO_ARGUMENTS),
    "test_embedded_resource": ToolSpec("Returns an embedded text resource", embedded_resource, NO_ARGUMENTS),
    "test_multiple_content_types": ToolSpec(
        "Returns text, an image and a resource", multiple_content_types, NO_ARGUMENTS
    ),
    "test_tool_with_logging": ToolSpec(
        "Sends three info logs while it runs", tool_with_logging, NO_ARGUMENTS
    ),
    "test_error_handling": ToolSpec("Always returns an error result", error_handling, NO_ARGUMENTS),
    "test_tool_with_progress": ToolSpec(
        "Reports progress 0, 50, 100 of 100", tool_with_progress, NO_ARGUMENTS
    ),
    "test_sampling": ToolSpec(
        "Asks the client's model", sampling, string_argument("prompt", "The prompt to send to the LLM")
    ),
    "test_elicitation": ToolSpec(
        "Asks the user", elicitation, string_argument("message", "The message to show the user")
    ),
    "test_elicitation_sep1034_defaults": ToolSpec(
        "Asks the user with a default for every primitive type", elicitation_defaults, NO_ARGUMENTS
    ),
    "test_elicitation_sep1330_enums": ToolSpec(
        "Asks the user with all five enum shapes", elicitation_enums, NO_ARGUMENTS
    ),
    "json_schema_2020_12_tool": ToolSpec(
        "Tool with JSON Schema 2020-12 features", json_schema_tool, JSON_SCHEMA_2020_12
    ),
    "test_custom_header": ToolSpec(
        "Echoes a region that also travels as the Mcp-Param-Region header",
        custom_header,
        {
            "type": "object",
            "properties": {"region": {"type": "string", "x-mcp-header": "Region"}},
            "required": ["region"],
        },
    ),
    "test_reconnection": ToolSpec("Closes its SSE stream mid-call", reconnection, NO_ARGUMENTS),
    "test_missing_capability": ToolSpec("Needs the sampling capability", missing_capability, NO_ARGUMENTS),
    "test_logging_tool": ToolSpec("Sends one log message", logging_tool, NO_ARGUMENTS),
    "test_streaming_elicitation": ToolSpec(
        "Asks for a name by input_required", streaming_elicitation, NO_ARGUMENTS
    ),
    "test_trigger_tool_change": ToolSpec("Announces a tools list change", trigger_tool_change, NO_ARGUMENTS),
    "test_trigger_prompt_change": ToolSpec(
        "Announces a prompts list change", trigger_prompt_change, NO_ARGUMENTS
    ),
    "test_input_required_result_elicitation": ToolSpec(
        "Asks for a name by input_required", input_required_elicitation, NO_ARGUMENTS
    ),
    "test_input_required_result_sampling": ToolSpec(
        "Asks the client's model by input_required", input_required_sampling, NO_ARGUMENTS
    ),
    "test_input_required_result_list_roots": ToolSpec(
        "Asks for the client's roots by input_required", input_required_list_roots, NO_ARGUMENTS
    ),
    "test_input_required_result_request_state": ToolSpec(
        "Round-trips a requestState", input_required_request_state, NO_ARGUMENTS
    ),
    "test_input_required_result_multi_round": ToolSpec(
        "Asks two questions in two rounds", input_required_multi_round, NO_ARGUMENTS
    ),
    "test_input_required_result_multiple_inputs": ToolSpec(
        "Asks three kinds of question in one round", input_required_multiple_inputs, NO_ARGUMENTS
    ),
    "test_input_required_result_capabilities": ToolSpec(
        "Asks only what the client declared it can answer", input_required_capabilities, NO_ARGUMENTS
    ),
    "test_input_required_result_tampered_state": ToolSpec(
        "Refuses a tampered requestState", input_required_tampered_state, NO_ARGUMENTS
    ),
}

MODERN_VERSIONS = frozenset({"2026-07-28"})


async def list_tools(ctx: Context, params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
    return types.ListToolsResult(
        tools=[
            types.Tool(name=name, description=spec.description, input_schema=spec.input_schema)
            for name, spec in TOOLS.items()
        ]
    )


async def call_tool(ctx: Context, params: types.CallToolRequestParams) -> ToolResult:
    spec = TOOLS.get(params.name)
    if spec is None:
        raise MCPError(code=types.INVALID_PARAMS, message=f"Unknown tool: {params.name}")
    return await spec.handler(ctx, params)


def tool_input_schema(name: str) -> dict[str, Any] | None:
    spec = TOOLS.get(name)
    return None if spec is None else spec.input_schema


# Resources: two static ones, a template, one to subscribe to.

STATIC_RESOURCES: dict[
    str, tuple[types.Resource, types.TextResourceContents | types.BlobResourceContents]
] = {
    "test://static-text": (
        types.Resource(
            uri="test://static-text",
            name="static-text",
            description="A static text resource",
            mime_type="text/plain",
        ),
        types.TextResourceContents(
            uri="test://static-text",
            mime_type="text/plain",
            text="This is the content of the static text resource.",
        ),
    ),
    "test://static-binary": (
        types.Resource(
            uri="test://static-binary",
            name="static-binary",
            description="A static binary resource (a 1x1 PNG)",
            mime_type="image/png",
        ),
        types.BlobResourceContents(uri="test://static-binary", mime_type="image/png", blob=PNG),
    ),
    "test://watched-resource": (
        types.Resource(
            uri="test://watched-resource",
            name="watched-resource",
            description="A resource clients may subscribe to",
            mime_type="text/plain",
        ),
        types.TextResourceContents(uri="test://watched-resource", mime_type="text/plain", text="watched"),
    ),
}
TEMPLATE_PREFIX, TEMPLATE_SUFFIX = "test://template/", "/data"
subscribed_uris: set[str] = set()


async def list_resources(
    ctx: Context, params: types.PaginatedRequestParams | None
) -> types.ListResourcesResult:
    return types.ListResourcesResult(resources=[resource for resource, _ in STATIC_RESOURCES.values()])


async def list_resource_templates(
    ctx: Context, params: types.PaginatedRequestParams | None
) -> types.ListResourceTemplatesResult:
    template = types.ResourceTemplate(
        uri_template=f"{TEMPLATE_PREFIX}{{id}}{TEMPLATE_SUFFIX}",
        name="template-data",
        description="Data for the id in the URI",
        mime_type="application/json",
    )
    return types.ListResourceTemplatesResult(resource_templates=[template])


async def read_resource(ctx: Context, params: types.ReadResourceRequestParams) -> types.ReadResourceResult:
    uri = str(params.uri)
    if uri in STATIC_RESOURCES:
        return types.ReadResourceResult(contents=[STATIC_RESOURCES[uri][1]])
    if uri.startswith(TEMPLATE_PREFIX) and uri.endswith(TEMPLATE_SUFFIX):
        item_id = uri.removeprefix(TEMPLATE_PREFIX).removesuffix(TEMPLATE_SUFFIX)
        if item_id and "/" not in item_id:
            data = {"id": item_id, "templateTest": True, "data": f"Data for ID: {item_id}"}
            contents = types.TextResourceContents(
                uri=uri, mime_type="application/json", text=json.dumps(data)
            )
            return types.ReadResourceResult(contents=[contents])
    raise MCPError(code=types.INVALID_PARAMS, message="Resource not found", data={"uri": uri})


async def subscribe(ctx: Context, params: types.SubscribeRequestParams) -> types.EmptyResult:
    subscribed_uris.add(str(params.uri))
    return types.EmptyResult()


async def unsubscribe(ctx: Context, params: types.UnsubscribeRequestParams) -> types.EmptyResult:
    subscribed_uris.discard(str(params.uri))
    return types.EmptyResult()


# Prompts.

PROMPTS = [
    types.Prompt(name="test_simple_prompt", description="A prompt without arguments"),
    types.Prompt(
        name="test_prompt_with_arguments",
        description="A prompt with two required arguments",
        arguments=[
            types.PromptArgument(name="arg1", description="First test argument", required=True),
            types.PromptArgument(name="arg2", description="Second test argument", required=True),
        ],
    ),
    types.Prompt(
        name="test_prompt_with_embedded_resource",
        description="A prompt that embeds a resource",
        arguments=[
            types.PromptArgument(
                name="resourceUri", description="URI of the resource to embed", required=True
            )
        ],
    ),
    types.Prompt(name="test_prompt_with_image", description="A prompt that carries an image"),
    types.Prompt(
        name="test_input_required_result_prompt", description="A prompt that asks for context first"
    ),
]


def user_text(text: str) -> types.PromptMessage:
    return types.PromptMessage(role="user", content=types.TextContent(type="text", text=text))


async def list_prompts(ctx: Context, params: types.PaginatedRequestParams | None) -> types.ListPromptsResult:
    return types.ListPromptsResult(prompts=PROMPTS)


async def get_prompt(
    ctx: Context, params: types.GetPromptRequestParams
) -> types.GetPromptResult | types.InputRequiredResult:
    arguments = params.arguments or {}
    if params.name == "test_simple_prompt":
        return types.GetPromptResult(messages=[user_text("This is a simple prompt for testing.")])
    if params.name == "test_prompt_with_arguments":
        text = f"Prompt with arguments: arg1='{arguments.get('arg1')}', arg2='{arguments.get('arg2')}'"
        return types.GetPromptResult(messages=[user_text(text)])
    if params.name == "test_prompt_with_embedded_resource":
        resource = types.TextResourceContents(
            uri=arguments.get("resourceUri", "test://example-resource"),
            mime_type="text/plain",
            text="Embedded resource content for testing.",
        )
        return types.GetPromptResult(
            messages=[
                types.PromptMessage(
                    role="user", content=types.EmbeddedResource(type="resource", resource=resource)
                ),
                user_text("Please process the embedded resource above."),
            ]
        )
    if params.name == "test_prompt_with_image":
        image = types.ImageContent(type="image", data=PNG, mime_type="image/png")
        return types.GetPromptResult(
            messages=[
                types.PromptMessage(role="user", content=image),
                user_text("Please analyze the image above."),
            ]
        )
    if params.name == "test_input_required_result_prompt":
        context = accepted_content(answers(params).get("user_context"))
        if context is None:
            question = elicit_request(
                "What context should the prompt use?", {"context": {"type": "string"}}, ["context"]
            )
            return types.InputRequiredResult(input_requests={"user_context": question})
        return types.GetPromptResult(messages=[user_text(f"Use this context: {context.get('context')}")])
    raise MCPError(code=types.INVALID_PARAMS, message=f"Unknown prompt: {params.name}")


async def complete(ctx: Context, params: types.CompleteRequestParams) -> types.CompleteResult:
    candidates = ["paris", "park", "party"] if params.argument.name == "arg1" else []
    values = [value for value in candidates if value.startswith(params.argument.value)]
    return types.CompleteResult(completion=types.Completion(values=values, total=len(values), has_more=False))


async def set_logging_level(ctx: Context, params: types.SetLevelRequestParams) -> types.EmptyResult:
    return types.EmptyResult()


class InMemoryEventStore(EventStore):
    """Every event of every stream, in memory, so a closed SSE stream can be resumed (SEP-1699)."""

    def __init__(self) -> None:
        self.events: list[tuple[str, str, types.JSONRPCMessage | None]] = []
        self.counter = itertools.count(1)

    async def store_event(self, stream_id: str, message: types.JSONRPCMessage | None) -> str:
        event_id = str(next(self.counter))
        self.events.append((event_id, stream_id, message))
        return event_id

    async def replay_events_after(self, last_event_id: str, send_callback: EventCallback) -> str | None:
        position = next((index for index, event in enumerate(self.events) if event[0] == last_event_id), None)
        if position is None:
            return None
        stream_id = self.events[position][1]
        for event_id, event_stream, message in self.events[position + 1 :]:
            if event_stream == stream_id and message is not None:
                await send_callback(EventMessage(message, event_id))
        return stream_id


SUBSCRIPTIONS = InMemorySubscriptionBus()


def build_server() -> Server[Any]:
    hint = CacheHint(ttl_ms=0, scope="private")
    server: Server[Any] = Server(
        SERVER_NAME,
        version="1.0.0",
        instructions="The tools, resources and prompts of the MCP conformance suite's server scenarios.",
        cache_hints={
            "tools/list": hint,
            "prompts/list": hint,
            "resources/list": hint,
            "resources/templates/list": hint,
            "resources/read": hint,
        },
        get_tool_input_schema=tool_input_schema,
        on_list_tools=list_tools,
        on_call_tool=call_tool,
        on_list_resources=list_resources,
        on_list_resource_templates=list_resource_templates,
        on_read_resource=read_resource,
        on_subscribe_resource=subscribe,
        on_unsubscribe_resource=unsubscribe,
        on_subscriptions_listen=ListenHandler(SUBSCRIPTIONS),
        on_list_prompts=list_prompts,
        on_get_prompt=get_prompt,
        on_completion=complete,
        on_set_logging_level=set_logging_level,
    )
    server.middleware.append(
        RequestStateBoundary(RequestStateSecurity.ephemeral(), default_audience=SERVER_NAME)
    )
    return server


async def serve_stdio(handshake_only: bool = False) -> None:
    server = build_server()
    options = server.create_initialization_options(
        NotificationOptions(prompts_changed=True, tools_changed=True)
    )
    async with stdio_server() as (read_stream, write_stream):
        if not handshake_only:
            await server.run(read_stream, write_stream, options)
            return
        requests, handed_on = anyio.create_memory_object_stream[SessionMessage | Exception](0)
        async with anyio.create_task_group() as task_group:
            task_group.start_soon(refuse_discovery, read_stream, requests, write_stream.clone())
            await server.run(handed_on, write_stream, options)


async def refuse_discovery(read_stream: Any, requests: Any, write_stream: Any) -> None:
    """Answer ``server/discover`` with -32601, as a server that only knows ``initialize`` does;
    hand everything else on."""
    async with read_stream, requests, write_stream:
        async for item in read_stream:
            message = getattr(item, "message", None)
            if isinstance(message, types.JSONRPCRequest) and message.method == "server/discover":
                error = types.ErrorData(code=types.METHOD_NOT_FOUND, message="Method not found")
                await write_stream.send(
                    SessionMessage(types.JSONRPCError(jsonrpc="2.0", id=message.id, error=error))
                )
                continue
            await requests.send(item)


async def serve_http(port: int) -> None:
    app = build_server().streamable_http_app(
        event_store=InMemoryEventStore(), retry_interval=SSE_RETRY_INTERVAL_MS
    )
    listening = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listening.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listening.bind(("127.0.0.1", port))
    listening.listen(64)
    print(f"READY {listening.getsockname()[1]}", flush=True)
    # h11, as the SDK's users get it without extras: httptools (installed here for the gateway)
    # keeps a header value's trailing whitespace, which the SDK's Mcp-Name check then compares.
    config = uvicorn.Config(app, log_level="warning", lifespan="on", http="h11")
    await uvicorn.Server(config).serve(sockets=[listening])


def main() -> None:
    parser = argparse.ArgumentParser(description="The MCP conformance suite's server-scenario backend")
    parser.add_argument("--transport", choices=["stdio", "streamable-http"], default="stdio")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument(
        "--handshake-only",
        action="store_true",
        help="stdio: refuse server/discover, so clients connect in the initialize era",
    )
    options = parser.parse_args()
    # Logging, sampling and roots are deprecated at 2026-07-28, but the handshake-era
    # scenarios still exercise them: the warnings would only be noise on stderr.
    warnings.filterwarnings("ignore", category=MCPDeprecationWarning)
    if options.transport == "streamable-http":
        anyio.run(serve_http, options.port)
    else:
        anyio.run(serve_stdio, options.handshake_only)


if __name__ == "__main__":
    main()
