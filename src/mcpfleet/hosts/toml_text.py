"""Editing a TOML document (Codex's ``config.toml``) as text: tables are added, removed or
renamed by splicing their lines, and every other line stays byte for byte (comments too).

Only the ``[a.b]`` table form is edited; a server written as an inline table or with dotted
keys is left alone, and the caller's check (parse the result, compare with the intended
data) refuses any edit that did not do what it meant to.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

_BARE_KEY = re.compile(r"[A-Za-z0-9_-]+")


@dataclass(frozen=True)
class Header:
    """One ``[table]`` or ``[[array]]`` header line."""

    line_start: int
    line_end: int
    """Offset just past the line's newline (or the end of the text)."""
    path: tuple[str, ...] | None
    """The table's key path; ``None`` for an ``[[array of tables]]`` header."""
    first_key_start: int
    first_key_end: int


def _lines(text: str) -> list[tuple[int, int]]:
    """(start, end past the newline) of each line."""
    spans: list[tuple[int, int]] = []
    start = 0
    while start < len(text):
        newline = text.find("\n", start)
        end = len(text) if newline == -1 else newline + 1
        spans.append((start, end))
        start = end
    return spans


def _read_key(text: str, position: int, end: int) -> tuple[str, int] | None:
    """One key segment at ``position`` (bare, "basic" or 'literal'): (key, offset past it)."""
    if position >= end:
        return None
    if text[position] == '"':
        match = re.compile(r'"(?:[^"\\\n]|\\.)*"').match(text, position, end)
        if match is None:
            return None
        try:
            return json.loads(match.group()), match.end()
        except ValueError:
            return None
    if text[position] == "'":
        close = text.find("'", position + 1, end)
        return (text[position + 1 : close], close + 1) if close != -1 else None
    match = _BARE_KEY.match(text, position, end)
    return (match.group(), match.end()) if match else None


def _header(text: str, start: int, end: int) -> Header | None:
    line = text[start:end]
    stripped = line.lstrip(" \t")
    if not stripped.startswith("["):
        return None
    position = start + len(line) - len(stripped)
    if stripped.startswith("[["):
        return Header(start, end, None, position, position)
    position += 1
    path: list[str] = []
    first_span = (position, position)
    while True:
        while position < end and text[position] in " \t":
            position += 1
        segment = _read_key(text, position, end)
        if segment is None:
            return None
        if not path:
            first_span = (position, segment[1])
        path.append(segment[0])
        position = segment[1]
        while position < end and text[position] in " \t":
            position += 1
        if position < end and text[position] == ".":
            position += 1
            continue
        break
    if position >= end or text[position] != "]":
        return None
    tail = text[position + 1 : end].strip()
    if tail and not tail.startswith("#"):
        return None  # e.g. a line of a multi-line array: ["a"], …
    return Header(start, end, tuple(path), *first_span)


def headers(text: str) -> list[Header]:
    found: list[Header] = []
    for start, end in _lines(text):
        header = _header(text, start, end)
        if header is not None:
            found.append(header)
    return found


def _is_content(line: str) -> bool:
    stripped = line.strip()
    return bool(stripped) and not stripped.startswith("#")


def _block_end(text: str, header: Header, following: Header | None) -> int:
    """Where the table opened by ``header`` ends: after its last line of content, so that
    blank and comment lines just above the next header stay with that header."""
    limit = following.line_start if following is not None else len(text)
    end = header.line_end
    for start, line_end in _lines(text[header.line_end : limit]):
        if _is_content(text[header.line_end + start : header.line_end + line_end]):
            end = header.line_end + line_end
    return end


def _table_spans(text: str, prefix: tuple[str, ...]) -> list[tuple[int, int]]:
    """(start, end) of every table whose path starts with ``prefix`` (sub-tables included),
    each with the one blank line above it (``append_table`` puts one there), in order."""
    found = headers(text)
    spans: list[tuple[int, int]] = []
    for index, header in enumerate(found):
        if header.path is not None and header.path[: len(prefix)] == prefix:
            following = found[index + 1] if index + 1 < len(found) else None
            start = header.line_start
            above = text.rfind("\n", 0, max(start - 1, 0)) + 1
            if start > 0 and text[above:start].strip() == "":
                start = above
            spans.append((start, _block_end(text, header, following)))
    return spans


def remove_tables(text: str, prefix: tuple[str, ...]) -> str:
    """``text`` without every table whose path starts with ``prefix`` (sub-tables included),
    each with the one blank line above it (``append_table`` puts one there)."""
    return cut_tables(text, prefix)[0]


@dataclass(frozen=True)
class Piece:
    """Text cut out of a document at ``offset`` (of the text before the cut), and a digest of
    what came before it, to tell later whether it can go back in the same place."""

    offset: int
    text: str
    before_sha256: str


def cut_tables(text: str, prefix: tuple[str, ...]) -> tuple[str, list[Piece]]:
    """``remove_tables``, and the pieces removed (``insert_pieces`` puts them back)."""
    spans = _table_spans(text, prefix)
    pieces = [Piece(start, text[start:end], _digest(text[:start])) for start, end in spans]
    for start, end in reversed(spans):
        text = text[:start] + text[end:]
    return text, pieces


def insert_pieces(text: str, pieces: Sequence[Piece]) -> str:
    """``text`` with ``pieces`` (one ``cut_tables``) back where they were cut, byte for byte,
    when everything before each of them is as it was; otherwise appended at the end."""
    restored = text
    for piece in pieces:
        if _digest(restored[: piece.offset]) != piece.before_sha256:
            break
        restored = restored[: piece.offset] + piece.text + restored[piece.offset :]
    else:
        return restored
    newline = "\r\n" if "\r\n" in text else "\n"
    for piece in pieces:
        if text and not text.endswith("\n"):
            text += newline
        text += (newline if text else "") + piece.text.lstrip("\r\n")
        if not text.endswith("\n"):
            text += newline
    return text


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def rename_tables(text: str, prefix: tuple[str, ...], new_first_key: str) -> str:
    """``text`` with the first key of every table under ``prefix`` replaced by ``new_first_key``."""
    for header in reversed(headers(text)):
        if header.path is not None and header.path[: len(prefix)] == prefix:
            text = text[: header.first_key_start] + _key(new_first_key) + text[header.first_key_end :]
    return text


def append_table(text: str, path: Sequence[str], values: Mapping[str, Any]) -> str:
    """``text`` with a ``[path]`` table of ``values`` (strings and lists of strings) at its end,
    after one blank line."""
    newline = "\r\n" if "\r\n" in text else "\n"
    lines = [f"[{'.'.join(_key(part) for part in path)}]"]
    lines += [f"{_key(key)} = {_value(value)}" for key, value in values.items()]
    block = newline.join(lines) + newline
    if not text:
        return block
    if not text.endswith("\n"):
        text += newline
    return text + newline + block


def _key(key: str) -> str:
    return key if _BARE_KEY.fullmatch(key) else json.dumps(key, ensure_ascii=False)


def _value(value: Any) -> str:
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, list) and all(isinstance(item, str) for item in value):
        return "[" + ", ".join(json.dumps(item, ensure_ascii=False) for item in value) + "]"
    raise TypeError(f"cannot write {value!r} as TOML here")
