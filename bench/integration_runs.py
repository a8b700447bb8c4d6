"""One timed agent run for ``bench.integrations``, in a process of its own: one framework, its
native MCP integration or mcpfleet's, over the fleet of the run's home folder.

    python bench/integration_runs.py FRAMEWORK SIDE FLEET_JSON RESULT_JSON

FRAMEWORK is ``openai-agents``, ``pydantic-ai``, ``langchain`` or ``google-adk``; SIDE is
``native``, ``mcpfleet`` or ``alone`` (the framework's own kind of tool, a local function, and
no MCP at all: what the framework's first run costs by itself). FLEET_JSON is the fleet's
``mcpServers`` file (the native side builds its servers from it; mcpfleet finds the same servers
in the user config of ``HOME``, which the caller points at the run's home). The result goes to
RESULT_JSON, in seconds:

- ``imports``: the modules a user's script imports at its top, before the clock;
- ``first_answer``: from building the servers' objects and the agent until the scripted model
  holds its first tool answer;
- ``close``: leaving the block until every server is gone;
- ``entered`` (mcpfleet's side): until its ``async with`` (or ``connect()``) returned, and
  ``connected_at_entry``, how many servers were connected then (the others were deferred);
- ``full_gc``: the time the interpreter spent in full garbage collections before the answer
  (one pass over everything the imports created, 0.1-0.3 s, whenever it happens to land).

A fresh process per run, as a user's program is: nothing is imported or warmed by an earlier
run, and the import of the framework is measured apart from the agent's start. Runs in the
project's venv, or in a venv with a framework's native MCP client that cannot hold mcpfleet
(langchain-mcp-adapters needs ``mcp`` 1.x), so nothing here imports mcpfleet but the mcpfleet
side.
"""

from __future__ import annotations

import asyncio
import gc
import importlib
import json
import sys
import time
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Coroutine, Sequence
from pathlib import Path
from typing import Any

MESSAGE = "ping from the benchmark"
INIT_TIMEOUT_S = 30.0
"""Handshake bound of the native clients, above the 5 s server (some default to 5 s)."""


class Timings:
    """When the model held its first tool answer, and how long the close took (seconds)."""

    def __init__(self) -> None:
        self.started = time.perf_counter()
        self.first_answer: float | None = None
        self.close: float | None = None
        self.entered: float | None = None
        """mcpfleet's side: when its ``async with`` (or ``connect()``) returned, the gate passed."""
        self.connected_at_entry: int | None = None
        """mcpfleet's side: how many servers were connected then (the others served from the cache)."""

    def enter_returned(self, session: Any) -> None:
        self.entered = time.perf_counter() - self.started
        manager = session.mcp_manager
        self.connected_at_entry = len(manager.get_connected_servers())

    def answered(self) -> None:
        if self.first_answer is None:
            self.first_answer = time.perf_counter() - self.started


def tool_0(message: str) -> str:
    """Echo the message: the framework's own kind of tool, for the runs without MCP."""
    return message


class FullCollections:
    """When the interpreter ran full (generation 2) garbage collections, and for how long."""

    def __init__(self) -> None:
        self.passes: list[tuple[float, float]] = []
        self._started = 0.0

    def note(self, phase: str, info: dict[str, int]) -> None:
        if info["generation"] != 2:
            return
        if phase == "start":
            self._started = time.perf_counter()
        else:
            self.passes.append((self._started, time.perf_counter()))

    def seconds_until(self, moment: float) -> float:
        return sum(end - start for start, end in self.passes if start < moment)


Servers = dict[str, list[str]]
"""Each server's command line, by name (``s0`` … ``s9``)."""
Run = Callable[[Timings, Servers], Coroutine[Any, Any, None]]


# -- OpenAI Agents SDK -------------------------------------------------------------------------------


def agents_model(tool_name: str, timings: Timings) -> Any:
    from agents import ModelResponse, Usage
    from agents.models.interface import Model
    from openai.types.responses import ResponseFunctionToolCall, ResponseOutputMessage, ResponseOutputText

    class Scripted(Model):
        async def get_response(self, system_instructions: Any, input: Any, *args: Any, **kwargs: Any) -> Any:
            answered = isinstance(input, list) and any(
                (item.get("type") if isinstance(item, dict) else None) == "function_call_output"
                for item in input
            )
            if not answered:
                call = ResponseFunctionToolCall(
                    type="function_call",
                    call_id="c0",
                    name=tool_name,
                    arguments=json.dumps({"message": MESSAGE}),
                )
                return ModelResponse(output=[call], usage=Usage(), response_id=None)
            timings.answered()
            text = ResponseOutputText(type="output_text", text="done", annotations=[])
            message = ResponseOutputMessage(
                id="m", type="message", role="assistant", status="completed", content=[text]
            )
            return ModelResponse(output=[message], usage=Usage(), response_id=None)

        def stream_response(self, *args: Any, **kwargs: Any) -> AsyncIterator[Any]:
            raise NotImplementedError

    return Scripted()


