"""A handshake-era MCP client over raw HTTP, for tests that look at the wire (which answers come
as one JSON body and which as a stream): ``Session(gateway, stack).open()`` initializes and holds
its standalone GET stream open, as the SDK's client does."""

from __future__ import annotations

import json
from contextlib import ExitStack
from typing import Any, Protocol

import httpx2

HANDSHAKE = "2025-11-25"
TAKES_JSON = "application/json, text/event-stream"
"""What the SDK's client sends: JSON and a stream, equally welcome."""


class Reachable(Protocol):
    """A gateway to talk to: its MCP URL, and what every request to it carries."""

    @property
    def url(self) -> str: ...

    @property
    def headers(self) -> dict[str, str]: ...


def sse_events(body: str) -> list[dict[str, str]]:
    events: list[dict[str, str]] = []
    for block in body.replace("\r\n", "\n").split("\n\n"):
        fields: dict[str, str] = {}
        for line in block.splitlines():
            name, _, value = line.partition(":")
            fields[name] = fields.get(name, "") + value.removeprefix(" ")
        if fields:
            events.append(fields)
    return events


def answer_of(response: httpx2.Response) -> dict[str, Any]:
    """The JSON-RPC answer in a JSON body or at the end of an SSE stream."""
    if response.headers["content-type"].startswith("application/json"):
        answer: dict[str, Any] = response.json()
        return answer
    messages = [json.loads(event["data"]) for event in sse_events(response.text) if event.get("data")]
    return dict(messages[-1])


class Session:
    """A handshake-era client over raw HTTP; ``standalone`` holds its GET stream open, as the
    SDK's client does."""

    def __init__(self, gateway: Reachable, stack: ExitStack, *, accept: str = TAKES_JSON) -> None:
        self.gateway = gateway
        self.http = stack.enter_context(httpx2.Client(timeout=30))
        self.stack = stack
        self.headers = {**gateway.headers, "Content-Type": "application/json", "Accept": accept}
        self.next_id = 1

    def open(self, *, standalone: bool = True) -> Session:
        init = {"protocolVersion": HANDSHAKE, "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}
        answer = self.post({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": init})
        self.headers["Mcp-Session-Id"] = answer.headers["mcp-session-id"]
        self.headers["MCP-Protocol-Version"] = HANDSHAKE
        self.post({"jsonrpc": "2.0", "method": "notifications/initialized"})
        if standalone:
            stream = self.stack.enter_context(
                httpx2.Client(timeout=30).stream(
                    "GET", self.gateway.url, headers={**self.headers, "Accept": "text/event-stream"}
                )
            )
            assert stream.status_code == 200
        return self

    def post(self, message: dict[str, Any], **headers: str) -> httpx2.Response:
        return self.http.post(self.gateway.url, json=message, headers={**self.headers, **headers})

    def request(self, method: str, params: dict[str, Any]) -> httpx2.Response:
        self.next_id += 1
        return self.post({"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params})
