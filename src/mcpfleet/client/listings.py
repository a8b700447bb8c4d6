"""Walking a server's paginated listings, and shaping its tool list.

A listing (``tools/list``, ``resources/list``, ``prompts/list``…) comes in pages linked by
cursors; a server may repeat a cursor or never stop, so the walk ends on a repeat and after
``MAX_LIST_PAGES``. The tool list is also capped (``maxTools``): past the cap it is cut with
one warning, and no further page is asked for.

Part of ``connection.py``, which imports the SDK.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import mcp_types

from mcpfleet.client.definitions import ToolDefinition
from mcpfleet.client.screening import ToolScreen

logger = logging.getLogger(__name__)

MAX_LIST_PAGES = 1000

FetchPage = Callable[[mcp_types.PaginatedRequestParams | None], Awaitable[Any]]
"""Asks for one page: the first with no parameters, the next ones with the last page's cursor."""


async def walk_pages(fetch: FetchPage, enough: Callable[[list[Any]], bool] | None = None) -> list[Any]:
    """Every page of a listing; ``enough(pages)`` stops the walk early."""
    pages: list[Any] = []
    cursor: str | None = None
    seen: set[str] = set()
    for _ in range(MAX_LIST_PAGES):
        page = await fetch(mcp_types.PaginatedRequestParams(cursor=cursor) if cursor is not None else None)
        pages.append(page)
        if enough is not None and enough(pages):
            break
        cursor = page.next_cursor
        # A server that repeats a cursor would page forever.
        if cursor is None or cursor in seen:
            break
        seen.add(cursor)
    return pages


def enough_tools(screen: ToolScreen) -> Callable[[list[Any]], bool]:
    """Stops a ``tools/list`` walk once the pages hold the server's cap of tools."""
    return lambda pages: sum(len(page.tools) for page in pages) >= screen.max_tools


def capped_tool_definitions(
    server: str, pages: Sequence[Any], screen: ToolScreen, cut_before: int
) -> list[ToolDefinition]:
    """The first ``screen.max_tools`` tools of ``pages``, warning once when the server listed
    more (``cut_before``: the screen's count of cut answers before the walk began)."""
    cap = screen.max_tools
    listed = [tool for page in pages for tool in page.tools]
    more_pages = len(listed) >= cap and pages[-1].next_cursor is not None
    if screen.cut_answers > cut_before or len(listed) > cap or more_pages:
        logger.warning(
            'MCP server "%s" lists more than %d tools: only its first %d are used; raise "maxTools" '
            'in its entry (or "maxToolsPerServer" in mcpfleet\'s user config) to take more',
            server,
            cap,
            cap,
        )
    return [_definition(tool) for tool in listed[:cap]]


def _definition(tool: mcp_types.Tool) -> ToolDefinition:
    annotations = tool.annotations.model_dump(by_alias=True, exclude_none=True) if tool.annotations else None
    return ToolDefinition(
        name=tool.name,
        description=tool.description,
        input_schema=dict(tool.input_schema),
        output_schema=dict(tool.output_schema) if tool.output_schema is not None else None,
        title=tool.title,
        annotations=annotations,
        raw=tool.model_dump(by_alias=True, mode="json", exclude_unset=True),
    )


__all__ = ["MAX_LIST_PAGES", "capped_tool_definitions", "enough_tools", "walk_pages"]