async def agents_native(timings: Timings, servers: Servers) -> None:
    from agents import Agent, RunConfig, Runner
    from agents.mcp import MCPServerManager, MCPServerStdio

    stdio = [
        MCPServerStdio(
            {"command": argv[0], "args": argv[1:]}, name=name, client_session_timeout_seconds=INIT_TIMEOUT_S
        )
        for name, argv in servers.items()
    ]
    manager = MCPServerManager(stdio, connect_in_parallel=True, strict=True)
    await manager.__aenter__()
    try:
        # Ten servers all listing tool_0…tool_4: the SDK refuses the clash unless it prefixes names.
        agent = Agent(
            name="a",
            model=agents_model("mcp_s0__tool_0", timings),
            mcp_servers=list(manager.active_servers),
            mcp_config={"include_server_in_tool_names": True},
        )
        await Runner.run(agent, "go", run_config=RunConfig(tracing_disabled=True))
    finally:
        closing = time.perf_counter()
        await manager.__aexit__(None, None, None)
        timings.close = time.perf_counter() - closing


async def agents_alone(timings: Timings, servers: Servers) -> None:
    from agents import Agent, RunConfig, Runner, function_tool

    agent = Agent(name="a", model=agents_model("tool_0", timings), tools=[function_tool(tool_0)])
    await Runner.run(agent, "go", run_config=RunConfig(tracing_disabled=True))
    timings.close = 0.0


async def agents_mcpfleet(timings: Timings, servers: Servers) -> None:
    from agents import Agent, RunConfig, Runner

    from mcpfleet.integrations.openai_agents import MCPFleetServer

    fleet = MCPFleetServer(cwd=Path.cwd())
    await fleet.connect()
    timings.enter_returned(fleet.session)
    try:
        agent = Agent(name="a", model=agents_model("mcp_s0_tool_0", timings), mcp_servers=[fleet])
        await Runner.run(agent, "go", run_config=RunConfig(tracing_disabled=True))
    finally:
        closing = time.perf_counter()
        await fleet.cleanup()
        timings.close = time.perf_counter() - closing


# -- Pydantic AI ------------------------------------------------------------------------------------


def pydantic_model(tool_name: str, timings: Timings) -> Any:
    from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, TextPart, ToolCallPart
    from pydantic_ai.models.function import AgentInfo, FunctionModel

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        answered = any(
            part.part_kind == "tool-return"
            for message in messages
            if isinstance(message, ModelRequest)
            for part in message.parts
        )
        if not answered:
            return ModelResponse(parts=[ToolCallPart(tool_name=tool_name, args={"message": MESSAGE})])
        timings.answered()
        return ModelResponse(parts=[TextPart("done")])

    return FunctionModel(respond)


async def pydantic_native(timings: Timings, servers: Servers) -> None:
    from fastmcp.client.transports import StdioTransport
    from pydantic_ai import Agent
    from pydantic_ai.mcp import MCPToolset

    # What ``load_mcp_toolsets`` builds (one prefixed ``MCPToolset`` per server), with the
    # handshake bound raised from its 5 s, which the 5 s server would not meet.
    transports = {name: StdioTransport(command=argv[0], args=argv[1:]) for name, argv in servers.items()}
    toolsets = [
        MCPToolset(transport, id=name, init_timeout=INIT_TIMEOUT_S).prefixed(name)
        for name, transport in transports.items()
    ]
    agent = Agent(pydantic_model("s0_tool_0", timings), toolsets=toolsets)
    async with agent:
        await agent.run("go")
        closing = time.perf_counter()
    # fastmcp keeps a stdio server alive when its client leaves (``keep_alive``): the servers
    # end when the transports are disconnected (or with the process).
    await asyncio.gather(*(transport.disconnect() for transport in transports.values()))
    timings.close = time.perf_counter() - closing


async def pydantic_alone(timings: Timings, servers: Servers) -> None:
    from pydantic_ai import Agent

    agent = Agent(pydantic_model("tool_0", timings), tools=[tool_0])
    await agent.run("go")
    timings.close = 0.0


