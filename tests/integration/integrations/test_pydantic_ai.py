"""Pydantic AI agents on mcpfleet's toolset: a real agent loop (``FunctionModel`` scripts the
model's tool calls) over real subprocess MCP servers."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest
from tests.integration.integrations.fleet_fixtures import logged, require, wait_until

require("pydantic_ai", "pydantic-ai")

from pydantic_ai import Agent  # noqa: E402
from pydantic_ai.messages import (  # noqa: E402
    ModelMessage,
    ModelRequest,
    ModelResponse,
    RetryPromptPart,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel  # noqa: E402

from mcpfleet import open_agent_session  # noqa: E402
from mcpfleet.integrations.pydantic_ai import MCPFleetToolset  # noqa: E402

pytestmark = pytest.mark.anyio


class ScriptedModel:
    """A model that makes the given tool calls, one per step, then answers "done".

    It records what it was offered and every part the agent sent back to it, which is
    exactly what a real model would have read.
    """

    def __init__(self, *calls: tuple[str, dict[str, Any]]) -> None:
        self.calls = list(calls)
        self.offered: list[dict[str, dict[str, Any]]] = []
        self.received: list[Any] = []

    def __call__(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        self.offered.append({tool.name: tool.parameters_json_schema for tool in info.function_tools})
        last = messages[-1]
        if isinstance(last, ModelRequest):
            self.received.extend(
                part for part in last.parts if isinstance(part, ToolReturnPart | RetryPromptPart)
            )
        step = sum(isinstance(message, ModelResponse) for message in messages)
        if step < len(self.calls):
            name, arguments = self.calls[step]
            return ModelResponse(parts=[ToolCallPart(tool_name=name, args=arguments)])
        return ModelResponse(parts=[TextPart("done")])


async def test_the_model_is_offered_the_session_tools_and_reads_a_call_result(project: Path) -> None:
    model = ScriptedModel(("mcp_files_add", {"a": 2, "b": 3}))
    async with MCPFleetToolset(cwd=project) as toolset:
        agent = Agent(FunctionModel(model), toolsets=[toolset])
        result = await agent.run("add 2 and 3")
        offered_by_session = {tool.name: tool.parameters for tool in toolset.session.tools}
    assert result.output == "done"
    assert model.offered[0] == offered_by_session
    assert model.offered[0]["mcp_files_add"]["required"] == ["a", "b"]
    [answer] = model.received
    assert isinstance(answer, ToolReturnPart)
    assert answer.tool_name == "mcp_files_add"
    assert answer.content == {"sum": 5}


async def test_a_failing_tool_reaches_the_model_as_a_retry_with_the_error_text(project: Path) -> None:
    model = ScriptedModel(("mcp_files_fail", {"message": "the disk is full"}))
    async with MCPFleetToolset(cwd=project) as toolset:
        result = await Agent(FunctionModel(model), toolsets=[toolset]).run("fail")
    assert result.output == "done"
    [answer] = model.received
    assert answer.content == "the disk is full"
    assert answer.outcome == "retried"


async def test_failed_behaviour_reports_the_error_as_a_failed_tool(project: Path) -> None:
    model = ScriptedModel(("mcp_files_fail", {"message": "the disk is full"}))
    async with MCPFleetToolset(cwd=project, tool_error_behavior="failed") as toolset:
        await Agent(FunctionModel(model), toolsets=[toolset]).run("fail")
    [answer] = model.received
    assert answer.content == "the disk is full"
    assert answer.outcome == "failed"


async def test_a_deferred_tool_is_offered_from_the_cache_and_waits_for_its_server(
    project: Path, slow_start: float
) -> None:
    model = ScriptedModel(("mcp_slow_echo", {"message": "late but here"}))
    async with MCPFleetToolset(cwd=project) as toolset:
        deferred = toolset.session.get_tool("mcp_slow_echo")
        assert deferred is not None and deferred.deferred  # type: ignore[attr-defined]
        await Agent(FunctionModel(model), toolsets=[toolset]).run("echo")
        assert toolset.session.mcp_manager.get_connection_status("slow") == "connected"
    assert "mcp_slow_echo" in model.offered[0]
    [answer] = model.received
    assert isinstance(answer, ToolReturnPart)
    assert answer.content == {"message": "late but here"}


async def test_runs_without_an_outer_block_start_and_close_the_fleet_themselves(project: Path) -> None:
    model = ScriptedModel(("mcp_files_echo", {"message": "hi"}))
    toolset = MCPFleetToolset(cwd=project)
    await Agent(FunctionModel(model), toolsets=[toolset]).run("echo")
    assert [part.content for part in model.received] == [{"message": "hi"}]
    with pytest.raises(RuntimeError, match="async with MCPFleetToolset"):
        _ = toolset.session


async def test_a_borrowed_session_is_shared_and_left_running(project: Path) -> None:
    async with open_agent_session(project) as session:
        parent = ScriptedModel(("mcp_files_echo", {"message": "one"}))
        child = ScriptedModel(("mcp_files_echo", {"message": "two"}))
        toolset = MCPFleetToolset(session=session)
        await Agent(FunctionModel(parent), toolsets=[toolset]).run("first")
        await Agent(FunctionModel(child), toolsets=[MCPFleetToolset(session=session.create_subagent())]).run(
            "second"
        )
        assert session.mcp_manager.get_connection_status("files") == "connected"
        assert [part.content for part in parent.received + child.received] == [
            {"message": "one"},
            {"message": "two"},
        ]


async def test_cancelling_the_run_cancels_the_call_and_keeps_the_connection(project: Path) -> None:
    model = ScriptedModel(("mcp_files_sleep", {"seconds": 60}))
    async with MCPFleetToolset(cwd=project) as toolset:
        agent = Agent(FunctionModel(model), toolsets=[toolset])
        with anyio.fail_after(30):
            async with anyio.create_task_group() as group:
                group.start_soon(agent.run, "sleep")
                await wait_until(lambda: "tools/call" in logged("requests"))
                group.cancel_scope.cancel()
        await wait_until(lambda: "cancelled" in logged("cancelled"))
        after = ScriptedModel(("mcp_files_echo", {"message": "still here"}))
        await Agent(FunctionModel(after), toolsets=[toolset]).run("echo")
    assert [part.content for part in after.received] == [{"message": "still here"}]
