"""A stdio MCP server whose tools ask the client something and answer with what they got.

Built on the SDK's lowlevel ``Server``, so it speaks both protocol eras the way the SDK does:
on a handshake-era connection each question is a request to the client during the call (an
error answer is reported in the tool's text); on a 2026-07-28 connection it is an
``input_required`` round, and the retried call answers with the client's response. With
``--legacy`` it serves the ``initialize`` handshake only (``server/discover`` is refused), as a
server that predates 2026-07-28 does.

Tools:
  sample {prompt}     asks ``sampling/createMessage``; text ``sampled <text> from <model>``
  elicit {message}    asks ``elicitation/create`` (a form with one string field ``answer``);
                      text ``elicited <action> <content as JSON>``
  roots {}            asks ``roots/list``; text ``roots <the root URIs as JSON>``
  roots_changes {}    text ``roots changed <n> times, last <URIs as JSON>``: the
                      ``notifications/roots/list_changed`` received so far (each is also logged
                      on stderr as ``roots changed``) and the roots the client gave when asked
                      again after the latest one (``null`` until it answers)
A refused question (handshake era) answers ``refused <code> <message>``.

With ``--unprompted FILE`` (handshake era), SIGUSR1 makes the server ask, outside any call,
``sampling/createMessage`` (prompt ``unprompted``), ``elicitation/create`` (message
``password?``) and ``roots/list``, one after the other, on the connection of its client, and
append one JSON line per question to FILE: ``{"asked": "sample" | "elicit" | "roots",
"outcome": <the text a tool would answer>}``. A roots request after
``notifications/roots/list_changed`` that is refused is remembered as ``last`` = the refusal.

Prompt ``summary {topic}`` asks ``sampling/createMessage`` for "Summarise <topic>" and is one
assistant message with the text the ``sample`` tool would answer.

Usage: ``python asking_server.py [--name NAME] [--legacy] [--unprompted FILE]``.
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
from typing import Any

import anyio
import anyio.abc
import mcp_types as types
from mcp.server import Server
from mcp.server.context import ServerRequestContext
from mcp.server.runner import serve_loop
from mcp.server.session import ServerSession
from mcp.server.stdio import stdio_server
from mcp.shared.exceptions import MCPError
from mcp.shared.message import ServerMessageMetadata
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import BaseModel

QUESTION_KEY = "question"
"""The key of the one input request of a 2026-07-28 round."""

_OBJECT: dict[str, Any] = {"type": "object"}
TOOLS = [
    types.Tool(
        name="sample",
        description="Ask the client's model",
        input_schema={**_OBJECT, "properties": {"prompt": {"type": "string"}}, "required": ["prompt"]},
    ),
    types.Tool(
        name="elicit",
        description="Ask the client's user",
        input_schema={**_OBJECT, "properties": {"message": {"type": "string"}}, "required": ["message"]},
    ),
    types.Tool(name="roots", description="Ask the client for its roots", input_schema=_OBJECT),
    types.Tool(name="roots_changes", description="How often the roots changed", input_schema=_OBJECT),
]


class RootsChanges:
    count = 0
    last: list[str] | str | None = None
    asks: anyio.abc.TaskGroup | None = None
    """Where the server asks for roots after a change, outside the notification's handler."""


class Connection:
    session: ServerSession | None = None
    """The session of the client, from its first request: where unprompted questions go."""


def question_for(name: str, arguments: dict[str, Any]) -> tuple[types.InputRequest, type[BaseModel]]:
    if name == "sample":
        prompt = types.SamplingMessage(
            role="user", content=types.TextContent(type="text", text=arguments["prompt"])
        )
        params = types.CreateMessageRequestParams(messages=[prompt], max_tokens=50)
        return types.CreateMessageRequest(params=params), types.CreateMessageResult
    if name == "elicit":
        schema = {"type": "object", "properties": {"answer": {"type": "string"}}, "required": ["answer"]}
        form = types.ElicitRequestFormParams(message=arguments["message"], requested_schema=schema)
        return types.ElicitRequest(params=form), types.ElicitResult
    return types.ListRootsRequest(), types.ListRootsResult


def describe(name: str, answer: dict[str, Any]) -> str:
    if name == "sample":
        return f"sampled {answer['content'].get('text')} from {answer.get('model')}"
    if name == "elicit":
        return f"elicited {answer['action']} {json.dumps(answer.get('content'), sort_keys=True)}"
    return f"roots {json.dumps([root['uri'] for root in answer['roots']])}"


def text_result(text: str) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)])


async def list_tools(
    ctx: ServerRequestContext, params: types.PaginatedRequestParams | None
) -> types.ListToolsResult:
    Connection.session = ctx.session
    return types.ListToolsResult(tools=TOOLS)


