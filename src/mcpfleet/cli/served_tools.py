"""``mcpfleet tools --profile NAME`` and ``mcpfleet tools --search QUERY``: the tools as the
gateway serves them.

The fleet is started as ``serve`` starts it (the profile's servers only, no agent-side
filter), and the served catalog is built by the gateway's own code (``build_catalog``, the
profile's restriction, ``find_tools``'s index), so what is printed is what a host would see:
served names (``<server>_<tool>``, ``serve``'s default naming), whether the profile pins each
one, and for a search the rank order and score.
"""

from __future__ import annotations

import argparse
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any

from mcpfleet.cli.options import FleetOptions
from mcpfleet.cli.output import EXIT_FAILED, EXIT_OK, EXIT_USAGE, emit_json, error_line

if TYPE_CHECKING:
    from mcpfleet.config.model import DiscoveryResult
    from mcpfleet.fleet.manager import MCPLoadResult, MCPManager

Connect = Callable[[argparse.Namespace, "MCPManager", "DiscoveryResult"], Awaitable["MCPLoadResult"]]


async def served_tools_command(args: argparse.Namespace, connect: Connect) -> int:
    from mcpfleet.config.profiles import read_gateway_settings
    from mcpfleet.fleet.manager import MCPManager
    from mcpfleet.gateway.budget import MAX_FIND_LIMIT, ToolBudget
    from mcpfleet.gateway.naming import NamingPolicy
    from mcpfleet.gateway.served_catalog import build_catalog
    from mcpfleet.reports.rows import ErrorRow, ToolRow

    if args.search is not None and not 1 <= args.limit <= MAX_FIND_LIMIT:
        error_line(f"--limit must be from 1 to {MAX_FIND_LIMIT}, not {args.limit}")
        return EXIT_USAGE
    if args.search is not None and not args.search.strip():
        error_line('--search needs a few words saying what the tool should do, e.g. --search "read a file"')
        return EXIT_USAGE
    settings = read_gateway_settings()
    profile = settings.profile(args.profile) if args.profile is not None else None
    budget = ToolBudget("all", profile=profile)
    options = FleetOptions.from_args(args)
    manager = MCPManager(
        options.project_root,
        **options.session_settings(),
        entry_filter=profile.entry_filter() if profile is not None else None,
        roots=options.roots,
    )
    discovery = manager.discover()
    async with manager:
        result = await connect(args, manager, discovery)
        catalog = budget.restrict(build_catalog(manager, NamingPolicy()))
        agent_tools = {(tool.server_name, tool.mcp_tool_name): tool for tool in manager.get_tools()}
        pinned = {str(tool["name"]) for tool in budget.pinned(catalog)}
        ranked: list[tuple[Mapping[str, Any], float | None]]
        if args.search is not None:
            ranked = [(hit.tool, hit.score) for hit in budget.index(catalog).search(args.search, args.limit)]
        else:
            ranked = [(tool, None) for tool in catalog.tools]
    rows: list[tuple[ToolRow, dict[str, Any]]] = []
    for tool, score in ranked:
        served_name = str(tool["name"])
        target = catalog.tool_target(served_name)
        if target is None or (args.server is not None and target[0] != args.server):
            continue
        agent_tool = agent_tools.get(target)
        row = ToolRow(
            name=served_name,
            server=target[0],
            mcp_name=target[1],
            description=str(tool.get("description") or ""),
            deferred=agent_tool.deferred if agent_tool is not None else False,
            input_schema=tool.get("inputSchema") or {},
        )
        extra: dict[str, Any] = {"served_name": served_name, "pinned": served_name in pinned}
        if score is not None:
            extra["score"] = score
        rows.append((row, extra))
    errors = [ErrorRow.of(failure) for failure in [*discovery.errors, *result.failures]]
    document = {
        "tools": [{**row.to_json(), **extra} for row, extra in rows],
        "errors": [error.to_json() for error in errors],
    }
    if args.json:
        emit_json(document)
    else:
        from mcpfleet.cli.render import print_tools

        print_tools(document)
    return EXIT_FAILED if args.strict and result.errors else EXIT_OK
