"""The gateway's list pages (``gateway.paging``): cursors resume after the last item served,
whatever changed in between, and a cursor the gateway did not give is refused."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest

from mcpfleet.gateway.paging import InvalidCursor, page_of


def tools(*names: str) -> list[dict[str, Any]]:
    return [{"name": name, "inputSchema": {"type": "object"}} for name in names]


def walk(kind: Any, items: list[dict[str, Any]], page_size: int) -> list[list[str]]:
    pages: list[list[str]] = []
    cursor = None
    while True:
        page = page_of(kind, items, cursor, page_size)
        pages.append([item["name"] for item in page[kind]])
        cursor = page.get("nextCursor")
        if cursor is None:
            return pages


def test_a_short_list_is_one_page_without_a_cursor() -> None:
    assert page_of("tools", tools("a", "b"), None, 5) == {"tools": tools("a", "b")}


def test_pages_hold_every_item_once_in_order() -> None:
    names = [f"t{index:02}" for index in range(23)]
    pages = walk("tools", tools(*names), 10)
    assert [len(page) for page in pages] == [10, 10, 3]
    assert [name for page in pages for name in page] == names


def test_a_cursor_resumes_after_its_last_item_when_items_came_before_it() -> None:
    first = page_of("tools", tools("b", "d", "f", "h"), None, 2)
    assert [item["name"] for item in first["tools"]] == ["b", "d"]
    grown = tools("a", "b", "c", "d", "f", "h")
    second = page_of("tools", grown, first["nextCursor"], 2)
    assert [item["name"] for item in second["tools"]] == ["f", "h"]


@pytest.mark.parametrize(
    "cursor",
    [
        "not base64 !",
        base64.urlsafe_b64encode(b"[1, 2").decode(),
        base64.urlsafe_b64encode(json.dumps(["prompts", 2, "d"]).encode()).decode(),
        base64.urlsafe_b64encode(json.dumps(["tools", True, "d"]).encode()).decode(),
        base64.urlsafe_b64encode(json.dumps(["tools", 2, "gone"]).encode()).decode(),
        "x" * 5000,
    ],
    ids=["not-base64", "not-json", "another-list", "bool-position", "item-gone", "too-long"],
)
def test_a_cursor_the_gateway_did_not_give_is_refused(cursor: str) -> None:
    with pytest.raises(InvalidCursor, match="list again without a cursor"):
        page_of("tools", tools("b", "d", "f"), cursor, 2)


def test_resources_and_templates_page_by_their_uris() -> None:
    resources = [{"uri": f"mcpfleet://s/{index}", "name": "same"} for index in range(3)]
    first = page_of("resources", resources, None, 2)
    assert page_of("resources", resources, first["nextCursor"], 2) == {"resources": resources[2:]}
    templates = [{"uriTemplate": f"mcpfleet://s/{index}/{{id}}", "name": "same"} for index in range(3)]
    first = page_of("resourceTemplates", templates, None, 2)
    assert page_of("resourceTemplates", templates, first["nextCursor"], 2) == {
        "resourceTemplates": templates[2:]
    }