async def ask(
    ctx: ServerRequestContext, params: types.InputResponseRequestParams, name: str, arguments: dict[str, Any]
) -> str | types.InputRequiredResult:
    """Ask the question of ``name`` in this connection's era; the text of the answer (or of the
    refusal), or the round that asks it."""
    request, result_type = question_for(name, arguments)
    if ctx.session.protocol_version in MODERN_PROTOCOL_VERSIONS:
        answered = (params.input_responses or {}).get(QUESTION_KEY)
        if answered is None:
            return types.InputRequiredResult(input_requests={QUESTION_KEY: request})
        return describe(name, answered.model_dump(by_alias=True, mode="json", exclude_none=True))
    try:
        answer = await ctx.session.send_request(
            request, result_type, metadata=ServerMessageMetadata(related_request_id=ctx.request_id)
        )
    except MCPError as error:
        return f"refused {error.code} {error.message}"
    return describe(name, answer.model_dump(by_alias=True, mode="json", exclude_none=True))


async def call_tool(
    ctx: ServerRequestContext, params: types.CallToolRequestParams
) -> types.CallToolResult | types.InputRequiredResult:
    if params.name == "roots_changes":
        return text_result(f"roots changed {RootsChanges.count} times, last {json.dumps(RootsChanges.last)}")
    answer = await ask(ctx, params, params.name, params.arguments or {})
    return answer if isinstance(answer, types.InputRequiredResult) else text_result(answer)


async def list_prompts(
    ctx: ServerRequestContext, params: types.PaginatedRequestParams | None
) -> types.ListPromptsResult:
    topic = types.PromptArgument(name="topic", required=True)
    return types.ListPromptsResult(prompts=[types.Prompt(name="summary", arguments=[topic])])


async def get_prompt(
    ctx: ServerRequestContext, params: types.GetPromptRequestParams
) -> types.GetPromptResult | types.InputRequiredResult:
    topic = (params.arguments or {}).get("topic", "")
    answer = await ask(ctx, params, "sample", {"prompt": f"Summarise {topic}"})
    if isinstance(answer, types.InputRequiredResult):
        return answer
    message = types.PromptMessage(role="assistant", content=types.TextContent(type="text", text=answer))
    return types.GetPromptResult(messages=[message])


async def roots_changed(ctx: ServerRequestContext, params: types.NotificationParams) -> None:
    RootsChanges.count += 1
    print("roots changed", file=sys.stderr, flush=True)
    assert RootsChanges.asks is not None
    RootsChanges.asks.start_soon(ask_roots_again, ctx.session)


async def ask_roots_again(session: ServerSession) -> None:
    """Ask for the roots on the connection itself: no call is in flight."""
    try:
        answer = await session.send_request(types.ListRootsRequest(), types.ListRootsResult)
    except MCPError as error:
        RootsChanges.last = f"refused {error.code} {error.message}"
        return
    RootsChanges.last = [str(root.uri) for root in answer.roots]


async def ask_unprompted(report: str) -> None:
    """On each SIGUSR1, ask every question on the connection, outside any call, and report."""
    with anyio.open_signal_receiver(signal.SIGUSR1) as signals:
        async for _ in signals:
            session = Connection.session
            assert session is not None, "no client has listed the tools yet"
            for name, arguments in (
                ("sample", {"prompt": "unprompted"}),
                ("elicit", {"message": "password?"}),
            ):
                request, result_type = question_for(name, arguments)
                await report_outcome(report, name, session, request, result_type)
            await report_outcome(report, "roots", session, types.ListRootsRequest(), types.ListRootsResult)


async def report_outcome(
    report: str, name: str, session: ServerSession, request: Any, result_type: type[BaseModel]
) -> None:
    try:
        answer = await session.send_request(request, result_type)
    except MCPError as error:
        outcome = f"refused {error.code} {error.message}"
    else:
        outcome = describe(name, answer.model_dump(by_alias=True, mode="json", exclude_none=True))
    async with await anyio.open_file(report, "a") as lines:
        await lines.write(json.dumps({"asked": name, "outcome": outcome}) + "\n")


def build_server(name: str) -> Server:
    server = Server(
        name,
        on_list_tools=list_tools,
        on_call_tool=call_tool,
        on_list_prompts=list_prompts,
        on_get_prompt=get_prompt,
    )
    server.add_notification_handler(
        "notifications/roots/list_changed", types.NotificationParams, roots_changed
    )
    return server


async def serve(options: argparse.Namespace) -> None:
    server = build_server(options.name)
    async with anyio.create_task_group() as asks, stdio_server() as (read_stream, write_stream):
        RootsChanges.asks = asks
        if options.unprompted is not None:
            asks.start_soon(ask_unprompted, options.unprompted)
        if options.legacy:
            await serve_loop(
                server,
                read_stream,
                write_stream,
                lifespan_state={},
                init_options=server.create_initialization_options(),
            )
        else:
            await server.run(read_stream, write_stream, server.create_initialization_options())
        asks.cancel_scope.cancel()


def main() -> None:
    parser = argparse.ArgumentParser(description="MCP test server whose tools ask the client")
    parser.add_argument("--name", default="asking")
    parser.add_argument("--legacy", action="store_true")
    parser.add_argument("--unprompted", metavar="FILE", help="on SIGUSR1, ask outside any call")
    anyio.run(serve, parser.parse_args())


if __name__ == "__main__":
    main()
