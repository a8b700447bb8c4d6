"""The gateway's guard seam (``gateway.guard``, ``gateway.views``), with a guard of this file's own:
per-viewer lists, refusals before a backend is reached, the hooks around each request, a
permit's own backend, and ``list_changed`` to exactly the sessions whose view changed.

The gateway is served over real HTTP in the test's task group, in front of two fake stdio
backends; a small ASGI layer puts the viewer named by the request's ``X-Test-Viewer`` header in
its scope, as a team gateway's identity check puts its principal there.
"""

from __future__ import annotations

import contextlib
import json
import sys
from collections.abc import AsyncIterator, Callable, Hashable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import anyio
import httpx2
import mcp_types
import pytest
from mcp.client import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from tests.servers.fixtures import FAKE_SERVER

from mcpfleet.fleet.manager import MCPManager
from mcpfleet.gateway.assembly import GatewayOptions, open_gateway
from mcpfleet.gateway.guard import (
    ALLOWED,
    CallOutcome,
    GuardedBackend,
    GuardedRequest,
    GuardRefusal,
    Permit,
    Scope,
    ViewsChangedListener,
)
from mcpfleet.gateway.handlers import build_server
from mcpfleet.gateway.http import HttpListener, parse_bind, serve_http
from mcpfleet.gateway.relay import Relay
from mcpfleet.gateway.served_catalog import ListKind

pytestmark = pytest.mark.anyio

VIEWER_HEADER = b"x-test-viewer"
VIEWER_KEY = "test.viewer"
TOOLS = ("--tool", "echo", "--tool", "fail")


@dataclass
class TableGuard:
    """Refuses ``(viewer, server)`` pairs listed in ``refused``; records every hook it is asked."""

    refused: set[tuple[str, str]] = field(default_factory=set)
    fail_after: bool = False
    backend: GuardedBackend | None = None
    before_calls: list[GuardedRequest] = field(default_factory=list)
    after_calls: list[tuple[str, str, CallOutcome, float]] = field(default_factory=list)
    listeners: list[ViewsChangedListener] = field(default_factory=list)
    passive = False

    def viewer(self, scope: Scope | None) -> Hashable:
        found = (scope or {}).get(VIEWER_KEY)
        if not isinstance(found, str):
            raise GuardRefusal("no viewer")
        return found

    def refusal(self, viewer: Hashable, kind: ListKind, server: str, name: str) -> str | None:
        if (viewer, server) in self.refused:
            return f"{viewer} may not use {server}/{name}"
        return None

    async def before(self, request: GuardedRequest) -> Permit:
        self.before_calls.append(request)
        refusal = self.refusal(request.asker.viewer, request.kind, request.server, request.name)
        if refusal is not None:
            return Permit(refusal=refusal)
        return Permit(backend=self.backend) if self.backend is not None else ALLOWED

    async def after(self, request: GuardedRequest, outcome: CallOutcome, duration_ms: float) -> None:
        self.after_calls.append((str(request.asker.viewer), request.name, outcome, duration_ms))
        if self.fail_after:
            raise GuardRefusal("the record of this call could not be written")

    def on_views_changed(self, listener: ViewsChangedListener) -> Callable[[], None]:
        self.listeners.append(listener)
        return lambda: self.listeners.remove(listener)

    def change(self, refused: set[tuple[str, str]]) -> None:
        self.refused = refused
        for listener in list(self.listeners):
            listener()


