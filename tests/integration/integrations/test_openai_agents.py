"""OpenAI Agents SDK agents on mcpfleet's ``MCPServer``: a real ``Runner`` loop (a scripted
``Model`` makes the tool calls) over real subprocess MCP servers. Tracing is off: nothing
leaves the machine."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from tests.integration.integrations.fleet_fixtures import (
    add_server,
    require,
    running_servers,
    starts_of_files,
    wait_until,
)

require("agents", "openai-agents")

from agents import Agent, ModelResponse, RunConfig, Runner, Usage  # noqa: E402
from agents.models.interface import Model  # noqa: E402
from openai.types.responses import (  # noqa: E402
    ResponseFunctionToolCall,
    ResponseOutputMessage,
    ResponseOutputText,
)

from mcpfleet import open_agent_session  # noqa: E402
from mcpfleet.integrations.openai_agents import MCPFleetServer  # noqa: E402

pytestmark = pytest.mark.anyio
NO_TRACING = RunConfig(tracing_disabled=True)


class ScriptedModel(Model):
    """Makes the given tool calls, one per turn, then answers "done"; records what it was
    offered (tool name → JSON schema) and every tool output the run handed back to it."""

    def __init__(self, *calls: tuple[str, dict[str, Any]], call_ids: str = "call") -> None:
        self.calls = list(calls)
        self.call_ids = call_ids
        """Prefix of the call ids: agents of one run must not reuse each other's."""
        self.offered: list[dict[str, Any]] = []
        self.outputs: list[Any] = []
        self.turn = 0

    async def get_response(
        self,
        system_instructions: Any,
        input: Any,
        model_settings: Any,
        tools: Any,
        output_schema: Any,
        handoffs: Any,
        tracing: Any,
        **_: Any,
    ) -> ModelResponse:
        self.offered.append({tool.name: tool.params_json_schema for tool in tools})
        if isinstance(input, list):
            self.outputs = [
                item["output"] for item in input if _field(item, "type") == "function_call_output"
            ]
        turn, self.turn = self.turn, self.turn + 1
        if turn < len(self.calls):
            name, arguments = self.calls[turn]
            call = ResponseFunctionToolCall(
                type="function_call",
                call_id=f"{self.call_ids}-{turn}",
                name=name,
                arguments=json.dumps(arguments),
            )
            return ModelResponse(output=[call], usage=Usage(), response_id=None)
        text = ResponseOutputText(type="output_text", text="done", annotations=[])
        message = ResponseOutputMessage(
            id="answer", type="message", role="assistant", status="completed", content=[text]
        )
        return ModelResponse(output=[message], usage=Usage(), response_id=None)

    def stream_response(self, *args: Any, **kwargs: Any) -> AsyncIterator[Any]:
        raise NotImplementedError("these tests run the agent without streaming")


def _field(item: Any, name: str) -> Any:
    return item.get(name) if isinstance(item, dict) else getattr(item, name, None)


def output_texts(output: Any) -> list[str]:
    """The texts a tool output carries, whichever of the SDK's shapes it came in."""
    if isinstance(output, str):
        return [output]
    if isinstance(output, list):
        return [text for item in output for text in output_texts(item)]
    return [str(_field(output, "text"))]


async def test_the_model_is_offered_the_session_tools_and_reads_a_call_result(project: Path) -> None:
    model = ScriptedModel(("mcp_files_add", {"a": 2, "b": 3}))
    async with MCPFleetServer(cwd=project) as fleet:
        agent = Agent(name="adder", model=model, mcp_servers=[fleet])
        result = await Runner.run(agent, "add 2 and 3", run_config=NO_TRACING)
        by_session = {tool.name for tool in fleet.session.tools}
    assert result.final_output == "done"
    assert set(model.offered[0]) == by_session
    assert model.offered[0]["mcp_files_add"]["properties"].keys() == {"a", "b"}
    # The server's text, then its structured content as JSON: what an mcpfleet session shows a model.
    [output] = model.outputs
    assert output_texts(output) == ["5", json.dumps({"sum": 5}, indent=2)]


