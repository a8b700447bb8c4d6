"""The tool budget: how many tools each client is served, and the search-and-call pair served
instead when there are too many.

Modes (``mcpfleet serve --tools``):

* ``all``: every tool the profile keeps;
* ``search``: two tools instead, ``find_tools(query, limit)`` and ``call_tool(name,
  arguments)``, next to the tools the profile pins;
* ``auto`` (the default): every tool while they fit the client's budget, the pair above it.

A client's budget is ``--max-tools N`` when given, else the first entry of the user's
``toolBudgets`` and then of ``KNOWN_CLIENT_BUDGETS`` whose glob matches the client's name
(the ``clientInfo.name`` of ``initialize``, or of a 2026-07-28 request's ``_meta``), else
unlimited. The decision is made on each ``tools/list``, so a fleet that grows past the
budget switches that client to the pair with the next ``list_changed``.

``call_tool`` goes through the same path as a direct call (the relay, progress, the same
results and errors); what it cannot forward (no such tool, arguments that are not an
object) is a tool error the model can read, never a protocol error. Any served tool may
still be called directly by its name. ``find_tools`` answers from the catalog (cached tools
included), never starting a backend; its index is rebuilt when the catalog changes.

No SDK here: results are plain JSON.
"""

from __future__ import annotations

import fnmatch
import json
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from mcpfleet.contract.defaults import DEFAULT_TOOL_MODE
from mcpfleet.contract.defaults import ToolMode as ToolMode
from mcpfleet.gateway.naming import ServedNames
from mcpfleet.gateway.search import ToolIndex

if TYPE_CHECKING:
    from mcpfleet.config.profiles import Profile
    from mcpfleet.gateway.served_catalog import ServedCatalog


FIND_TOOLS = "find_tools"
CALL_TOOL = "call_tool"
DEFAULT_FIND_LIMIT = 8
MAX_FIND_LIMIT = 50

KNOWN_CLIENT_BUDGETS: tuple[tuple[str, int | None], ...] = (
    ("cursor*", 40),
    ("visual studio code*", 128),
    ("windsurf*", 100),
    ("codex*", 128),
)
"""Hosts with a known tool limit, by a glob over their lower-cased ``clientInfo.name``:
Cursor (``cursor-vscode``) warns past 40 tools (80 in later releases); VS Code's agent mode
sends at most 128 tools to a model; Windsurf's Cascade caps the total at 100; Codex talks to
OpenAI's API, which rejects more than 128 functions. Overridden by ``toolBudgets`` in
mcpfleet's user config (``config.profiles``)."""


def budget_for(
    client_name: str | None,
    *,
    max_tools: int | None = None,
    client_budgets: Sequence[tuple[str, int | None]] = (),
) -> int | None:
    """The number of tools ``client_name`` is served directly at most; ``None``: no limit."""
    if max_tools is not None:
        return max_tools
    if client_name is None:
        return None
    name = client_name.lower()
    for pattern, budget in (*client_budgets, *KNOWN_CLIENT_BUDGETS):
        if fnmatch.fnmatchcase(name, pattern):
            return budget
    return None


@dataclass(frozen=True)
class CallRoute:
    """Where one ``tools/call`` goes: a served tool (``name``, ``arguments``), or an answer
    the gateway gives itself (``answer``: ``find_tools``, or a ``call_tool`` it cannot forward)."""

    name: str = ""
    arguments: Mapping[str, Any] | None = None
    answer: dict[str, Any] | None = None
    target: tuple[str, str] | None = None
    """``(server, backend name)`` when deciding already resolved the tool (``call_tool``'s
    inner one), so that it is not resolved twice."""


