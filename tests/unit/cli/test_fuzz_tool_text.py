"""Property tests: tool names and descriptions with any Unicode never break naming nor the
terminal output.

Servers choose their tool names, descriptions, errors and stderr freely; these tests feed
every kind of character (controls, bidi overrides, lone surrogates, markup brackets) to
the naming and to each renderer, drawn into ``Console(file=io.StringIO(), width=…)``.
"""

from __future__ import annotations

import io
import json
import random
import re
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from rich.console import Console, RenderableType

from mcpfleet.cli import output
from mcpfleet.cli.progress import progress_table
from mcpfleet.cli.render import (
    error_text,
    print_daemon_status,
    status_table,
    tools_table,
)
from mcpfleet.config.model import SourceInfo
from mcpfleet.contract.text import json_for_terminal, safe_text
from mcpfleet.fleet.tools import assign_tool_names, mcp_tool_name
from mcpfleet.reports.rows import ErrorRow, ServerRow, ToolRow

PROVIDER_SAFE_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
TERMINAL_CONTROL = re.compile(
    "[\\x00-\\x08\\x0b-\\x1f\\x7f-\\x9f\\u061c\\u200e\\u200f\\u2028-\\u202e\\u2066-\\u2069\\ud800-\\udfff]"
)
"""What must never reach a terminal raw: C0 but tab and newline, DEL, C1, bidi controls,
line and paragraph separators, lone surrogates (the rule of ``mcpfleet.contract.text``)."""

# Every code point, lone surrogates included (JSON can carry them even where UTF-8 cannot).
any_character = st.characters(min_codepoint=0, max_codepoint=0x10FFFF, exclude_categories=())
hostile_character = st.sampled_from(
    [
        "\x1b",
        "\x07",
        "\x9b",
        "\r",
        "\n",
        "\t",
        "\x00",
        "\u202e",
        "\u2066",
        "\u2028",
        "\ud800",
        "[",
        "]",
        "/",
        ":",
    ]
)
server_text = st.text(st.one_of(any_character, hostile_character), max_size=80)
markup_like = st.builds(
    "".join,
    st.lists(
        st.sampled_from(["[/bogus]", "[link=http://x]", "y", "[/link]", "[bold]", ":smile:", "\x1b]0;t\x07"])
    ),
)
text_field = st.one_of(server_text, markup_like)
# Names from a few characters that sanitise alike collide often; long ones need the hash suffix.
name_alphabet = st.sampled_from(["a", "B", "_", "-", " ", ".", "é", "日", "\ud800", "\udfff", "\x1b"])
tool_name_part = st.one_of(
    text_field, st.text(name_alphabet, max_size=6), st.text(name_alphabet, min_size=50, max_size=90)
)


@settings(max_examples=150)
@given(st.lists(st.tuples(tool_name_part, tool_name_part), max_size=12), st.randoms(use_true_random=False))
def test_tool_names_are_valid_short_stable_and_distinct(
    pairs: list[tuple[str, str]], shuffle: random.Random
) -> None:
    names = assign_tool_names(pairs)
    distinct_pairs = set(pairs)
    assert set(names) == distinct_pairs
    assert len(set(names.values())) == len(distinct_pairs)
    for (server, tool), name in names.items():
        assert PROVIDER_SAFE_NAME.match(name), name
        assert mcp_tool_name(server, tool) == mcp_tool_name(server, tool)
    reordered = list(pairs)
    shuffle.shuffle(reordered)
    assert assign_tool_names(reordered) == names


@given(text_field, st.booleans())
def test_safe_text_leaves_no_terminal_control(text: str, multiline: bool) -> None:
    shown = safe_text(text, multiline=multiline)
    assert not TERMINAL_CONTROL.search(shown)
    if not multiline:
        assert "\n" not in shown
    printable = "".join(
        character for character in text if not TERMINAL_CONTROL.match(character) and character != "\n"
    )
    if printable == text:
        assert shown == text  # ordinary text is shown exactly as it is


@given(
    st.recursive(
        st.none() | st.booleans() | st.integers() | text_field,
        lambda inner: st.lists(inner, max_size=4) | st.dictionaries(text_field, inner, max_size=4),
        max_leaves=12,
    )
)
def test_json_output_keeps_exact_strings_and_no_terminal_control(payload: Any) -> None:
    written = json_for_terminal(payload)
    assert json.loads(written) == payload
    assert not TERMINAL_CONTROL.search(written.replace("\n", ""))


