"""Editing a JSON or JSONC document as text: what is not edited stays byte for byte.

A host's settings file is the user's: Zed's and VS Code's carry comments, every file has its
own indentation, key order and line endings, and ``~/.claude.json`` holds far more than
servers. Loading it and dumping it again would lose the comments and reformat the rest, so
edits here are splices of the original text, placed by a parser that records where each
object member starts and ends (comments and whitespace skipped, never dropped).

Each edit follows the layout it finds: a member is added on its own line, with the
indentation of its siblings, when they sit one per line, and inline otherwise. Adding a
member at the end of an object and removing it again gives back the original text exactly;
so does renaming a member's key twice. Callers check every result by parsing it (see
``hosts/wiring.py``): an edit that would not produce exactly the intended data is never
written.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from mcpfleet.errors import MCPFleetError

_GAP = re.compile(r"(?:\s+|//[^\n]*|/\*.*?\*/)*", re.DOTALL)
"""Blanks and comments between two tokens."""
_STRING = re.compile(r'"(?:[^"\\\n]|\\.)*"')
_LITERAL = re.compile(r'[^\s{}\[\],:"/]+')
_NESTING = re.compile(r'"(?:[^"\\\n]|\\.)*"|//[^\n]*|/\*.*?\*/|[\[\]{}]', re.DOTALL)
"""What counts inside a skipped value: strings and comments (to step over) and brackets."""
_LINE_TAIL = re.compile(r"[ \t]*(?://[^\n\r]*|/\*[^\n]*?\*/)?[ \t]*")
"""What may follow a member on its own line: blanks and one comment that ends on that line."""
DEFAULT_INDENT = "  "


class JsoncSyntaxError(MCPFleetError, ValueError):
    """The text is not the JSON object the editor expects (the message says where)."""


@dataclass(frozen=True)
class Member:
    """One ``"key": value`` of an object, by offsets into the text."""

    key: str
    key_start: int
    key_end: int
    value_start: int
    value_end: int
    comma: int | None
    """Offset of the comma after the value, when there is one (a separator or a trailing comma)."""


@dataclass(frozen=True)
class JsonObject:
    start: int
    """Offset of ``{``."""
    end: int
    """Offset just past ``}``."""
    members: tuple[Member, ...]

    def member(self, key: str) -> Member | None:
        return next((member for member in self.members if member.key == key), None)


def _gap_end(text: str, position: int) -> int:
    match = _GAP.match(text, position)
    return match.end() if match else position


def _expect(text: str, position: int, char: str, what: str) -> int:
    """Offset past ``char`` at ``position`` (blanks and comments skipped first)."""
    position = _gap_end(text, position)
    if not text.startswith(char, position):
        raise JsoncSyntaxError(f"expected {what} at offset {position}")
    return position + 1


_DECODER = json.JSONDecoder()


def _value_end(text: str, position: int) -> int:
    """Offset just past the value that starts at ``position``: a string, a literal, or an
    object or array. Plain JSON is measured by the C decoder (``~/.claude.json`` holds
    megabytes of history beside its servers); a value with comments inside, by counting
    brackets (its contents are not parsed: the caller's parse of the whole text checks them)."""
    try:
        return int(_DECODER.raw_decode(text, position)[1])
    except ValueError:
        pass
    if text.startswith('"', position):
        string = _STRING.match(text, position)
        if string is None:
            raise JsoncSyntaxError(f"unterminated string at offset {position}")
        return string.end()
    if position < len(text) and text[position] in "[{":
        depth = 0
        for match in _NESTING.finditer(text, position):
            token = match.group()
            if token in "[{":
                depth += 1
            elif token in "]}":
                depth -= 1
                if depth == 0:
                    return match.end()
        raise JsoncSyntaxError(f"unclosed bracket at offset {position}")
    literal = _LITERAL.match(text, position)
    if literal is None:
        raise JsoncSyntaxError(f"expected a value at offset {position}")
    return literal.end()


def parse_object(text: str, start: int | None = None) -> JsonObject:
    """The object at offset ``start`` (by default the top-level one, which must be all the
    text holds) with its members' offsets; the members' values are not parsed further
    (``parse_object(text, member.value_start)`` parses one)."""
    opening = _gap_end(text, 0) if start is None else start
    if not text.startswith("{", opening):
        raise JsoncSyntaxError(f"expected an object at offset {opening}")
    members: list[Member] = []
    position = _gap_end(text, opening + 1)
    while not text.startswith("}", position):
        key = _STRING.match(text, position)
        if key is None:
            raise JsoncSyntaxError(f"expected a key at offset {position}")
        value_start = _gap_end(text, _expect(text, key.end(), ":", "':' after a key"))
        value_end = _value_end(text, value_start)
        position = _gap_end(text, value_end)
        comma = position if text.startswith(",", position) else None
        name = json.loads(key.group())
        members.append(Member(name, key.start(), key.end(), value_start, value_end, comma))
        if comma is None:
            break
        position = _gap_end(text, comma + 1)
    closing = _expect(text, position, "}", "'}'")
    if start is None and _gap_end(text, closing) != len(text):
        raise JsoncSyntaxError(f"text after the top-level object at offset {_gap_end(text, closing)}")
    return JsonObject(opening, closing, tuple(members))


# --- layout ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Layout:
    """How the document is written: its line ending, one level of indentation, and whether
    it is all on one line (then what is added is written on that line too)."""

    newline: str
    indent_unit: str
    compact: bool

    @classmethod
    def of(cls, text: str, root: JsonObject) -> Layout:
        newline = "\r\n" if "\r\n" in text else "\n"
        unit = DEFAULT_INDENT
        if root.members and _starts_line(text, root.members[0].key_start):
            unit = _indent_before(text, root.members[0].key_start) or DEFAULT_INDENT
        return cls(newline, unit, "\n" not in text.strip())

    def render(self, value: Any, indent: str) -> str:
        """``value`` as JSON written at a member indented by ``indent``."""
        if self.compact:
            return json.dumps(value, ensure_ascii=False)
        rendered = json.dumps(value, indent=self.indent_unit, ensure_ascii=False)
        return rendered.replace("\n", self.newline + indent)


def _line_start(text: str, position: int) -> int:
    return text.rfind("\n", 0, position) + 1


def _starts_line(text: str, position: int) -> bool:
    return text[_line_start(text, position) : position].strip(" \t") == ""


def _indent_before(text: str, position: int) -> str:
    return text[_line_start(text, position) : position]


def _line_tail_end(text: str, position: int) -> int:
    """Where the blanks and the one-line comment after ``position`` end."""
    match = _LINE_TAIL.match(text, position)
    return match.end() if match else position


def _at_line_end(text: str, position: int) -> bool:
    return position >= len(text) or text[position] in "\r\n"


def _newline_before(text: str, position: int) -> int:
    """Offset of the line ending that precedes the line holding ``position``."""
    start = _line_start(text, position) - 1
    return start - 1 if start > 0 and text[start - 1] == "\r" else start


def _member_on_own_lines(text: str, member: Member) -> bool:
    after = member.comma + 1 if member.comma is not None else member.value_end
    end = _line_tail_end(text, after)
    return (
        _starts_line(text, member.key_start)
        and _line_start(text, member.key_start) > 0
        and (_at_line_end(text, end) or text[end] == "}")
    )


# --- edits ----------------------------------------------------------------------------------


def member_text(text: str, member: Member) -> str:
    """The member as written, from its key to the end of its value."""
    return text[member.key_start : member.value_end]


def member_indent(text: str, container: JsonObject, layout: Layout) -> str:
    """The indentation of a member of ``container``: its members' own, or one level deeper
    than the line that opens it."""
    for member in container.members:
        if _starts_line(text, member.key_start):
            return _indent_before(text, member.key_start)
    opening_line = text[_line_start(text, container.start) : container.start]
    return opening_line[: len(opening_line) - len(opening_line.lstrip(" \t"))] + layout.indent_unit


def append_member(text: str, container: JsonObject, key: str, value_text: str, layout: Layout) -> str:
    """``text`` with ``"key": value_text`` added as the last member of ``container``.

    ``value_text`` is already rendered for this position (``Layout.render`` with
    ``member_indent``). ``remove_member`` of the result gives ``text`` back exactly.
    """
    body = f"{json.dumps(key, ensure_ascii=False)}: {value_text}"
    if not container.members:
        return _fill_empty(text, container, body, layout)
    last = container.members[-1]
    if _member_on_own_lines(text, last):
        indent = _indent_before(text, last.key_start)
        if last.comma is None:
            end = _line_tail_end(text, last.value_end)
            return (
                text[: last.value_end]
                + ","
                + text[last.value_end : end]
                + layout.newline
                + indent
                + body
                + text[end:]
            )
        end = _line_tail_end(text, last.comma + 1)
        return text[:end] + layout.newline + indent + body + "," + text[end:]
    if last.comma is None:
        return text[: last.value_end] + ", " + body + text[last.value_end :]
    return text[: last.comma + 1] + " " + body + "," + text[last.comma + 1 :]


def _fill_empty(text: str, container: JsonObject, body: str, layout: Layout) -> str:
    inside = text[container.start + 1 : container.end - 1]
    multiline = "\n" in text[: container.start] or "\n" in text[container.end :]
    if inside.strip() == "" and multiline:
        indent = member_indent(text, container, layout)
        closing_indent = indent[: len(indent) - len(layout.indent_unit)]
        return (
            text[: container.start + 1]
            + layout.newline
            + indent
            + body
            + layout.newline
            + closing_indent
            + text[container.end - 1 :]
        )
    return text[: container.start + 1] + body + text[container.start + 1 :]


def remove_member(text: str, container: JsonObject, member: Member) -> str:
    """``text`` without ``member`` (with its separator, and its line when it has one)."""
    index = container.members.index(member)
    previous = container.members[index - 1] if index > 0 else None
    following = container.members[index + 1] if index + 1 < len(container.members) else None
    if _member_on_own_lines(text, member):
        after = member.comma + 1 if member.comma is not None else member.value_end
        start, end = _newline_before(text, member.key_start), _line_tail_end(text, after)
        result = text[:start] + text[end:]
        if following is None and member.comma is None and previous is not None and previous.comma is not None:
            # The comma that separated the two goes with the last member, as it came with it.
            result = result[: previous.comma] + result[previous.comma + 1 :]
        return result
    if previous is not None:
        return text[: previous.value_end] + text[member.value_end :]
    if following is not None:
        return text[: member.key_start] + text[following.key_start :]
    end = member.comma + 1 if member.comma is not None else member.value_end
    return text[: member.key_start] + text[end:]


def rename_member(text: str, member: Member, new_key: str) -> str:
    """``text`` with ``member``'s key replaced (its value and place kept)."""
    return text[: member.key_start] + json.dumps(new_key, ensure_ascii=False) + text[member.key_end :]


def replace_value(text: str, member: Member, value_text: str) -> str:
    """``text`` with ``member``'s value replaced by ``value_text`` (already rendered)."""
    return text[: member.value_start] + value_text + text[member.value_end :]


def object_text(member_texts: list[str], indent: str, layout: Layout) -> str:
    """An object holding ``member_texts`` (each as written elsewhere at this same depth),
    for a member indented by ``indent``."""
    if not member_texts:
        return "{}"
    if layout.compact:
        return "{" + ", ".join(member_texts) + "}"
    inner = indent + layout.indent_unit
    separator = "," + layout.newline + inner
    return "{" + layout.newline + inner + separator.join(member_texts) + layout.newline + indent + "}"