class ToolBudget:
    """The budget, the profile and the search index of one gateway."""

    def __init__(
        self,
        mode: ToolMode = DEFAULT_TOOL_MODE,
        *,
        max_tools: int | None = None,
        client_budgets: Sequence[tuple[str, int | None]] = (),
        profile: Profile | None = None,
    ) -> None:
        self.mode = mode
        self.max_tools = max_tools
        self.client_budgets = tuple(client_budgets)
        self.profile = profile
        self._indexed: tuple[ServedCatalog, ToolIndex] | None = None

    # -- what is served ------------------------------------------------------------------------------

    def restrict(self, catalog: ServedCatalog) -> ServedCatalog:
        """``catalog`` with only the tools the profile keeps (all of them without a profile):
        a tool left out is neither listed, found, nor callable."""
        profile = self.profile
        if profile is None:
            return catalog
        kept = ServedNames(
            by_pair={
                pair: served
                for pair, served in catalog.tool_names.by_pair.items()
                if profile.keeps_tool(pair[0], pair[1], served)
            },
            collisions=catalog.tool_names.collisions,
        )
        kept.by_served = {served: pair for pair, served in kept.by_pair.items()}
        tools = tuple(tool for tool in catalog.tools if tool.get("name") in kept.by_served)
        return replace(catalog, tools=tools, tool_names=kept)

    def budget_for(self, client_name: str | None) -> int | None:
        return budget_for(client_name, max_tools=self.max_tools, client_budgets=self.client_budgets)

    def searching(self, catalog: ServedCatalog, client_name: str | None) -> bool:
        """Whether ``client_name`` is served the pair rather than every tool."""
        if self.mode != "auto":
            return self.mode == "search"
        budget = self.budget_for(client_name)
        return budget is not None and len(catalog.tools) > budget

    def listing(self, catalog: ServedCatalog, client_name: str | None) -> list[dict[str, Any]]:
        """The ``tools`` of this client's ``tools/list``."""
        if not self.searching(catalog, client_name):
            return list(catalog.tools)
        return [*search_tools_pair(catalog), *self.pinned(catalog)]

    def pinned(self, catalog: ServedCatalog) -> list[dict[str, Any]]:
        """The tools the profile pins, as served."""
        profile = self.profile
        if profile is None or not profile.pin:
            return []
        pinned: list[dict[str, Any]] = []
        for tool in catalog.tools:
            name = str(tool.get("name"))
            target = catalog.tool_target(name)
            if (
                target is not None
                and name not in (FIND_TOOLS, CALL_TOOL)
                and profile.pins_tool(*target, name)
            ):
                pinned.append(tool)
        return pinned

    # -- find_tools and call_tool ------------------------------------------------------------------

    def index(self, catalog: ServedCatalog) -> ToolIndex:
        """The search index of ``catalog``, built once per catalog (each change makes a new one)."""
        indexed = self._indexed
        if indexed is None or indexed[0] is not catalog:
            backend_names = {served: tool for (_, tool), served in catalog.tool_names.by_pair.items()}
            indexed = (catalog, ToolIndex(catalog.tools, backend_names))
            self._indexed = indexed
        return indexed[1]

    def find(
        self, catalog: ServedCatalog, query: str, limit: int = DEFAULT_FIND_LIMIT
    ) -> list[dict[str, Any]]:
        """The best tools for ``query``: name, title, description and input schema each."""
        return [found_tool(hit.tool) for hit in self.index(catalog).search(query, limit)]

    async def route_call(
        self,
        catalog: ServedCatalog,
        client_name: str | None,
        name: str,
        arguments: Mapping[str, Any],
        *,
        find_target: Callable[[str], Awaitable[tuple[str, str] | None]],
    ) -> CallRoute:
        """Where a ``tools/call`` of ``name`` goes. The pair answers when this client is served
        it, or when no served tool has its name; ``find_target`` resolves the tool that
        ``call_tool`` names (waiting, as a direct call does, for a fleet still starting)."""
        if self.mode == "all" or name not in (FIND_TOOLS, CALL_TOOL):
            return CallRoute(name, arguments)
        if catalog.tool_target(name) is not None and not self.searching(catalog, client_name):
            return CallRoute(name, arguments)
        if name == FIND_TOOLS:
            return CallRoute(answer=self._find_tools(catalog, arguments))
        inner = arguments.get("name")
        inner_arguments = arguments.get("arguments", {})
        if not isinstance(inner, str) or not inner:
            return CallRoute(
                answer=tool_error('call_tool needs "name": the full name of a tool from find_tools')
            )
        if inner_arguments is None:
            inner_arguments = {}
        if not isinstance(inner_arguments, Mapping):
            return CallRoute(
                answer=tool_error(f'call_tool needs "arguments" as a JSON object of {inner}\'s parameters')
            )
        target = await find_target(inner)
        if target is None:
            return CallRoute(
                answer=tool_error(
                    f"Unknown tool: {inner}; call find_tools to get the names of the tools served"
                )
            )
        return CallRoute(inner, inner_arguments, target=target)

    def _find_tools(self, catalog: ServedCatalog, arguments: Mapping[str, Any]) -> dict[str, Any]:
        query = arguments.get("query")
        limit = arguments.get("limit", DEFAULT_FIND_LIMIT)
        if not isinstance(query, str) or not query.strip():
            return tool_error('find_tools needs "query": a few words saying what the tool should do')
        if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_FIND_LIMIT:
            return tool_error(f'find_tools: "limit" must be a whole number from 1 to {MAX_FIND_LIMIT}')
        found = self.find(catalog, query, limit)
        structured = {"tools": found}
        text = (
            json.dumps(structured, ensure_ascii=False)
            if found
            else f"No tool matches {query!r}; try other words."
        )
        return {
            "content": [{"type": "text", "text": text}],
            "structuredContent": structured,
            "isError": False,
        }