def render(renderable: RenderableType, width: int) -> str:
    buffer = io.StringIO()
    Console(file=buffer, width=width, highlight=False).print(renderable)
    return buffer.getvalue()


def assert_terminal_safe(rendered: str) -> None:
    assert not TERMINAL_CONTROL.search(rendered), repr(rendered)


tool_rows = st.lists(
    st.builds(
        ToolRow,
        name=text_field,
        server=text_field,
        mcp_name=text_field,
        description=st.just("") | text_field,
        deferred=st.booleans(),
        input_schema=st.just({}),
    ),
    max_size=5,
)
statuses = st.sampled_from(["connected", "connecting", "failed", "pending-approval", "disabled"])
status_rows = st.lists(
    st.builds(
        lambda status, **fields: ServerRow(status=status, state=status, **fields),
        status=statuses,
        name=text_field,
        tools=st.integers(0, 500),
        deferred=st.booleans(),
        at_gate=st.none() | st.sampled_from(["live", "deferred", "waited"]),
        error=st.none() | text_field,
        stderr_tail=st.lists(text_field, max_size=4).map(tuple),
        source=st.builds(
            SourceInfo, provider=st.just("p"), provider_name=text_field, path=text_field, level=text_field
        ),
        timings_ms=st.fixed_dictionaries({}, optional={"total": st.floats(0, 1e6)}),
    ),
    max_size=5,
)
error_rows = st.lists(st.builds(ErrorRow, path=text_field, error=text_field), max_size=4)
widths = st.integers(min_value=8, max_value=200)


@settings(max_examples=60)
@given(tool_rows, error_rows, widths)
def test_the_tools_report_never_raises_nor_emits_a_control(
    tools: list[ToolRow], errors: list[ErrorRow], width: int
) -> None:
    assert_terminal_safe(render(tools_table([tool.to_json() for tool in tools]), width))
    for error in errors:
        assert_terminal_safe(render(error_text(error.to_json()), width))


@settings(max_examples=60)
@given(status_rows, widths)
def test_the_status_report_never_raises_nor_emits_a_control(rows: list[ServerRow], width: int) -> None:
    assert_terminal_safe(render(status_table([row.to_json() for row in rows]), width))


daemon_status_documents = st.fixed_dictionaries(
    {
        "pid": st.integers(1, 2**22),
        "version": text_field,
        "since": text_field,
        "log": text_field,
        "draining": st.booleans(),
        "sessions": st.lists(
            st.fixed_dictionaries(
                {
                    "id": text_field,
                    "host": st.none() | text_field,
                    "project": st.none() | text_field,
                    "since": text_field,
                    "pid": st.integers(1, 2**22),
                }
            ),
            max_size=4,
        ),
        "servers": st.lists(
            st.fixed_dictionaries(
                {
                    "name": text_field,
                    "state": statuses | text_field,
                    "share": st.sampled_from(["user", "project", "session"]) | text_field,
                    "sessions": st.integers(0, 50),
                    "pid": st.none() | st.integers(1, 2**22),
                    "rss_bytes": st.none() | st.integers(0, 2**40),
                    "idle_s": st.floats(0, 1e6),
                    "project": st.none() | text_field,
                }
            ),
            max_size=4,
        ),
        "totals": st.fixed_dictionaries(
            {"processes": st.integers(1, 50), "rss_bytes": st.integers(0, 2**40)}
        ),
    }
)


@settings(max_examples=60)
@given(daemon_status_documents, widths)
def test_the_daemon_status_report_never_raises_nor_emits_a_control(
    document: dict[str, Any], width: int
) -> None:
    buffer = io.StringIO()
    print_daemon_status(document, out=Console(file=buffer, width=width, highlight=False))
    assert_terminal_safe(buffer.getvalue())


@settings(max_examples=60)
@given(
    st.dictionaries(
        text_field,
        st.tuples(
            st.sampled_from(["connecting", "connected", "failed"]), st.floats(0, 100), st.none() | text_field
        ),
        max_size=5,
    ),
    widths,
)
def test_the_live_progress_never_raises_nor_emits_a_control(
    states: dict[str, tuple[str, float, str | None]], width: int
) -> None:
    assert_terminal_safe(render(progress_table(states, 0.0), width))


@given(text=text_field)
def test_plain_output_lines_never_emit_a_control(capsys: pytest.CaptureFixture[str], text: str) -> None:
    output.error_line(text)
    output.info_line(text)
    output.output_line(text)
    output.output_line(text, multiline=True)
    captured = capsys.readouterr()
    assert_terminal_safe(captured.out + captured.err)