def put_viewer(app: Any) -> Any:
    """The ASGI layer of this test: the header's viewer into the scope (as an identity check would)."""

    async def layer(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            for key, value in scope["headers"]:
                if key == VIEWER_HEADER:
                    scope[VIEWER_KEY] = value.decode()
        await app(scope, receive, send)

    return layer


@asynccontextmanager
async def guarded_gateway(home: Path, guard: TableGuard) -> AsyncIterator[str]:
    """A gateway over fake servers ``alpha`` and ``beta``, guarded by ``guard``; yields its URL."""
    entries = {
        name: {
            "command": sys.executable,
            "args": [str(FAKE_SERVER), "--name", name, *TOOLS],
        }
        for name in ("alpha", "beta")
    }
    config = home / "servers.json"
    config.write_text(json.dumps({"mcpServers": entries}))

    def own_fleet(relay: Relay) -> contextlib.nullcontext[MCPManager]:
        manager = MCPManager(
            home, cache=None, startup_timeout_ms=0, extra_config_paths=[config], server_requests=relay
        )
        return contextlib.nullcontext(manager)

    listener = HttpListener.open(parse_bind("127.0.0.1:0"))
    async with (
        open_gateway(own_fleet, GatewayOptions(guard=guard)) as gateway,
        anyio.create_task_group() as task_group,
    ):
        url = await task_group.start(
            partial(
                serve_http,
                build_server(gateway),
                listener,
                auth_token=None,
                notice=lambda _: None,
                around=put_viewer,
            )
        )
        yield url
        task_group.cancel_scope.cancel()


def client_of(url: str, viewer: str, **options: Any) -> Client:
    http = httpx2.AsyncClient(headers={"X-Test-Viewer": viewer}, timeout=httpx2.Timeout(20.0))
    return Client(streamable_http_client(url, http_client=http), mode="legacy", **options)


async def tool_names(client: Client) -> list[str]:
    return sorted(tool.name for tool in (await client.list_tools()).tools)


def text_of(result: Any) -> str:
    block = result.content[0]
    assert isinstance(block, mcp_types.TextContent)
    return block.text


async def test_each_viewer_lists_what_the_guard_lets_it_see(isolated_home: Path) -> None:
    guard = TableGuard(refused={("bob", "beta")})
    async with (
        guarded_gateway(isolated_home, guard) as url,
        client_of(url, "ann") as ann,
        client_of(url, "bob") as bob,
    ):
        assert await tool_names(ann) == ["alpha_echo", "alpha_fail", "beta_echo", "beta_fail"]
        assert await tool_names(bob) == ["alpha_echo", "alpha_fail"]
        assert [prompt.name for prompt in (await bob.list_prompts()).prompts] == ["alpha_greet"]
        assert [prompt.name for prompt in (await ann.list_prompts()).prompts] == ["alpha_greet", "beta_greet"]
        assert any("beta" in str(listed.uri) for listed in (await ann.list_resources()).resources)
        assert all("beta" not in str(listed.uri) for listed in (await bob.list_resources()).resources)


async def test_a_refused_call_never_reaches_the_backend_and_names_the_refusal(isolated_home: Path) -> None:
    guard = TableGuard(refused={("bob", "beta")})
    async with guarded_gateway(isolated_home, guard) as url, client_of(url, "bob") as bob:
        refused = await bob.call_tool("beta_echo", {"message": "hi"})
        assert refused.is_error and text_of(refused) == "MCP error: bob may not use beta/echo"
        assert [(request.server, request.name) for request in guard.before_calls] == [("beta", "echo")]
        assert guard.after_calls == []  # it never went out

        with pytest.raises(MCPError, match="bob may not use beta/"):
            await bob.get_prompt("beta_greet", {"who": "x"})


async def test_the_hooks_hear_each_call_with_its_outcome(isolated_home: Path) -> None:
    guard = TableGuard()
    async with guarded_gateway(isolated_home, guard) as url, client_of(url, "ann") as ann:
        assert text_of(await ann.call_tool("alpha_echo", {"message": "hi"})) == "hi"
        assert (await ann.call_tool("alpha_fail", {"message": "no"})).is_error
        request = guard.before_calls[0]
        assert (request.asker.viewer, request.server, request.name, request.served_name) == (
            "ann",
            "alpha",
            "echo",
            "alpha_echo",
        )
        assert dict(request.arguments) == {"message": "hi"}
        assert [(viewer, name, outcome) for viewer, name, outcome, _ in guard.after_calls] == [
            ("ann", "echo", "ok"),
            ("ann", "fail", "error"),
        ]
        assert all(duration_ms >= 0 for *_, duration_ms in guard.after_calls)


async def test_a_failing_after_hook_replaces_the_answer(isolated_home: Path) -> None:
    guard = TableGuard(fail_after=True)
    async with guarded_gateway(isolated_home, guard) as url, client_of(url, "ann") as ann:
        result = await ann.call_tool("alpha_echo", {"message": "hi"})
        assert result.is_error and "could not be written" in text_of(result)


@dataclass
class OwnBackend:
    """A permit's backend: answers every call itself, saying whose it is."""

    owner: str

    async def call_tool(self, server_name: str, tool_name: str, arguments: dict[str, Any], **_: Any) -> Any:
        text = f"{self.owner}'s own {server_name}/{tool_name}"
        return {"content": [{"type": "text", "text": text}], "isError": False}

    async def read_resource(self, server: str, uri: str) -> dict[str, Any]:
        return {"contents": []}

    async def get_prompt(
        self, server: str, name: str, arguments: Mapping[str, str] | None = None
    ) -> dict[str, Any]:
        return {"messages": []}


async def test_a_permit_sends_the_call_to_its_own_backend(isolated_home: Path) -> None:
    guard = TableGuard(backend=OwnBackend("ann"))
    async with guarded_gateway(isolated_home, guard) as url, client_of(url, "ann") as ann:
        assert text_of(await ann.call_tool("alpha_echo", {"message": "hi"})) == "ann's own alpha/echo"


async def test_a_session_answers_only_the_viewer_that_opened_it(isolated_home: Path) -> None:
    """A session id is bound to its first viewer: another viewer sending it is refused."""
    async with (
        guarded_gateway(isolated_home, TableGuard()) as url,
        httpx2.AsyncClient(timeout=httpx2.Timeout(20.0)) as http,
    ):
        opened = await _post(http, url, "ann", None, "initialize", INITIALIZE)
        session_id = opened.headers["mcp-session-id"]
        await _post(http, url, "ann", session_id, "notifications/initialized", None)
        own = await _post(http, url, "ann", session_id, "tools/list", {})
        assert "alpha_echo" in own.text
        other = await _post(http, url, "bob", session_id, "tools/list", {})
        assert "another identity" in other.text and "alpha_echo" not in other.text


PROTOCOL_VERSION = "2025-06-18"
INITIALIZE: dict[str, Any] = {
    "protocolVersion": PROTOCOL_VERSION,
    "capabilities": {},
    "clientInfo": {"name": "guard-test", "version": "1"},
}


async def _post(
    http: httpx2.AsyncClient, url: str, viewer: str, session_id: str | None, method: str, params: Any
) -> httpx2.Response:
    """One JSON-RPC message sent by hand (a request, or a notification when ``params`` is None)."""
    headers = {
        "X-Test-Viewer": viewer,
        "Accept": "application/json, text/event-stream",
        "Content-Type": "application/json",
    }
    if session_id is not None:
        headers |= {"Mcp-Session-Id": session_id, "MCP-Protocol-Version": PROTOCOL_VERSION}
    message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
    if params is not None:
        message |= {"id": 1, "params": params}
    return await http.post(url, headers=headers, content=json.dumps(message))


async def test_a_change_of_the_guard_tells_only_the_sessions_whose_view_changed(isolated_home: Path) -> None:
    guard = TableGuard(refused={("bob", "beta")})
    heard: dict[str, list[str]] = {"ann": [], "bob": []}
    news = {"ann": anyio.Event(), "bob": anyio.Event()}

    def handler(viewer: str) -> Callable[[Any], Any]:
        async def on_message(message: Any) -> None:
            if isinstance(message, mcp_types.ToolListChangedNotification):
                heard[viewer].append("tools")
                news[viewer].set()

        return on_message

    async with (
        guarded_gateway(isolated_home, guard) as url,
        client_of(url, "ann", message_handler=handler("ann")) as ann,
        client_of(url, "bob", message_handler=handler("bob")) as bob,
    ):
        assert len(await tool_names(ann)) == 4 and len(await tool_names(bob)) == 2
        guard.change(set())  # bob now sees beta too; ann's view is the same
        with anyio.fail_after(20):
            await news["bob"].wait()
        assert await tool_names(bob) == ["alpha_echo", "alpha_fail", "beta_echo", "beta_fail"]

        guard.change({("ann", "beta")})  # now ann's view changes
        with anyio.fail_after(20):
            await news["ann"].wait()
        # One notice only: had the first change been told to ann, it would have come first.
        assert heard["ann"] == ["tools"]
        assert await tool_names(ann) == ["alpha_echo", "alpha_fail"]
