"""The fleet as a Pydantic AI toolset: ``Agent(model, toolsets=[MCPFleetToolset(cwd=".")])``.

In place of one ``MCPServerStdio`` per server, one toolset serves every server of the
session, under the session's names (``mcp_<server>_<tool>``) and schemas. The agent enters
toolsets around each run; the toolset counts those entries, so inside the caller's own
``async with`` a run reuses the fleet, and without one each run starts and closes it.

A tool error (``isError``, or mcpfleet's ``MCP error:`` for a server that failed) becomes
``ModelRetry`` by default, as Pydantic AI's own MCP toolset does, so the model reads the
error text and may try again; ``tool_error_behavior="failed"`` raises ``ToolFailed``
instead. Structured content is returned as the value itself; images, audio and blobs as
``BinaryContent``; text resources as their text and resource links as their URI.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal, Unpack

from mcpfleet.integrations._framework import decoded, only_text, require_framework, unwrapped_structured

require_framework("pydantic_ai", "Pydantic AI", "pydantic-ai")

import pydantic_core  # noqa: E402  (after the check that names the extra to install)
from pydantic_ai import BinaryContent, ModelRetry, RunContext, ToolDefinition  # noqa: E402
from pydantic_ai.exceptions import ToolFailed  # noqa: E402
from pydantic_ai.toolsets import AbstractToolset, ToolsetTool  # noqa: E402

from mcpfleet.agent.session import AgentSession  # noqa: E402
from mcpfleet.fleet.tools import ToolResult  # noqa: E402
from mcpfleet.integrations._lease import SessionLease, SessionOptions  # noqa: E402

__all__ = ["MCPFleetToolset"]

_ANY_ARGUMENTS = pydantic_core.SchemaValidator(
    pydantic_core.core_schema.dict_schema(
        pydantic_core.core_schema.str_schema(), pydantic_core.core_schema.any_schema()
    )
)
"""Arguments pass through as the model gave them: the server validates against its own schema."""


class MCPFleetToolset(AbstractToolset[Any]):
    """Every tool of an mcpfleet session as one Pydantic AI toolset.

    Build it from ``session=`` (an ``AgentSession`` you run, never closed here) or ``cwd=``
    (discovered and connected on entry, closed on the last exit; the other keywords are
    ``open_agent_session``'s).
    """

    def __init__(
        self,
        *,
        session: AgentSession | None = None,
        cwd: str | Path | None = None,
        id: str | None = None,
        max_retries: int | None = None,
        tool_error_behavior: Literal["retry", "failed"] = "retry",
        **options: Unpack[SessionOptions],
    ) -> None:
        self._lease = SessionLease("MCPFleetToolset", session, cwd, options)
        self._id = id
        self.max_retries = max_retries
        self.tool_error_behavior = tool_error_behavior

    @property
    def id(self) -> str | None:
        return self._id

    @property
    def session(self) -> AgentSession:
        """The session served (once entered)."""
        return self._lease.session

    async def __aenter__(self) -> MCPFleetToolset:
        await self._lease.enter()
        return self

    async def __aexit__(self, *args: object) -> bool | None:
        await self._lease.exit()
        return None

    async def get_tools(self, ctx: RunContext[Any]) -> dict[str, ToolsetTool[Any]]:
        """The session's tools now: a server's ``tools/list_changed`` shows on the next step."""
        max_retries = self.max_retries if self.max_retries is not None else ctx.max_retries
        return {
            tool.name: ToolsetTool(
                toolset=self,
                tool_def=ToolDefinition(
                    name=tool.name, description=tool.description, parameters_json_schema=tool.parameters
                ),
                max_retries=max_retries,
                args_validator=_ANY_ARGUMENTS,
            )
            for tool in self._lease.tools()
        }

    async def call_tool(
        self, name: str, tool_args: dict[str, Any], ctx: RunContext[Any], tool: ToolsetTool[Any]
    ) -> Any:
        result = await self._lease.call(name, tool_args)
        if result.is_error:
            if self.tool_error_behavior == "failed":
                raise ToolFailed(message=result.text)
            raise ModelRetry(result.text)
        return _for_the_model(result)


def _for_the_model(result: ToolResult) -> Any:
    """The value Pydantic AI hands the model: structured content when text alone carries the
    answer, else each block as text or ``BinaryContent``."""
    if result.structured is not None and only_text(result):
        return unwrapped_structured(result)
    parts = [_part(block) for block in result.content]
    return parts[0] if len(parts) == 1 else parts


def _part(block: dict[str, Any]) -> str | BinaryContent:
    kind = block.get("type")
    if kind in ("image", "audio"):
        return BinaryContent.narrow_type(
            BinaryContent(data=decoded(block.get("data")), media_type=str(block.get("mimeType") or ""))
        )
    if kind == "resource":
        resource = block.get("resource")
        resource = resource if isinstance(resource, dict) else {}
        if isinstance(resource.get("blob"), str):
            media_type = str(resource.get("mimeType") or "application/octet-stream")
            return BinaryContent.narrow_type(
                BinaryContent(data=decoded(resource["blob"]), media_type=media_type)
            )
        return str(resource.get("text", ""))
    if kind == "resource_link":
        return str(block.get("uri", ""))
    return str(block.get("text", ""))
