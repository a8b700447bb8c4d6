"""The tool list without any server: filtering, the duplicate-name rule, naming, deferred slices."""

from __future__ import annotations

import itertools
import logging

import pytest

from mcpfleet.client.definitions import ToolDefinition
from mcpfleet.config.model import ServerConfig
from mcpfleet.fleet.tool_list import ToolSlice, build_tools, filter_tools, merge_slices
from mcpfleet.fleet.tools import DeferredMCPTool, MCPTool


def config(include: tuple[str, ...] | None = None, exclude: tuple[str, ...] = ()) -> ServerConfig:
    return ServerConfig(
        name="files", transport="stdio", command="files-server", include_tools=include, exclude_tools=exclude
    )


def tools(*names: str) -> list[ToolDefinition]:
    return [ToolDefinition(name=name) for name in names]


def test_a_name_listed_twice_keeps_its_first_definition(caplog: pytest.LogCaptureFixture) -> None:
    first = ToolDefinition(name="read", description="the first")
    second = ToolDefinition(name="read", description="the second")
    with caplog.at_level(logging.WARNING, logger="mcpfleet"):
        kept = filter_tools([first, ToolDefinition(name="write"), second], config())
    assert kept == (first, ToolDefinition(name="write"))
    assert any("lists the tool 'read' more than once" in record.getMessage() for record in caplog.records)


def test_allow_and_deny_lists_are_globs_and_deny_wins() -> None:
    listed = tools("read_file", "read_dir", "write_file", "delete_file")
    assert [t.name for t in filter_tools(listed, config(include=("read_*",)))] == ["read_file", "read_dir"]
    assert [t.name for t in filter_tools(listed, config(exclude=("*_file",)))] == ["read_dir"]
    both = config(include=("read_*", "delete_file"), exclude=("read_dir", "delete_*"))
    assert [t.name for t in filter_tools(listed, both)] == ["read_file"]
    assert filter_tools(listed, config(include=())) == ()


def test_a_denied_duplicate_does_not_revive_a_name() -> None:
    assert filter_tools(tools("secret", "secret"), config(exclude=("secret",))) == ()


def test_merged_names_are_sorted_and_the_same_whatever_the_order_of_the_slices() -> None:
    slices = {
        "github": ToolSlice(tuple(tools("github_create_issue", "search")), deferred=False),
        "files": ToolSlice(tuple(tools("search", "read")), deferred=True),
    }
    expected = merge_slices(slices)
    assert [entry.name for entry in expected] == sorted(entry.name for entry in expected)
    assert {(e.server, e.definition.name): e.name for e in expected}[("github", "github_create_issue")] == (
        "mcp_github_create_issue"
    )
    for order in itertools.permutations(slices):
        assert merge_slices({name: slices[name] for name in order}) == expected
    assert {entry.server: entry.deferred for entry in expected} == {"github": False, "files": True}


def test_built_tools_are_deferred_for_a_cached_slice_and_know_their_provider() -> None:
    slices = {
        "live": ToolSlice(tuple(tools("echo")), deferred=False),
        "cached": ToolSlice(tuple(tools("echo")), deferred=True),
    }
    providers = {"live": "Claude Code", "cached": None}
    built = build_tools(slices, backend=_NoBackend(), provider_of=providers.__getitem__)
    assert [(type(t), t.name, t.server_name) for t in built] == [
        (DeferredMCPTool, "mcp_cached_echo", "cached"),
        (MCPTool, "mcp_live_echo", "live"),
    ]
    assert built[1].provider_name == "Claude Code"


class _NoBackend:
    """The tools are only built here, never called: every method says so."""

    def get_provider_name(self, server_name: str) -> str | None:
        return None

    async def call_tool(self, server_name: str, tool_name: str, arguments: object, **_: object) -> object:
        raise AssertionError("not called in this test")

    async def wait_for_connection(self, server_name: str) -> None:
        raise AssertionError("not called in this test")
