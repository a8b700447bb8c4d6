"""The relay: a backend's sampling, elicitation and roots requests reach the client whose call
caused them, through ``mcpfleet serve``, in both protocol eras on both sides.

Backends are ``tests/servers/asking_server.py``: ``old`` speaks the ``initialize`` handshake
(it asks with requests during the call), ``new`` speaks 2026-07-28 (it asks through
``input_required`` rounds). Clients are the SDK's ``Client``: over stdio against the
``mcpfleet`` command, and in-process (two sessions on one gateway) where a test needs more
than one client or a short answer timeout.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import sys
import warnings
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import mcp_types
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.session import SamplingFnT
from mcp.client.stdio import stdio_client
from mcp.server.lowlevel import Server
from mcp.shared.exceptions import MCPError
from pydantic import FileUrl
from tests.servers.fixtures import SERVERS_DIR

from mcpfleet.fleet.manager import MCPManager
from mcpfleet.gateway.assembly import GatewayOptions, open_gateway
from mcpfleet.gateway.handlers import build_server
from mcpfleet.gateway.relay import Relay

pytestmark = pytest.mark.anyio

MODERN = "2026-07-28"
CLIENT_ERAS = ("legacy", MODERN)
ASKING_SERVER = SERVERS_DIR / "asking_server.py"
MCPFLEET = Path(sys.executable).parent / "mcpfleet"
BACKENDS = {
    "old": {"command": sys.executable, "args": [str(ASKING_SERVER), "--name", "old", "--legacy"]},
    "new": {"command": sys.executable, "args": [str(ASKING_SERVER), "--name", "new"]},
}
SETTLE_S = 20.0
"""Bound of every wait for something the gateway does in the background."""


def write_config(home: Path) -> Path:
    config = home / "relay-servers.json"
    config.write_text(json.dumps({"mcpServers": BACKENDS}))
    return config


@asynccontextmanager
async def served_over_stdio(home: Path, *, mode: str, **callbacks: Any) -> AsyncIterator[Client]:
    """``mcpfleet serve`` (this checkout's) on stdio, every backend waited for at start-up."""
    config = write_config(home)
    args = ["--config", str(config), "--startup-timeout", "0", "--no-cache", "serve"]
    params = StdioServerParameters(command=str(MCPFLEET), args=args, env=dict(os.environ), cwd=str(home))
    with (home / "gateway-stderr.log").open("w") as errlog:
        async with Client(stdio_client(params, errlog=errlog), mode=mode, **callbacks) as client:
            yield client


@asynccontextmanager
async def gateway_in_process(home: Path, *, answer_timeout_s: float = 600.0) -> AsyncIterator[Server[Any]]:
    """The gateway in this process, as ``mcpfleet serve`` builds it: clients connect with
    ``Client(server, …)``, each its own session."""
    config = write_config(home)

    def own_fleet(relay: Relay) -> contextlib.nullcontext[MCPManager]:
        return contextlib.nullcontext(
            MCPManager(
                home, cache=None, startup_timeout_ms=0, extra_config_paths=[config], server_requests=relay
            )
        )

    async with open_gateway(own_fleet, GatewayOptions(answer_timeout_s=answer_timeout_s)) as gateway:
        yield build_server(gateway)


Sampling = SamplingFnT


def sampling_as(who: str, entered: list[str] | None = None, together: anyio.Event | None = None) -> Sampling:
    """A sampling callback answering as ``who``; with ``together``, it answers only once two
    callbacks have been entered (so two calls are in flight at once)."""

    async def sample(
        context: Any, params: mcp_types.CreateMessageRequestParams
    ) -> mcp_types.CreateMessageResult:
        if entered is not None and together is not None:
            entered.append(who)
            if len(entered) == 2:
                together.set()
            with anyio.fail_after(SETTLE_S):
                await together.wait()
        prompt = params.messages[0].content
        text = prompt.text if isinstance(prompt, mcp_types.TextContent) else ""
        return mcp_types.CreateMessageResult(
            role="assistant",
            content=mcp_types.TextContent(type="text", text=f"{text}, says {who}"),
            model=who,
        )

    return sample


async def elicit_yes(context: Any, params: mcp_types.ElicitRequestParams) -> mcp_types.ElicitResult:
    return mcp_types.ElicitResult(action="accept", content={"answer": f"yes to {params.message}"})


def roots_at(uri: str) -> Any:
    async def list_roots(context: Any) -> mcp_types.ListRootsResult:
        return mcp_types.ListRootsResult(roots=[mcp_types.Root(uri=FileUrl(uri), name="project")])

    return list_roots


class RootsAsked:
    """Clients' roots callbacks that record, in order, which client was asked."""

    def __init__(self) -> None:
        self.uris: list[str] = []
        self._changed = anyio.Event()

    def callback(self, uri: str) -> Any:
        async def list_roots(context: Any) -> mcp_types.ListRootsResult:
            self.uris.append(uri)
            self._changed.set()
            self._changed = anyio.Event()
            return mcp_types.ListRootsResult(roots=[mcp_types.Root(uri=FileUrl(uri), name="project")])

        return list_roots

    async def until(self, count: int) -> None:
        with anyio.fail_after(SETTLE_S):
            while len(self.uris) < count:
                await self._changed.wait()


class LoggedEvent(logging.Handler):
    """Set once a record holding ``text`` is logged (from the event loop's thread)."""

    def __init__(self, text: str) -> None:
        super().__init__()
        self.text = text
        self.event = anyio.Event()

    def emit(self, record: logging.LogRecord) -> None:
        if self.text in record.getMessage():
            self.event.set()

    async def wait(self) -> None:
        await self.event.wait()


def text_of(result: mcp_types.CallToolResult) -> str:
    block = result.content[0]
    assert isinstance(block, mcp_types.TextContent), block
    return block.text


@pytest.mark.parametrize("mode", CLIENT_ERAS)
async def test_the_backends_questions_are_answered_by_the_client_over_stdio(
    isolated_home: Path, mode: str
) -> None:
    client_root = "file:///client/project"
    async with served_over_stdio(
        isolated_home,
        mode=mode,
        sampling_callback=sampling_as(f"{mode} client"),
        elicitation_callback=elicit_yes,
        list_roots_callback=roots_at(client_root),
    ) as client:
        for backend in ("old", "new"):
            sampled = await client.call_tool(f"{backend}_sample", {"prompt": f"hello {backend}"})
            elicited = await client.call_tool(f"{backend}_elicit", {"message": "proceed?"})
            roots = await client.call_tool(f"{backend}_roots", {})
            assert text_of(sampled) == f"sampled hello {backend}, says {mode} client from {mode} client"
            assert text_of(elicited) == 'elicited accept {"answer": "yes to proceed?"}'
            assert text_of(roots) == f'roots ["{client_root}"]'


@pytest.mark.parametrize("mode", CLIENT_ERAS)
async def test_a_client_without_the_capability_gets_the_backend_an_error_and_the_result_says_so(
    isolated_home: Path, mode: str
) -> None:
    """The handshake-era backend receives the JSON-RPC error and reports it; the 2026-07-28 one
    cannot be answered with an error, so a handshake-era client's call ends in an error result,
    and a 2026-07-28 client, which gets the backend's question as it is, refuses it itself.
    Roots fall back to the gateway's working folder."""
    missing = 'Sampling not supported: the MCP client of this call did not declare the "sampling" capability'
    async with gateway_in_process(isolated_home) as server, Client(server, mode=mode) as client:
        old = await client.call_tool("old_sample", {"prompt": "hello"})
        if mode == MODERN:
            with pytest.raises(MCPError, match="Sampling not supported"):
                await client.call_tool("new_sample", {"prompt": "hello"})
        else:
            new = await client.call_tool("new_sample", {"prompt": "hello"})
            assert new.is_error
            assert text_of(new).startswith("MCP error: ")
            assert missing in text_of(new)
        roots = await client.call_tool("old_roots", {})
    assert not old.is_error
    assert text_of(old).startswith(f"refused -32600 {missing}")
    assert text_of(roots) == f'roots ["{isolated_home.resolve().as_uri()}"]'  # noqa: ASYNC240 (no I/O)


@pytest.mark.parametrize("mode", CLIENT_ERAS)
async def test_a_prompt_whose_backend_asks_gets_the_clients_answer(isolated_home: Path, mode: str) -> None:
    """``prompts/get`` is relayed like ``tools/call``: the backend's question reaches its client."""
    async with (
        gateway_in_process(isolated_home) as server,
        Client(server, mode=mode, sampling_callback=sampling_as(f"{mode} client")) as client,
    ):
        for backend in ("old", "new"):
            prompt = await client.get_prompt(f"{backend}_summary", {"topic": "the plan"})
            message = prompt.messages[0].content
            assert isinstance(message, mcp_types.TextContent)
            assert message.text == f"sampled Summarise the plan, says {mode} client from {mode} client"


async def test_two_clients_calling_at_once_each_get_their_own_answers(isolated_home: Path) -> None:
    """A handshake-era and a 2026-07-28 client, both calls in flight at once: on the same
    2026-07-28 backend (which asks from inside each call), then one on each backend."""
    async with gateway_in_process(isolated_home) as server:
        for first, second in (("new", "new"), ("old", "new"), ("new", "old")):
            entered: list[str] = []
            together = anyio.Event()
            async with (
                Client(server, mode="legacy", sampling_callback=sampling_as("A", entered, together)) as a,
                Client(server, mode=MODERN, sampling_callback=sampling_as("B", entered, together)) as b,
            ):
                answers = await call_at_once((a, f"{first}_sample", "to A"), (b, f"{second}_sample", "to B"))
            assert sorted(entered) == ["A", "B"]
            assert answers == ["sampled to A, says A from A", "sampled to B, says B from B"]


async def call_at_once(*calls: tuple[Client, str, str]) -> list[str]:
    """Each ``(client, tool, prompt)`` called concurrently; the texts in the same order."""
    texts = [""] * len(calls)

    async def call(index: int, client: Client, tool: str, prompt: str) -> None:
        texts[index] = text_of(await client.call_tool(tool, {"prompt": prompt}))

    async with anyio.create_task_group() as group:
        for index, (client, tool, prompt) in enumerate(calls):
            group.start_soon(call, index, client, tool, prompt)
    return texts


async def test_client_roots_reach_the_backends_and_outside_calls_only_a_lone_client_is_asked(
    isolated_home: Path, request: pytest.FixtureRequest
) -> None:
    """A client that declares roots makes the backends ask again when it connects and when it
    says they changed. With no call in flight, the one client connected answers; with two
    connected, nobody can tell whose question it is: it is refused to the backend (neither
    client is asked) and the gateway's log says so, naming the server."""
    asked = RootsAsked()
    logged = LoggedEvent(
        'roots/list refused: the MCP server "old" asked with no call in flight and 2 MCP clients'
    )
    logging.getLogger("mcpfleet.gateway.relay").addHandler(logged)
    request.addfinalizer(lambda: logging.getLogger("mcpfleet.gateway.relay").removeHandler(logged))
    async with (
        gateway_in_process(isolated_home) as server,
        Client(server, mode="legacy", list_roots_callback=asked.callback("file:///a")) as a,
    ):
        await asked.until(1)
        async with Client(server, mode="legacy", list_roots_callback=asked.callback("file:///b")) as b:
            # No call meanwhile: a call in flight on the backend would make its caller the one asked.
            with anyio.fail_after(SETTLE_S):
                await logged.wait()
            refused = text_of(await b.call_tool("old_roots_changes", {}))
            assert refused.startswith('roots changed 2 times, last "refused -32600 roots/list refused: '), (
                refused
            )
            assert asked.uris == ["file:///a"]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            await a.session.send_roots_list_changed()
        await asked.until(2)
        old = await wait_for_text(a, "old_roots_changes", 'roots changed 3 times, last ["file:///a"]')
        new = await a.call_tool("new_roots_changes", {})
    assert asked.uris == ["file:///a", "file:///a"]
    assert old == 'roots changed 3 times, last ["file:///a"]'
    # 2026-07-28 has no roots/list_changed: that backend asks within each call instead.
    assert text_of(new) == "roots changed 0 times, last null"


async def test_a_question_a_modern_client_never_answers_is_refused_and_the_call_dropped(
    isolated_home: Path,
) -> None:
    answer_timeout_s = 0.5
    async with (
        gateway_in_process(isolated_home, answer_timeout_s=answer_timeout_s) as server,
        Client(server, mode=MODERN, elicitation_callback=elicit_yes) as client,
    ):
        first = await client.session.call_tool(
            "old_elicit", {"message": "proceed?"}, allow_input_required=True
        )
        assert isinstance(first, mcp_types.InputRequiredResult)
        assert first.request_state is not None
        (key,) = (first.input_requests or {}).keys()
        # Long enough for the question to time out, the backend to answer, and the call
        # nobody collected to be dropped.
        await anyio.sleep(answer_timeout_s * 2 + 3)
        late = mcp_types.ElicitResult(action="accept", content={"answer": "too late"})
        with pytest.raises(MCPError, match="Invalid or expired requestState") as expired:
            await client.session.call_tool(
                "old_elicit",
                {"message": "proceed?"},
                input_responses={key: late},
                request_state=first.request_state,
                allow_input_required=True,
            )
        assert expired.value.code == mcp_types.INVALID_PARAMS
        with pytest.raises(MCPError, match="Invalid or expired requestState"):
            await client.session.call_tool(
                "old_elicit", {"message": "proceed?"}, request_state="made-up", allow_input_required=True
            )


async def test_a_modern_clients_rounds_carry_the_backends_questions_until_the_result(
    isolated_home: Path,
) -> None:
    """Driven by hand: the first answer is the question, the retry with the answer is the result."""
    async with (
        gateway_in_process(isolated_home) as server,
        Client(server, mode=MODERN, elicitation_callback=elicit_yes) as client,
    ):
        for backend in ("old", "new"):
            tool = f"{backend}_elicit"
            first = await client.session.call_tool(tool, {"message": "proceed?"}, allow_input_required=True)
            assert isinstance(first, mcp_types.InputRequiredResult)
            ((key, question),) = (first.input_requests or {}).items()
            assert isinstance(question, mcp_types.ElicitRequest)
            assert question.params.message == "proceed?"
            answer = mcp_types.ElicitResult(action="decline")
            final = await client.session.call_tool(
                tool,
                {"message": "proceed?"},
                input_responses={key: answer},
                request_state=first.request_state,
                allow_input_required=True,
            )
            assert isinstance(final, mcp_types.CallToolResult)
            assert text_of(final) == "elicited decline null"


async def wait_for_text(client: Client, tool: str, expected: str, *, prefix: bool = False) -> str:
    """The tool's text once it is ``expected`` (or starts with it, with ``prefix``), or the last
    one after ``SETTLE_S``."""
    text = ""
    with anyio.move_on_after(SETTLE_S):
        while True:
            text = text_of(await client.call_tool(tool, {}))
            if text == expected or (prefix and text.startswith(expected)):
                break
            await anyio.sleep(0.05)
    return text
