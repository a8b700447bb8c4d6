"""The tool budget without processes: which budget a client gets, when the pair replaces the
tools, what a profile keeps and pins, and how ``find_tools``/``call_tool`` are routed."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from mcpfleet.config.profiles import Profile
from mcpfleet.gateway.budget import CALL_TOOL, FIND_TOOLS, KNOWN_CLIENT_BUDGETS, ToolBudget, budget_for
from mcpfleet.gateway.naming import NamingPolicy, assign_served_names
from mcpfleet.gateway.served_catalog import ServedCatalog


def catalog_of(pairs: list[tuple[str, str]]) -> ServedCatalog:
    names = assign_served_names(pairs, NamingPolicy())
    tools = []
    for server, tool in pairs:
        served = names.served(server, tool)
        tools.append(
            {
                "name": served,
                "description": f"{tool.replace('_', ' ')} on {server}",
                "inputSchema": {"type": "object"},
            }
        )
    return ServedCatalog(tools=tuple(sorted(tools, key=lambda t: str(t["name"]))), tool_names=names)


FLEET = catalog_of([("files", "read_file"), ("files", "write_file"), ("git", "git_log"), ("notes", "echo")])


def listed(budget: ToolBudget, client: str | None = None, catalog: ServedCatalog = FLEET) -> list[str]:
    return [str(tool["name"]) for tool in budget.listing(catalog, client)]


def test_the_budget_is_max_tools_else_the_users_table_else_the_known_hosts_else_none() -> None:
    assert budget_for("cursor-vscode") == 40
    assert budget_for("Visual Studio Code - Insiders") == 128
    assert budget_for("claude-code") is None
    assert budget_for(None) is None
    assert budget_for("cursor-vscode", client_budgets=[("cursor*", 60)]) == 60
    assert budget_for("cursor-vscode", client_budgets=[("cursor*", None)]) is None
    assert budget_for("cursor-vscode", max_tools=3, client_budgets=[("cursor*", 60)]) == 3
    assert all(pattern == pattern.lower() for pattern, _ in KNOWN_CLIENT_BUDGETS)


def test_auto_serves_every_tool_within_the_budget_and_the_pair_above_it() -> None:
    assert listed(ToolBudget("auto", max_tools=4)) == [str(tool["name"]) for tool in FLEET.tools]
    assert listed(ToolBudget("auto", max_tools=3)) == [FIND_TOOLS, CALL_TOOL]
    assert listed(ToolBudget("auto", client_budgets=[("small-host", 2)]), "small-host") == [
        FIND_TOOLS,
        CALL_TOOL,
    ]
    assert len(listed(ToolBudget("auto", client_budgets=[("small-host", 2)]), "other")) == 4
    assert listed(ToolBudget("search")) == [FIND_TOOLS, CALL_TOOL]
    assert len(listed(ToolBudget("all", max_tools=1))) == 4


def test_the_pair_names_the_servers_behind_it() -> None:
    find_tools = ToolBudget("search").listing(FLEET, None)[0]
    assert "4 tools" in find_tools["description"]
    assert "files (2), git (1), notes (1)" in find_tools["description"]


def test_a_profile_keeps_includes_and_excludes_by_served_name_or_pair_and_pins() -> None:
    profile = Profile(
        "small",
        servers=("files", "git"),
        include=("files_*", "git/*"),
        exclude=("*write*",),
        pin=("git_log",),
    )
    budget = ToolBudget("search", profile=profile)
    restricted = budget.restrict(FLEET)
    assert [tool["name"] for tool in restricted.tools] == ["files_read_file", "git_log"]
    assert restricted.tool_target("files_write_file") is None
    assert restricted.tool_target("notes_echo") is None
    assert restricted.servers_with_tools == {"files": 1, "git": 1}
    assert listed(budget, catalog=restricted) == [FIND_TOOLS, CALL_TOOL, "git_log"]
    assert [tool["name"] for tool in budget.find(restricted, "write a file")] == ["files_read_file"]


def test_find_tools_returns_names_descriptions_and_schemas_and_reuses_its_index() -> None:
    budget = ToolBudget("search")
    found = budget.find(FLEET, "git log", 1)
    assert found == [{"name": "git_log", "description": "git log on git", "inputSchema": {"type": "object"}}]
    assert budget.index(FLEET) is budget.index(FLEET)
    changed = catalog_of([("git", "git_log")])
    assert budget.index(changed) is not budget.index(FLEET)


def route(budget: ToolBudget, name: str, arguments: dict[str, Any], client: str | None = None) -> Any:
    async def find_target(served: str) -> tuple[str, str] | None:
        return FLEET.tool_target(served)

    async def run() -> Any:
        return await budget.route_call(FLEET, client, name, arguments, find_target=find_target)

    return anyio.run(run)


def test_call_tool_forwards_to_the_named_tool_and_answers_what_it_cannot_forward() -> None:
    budget = ToolBudget("search")
    forwarded = route(budget, CALL_TOOL, {"name": "notes_echo", "arguments": {"message": "hi"}})
    assert (forwarded.name, forwarded.arguments, forwarded.answer) == ("notes_echo", {"message": "hi"}, None)
    assert route(budget, CALL_TOOL, {"name": "notes_echo"}).arguments == {}
    for arguments, fragment in (
        ({"name": "nobody"}, "Unknown tool: nobody"),
        ({}, '"name"'),
        ({"name": 3}, '"name"'),
        ({"name": "notes_echo", "arguments": [1]}, "JSON object"),
    ):
        answer = route(budget, CALL_TOOL, arguments).answer
        assert answer["isError"] is True and fragment in answer["content"][0]["text"]
    direct = route(budget, "notes_echo", {"message": "hi"})
    assert (direct.name, direct.answer) == ("notes_echo", None)


@pytest.mark.parametrize(
    ("arguments", "fragment"),
    [
        ({}, '"query"'),
        ({"query": " "}, '"query"'),
        ({"query": "x", "limit": 0}, '"limit"'),
        ({"query": "x", "limit": True}, '"limit"'),
    ],
)
def test_find_tools_refuses_bad_arguments_as_a_tool_error(arguments: dict[str, Any], fragment: str) -> None:
    answer = route(ToolBudget("search"), FIND_TOOLS, arguments).answer
    assert answer["isError"] is True and fragment in answer["content"][0]["text"]


def test_in_all_mode_the_pair_is_not_served_and_its_names_pass_through() -> None:
    assert route(ToolBudget("all"), FIND_TOOLS, {"query": "x"}).answer is None
    assert route(ToolBudget("all"), FIND_TOOLS, {"query": "x"}).name == FIND_TOOLS
