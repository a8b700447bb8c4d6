"""An MCP server over HTTP for tests, built on the SDK's ``MCPServer`` and run by uvicorn.

Usage: ``python http_server.py [--transport streamable-http|sse] [--port N] [--name NAME]
[--require-bearer TOKEN] [--require-query NAME=VALUE] [--era dual|modern|legacy]``.

It binds 127.0.0.1 (``--port 0``, the default, picks a free port) and prints ``READY <port>``
on stdout once it listens. The MCP endpoint is ``/mcp`` (streamable HTTP) or ``/sse``
(legacy SSE). With ``--require-bearer`` every request without ``Authorization: Bearer
TOKEN`` gets 401, and with ``--require-query`` every request whose query string lacks
``NAME=VALUE`` gets 403 (a test's proof that a masked value still reached the server).
Tools: ``echo {message}`` (text + structured), ``add {a, b}``, ``sleep {seconds}``
(reports progress every 0.1 s), ``review {topic}`` (asks the client for an approval by
elicitation, a summary by sampling and its roots before answering: on a
2026-07-28 connection as ``input_required`` rounds, on a legacy one as requests).
``tests/servers/fixtures.py`` starts it.

Protocol eras of streamable HTTP (``--era``): ``dual`` (the SDK's default: both the
``initialize`` handshake and 2026-07-28 requests), ``modern`` (stateless, and every request
that is not 2026-07-28, ``initialize`` included, refused with HTTP 400 and the
unsupported-version error, as a server that dropped the handshake answers), ``legacy`` (every
2026-07-28 request, ``server/discover`` included, refused with HTTP 400 "no session", as a
server that predates the revision answers).
"""

from __future__ import annotations

import argparse
import json
import socket
from typing import Annotated, Any
from urllib.parse import parse_qs

import anyio
import uvicorn
from mcp.server.mcpserver import Context, Elicit, ListRoots, MCPServer, Resolve, Sample
from mcp.shared.inbound import unsupported_protocol_version_rejection
from mcp_types import CreateMessageResult, ListRootsResult, SamplingMessage, TextContent
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import BaseModel
from starlette.types import ASGIApp, Message, Receive, Scope, Send


class Approval(BaseModel):
    approved: bool


def ask_approval(topic: str) -> Elicit[Approval]:
    return Elicit(f"Approve the review of {topic}?", Approval)


def ask_summary(topic: str) -> Sample:
    prompt = SamplingMessage(role="user", content=TextContent(type="text", text=f"Summarise {topic}"))
    return Sample([prompt], max_tokens=50)


def ask_roots() -> ListRoots:
    return ListRoots()


def build_server(name: str) -> MCPServer:
    server = MCPServer(name, instructions=f"http test server {name}")

    @server.tool()
    def echo(message: str) -> dict[str, Any]:
        """Echo a message back."""
        return {"message": message}

    @server.tool()
    def add(a: float, b: float) -> float:
        """Add two numbers."""
        return a + b

    @server.tool()
    async def sleep(seconds: float, ctx: Context) -> str:
        """Sleep, reporting progress."""
        steps = max(1, int(seconds / 0.1))
        for step in range(steps):
            await anyio.sleep(seconds / steps)
            await ctx.report_progress(step + 1, steps)
        return f"slept {seconds}"

    @server.tool()
    def review(
        topic: str,
        approval: Annotated[Approval, Resolve(ask_approval)],
        summary: Annotated[CreateMessageResult, Resolve(ask_summary)],
        roots: Annotated[ListRootsResult, Resolve(ask_roots)],
    ) -> str:
        """Review a topic with the client's approval, model and roots."""
        text = summary.content.text if isinstance(summary.content, TextContent) else ""
        return f"{topic}: approved={approval.approved}; summary={text}; roots={len(roots.roots)}"

    return server


class OneEraOnly:
    """Refuse, as the named era's servers do, every request that speaks the other era."""

    def __init__(self, app: ASGIApp, era: str) -> None:
        self.app = app
        self.era = era

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        version = dict(scope["headers"]).get(b"mcp-protocol-version", b"").decode("latin-1")
        modern = version in MODERN_PROTOCOL_VERSIONS
        if modern == (self.era == "modern"):
            await self.app(scope, receive, send)
            return
        body = await _read_body(receive)
        try:
            request_id = json.loads(body).get("id")
        except (ValueError, AttributeError):
            request_id = None
        if self.era == "modern":
            rejection = unsupported_protocol_version_rejection(version)
            assert rejection is not None
            error: dict[str, Any] = {
                "code": rejection.code,
                "message": rejection.message,
                "data": rejection.data,
            }
        else:
            error = {"code": -32600, "message": "Bad Request: No valid session ID provided"}
        payload = json.dumps({"jsonrpc": "2.0", "id": request_id, "error": error}).encode()
        await send(
            {
                "type": "http.response.start",
                "status": 400,
                "headers": [(b"content-type", b"application/json")],
            }
        )
        await send({"type": "http.response.body", "body": payload})


async def _read_body(receive: Receive) -> bytes:
    chunks: list[bytes] = []
    while True:
        message: Message = await receive()
        chunks.append(message.get("body", b""))
        if not message.get("more_body"):
            return b"".join(chunks)


class RequireBearer:
    """Answer 401 to any HTTP request that lacks the expected bearer token."""

    def __init__(self, app: ASGIApp, token: str) -> None:
        self.app = app
        self.expected = f"Bearer {token}".encode()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and dict(scope["headers"]).get(b"authorization") != self.expected:
            await send(
                {
                    "type": "http.response.start",
                    "status": 401,
                    "headers": [(b"content-type", b"application/json"), (b"www-authenticate", b"Bearer")],
                }
            )
            await send({"type": "http.response.body", "body": b'{"error": "invalid_token"}'})
            return
        await self.app(scope, receive, send)


class RequireQuery:
    """Answer 403 to any HTTP request whose query string lacks ``name=value``."""

    def __init__(self, app: ASGIApp, pair: str) -> None:
        self.app = app
        name, _, value = pair.partition("=")
        self.name, self.value = name, value

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            query = parse_qs(scope.get("query_string", b"").decode("latin-1"))
            if self.value not in query.get(self.name, []):
                await send({"type": "http.response.start", "status": 403, "headers": []})
                await send({"type": "http.response.body", "body": b"missing query value"})
                return
        await self.app(scope, receive, send)


async def serve(options: argparse.Namespace) -> None:
    server = build_server(options.name)
    app: ASGIApp
    if options.transport == "sse":
        app = server.sse_app()
    else:
        app = server.streamable_http_app(stateless_http=options.era == "modern")
        if options.era != "dual":
            app = OneEraOnly(app, options.era)
    if options.require_bearer:
        app = RequireBearer(app, options.require_bearer)
    if options.require_query:
        app = RequireQuery(app, options.require_query)
    listening = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listening.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listening.bind(("127.0.0.1", options.port))
    listening.listen(64)
    port = listening.getsockname()[1]
    config = uvicorn.Config(app, log_level="warning", lifespan="on")
    print(f"READY {port}", flush=True)
    await uvicorn.Server(config).serve(sockets=[listening])


def main() -> None:
    parser = argparse.ArgumentParser(description="MCP test server over HTTP")
    parser.add_argument("--transport", choices=["streamable-http", "sse"], default="streamable-http")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--name", default="http-test")
    parser.add_argument("--require-bearer")
    parser.add_argument("--require-query")
    parser.add_argument("--era", choices=["dual", "modern", "legacy"], default="dual")
    anyio.run(serve, parser.parse_args())


if __name__ == "__main__":
    main()
