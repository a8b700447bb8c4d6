"""``wire.encode_line``: every document becomes one line of valid UTF-8 JSON that decodes to it."""

from __future__ import annotations

import json
import os

import pytest

from mcpfleet.contract import wire


@pytest.mark.parametrize(
    "document",
    [
        {"text": "café ✓"},
        # A folder name that is not UTF-8, as os.getcwd() gives it (surrogateescape).
        {"cwd": os.fsdecode(b"/tmp/caf\xe9")},
        # An id a peer sent as a lone "\ud800" escape.
        {"id": "\ud800", "text": "café"},
    ],
)
def test_a_line_is_utf8_json_of_the_same_document(document: dict[str, str]) -> None:
    line = wire.encode_line(document)
    assert line.endswith(b"\n") and line.count(b"\n") == 1
    assert json.loads(line.decode("utf-8")) == document
    assert wire.decode_line(line) == document