def tool_budget(mode: ToolMode, *, max_tools: int | None, profile: str | None) -> ToolBudget:
    """The tool budget of a gateway served with ``serve``'s ``--tools``, ``--max-tools`` and
    ``--profile``, from mcpfleet's user config as it is now (its client budgets, the profile
    named): ``serve``'s in-process gateway and each of the daemon's sessions build it here.
    ``ConfigError`` for a profile the config does not define."""
    from mcpfleet.config.profiles import read_gateway_settings

    settings = read_gateway_settings()
    return ToolBudget(
        mode,
        max_tools=max_tools,
        client_budgets=settings.client_budgets,
        profile=settings.profile(profile) if profile is not None else None,
    )


def found_tool(tool: Mapping[str, Any]) -> dict[str, Any]:
    """One tool as ``find_tools`` returns it: enough for a model to call it."""
    found = {"name": tool.get("name"), "description": tool.get("description", "")}
    if tool.get("title"):
        found["title"] = tool["title"]
    found["inputSchema"] = tool.get("inputSchema", {"type": "object"})
    return found


def tool_error(message: str) -> dict[str, Any]:
    """A ``tools/call`` result that tells the model what went wrong and how to fix it."""
    return {"content": [{"type": "text", "text": message}], "isError": True}


def search_tools_pair(catalog: ServedCatalog) -> list[dict[str, Any]]:
    """``find_tools`` and ``call_tool`` as served: their descriptions name the servers behind
    them, so a model knows what it may search for."""
    counts = catalog.servers_with_tools
    servers = ", ".join(f"{server} ({count})" for server, count in sorted(counts.items())) or "none yet"
    total = sum(counts.values())
    find_tools = {
        "name": FIND_TOOLS,
        "title": "Find tools",
        "description": (
            f"Search the {total} tools of the MCP servers behind this gateway ({servers}) and return "
            "the best matches with their full names, descriptions and input schemas. Describe the task "
            "in a few words; then call the tool you chose with call_tool."
        ),
        "inputSchema": {
            "type": "object",
            "properties": {
                "query": {"type": "string", "description": "What the tool should do, in a few words"},
                "limit": {
                    "type": "integer",
                    "minimum": 1,
                    "maximum": MAX_FIND_LIMIT,
                    "default": DEFAULT_FIND_LIMIT,
                    "description": "How many tools to return at most",
                },
            },
            "required": ["query"],
        },
        "annotations": {"readOnlyHint": True, "openWorldHint": False},
    }
    call_tool = {
        "name": CALL_TOOL,
        "title": "Call a tool",
        "description": (
            "Call one of the tools found with find_tools, by its full name, with its arguments. "
            "Returns that tool's own result."
        ),
        "inputSchema": {
            "type": "object",
            "properties": {
                "name": {"type": "string", "description": "The tool's full name, as find_tools gave it"},
                "arguments": {
                    "type": "object",
                    "description": "The tool's arguments, as its input schema describes them",
                },
            },
            "required": ["name"],
        },
    }
    return [find_tools, call_tool]
