"""The fleet as a Google ADK toolset: ``LlmAgent(tools=[toolset])`` inside
``async with MCPFleetToolset(cwd=".") as toolset:``.

In place of one ``McpToolset`` per server, one ``BaseToolset`` serves every server of the
session, under the session's names (``mcp_<server>_<tool>``) with the server's JSON schema as
the function declaration. ADK asks a toolset for its tools at every model call, so a server's
``tools/list_changed`` shows on the next one; giving the same toolset to sub-agents shares its
connections.

A successful call answers as ADK's own MCP tool does, the result's JSON (``content``,
``structuredContent``, ``isError``); a tool error (``isError``, or mcpfleet's ``MCP error:``)
answers ``{"error": text}``, ADK's convention for a failed tool, so the model reads the text.
Each call goes through mcpfleet: a deferred tool waits for its server, and cancelling the run
cancels the call.
"""

from __future__ import annotations

from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, Unpack

from mcpfleet.integrations._framework import require_framework

require_framework("google.adk", "Google ADK", "google-adk")

from google.adk.tools.base_tool import BaseTool  # noqa: E402  (after the check that names the extra)
from google.adk.tools.base_toolset import BaseToolset, ToolPredicate  # noqa: E402
from google.genai import types  # noqa: E402

from mcpfleet.agent.session import AgentSession, Tool  # noqa: E402
from mcpfleet.integrations._lease import SessionLease, SessionOptions  # noqa: E402

if TYPE_CHECKING:
    from google.adk.agents.readonly_context import ReadonlyContext
    from google.adk.tools.tool_context import ToolContext

__all__ = ["MCPFleetTool", "MCPFleetToolset"]


class MCPFleetTool(BaseTool):
    """One tool of an mcpfleet session as an ADK tool."""

    def __init__(self, tool: Tool, lease: SessionLease) -> None:
        super().__init__(name=tool.name, description=tool.description)
        self._parameters = tool.parameters
        self._lease = lease

    def _get_declaration(self) -> types.FunctionDeclaration:
        return types.FunctionDeclaration(
            name=self.name, description=self.description, parameters_json_schema=self._parameters
        )

    async def run_async(self, *, args: dict[str, Any], tool_context: ToolContext) -> Any:
        result = await self._lease.call(self.name, args)
        if result.is_error:
            return {"error": result.text}
        answer: dict[str, Any] = {"content": result.content, "isError": False}
        if result.structured is not None:
            answer["structuredContent"] = result.structured
        return answer


class MCPFleetToolset(BaseToolset):
    """Every tool of an mcpfleet session as one ADK toolset.

    Build it from ``session=`` (an ``AgentSession`` you run, never closed here) or ``cwd=``
    (discovered and connected when ``async with`` starts, every server closed when it ends;
    the other keywords are ``open_agent_session``'s). ``tool_filter`` and
    ``tool_name_prefix`` are ADK's.
    """

    def __init__(
        self,
        *,
        session: AgentSession | None = None,
        cwd: str | Path | None = None,
        tool_filter: ToolPredicate | list[str] | None = None,
        tool_name_prefix: str | None = None,
        **options: Unpack[SessionOptions],
    ) -> None:
        super().__init__(tool_filter=tool_filter, tool_name_prefix=tool_name_prefix)
        self._lease = SessionLease("MCPFleetToolset", session, cwd, options)
        self._entered = False

    @property
    def session(self) -> AgentSession:
        """The session served (once entered)."""
        return self._lease.session

    async def __aenter__(self) -> MCPFleetToolset:
        if not self._entered:
            await self._lease.enter()
            self._entered = True
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        if self._entered:
            self._entered = False
            await self._lease.exit()

    async def close(self) -> None:
        """Leave the fleet to the ``async with`` that started it.

        ADK's ``Runner.close()`` calls this from a task of its own (``asyncio.wait_for``), and a
        fleet's task group can only be left from the task that entered it: the servers close
        when the ``async with`` block ends, whoever else asks.
        """

    async def get_tools(self, readonly_context: ReadonlyContext | None = None) -> list[BaseTool]:
        """The session's tools now (after ADK's ``tool_filter``)."""
        tools: list[BaseTool] = [MCPFleetTool(tool, self._lease) for tool in self._lease.tools()]
        return [tool for tool in tools if self._is_tool_selected(tool, readonly_context)]
