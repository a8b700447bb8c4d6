"""The gateway's lists served in pages: ``tools/list``, ``resources/list``,
``resources/templates/list`` and ``prompts/list``.

A page holds ``PAGE_SIZE`` items; a longer list ends its page with a ``nextCursor``. The cursor
is opaque to the client (base64url of where the page ended: the list, the position, and the key
of the last item served), so a client walking the pages while the list changes (a late server
joining) goes on after the last item it got, wherever that item now is, and gets no item twice.
A cursor that does not decode, names another list, or names an item no longer served is
``InvalidCursor`` (``-32602`` on the wire): the list changed, and the client hears of it with
``list_changed`` and lists again from the start.

The size is large on purpose: several hosts (Claude Code, Codex, Copilot CLI, the claude.ai web
client, in 2026) read only the first page of a list, so every fleet of ordinary size must fit in
one page; the pages bound what one answer costs when a fleet is very large.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Sequence
from typing import Any, Literal

from mcpfleet.errors import MCPFleetError

PAGE_SIZE = 1000
"""Items in one page of a served list."""

PagedList = Literal["tools", "resources", "resourceTemplates", "prompts"]
"""The key of a served list in its result."""

ITEM_KEYS: dict[PagedList, str] = {
    "tools": "name",
    "prompts": "name",
    "resources": "uri",
    "resourceTemplates": "uriTemplate",
}
"""The field that tells the items of a list apart (served names and URIs are unique)."""

_MAX_CURSOR_CHARS = 4096


class InvalidCursor(MCPFleetError, ValueError):
    """A cursor the gateway did not give for this list, or one the list has moved past."""


def page_of(
    kind: PagedList, items: Sequence[dict[str, Any]], cursor: str | None, page_size: int = PAGE_SIZE
) -> dict[str, Any]:
    """The result for one page of ``items`` (``{kind: [...], "nextCursor"?: ...}``), starting
    where ``cursor`` (from the previous page's ``nextCursor``) says."""
    start = 0 if cursor is None else _resume_at(kind, items, cursor)
    page = list(items[start : start + page_size])
    result: dict[str, Any] = {kind: page}
    end = start + len(page)
    if end < len(items):
        result["nextCursor"] = _encode(kind, end, _key_of(kind, page[-1]))
    return result


def _key_of(kind: PagedList, item: dict[str, Any]) -> str:
    return str(item.get(ITEM_KEYS[kind], ""))


def _encode(kind: PagedList, position: int, last_key: str) -> str:
    text = json.dumps([kind, position, last_key], separators=(",", ":"), ensure_ascii=True)
    return base64.urlsafe_b64encode(text.encode()).decode().rstrip("=")


def _resume_at(kind: PagedList, items: Sequence[dict[str, Any]], cursor: str) -> int:
    invalid = InvalidCursor(
        f"Invalid cursor {cursor[:64]!r} for {kind}: give the nextCursor of the previous page, "
        "or list again without a cursor"
    )
    if not isinstance(cursor, str) or len(cursor) > _MAX_CURSOR_CHARS:
        raise invalid
    try:
        decoded = json.loads(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)))
    except (binascii.Error, ValueError):
        raise invalid from None
    if (
        not isinstance(decoded, list)
        or len(decoded) != 3
        or decoded[0] != kind
        or isinstance(decoded[1], bool)
        or not isinstance(decoded[1], int)
        or not isinstance(decoded[2], str)
    ):
        raise invalid
    position, last_key = decoded[1], decoded[2]
    # Where the last item served is now: its old place when nothing moved, else found by key.
    if 0 < position <= len(items) and _key_of(kind, items[position - 1]) == last_key:
        return position
    for index, item in enumerate(items):
        if _key_of(kind, item) == last_key:
            return index + 1
    raise InvalidCursor(
        f"Invalid cursor for {kind}: the list changed since it was given; list again without a cursor"
    )


__all__ = ["PAGE_SIZE", "InvalidCursor", "PagedList", "page_of"]