async def test_a_failing_tool_hands_the_model_the_error_text(project: Path) -> None:
    model = ScriptedModel(("mcp_files_fail", {"message": "the disk is full"}))
    async with MCPFleetServer(cwd=project) as fleet:
        result = await Runner.run(
            Agent(name="a", model=model, mcp_servers=[fleet]), "x", run_config=NO_TRACING
        )
    assert result.final_output == "done"
    [output] = model.outputs
    assert output_texts(output) == ["the disk is full"]


async def test_a_deferred_tool_is_offered_from_the_cache_and_waits_for_its_server(
    project: Path, slow_start: float
) -> None:
    model = ScriptedModel(("mcp_slow_echo", {"message": "late but here"}))
    async with MCPFleetServer(cwd=project) as fleet:
        tool = fleet.session.get_tool("mcp_slow_echo")
        assert tool is not None and tool.deferred  # type: ignore[attr-defined]
        await Runner.run(Agent(name="a", model=model, mcp_servers=[fleet]), "x", run_config=NO_TRACING)
    assert "mcp_slow_echo" in model.offered[0]
    [output] = model.outputs
    assert output_texts(output)[0] == "late but here"


async def test_a_borrowed_session_is_left_running_and_serves_prompts(project: Path) -> None:
    async with open_agent_session(project) as session:
        async with MCPFleetServer(session=session) as fleet:
            listed = await fleet.list_prompts()
            greeting = await fleet.get_prompt("files/greet", {"who": "Ada"})
        assert session.mcp_manager.get_connection_status("files") == "connected"
    assert sorted(prompt.name for prompt in listed.prompts) == ["files/greet", "slow/greet"]
    assert greeting.messages[0].content.text == "Hello Ada"  # type: ignore[union-attr]


async def test_a_tools_list_changed_shows_on_the_next_listing(project: Path) -> None:
    # Its tools grow while it runs: pinning would withhold the added one (tests/integration/test_pinning.py).
    add_server("growing", "--tool", "echo", "--list-changed-after", "1.0", pinning="off")
    model = ScriptedModel(("mcp_growing_late_tool", {"message": "new"}))
    async with MCPFleetServer(cwd=project) as fleet:
        before = [tool.name for tool in await fleet.list_tools()]
        await wait_until(lambda: fleet.session.get_tool("mcp_growing_late_tool") is not None)
        after = [tool.name for tool in await fleet.list_tools()]
        await Runner.run(Agent(name="a", model=model, mcp_servers=[fleet]), "x", run_config=NO_TRACING)
    assert "mcp_growing_late_tool" not in before
    assert "mcp_growing_late_tool" in after
    assert "mcp_growing_late_tool" in model.offered[0]
    assert output_texts(model.outputs[0])[0] == "new"


async def test_a_handoff_calls_through_the_parents_connections(project: Path) -> None:
    started = starts_of_files()
    lead_model = ScriptedModel(("mcp_files_echo", {"message": "from the lead"}), ("transfer_to_helper", {}))
    helper_model = ScriptedModel(("mcp_files_echo", {"message": "from the helper"}), call_ids="helper")
    async with MCPFleetServer(cwd=project) as fleet:
        # The helper's own MCPServer, over a sub-agent session of the lead's fleet.
        helper_fleet = MCPFleetServer(session=fleet.session.create_subagent())
        async with helper_fleet:
            helper = Agent(name="helper", model=helper_model, mcp_servers=[helper_fleet])
            lead = Agent(name="lead", model=lead_model, mcp_servers=[fleet], handoffs=[helper])
            result = await Runner.run(lead, "go", run_config=NO_TRACING)
            running = running_servers()
    assert result.last_agent is helper
    assert result.final_output == "done"
    assert output_texts(lead_model.outputs[0])[0] == "from the lead"
    assert output_texts(helper_model.outputs[-1])[0] == "from the helper"
    assert len(running) == 2  # files and slow, one process each, for both agents
    assert starts_of_files() - started == 1


def test_exactly_one_of_session_and_cwd() -> None:
    with pytest.raises(TypeError, match=r"exactly one of session= .* or cwd="):
        MCPFleetServer()
