"""Google ADK agents on mcpfleet's toolset: a real ``InMemoryRunner`` loop (a scripted
``BaseLlm`` makes the function calls) over real subprocess MCP servers."""

from __future__ import annotations

import json
from collections.abc import AsyncGenerator
from pathlib import Path
from typing import Any

import pytest
from pydantic import Field
from tests.integration.integrations.fleet_fixtures import require, running_servers, starts_of_files

require("google.adk", "google-adk")

from google.adk.agents import LlmAgent  # noqa: E402
from google.adk.models.base_llm import BaseLlm  # noqa: E402
from google.adk.models.llm_request import LlmRequest  # noqa: E402
from google.adk.models.llm_response import LlmResponse  # noqa: E402
from google.adk.runners import InMemoryRunner  # noqa: E402
from google.genai import types  # noqa: E402

from mcpfleet import open_agent_session  # noqa: E402
from mcpfleet.integrations.google_adk import MCPFleetToolset  # noqa: E402

pytestmark = pytest.mark.anyio


class ScriptedLlm(BaseLlm):
    """Makes the given function calls, one per turn, then answers "done"; records the
    declarations it was offered and every function response the runner handed back."""

    model: str = "scripted"
    calls: list[tuple[str, dict[str, Any]]] = Field(default_factory=list)
    offered: list[dict[str, Any]] = Field(default_factory=list)
    received: list[types.FunctionResponse] = Field(default_factory=list)

    async def generate_content_async(
        self, llm_request: LlmRequest, stream: bool = False
    ) -> AsyncGenerator[LlmResponse, None]:
        self.offered.append(
            {
                name: declaration.parameters_json_schema
                for name, tool in llm_request.tools_dict.items()
                if (declaration := tool._get_declaration()) is not None
            }
        )
        parts = [part for content in llm_request.contents for part in content.parts or []]
        self.received = [part.function_response for part in parts if part.function_response]
        turn = sum(1 for content in llm_request.contents if content.role == "model")
        if turn < len(self.calls):
            name, arguments = self.calls[turn]
            call = types.FunctionCall(id=f"call-{turn}", name=name, args=arguments)
            yield LlmResponse(content=types.Content(role="model", parts=[types.Part(function_call=call)]))
        else:
            yield LlmResponse(content=types.Content(role="model", parts=[types.Part(text="done")]))


async def run(toolset: MCPFleetToolset, model: ScriptedLlm) -> list[Any]:
    """Run the agent to its end; the answers are the function responses the model received."""
    runner = InMemoryRunner(agent=LlmAgent(name="agent", model=model, tools=[toolset]), app_name="tests")
    session = await runner.session_service.create_session(app_name="tests", user_id="user")
    message = types.Content(role="user", parts=[types.Part(text="go")])
    final = [
        event async for event in runner.run_async(user_id="user", session_id=session.id, new_message=message)
    ][-1]
    await runner.close()
    assert final.content is not None and final.content.parts[0].text == "done"  # type: ignore[index]
    return [response.response for response in model.received]


async def test_the_model_is_offered_the_session_tools_and_reads_a_call_result(project: Path) -> None:
    model = ScriptedLlm(calls=[("mcp_files_add", {"a": 2, "b": 3})])
    async with MCPFleetToolset(cwd=project) as toolset:
        [answer] = await run(toolset, model)
        assert model.offered[0] == {tool.name: tool.parameters for tool in toolset.session.tools}
        # Runner.close() asked the toolset to close: the fleet still serves until the block ends.
        assert toolset.session.mcp_manager.get_connection_status("files") == "connected"
    assert answer == {
        "content": [
            {"type": "text", "text": "5"},
            {"type": "text", "text": json.dumps({"sum": 5}, indent=2)},
        ],
        "structuredContent": {"sum": 5},
        "isError": False,
    }


async def test_a_failing_tool_answers_the_model_with_an_error(project: Path) -> None:
    model = ScriptedLlm(calls=[("mcp_files_fail", {"message": "the disk is full"})])
    async with MCPFleetToolset(cwd=project) as toolset:
        [answer] = await run(toolset, model)
    assert answer == {"error": "the disk is full"}


async def test_a_deferred_tool_is_offered_from_the_cache_and_waits_for_its_server(
    project: Path, slow_start: float
) -> None:
    model = ScriptedLlm(calls=[("mcp_slow_echo", {"message": "late but here"})])
    async with open_agent_session(project) as session:
        tool = session.get_tool("mcp_slow_echo")
        assert tool is not None and tool.deferred  # type: ignore[attr-defined]
        async with MCPFleetToolset(session=session) as toolset:
            [answer] = await run(toolset, model)
        assert session.mcp_manager.get_connection_status("slow") == "connected"
    assert "mcp_slow_echo" in model.offered[0]
    assert answer["structuredContent"] == {"message": "late but here"}


async def test_tool_filter_keeps_only_the_named_tools(project: Path) -> None:
    model = ScriptedLlm()
    async with MCPFleetToolset(cwd=project, tool_filter=["mcp_files_echo"]) as toolset:
        await run(toolset, model)
    assert list(model.offered[0]) == ["mcp_files_echo"]


async def test_a_sub_agent_given_the_same_toolset_calls_through_its_connections(project: Path) -> None:
    started = starts_of_files()
    lead_model = ScriptedLlm(
        calls=[
            ("mcp_files_echo", {"message": "from the lead"}),
            ("transfer_to_agent", {"agent_name": "helper"}),
        ]
    )
    helper_model = ScriptedLlm(calls=[("mcp_files_echo", {"message": "from the helper"})])
    async with MCPFleetToolset(cwd=project) as toolset:
        helper = LlmAgent(name="helper", model=helper_model, tools=[toolset])
        lead = LlmAgent(name="lead", model=lead_model, tools=[toolset], sub_agents=[helper])
        runner = InMemoryRunner(agent=lead, app_name="tests")
        session = await runner.session_service.create_session(app_name="tests", user_id="user")
        message = types.Content(role="user", parts=[types.Part(text="go")])
        events = [
            event
            async for event in runner.run_async(user_id="user", session_id=session.id, new_message=message)
        ]
        await runner.close()
        running = running_servers()
    assert events[-1].author == "helper"
    lead_answer, helper_answer = lead_model.received[0].response, helper_model.received[-1].response
    assert lead_answer is not None and lead_answer["structuredContent"] == {"message": "from the lead"}
    assert helper_answer is not None and helper_answer["structuredContent"] == {"message": "from the helper"}
    assert len(running) == 2  # files and slow, one process each, for both agents
    assert starts_of_files() - started == 1
