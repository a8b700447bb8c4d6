"""The gateway's served names and URIs: unique, within the length limit, stable whatever the
order, and always leading back to the server and the name they came from."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mcpfleet.contract.defaults import MIN_TOOL_NAME_LENGTH
from mcpfleet.fleet.tools import assign_tool_names
from mcpfleet.gateway.naming import (
    NamingPolicy,
    assign_served_names,
    served_uri,
    split_served_uri,
)
from mcpfleet.gateway.served_catalog import ServedCatalog

SERVED_NAME = re.compile(r"^[A-Za-z0-9_-]+$")

names = st.text(min_size=0, max_size=80)
pairs = st.lists(st.tuples(names, names), max_size=30)
limits = st.integers(min_value=MIN_TOOL_NAME_LENGTH, max_value=128)


@given(pairs, limits)
def test_served_names_are_unique_bounded_and_reversible(pair_list: list[tuple[str, str]], limit: int) -> None:
    served = assign_served_names(pair_list, NamingPolicy(max_name_length=limit))

    assert set(served.by_pair) == set(pair_list)
    assert len(set(served.by_pair.values())) == len(served.by_pair)
    for pair, name in served.by_pair.items():
        assert len(name) <= limit
        assert SERVED_NAME.match(name)
        assert served.resolve(name) == pair


@given(pairs, limits)
def test_served_names_do_not_depend_on_order(pair_list: list[tuple[str, str]], limit: int) -> None:
    policy = NamingPolicy(max_name_length=limit)
    assert (
        assign_served_names(pair_list, policy).by_pair
        == assign_served_names(list(reversed(pair_list)), policy).by_pair
    )


def test_served_names_are_the_bridge_names_without_its_prefix() -> None:
    pair_list = [("github", "github_create_issue"), ("files", "read"), ("my server", "x" * 90)]
    served = assign_served_names(pair_list, NamingPolicy()).by_pair
    bridge = assign_tool_names(pair_list)

    assert served[("github", "github_create_issue")] == "github_create_issue"
    assert served[("files", "read")] == "files_read"
    assert bridge[("files", "read")] == "mcp_" + served[("files", "read")]
    assert len(served[("my server", "x" * 90)]) == 64


def test_a_name_two_servers_share_collides_only_without_prefix() -> None:
    pair_list = [("beta", "echo"), ("alpha", "echo")]

    prefixed = assign_served_names(pair_list, NamingPolicy())
    assert prefixed.collisions == []
    assert set(prefixed.by_served) == {"alpha_echo", "beta_echo"}

    bare = assign_served_names(pair_list, NamingPolicy(prefix="none"))
    assert bare.by_served == {"echo": ("alpha", "echo")}
    [collision] = bare.collisions
    assert collision.servers == ("alpha", "beta")
    assert '"alpha" and "beta"' in collision.message() and '"echo"' in collision.message()


def test_a_limit_that_cannot_hold_the_hash_is_refused() -> None:
    with pytest.raises(ValueError, match="at least"):
        NamingPolicy(max_name_length=MIN_TOOL_NAME_LENGTH - 1)


servers = st.text(min_size=1, max_size=40)
uris = st.text(max_size=120)


@given(servers, uris)
def test_served_uris_lead_back_to_server_and_uri(server: str, uri: str) -> None:
    served = served_uri(server, uri, NamingPolicy())
    assert served.startswith("mcpfleet://")
    assert split_served_uri(served) == (server, uri)


@given(servers, st.text(alphabet=st.characters(blacklist_characters="{}"), max_size=30))
def test_a_filled_template_still_leads_back_to_its_server(server: str, value: str) -> None:
    template = "file:///notes/{name}/body"
    served_template = served_uri(server, template, NamingPolicy())

    filled = served_template.replace("{name}", value)

    assert split_served_uri(filled) == (server, template.replace("{name}", value))


def test_without_prefix_uris_pass_through() -> None:
    assert served_uri("alpha", "file:///x", NamingPolicy(prefix="none")) == "file:///x"


def test_a_backend_uri_is_routed_to_the_one_server_that_can_own_it() -> None:
    catalog = ServedCatalog(
        policy=NamingPolicy(prefix="none"),
        resource_owners={"fake://readme": ("alpha",), "fake://shared": ("alpha", "beta")},
        backend_templates=(("beta", "notes://{id}"), ("alpha", "file:///{+path}")),
    )

    assert catalog.resource_target("fake://readme") == ("alpha", "fake://readme")
    assert catalog.resource_target("notes://42") == ("beta", "notes://42")
    assert catalog.resource_target("file:///a/b.txt") == ("alpha", "file:///a/b.txt")
    # Two servers list it: the gateway does not guess.
    assert catalog.resource_target("fake://shared") is None
    assert catalog.resource_target("unknown://x") is None
