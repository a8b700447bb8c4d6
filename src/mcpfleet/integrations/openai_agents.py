"""The fleet as one OpenAI Agents SDK MCP server: ``Agent(mcp_servers=[MCPFleetServer(cwd=".")])``.

In place of one ``MCPServerStdio`` per server, one ``MCPServer`` serves every server of the
session, under the session's names (``mcp_<server>_<tool>``) and schemas. The Agents SDK
lists an agent's MCP tools at every turn, so a server's ``tools/list_changed`` is seen on the
next turn; handing the same object to a handoff or sub-agent shares its connections.

Calls go through mcpfleet: a deferred tool waits for its server, a failed server answers
``MCP error: …`` with ``isError`` set, which the Agents SDK hands the model as the tool's
output (its own MCP convention), and cancelling the run cancels the call. Prompts are the
servers' prompts, named ``<server>/<prompt>``.
"""

from __future__ import annotations

from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, Unpack

from mcpfleet.integrations._framework import require_framework

require_framework("agents", "the OpenAI Agents SDK", "openai-agents")

from agents.mcp import MCPServer  # noqa: E402  (after the check that names the extra to install)

from mcpfleet.agent.session import AgentSession  # noqa: E402
from mcpfleet.errors import ToolNotFoundError  # noqa: E402
from mcpfleet.integrations._lease import SessionLease, SessionOptions  # noqa: E402

if TYPE_CHECKING:
    from agents import AgentBase, RunContextWrapper
    from mcp_types import CallToolResult, GetPromptResult, ListPromptsResult, Tool

__all__ = ["MCPFleetServer"]


class MCPFleetServer(MCPServer):
    """Every tool of an mcpfleet session as one Agents SDK ``MCPServer``.

    Build it from ``session=`` (an ``AgentSession`` you run, never closed here) or ``cwd=``
    (discovered and connected by ``connect()`` or ``async with``, closed by ``cleanup()``;
    the other keywords are ``open_agent_session``'s). ``server_options`` go to ``MCPServer``
    (``require_approval``, ``failure_error_function``, ``use_structured_content`` …).
    """

    def __init__(
        self,
        *,
        session: AgentSession | None = None,
        cwd: str | Path | None = None,
        name: str = "mcpfleet",
        server_options: dict[str, Any] | None = None,
        **options: Unpack[SessionOptions],
    ) -> None:
        super().__init__(**(server_options or {}))
        self._lease = SessionLease("MCPFleetServer", session, cwd, options)
        self._name = name
        self._connected = False

    @property
    def name(self) -> str:
        return self._name

    @property
    def session(self) -> AgentSession:
        """The session served (once connected)."""
        return self._lease.session

    async def connect(self) -> None:
        """Start the fleet (``cwd=``) or begin serving the given session; a second call is a no-op."""
        if self._connected:
            return
        await self._lease.enter()
        self._connected = True

    async def cleanup(self) -> None:
        """Close every server this object started, each bounded by its shutdown deadline."""
        if not self._connected:
            return
        self._connected = False
        await self._lease.exit()

    async def __aenter__(self) -> MCPFleetServer:
        await self.connect()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.cleanup()

    async def list_tools(
        self,
        run_context: RunContextWrapper[Any] | None = None,
        agent: AgentBase | None = None,
    ) -> list[Tool]:
        """The session's tools now, as MCP tool definitions."""
        from mcp_types import Tool

        return [
            Tool(name=tool.name, description=tool.description, input_schema=tool.parameters)
            for tool in self._lease.tools()
        ]

    async def call_tool(
        self,
        tool_name: str,
        arguments: dict[str, Any] | None,
        meta: dict[str, Any] | None = None,
    ) -> CallToolResult:
        """Call through mcpfleet and hand the result back in the MCP shape the SDK reads."""
        from mcp_types import CallToolResult

        result = await self._lease.call(tool_name, arguments)
        return CallToolResult.model_validate(
            {"content": result.content, "structuredContent": result.structured, "isError": result.is_error}
        )

    async def list_prompts(self) -> ListPromptsResult:
        """Every connected server's prompts, each named ``<server>/<prompt>``."""
        from mcp_types import ListPromptsResult

        manager = self._lease.session.mcp_manager
        prompts: list[dict[str, Any]] = []
        for server in manager.get_connected_servers():
            for prompt in await manager.list_prompts(server):
                prompts.append({**prompt, "name": f"{server}/{prompt.get('name', '')}"})
        return ListPromptsResult.model_validate({"prompts": prompts})

    async def get_prompt(self, name: str, arguments: dict[str, Any] | None = None) -> GetPromptResult:
        """One prompt by its ``<server>/<prompt>`` name."""
        from mcp_types import GetPromptResult

        server, separator, prompt = name.partition("/")
        manager = self._lease.session.mcp_manager
        if not separator or server not in manager.get_all_server_names():
            raise ToolNotFoundError(
                f"No prompt named {name!r}: prompts are named <server>/<prompt>, see list_prompts()"
            )
        text_arguments = {key: str(value) for key, value in (arguments or {}).items()}
        return GetPromptResult.model_validate(await manager.get_prompt(server, prompt, text_arguments))
