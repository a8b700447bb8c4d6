"""Agent-facing tool names: sanitising, the redundant prefix, the 64-character cap and
collisions that resolve the same way whatever order the servers connected in."""

from __future__ import annotations

import hashlib
import itertools
import logging
import re

import pytest

from mcpfleet.fleet.tools import assign_tool_names, mcp_tool_name

PROVIDER_SAFE_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


@pytest.mark.parametrize(
    ("server", "tool", "expected"),
    [
        ("files", "read_text_file", "mcp_files_read_text_file"),
        ("my server", "read file", "mcp_my_server_read_file"),
        ("docs.v2", "search.pages", "mcp_docs_v2_search_pages"),
        ("café", "naïve tool", "mcp_caf_na_ve_tool"),
        ("  padded  ", "__tool__", "mcp_padded_tool"),
        ("a...b", "x  /  y", "mcp_a_b_x_y"),
        ("my-server", "get-item", "mcp_my-server_get-item"),
        ("GitHub", "createIssue", "mcp_GitHub_createIssue"),
        ("", "", "mcp_server_tool"),
        ("日本", "検索", "mcp_server_tool"),
    ],
)
def test_names_are_sanitised(server: str, tool: str, expected: str) -> None:
    name = mcp_tool_name(server, tool)

    assert name == expected
    assert PROVIDER_SAFE_NAME.match(name)


@pytest.mark.parametrize(
    ("server", "tool", "expected"),
    [
        ("github", "github_create_issue", "mcp_github_create_issue"),
        ("GitHub", "github_search", "mcp_GitHub_search"),
        ("my-server", "my_server_ping", "mcp_my-server_ping"),
        ("puppeteer", "puppeteer.screenshot", "mcp_puppeteer_screenshot"),
        # Not a redundant prefix: nothing left after it, or no separator after it.
        ("echo", "echo", "mcp_echo_echo"),
        ("echo", "echo_", "mcp_echo_echo"),
        ("github", "githubber", "mcp_github_githubber"),
    ],
)
def test_redundant_server_prefix_is_dropped(server: str, tool: str, expected: str) -> None:
    assert mcp_tool_name(server, tool) == expected


def test_long_names_are_cut_with_a_stable_hash_suffix() -> None:
    full_name = "mcp_srv_" + "t" * 100

    name = mcp_tool_name("srv", "t" * 100)

    assert name == full_name[:55] + "_" + hashlib.sha256(full_name.encode()).hexdigest()[:8]
    assert len(name) == 64
    assert PROVIDER_SAFE_NAME.match(name)
    assert mcp_tool_name("srv", "t" * 100) == name


def test_long_names_sharing_a_prefix_stay_distinct() -> None:
    first = mcp_tool_name("srv", "t" * 100 + "_alpha")
    second = mcp_tool_name("srv", "t" * 100 + "_beta")

    assert first[:55] == second[:55]
    assert first != second


def test_names_at_the_limit_are_kept_whole() -> None:
    tool_at_limit = "t" * (64 - len("mcp_srv_"))

    assert mcp_tool_name("srv", tool_at_limit) == "mcp_srv_" + tool_at_limit
    assert len(mcp_tool_name("srv", tool_at_limit + "t")) == 64
    assert mcp_tool_name("srv", tool_at_limit + "t") != "mcp_srv_" + tool_at_limit


def test_every_name_is_provider_safe_whatever_the_input() -> None:
    awkward = [
        "",
        "_",
        "-",
        "a" * 200,
        "tab\there",
        "new\nline",
        "emoji 🚀 tool",
        "../../etc",
        "ünïcödé" * 20,
    ]
    for server, tool in itertools.product(awkward, repeat=2):
        assert PROVIDER_SAFE_NAME.match(mcp_tool_name(server, tool)), (server, tool)


COLLIDING_PAIRS = [("a.b", "c"), ("a_b", "c"), ("a b", "c"), ("github", "create_issue")]


def test_collisions_resolve_the_same_way_in_every_input_order() -> None:
    outcomes = [assign_tool_names(order) for order in itertools.permutations(COLLIDING_PAIRS)]

    assert all(outcome == outcomes[0] for outcome in outcomes)
    names = outcomes[0]
    # The first pair in sorted order keeps the contested name (" " sorts before "." and "_").
    assert names[("a b", "c")] == "mcp_a_b_c"
    assert names[("github", "create_issue")] == "mcp_github_create_issue"
    assert len(set(names.values())) == len(COLLIDING_PAIRS)
    for loser in [("a.b", "c"), ("a_b", "c")]:
        assert re.fullmatch(r"mcp_a_b_c_[0-9a-f]{8}", names[loser])


def test_prefix_drop_collision_keeps_the_sorted_first_pair() -> None:
    pairs = [("github", "github_create_issue"), ("github", "create_issue")]
    for order in itertools.permutations(pairs):
        names = assign_tool_names(order)
        assert names[("github", "create_issue")] == "mcp_github_create_issue"
        assert names[("github", "github_create_issue")].startswith("mcp_github_create_issue_")


def test_collision_warning_names_both_tools(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="mcpfleet.fleet.tools"):
        names = assign_tool_names([("a_b", "c"), ("a.b", "c")])

    [record] = caplog.records
    message = record.getMessage()
    assert "a.b/c" in message
    assert "a_b/c" in message
    assert names[("a_b", "c")] in message


def test_repeated_pairs_are_not_collisions(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="mcpfleet.fleet.tools"):
        names = assign_tool_names([("files", "read"), ("files", "read")])

    assert names == {("files", "read"): "mcp_files_read"}
    assert caplog.records == []


def test_names_stay_unique_when_a_suffixed_name_is_another_tools_natural_name() -> None:
    loser_name = assign_tool_names([("a b", "c"), ("a.b", "c")])[("a.b", "c")]
    impostor = ("a_b", loser_name.removeprefix("mcp_a_b_"))
    assert mcp_tool_name(*impostor) == loser_name

    pairs = [("a b", "c"), ("a.b", "c"), impostor]
    outcomes = [assign_tool_names(order) for order in itertools.permutations(pairs)]

    assert all(outcome == outcomes[0] for outcome in outcomes)
    assert len(set(outcomes[0].values())) == 3
    assert all(PROVIDER_SAFE_NAME.match(name) for name in outcomes[0].values())


def test_long_sanitised_duplicates_get_distinct_capped_names() -> None:
    pairs = [("srv", "x" * 80 + ".y"), ("srv", "x" * 80 + " y")]

    names = assign_tool_names(pairs)

    assert len(set(names.values())) == 2
    assert all(PROVIDER_SAFE_NAME.match(name) for name in names.values())
