"""The text editor behind ``hosts install``: whatever the layout (indentation, tabs, one line,
trailing commas, comments, CRLF), adding a member gives exactly the intended data, keeps every
other byte, and removing it again gives the original text back."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mcpfleet.config.readers import parse_text
from mcpfleet.hosts import jsonc

_values = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(-5, 5), st.text(max_size=6)),
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=4), inner, max_size=3)
    ),
    max_leaves=6,
)
_objects = st.dictionaries(st.text(min_size=1, max_size=6), _values, max_size=5)


def _render(data: dict[str, Any], style: dict[str, Any]) -> str:
    """``data`` written the way one of the hosts' files might be."""
    if style["compact"]:
        return json.dumps(data, ensure_ascii=False)
    unit, newline = style["unit"], style["newline"]
    lines = ["// settings, written by hand"] if style["comments"] else []
    lines.append("{")
    items = list(data.items())
    for index, (key, value) in enumerate(items):
        value_text = json.dumps(value, indent=unit, ensure_ascii=False).replace("\n", "\n" + unit)
        comma = "," if index < len(items) - 1 or style["trailing_comma"] else ""
        comment = f" // about {index}" if style["comments"] and index % 2 == 0 else ""
        lines.append(f"{unit}{json.dumps(key, ensure_ascii=False)}: {value_text}{comma}{comment}")
    if style["comments"]:
        lines.append(f"{unit}// the end")
    lines.append("}")
    return ("\n".join(lines) + "\n").replace("\n", newline)


_styles = st.fixed_dictionaries(
    {
        "compact": st.booleans(),
        "unit": st.sampled_from(["  ", "    ", "\t"]),
        "newline": st.sampled_from(["\n", "\r\n"]),
        "trailing_comma": st.booleans(),
        "comments": st.booleans(),
    }
)


def _parse(text: str) -> Any:
    return parse_text(text, "json", path=Path("settings.json"))


@given(data=_objects, style=_styles, value=_values)
def test_adding_then_removing_a_member_gives_the_original_back(
    data: dict[str, Any], style: dict[str, Any], value: Any
) -> None:
    original = _render(data, style)
    key = "an added member"  # longer than any generated key
    root = jsonc.parse_object(original)
    layout = jsonc.Layout.of(original, root)
    added = jsonc.append_member(
        original, root, key, layout.render(value, jsonc.member_indent(original, root, layout)), layout
    )
    assert _parse(added) == {**data, key: value}
    if style["newline"] == "\r\n":
        assert "\n" not in added.replace("\r\n", ""), "a line added with another line ending"
    root = jsonc.parse_object(added)
    member = root.member(key)
    assert member is not None
    assert jsonc.remove_member(added, root, member) == original


@given(data=_objects.filter(bool), style=_styles, pick=st.integers(0, 10))
def test_removing_any_member_keeps_every_other(
    data: dict[str, Any], style: dict[str, Any], pick: int
) -> None:
    original = _render(data, style)
    root = jsonc.parse_object(original)
    member = root.members[pick % len(root.members)]
    kept = {key: value for key, value in data.items() if key != member.key}
    assert _parse(jsonc.remove_member(original, root, member)) == kept


@given(data=_objects.filter(bool), style=_styles, new_key=st.text(min_size=1, max_size=6))
def test_renaming_a_key_twice_gives_the_original_back(
    data: dict[str, Any], style: dict[str, Any], new_key: str
) -> None:
    original = _render(data, style)
    root = jsonc.parse_object(original)
    first = root.members[0]
    if new_key in data:
        return
    renamed = jsonc.rename_member(original, first, new_key)
    assert _parse(renamed) == {new_key if key == first.key else key: value for key, value in data.items()}
    back = jsonc.rename_member(renamed, jsonc.parse_object(renamed).members[0], first.key)
    assert _parse(back) == data
    if json.dumps(first.key, ensure_ascii=False) == original[first.key_start : first.key_end]:
        assert back == original


def test_comments_and_layout_around_an_added_member_stay() -> None:
    original = (
        "// Zed settings\n"
        "{\n"
        '  "theme": "One Dark", // my theme\n'
        "  /* servers */\n"
        '  "context_servers": {\n'
        '    "gh": {"command": "gh-mcp"} // keep me\n'
        "  }\n"
        "}\n"
    )
    root = jsonc.parse_object(original)
    servers = root.member("context_servers")
    assert servers is not None
    inner = jsonc.parse_object(original, servers.value_start)
    layout = jsonc.Layout.of(original, root)
    indent = jsonc.member_indent(original, inner, layout)
    added = jsonc.append_member(original, inner, "mcpfleet", layout.render({"command": "m"}, indent), layout)
    assert added == (
        "// Zed settings\n"
        "{\n"
        '  "theme": "One Dark", // my theme\n'
        "  /* servers */\n"
        '  "context_servers": {\n'
        '    "gh": {"command": "gh-mcp"}, // keep me\n'
        '    "mcpfleet": {\n'
        '      "command": "m"\n'
        "    }\n"
        "  }\n"
        "}\n"
    )


def test_an_empty_object_gets_its_first_member_on_its_own_line() -> None:
    original = '{\n  "servers": {}\n}\n'
    root = jsonc.parse_object(original)
    servers = root.member("servers")
    assert servers is not None
    inner = jsonc.parse_object(original, servers.value_start)
    layout = jsonc.Layout.of(original, root)
    indent = jsonc.member_indent(original, inner, layout)
    added = jsonc.append_member(original, inner, "a", layout.render(1, indent), layout)
    assert added == '{\n  "servers": {\n    "a": 1\n  }\n}\n'


@pytest.mark.parametrize("text", ["[1, 2]", '{"a": 1} {"b": 2}', '{"a" 1}', '{"a": 1', "", '{"a": [1, }'])
def test_what_is_not_one_object_is_refused(text: str) -> None:
    with pytest.raises(jsonc.JsoncSyntaxError):
        jsonc.parse_object(text)
