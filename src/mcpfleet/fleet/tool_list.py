"""The fleet's tool list: each server's slice, filtered, named and merged (no I/O).

A server's tools are owned by the server's name, never found by a name prefix, so
replacing or removing one server's slice never touches another's. A slice is *deferred*
when it came from the tool cache because the server was still starting at the gate.
"""

from __future__ import annotations

import fnmatch
import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from mcpfleet.client.definitions import ToolDefinition
from mcpfleet.config.model import ServerConfig
from mcpfleet.fleet.tools import DeferredMCPTool, MCPTool, ToolBackend, assign_tool_names

logger = logging.getLogger(__name__)

AnyTool = MCPTool | DeferredMCPTool


@dataclass(frozen=True)
class ToolSlice:
    """One server's part of the tool list."""

    definitions: tuple[ToolDefinition, ...]
    deferred: bool


@dataclass(frozen=True)
class CatalogEntry:
    """One tool of the merged list: which server, which definition, and its agent-facing name."""

    server: str
    definition: ToolDefinition
    name: str
    deferred: bool


def filter_tools(tools: Iterable[ToolDefinition], config: ServerConfig) -> tuple[ToolDefinition, ...]:
    """One definition per name, then the server's allow-list and deny-list (globs; deny wins).

    A server may list a name twice; the agent calls tools by name, so only one definition
    can ever be reached. The first is kept, as the server listed it first.
    """

    def allowed(name: str) -> bool:
        if any(fnmatch.fnmatchcase(name, pattern) for pattern in config.exclude_tools):
            return False
        if config.include_tools is None:
            return True
        return any(fnmatch.fnmatchcase(name, pattern) for pattern in config.include_tools)

    kept: dict[str, ToolDefinition] = {}
    for tool in tools:
        if tool.name in kept:
            logger.warning(
                "MCP server %s lists the tool %r more than once; only its first definition is used",
                config.name,
                tool.name,
            )
        elif allowed(tool.name):
            kept[tool.name] = tool
    return tuple(kept.values())


def merge_slices(slices: Mapping[str, ToolSlice]) -> list[CatalogEntry]:
    """Every tool of every slice with its agent-facing name, sorted by that name.

    Names depend only on the set of (server, tool) pairs, so the list is the same whatever
    order the servers connected in.
    """
    pairs = [(server, d.name) for server, piece in slices.items() for d in piece.definitions]
    names = assign_tool_names(pairs)
    entries = [
        CatalogEntry(server, definition, names[(server, definition.name)], piece.deferred)
        for server, piece in slices.items()
        for definition in piece.definitions
    ]
    entries.sort(key=lambda entry: entry.name)
    return entries


def build_tools(
    slices: Mapping[str, ToolSlice], backend: ToolBackend, provider_of: Callable[[str], str | None]
) -> list[AnyTool]:
    """The agent's tool objects for ``merge_slices(slices)``; a deferred one waits for its server."""
    tools: list[AnyTool] = []
    for entry in merge_slices(slices):
        tool_class = DeferredMCPTool if entry.deferred else MCPTool
        tools.append(
            tool_class(
                backend,
                entry.server,
                entry.definition,
                name=entry.name,
                provider_name=provider_of(entry.server),
            )
        )
    return tools
