"""The fleet as LangChain tools: ``async with open_langchain_tools(cwd=".") as tools:``.

In place of ``MultiServerMCPClient(...).get_tools()``, one ``async with`` yields a
``BaseTool`` per tool of the session, under the session's names (``mcp_<server>_<tool>``)
with the server's JSON schema as ``args_schema``, ready for ``create_agent(model, tools)``
or ``model.bind_tools(tools)``. The tools are async (``ainvoke``); each call goes through
mcpfleet, so a deferred tool waits for its server and cancelling the run cancels the call.

A tool error (``isError``, or mcpfleet's ``MCP error:``) is raised as ``ToolException``
with ``handle_tool_error`` set, LangChain's own convention: the model receives a
``ToolMessage`` with ``status="error"`` and the error text. Text comes back as text; images,
audio and blobs as LangChain's standard ``image``/``file`` blocks; structured content as the
message's ``artifact``.

The yielded list is kept in step with the session (a ``tools/list_changed`` adds or drops
entries in place); an agent already built keeps the tools it was given, so build the agent
again to offer it new ones. A tool that went away answers with an error the model can read.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, Literal, Unpack

from mcpfleet.integrations._framework import require_framework

require_framework("langchain_core", "LangChain", "langchain")

from langchain_core.tools import BaseTool, ToolException  # noqa: E402  (after the check naming the extra)

from mcpfleet.agent.session import AgentSession, Tool  # noqa: E402
from mcpfleet.fleet.events import ManagerEvent  # noqa: E402
from mcpfleet.fleet.tools import ToolResult  # noqa: E402
from mcpfleet.integrations._lease import SessionLease, SessionOptions  # noqa: E402

__all__ = ["MCPFleetTool", "open_langchain_tools"]


class MCPFleetTool(BaseTool):
    """One tool of an mcpfleet session as a LangChain ``BaseTool`` (async only)."""

    lease: SessionLease
    response_format: Literal["content", "content_and_artifact"] = "content_and_artifact"
    handle_tool_error: bool = True

    def _run(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError(
            f"{self.name} is an async MCP tool: call it with `await tool.ainvoke(...)` "
            "(or run the agent with ainvoke)"
        )

    async def _arun(self, **arguments: Any) -> tuple[str | list[dict[str, Any]], Any]:
        result = await self.lease.call(self.name, arguments)
        if result.is_error:
            raise ToolException(result.text)
        return _message_content(result), result.structured


def _message_content(result: ToolResult) -> str | list[dict[str, Any]]:
    """Plain text when the result is all text (what most chat models read best), else blocks."""
    if all(block.get("type") == "text" for block in result.content):
        return result.text
    return [_block(block) for block in result.content]


def _block(block: dict[str, Any]) -> dict[str, Any]:
    kind = block.get("type")
    if kind == "image":
        return {"type": "image", "base64": block.get("data", ""), "mime_type": block.get("mimeType")}
    if kind == "audio":
        return {"type": "file", "base64": block.get("data", ""), "mime_type": block.get("mimeType")}
    if kind == "resource":
        resource = block.get("resource")
        resource = resource if isinstance(resource, dict) else {}
        if isinstance(resource.get("blob"), str):
            mime_type = resource.get("mimeType") or "application/octet-stream"
            return {"type": "file", "base64": resource["blob"], "mime_type": mime_type}
        return {"type": "text", "text": str(resource.get("text", ""))}
    if kind == "resource_link":
        return {"type": "text", "text": f"[Resource link: {block.get('uri', '')}]"}
    return {"type": "text", "text": str(block.get("text", ""))}


def _as_langchain(tool: Tool, lease: SessionLease) -> MCPFleetTool:
    return MCPFleetTool(
        name=tool.name, description=tool.description, args_schema=tool.parameters, lease=lease
    )


@asynccontextmanager
async def open_langchain_tools(
    *,
    session: AgentSession | None = None,
    cwd: str | Path | None = None,
    **options: Unpack[SessionOptions],
) -> AsyncIterator[list[BaseTool]]:
    """The session's tools as LangChain tools, for the length of the ``async with``.

    From ``session=`` (an ``AgentSession`` you run, never closed here) or ``cwd=`` (discovered
    and connected on entry, every server closed on exit; the other keywords are
    ``open_agent_session``'s).
    """
    lease = SessionLease("open_langchain_tools", session, cwd, options)
    running = await lease.enter()
    tools: list[BaseTool] = [_as_langchain(tool, lease) for tool in lease.tools()]

    def follow(event: ManagerEvent) -> None:
        # The session's own listener was subscribed first, so its tools are already swapped.
        if event.kind == "tools_changed":
            tools[:] = [_as_langchain(tool, lease) for tool in lease.tools()]

    try:
        unsubscribe: Callable[[], None] | None = running.mcp_manager.subscribe(follow)
    except RuntimeError:  # enable_mcp=False: there is no fleet, so the list never changes
        unsubscribe = None
    try:
        yield tools
    finally:
        if unsubscribe is not None:
            unsubscribe()
        await lease.exit()