async def pydantic_mcpfleet(timings: Timings, servers: Servers) -> None:
    from pydantic_ai import Agent

    from mcpfleet.integrations.pydantic_ai import MCPFleetToolset

    async with MCPFleetToolset(cwd=Path.cwd()) as toolset:
        timings.enter_returned(toolset.session)
        agent = Agent(pydantic_model("mcp_s0_tool_0", timings), toolsets=[toolset])
        await agent.run("go")
        closing = time.perf_counter()
    timings.close = time.perf_counter() - closing


# -- LangChain --------------------------------------------------------------------------------------


def langchain_model(tool_name: str, timings: Timings) -> Any:
    from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
    from langchain_core.messages import AIMessage, BaseMessage, ToolMessage

    class Scripted(GenericFakeChatModel):
        """LangChain's fake chat model, made bindable, noting when a tool answer reaches it."""

        def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> Scripted:
            return self

        def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> Any:
            if any(isinstance(message, ToolMessage) for message in messages):
                timings.answered()
            return super()._generate(messages, *args, **kwargs)

    call = {"name": tool_name, "args": {"message": MESSAGE}, "id": "c0", "type": "tool_call"}
    return Scripted(messages=iter([AIMessage(content="", tool_calls=[call]), AIMessage(content="done")]))


async def langchain_native(timings: Timings, servers: Servers) -> None:
    from langchain.agents import create_agent
    from langchain_mcp_adapters.client import MultiServerMCPClient

    connections: dict[str, Any] = {
        name: {"transport": "stdio", "command": argv[0], "args": argv[1:]} for name, argv in servers.items()
    }
    client = MultiServerMCPClient(connections, tool_name_prefix=True)
    tools = await client.get_tools()
    agent = create_agent(langchain_model("s0_tool_0", timings), tools)
    await agent.ainvoke({"messages": [("user", "go")]})
    # Stateless by design: every listing and every call had a session (a process) of its own,
    # already closed, so there is nothing left to close.
    timings.close = 0.0


async def langchain_alone(timings: Timings, servers: Servers) -> None:
    from langchain.agents import create_agent
    from langchain_core.tools import tool

    agent = create_agent(langchain_model("tool_0", timings), [tool(tool_0)])
    await agent.ainvoke({"messages": [("user", "go")]})
    timings.close = 0.0


async def langchain_mcpfleet(timings: Timings, servers: Servers) -> None:
    from langchain.agents import create_agent

    from mcpfleet.integrations.langchain import open_langchain_tools

    async with open_langchain_tools(cwd=Path.cwd()) as tools:
        timings.enter_returned(tools[0].lease.session)
        agent = create_agent(langchain_model("mcp_s0_tool_0", timings), tools)
        await agent.ainvoke({"messages": [("user", "go")]})
        closing = time.perf_counter()
    timings.close = time.perf_counter() - closing


# -- Google ADK -------------------------------------------------------------------------------------


def adk_model(tool_name: str, timings: Timings) -> Any:
    from google.adk.models.base_llm import BaseLlm
    from google.adk.models.llm_request import LlmRequest
    from google.adk.models.llm_response import LlmResponse
    from google.genai import types

    class Scripted(BaseLlm):
        async def generate_content_async(
            self, llm_request: LlmRequest, stream: bool = False
        ) -> AsyncGenerator[LlmResponse, None]:
            parts = [part for content in llm_request.contents for part in content.parts or []]
            if not any(part.function_response for part in parts):
                call = types.FunctionCall(id="c0", name=tool_name, args={"message": MESSAGE})
                yield LlmResponse(content=types.Content(role="model", parts=[types.Part(function_call=call)]))
                return
            timings.answered()
            yield LlmResponse(content=types.Content(role="model", parts=[types.Part(text="done")]))

    return Scripted(model="scripted")


async def adk_run(tools: list[Any], model: Any) -> Any:
    from google.adk.agents import LlmAgent
    from google.adk.runners import InMemoryRunner
    from google.genai import types

    runner = InMemoryRunner(agent=LlmAgent(name="a", model=model, tools=tools), app_name="bench")
    session = await runner.session_service.create_session(app_name="bench", user_id="u")
    message = types.Content(role="user", parts=[types.Part(text="go")])
    async for _ in runner.run_async(user_id="u", session_id=session.id, new_message=message):
        pass
    return runner


