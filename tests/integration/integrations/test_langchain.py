"""LangChain agents on mcpfleet's tools: ``create_agent`` (a LangGraph loop) driven by
LangChain's fake chat model emitting tool calls, over real subprocess MCP servers."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from tests.integration.integrations.fleet_fixtures import require

require("langchain", "langchain")

from langchain.agents import create_agent  # noqa: E402
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel  # noqa: E402
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage  # noqa: E402

from mcpfleet import open_agent_session  # noqa: E402
from mcpfleet.integrations.langchain import open_langchain_tools  # noqa: E402

pytestmark = pytest.mark.anyio


class ToolCallingFakeModel(GenericFakeChatModel):
    """LangChain's fake chat model, made bindable: it answers its scripted messages in order
    whatever tools it is given (``create_agent`` binds the tools before the first call)."""

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> ToolCallingFakeModel:
        return self


def scripted(*calls: tuple[str, dict[str, Any]]) -> ToolCallingFakeModel:
    """A model that makes each call in its own turn, then answers "done"."""
    turns: list[AIMessage] = [
        AIMessage(
            content="", tool_calls=[{"name": name, "args": args, "id": f"call-{i}", "type": "tool_call"}]
        )
        for i, (name, args) in enumerate(calls)
    ]
    return ToolCallingFakeModel(messages=iter([*turns, AIMessage(content="done")]))


async def run(tools: list[Any], model: ToolCallingFakeModel) -> list[ToolMessage]:
    """Run the agent to its end; the tool messages are what the model was handed back."""
    agent = create_agent(model, tools)
    state = await agent.ainvoke({"messages": [HumanMessage("go")]})
    assert state["messages"][-1].content == "done"
    return [message for message in state["messages"] if isinstance(message, ToolMessage)]


async def test_tools_carry_the_session_names_and_schemas_and_answer_the_model(project: Path) -> None:
    async with open_agent_session(project) as session, open_langchain_tools(session=session) as tools:
        assert {tool.name: tool.args_schema for tool in tools} == {
            tool.name: tool.parameters for tool in session.tools
        }
        [answer] = await run(tools, scripted(("mcp_files_add", {"a": 2, "b": 3})))
    assert answer.status == "success"
    assert answer.name == "mcp_files_add"
    # The server's text, then its structured content as JSON: what an mcpfleet session shows a model.
    assert answer.content == "5\n" + json.dumps({"sum": 5}, indent=2)
    assert answer.artifact == {"sum": 5}


async def test_a_failing_tool_is_an_error_tool_message_with_its_text(project: Path) -> None:
    async with open_langchain_tools(cwd=project) as tools:
        [answer] = await run(tools, scripted(("mcp_files_fail", {"message": "the disk is full"})))
    assert answer.status == "error"
    assert answer.content == "the disk is full"


async def test_a_deferred_tool_is_offered_from_the_cache_and_waits_for_its_server(
    project: Path, slow_start: float
) -> None:
    async with open_agent_session(project) as session:
        tool = session.get_tool("mcp_slow_echo")
        assert tool is not None and tool.deferred  # type: ignore[attr-defined]
        async with open_langchain_tools(session=session) as tools:
            assert "mcp_slow_echo" in [tool.name for tool in tools]
            [answer] = await run(tools, scripted(("mcp_slow_echo", {"message": "late but here"})))
        assert session.mcp_manager.get_connection_status("slow") == "connected"
    assert answer.status == "success"
    assert isinstance(answer.content, str) and answer.content.startswith("late but here\n")
    assert answer.artifact == {"message": "late but here"}


async def test_the_list_follows_the_session_when_a_server_goes(project: Path) -> None:
    async with open_agent_session(project) as session, open_langchain_tools(session=session) as tools:
        await session.mcp_manager.disconnect_server("slow")
        assert sorted(tool.name for tool in tools) == [
            "mcp_files_add",
            "mcp_files_echo",
            "mcp_files_fail",
            "mcp_files_sleep",
        ]