async def adk_native(timings: Timings, servers: Servers) -> None:
    from google.adk.tools.mcp_tool import McpToolset, StdioConnectionParams
    from mcp import StdioServerParameters

    toolsets = [
        McpToolset(
            connection_params=StdioConnectionParams(
                server_params=StdioServerParameters(command=argv[0], args=argv[1:]), timeout=INIT_TIMEOUT_S
            ),
            tool_name_prefix=name,
        )
        for name, argv in servers.items()
    ]
    runner = await adk_run(list(toolsets), adk_model("s0_tool_0", timings))
    closing = time.perf_counter()
    await runner.close()
    timings.close = time.perf_counter() - closing


async def adk_alone(timings: Timings, servers: Servers) -> None:
    runner = await adk_run([tool_0], adk_model("tool_0", timings))
    closing = time.perf_counter()
    await runner.close()
    timings.close = time.perf_counter() - closing


async def adk_mcpfleet(timings: Timings, servers: Servers) -> None:
    from mcpfleet.integrations.google_adk import MCPFleetToolset

    toolset = MCPFleetToolset(cwd=Path.cwd())
    async with toolset:
        timings.enter_returned(toolset.session)
        runner = await adk_run([toolset], adk_model("mcp_s0_tool_0", timings))
        await runner.close()
        closing = time.perf_counter()
    timings.close = time.perf_counter() - closing


# -- the run ----------------------------------------------------------------------------------------

RUNS: dict[tuple[str, str], tuple[tuple[str, ...], Run]] = {
    ("openai-agents", "native"): (("agents", "agents.mcp"), agents_native),
    ("openai-agents", "alone"): (("agents",), agents_alone),
    ("openai-agents", "mcpfleet"): (("agents", "mcpfleet.integrations.openai_agents"), agents_mcpfleet),
    ("pydantic-ai", "native"): (
        ("pydantic_ai", "pydantic_ai.mcp", "pydantic_ai.models.function", "fastmcp.client.transports"),
        pydantic_native,
    ),
    ("pydantic-ai", "alone"): (("pydantic_ai", "pydantic_ai.models.function"), pydantic_alone),
    ("pydantic-ai", "mcpfleet"): (
        ("pydantic_ai", "pydantic_ai.models.function", "mcpfleet.integrations.pydantic_ai"),
        pydantic_mcpfleet,
    ),
    ("langchain", "native"): (
        (
            "langchain.agents",
            "langchain_core.language_models.fake_chat_models",
            "langchain_mcp_adapters.client",
        ),
        langchain_native,
    ),
    ("langchain", "alone"): (
        ("langchain.agents", "langchain_core.language_models.fake_chat_models", "langchain_core.tools"),
        langchain_alone,
    ),
    ("langchain", "mcpfleet"): (
        (
            "langchain.agents",
            "langchain_core.language_models.fake_chat_models",
            "mcpfleet.integrations.langchain",
        ),
        langchain_mcpfleet,
    ),
    ("google-adk", "native"): (
        ("google.adk.agents", "google.adk.runners", "google.adk.tools.mcp_tool"),
        adk_native,
    ),
    ("google-adk", "alone"): (("google.adk.agents", "google.adk.runners"), adk_alone),
    ("google-adk", "mcpfleet"): (
        ("google.adk.agents", "google.adk.runners", "mcpfleet.integrations.google_adk"),
        adk_mcpfleet,
    ),
}
"""Per framework and side: what the user's script imports at its top, and the timed run."""


def main(argv: list[str]) -> None:
    framework, side, fleet_file, result_file = argv
    modules, run = RUNS[framework, side]
    servers: Servers = {
        name: [entry["command"], *entry["args"]]
        for name, entry in json.loads(Path(fleet_file).read_text())["mcpServers"].items()
    }
    importing = time.perf_counter()
    for module in modules:
        importlib.import_module(module)
    imports = time.perf_counter() - importing
    collections = FullCollections()
    gc.callbacks.append(collections.note)
    timings = Timings()
    asyncio.run(run(timings, servers))
    if timings.first_answer is None or timings.close is None:
        raise AssertionError(f"{framework} {side}: the scripted model never received its tool answer")
    result = {
        "imports": imports,
        "first_answer": timings.first_answer,
        "close": timings.close,
        "full_gc": collections.seconds_until(timings.started + timings.first_answer),
    }
    if timings.entered is not None and timings.connected_at_entry is not None:
        result["entered"] = timings.entered
        result["connected_at_entry"] = timings.connected_at_entry
    Path(result_file).write_text(json.dumps(result))


if __name__ == "__main__":
    main(sys.argv[1:])
