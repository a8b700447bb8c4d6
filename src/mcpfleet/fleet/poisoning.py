"""Poisoning warnings: what in a tool's definition looks written to steer the model, not to
describe the tool.

A server's tool definitions reach the model word for word, so a server can hide instructions
in them ("tool poisoning"), change them after approval (a "rug pull") or name another
server's tools to take over their calls ("shadowing"). ``poisoning_warnings`` reads one
definition against a small, named rule set and says what it found and where; the pinning
review shows the result beside the diff. It is pure: no I/O, no network, nothing leaves the
machine. The rules, with what each matches and what it leaves alone, are documented in
docs/integrity.md ("Poisoning warnings").

Every field a host passes to the model is read: ``name``, ``title``, ``description``,
``annotations`` and every string in ``inputSchema`` and ``outputSchema`` (the descriptions of
the arguments included). A prompt's or a resource's definition reads the same way (a prompt's
``arguments`` too), with the server's other prompts or resources as its peers.

Text rules look at a normalised copy of each string (NFKC, invisible characters dropped,
curly apostrophes straightened, whitespace collapsed), so
``ig\\u200bnore previous instructions`` (a zero-width space inside the word) or full-width
letters do not slip past them; the invisible characters themselves have their own rule.

A warning's text may quote the definition: the quote is bounded and every character a
terminal would act on or not show is written as ``\\uNNNN``.
"""

from __future__ import annotations

import functools
import re
import statistics
import unicodedata
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from mcpfleet.fleet.tools import mcp_tool_name

__all__ = ["RULES", "PoisoningWarning", "poisoning_warnings"]

RULES: Final = (
    "model-instructions",
    "hidden-markup",
    "invisible-characters",
    "bidi-controls",
    "other-servers-tools",
    "secrets-paths",
    "long-description",
)
"""Every rule's name, in the order a definition's warnings are listed."""

QUOTE_LENGTH: Final = 80
"""The most characters of the definition one warning quotes."""
MAX_WARNINGS_PER_RULE: Final = 5
"""A hostile definition with thousands of arguments gets this many warnings per rule, and one
more saying how many fields were left out."""
LONG_FACTOR: Final = 4
LONG_MIN_EXCESS: Final = 500
LONG_MIN_PEERS: Final = 3
"""A description is "far longer than its peers" when it is more than ``LONG_FACTOR`` times the
median length of the server's other descriptions *and* more than ``LONG_MIN_EXCESS``
characters above it, with at least ``LONG_MIN_PEERS`` described peers to take a median of
(fewer say nothing about what is usual for this server)."""
MAX_DEPTH: Final = 64
"""How deep into a schema the reader goes; the client bounds nesting long before this."""


@dataclass(frozen=True)
class PoisoningWarning:
    """One thing in a tool definition that looks written for the model rather than about the
    tool: the rule that matched (one of ``RULES``) and what it found where, terminal-safe."""

    rule: str
    text: str

    def to_json(self) -> dict[str, str]:
        return {"rule": self.rule, "text": self.text}


# --- showing hostile text -----------------------------------------------------------------------

# Printable to ``str.isprintable`` but invisible on a terminal: combining grapheme joiner, the
# Hangul fillers and the variation selectors (the supplementary ones carry hidden bytes).
_SHOWN_ESCAPED = frozenset(
    [0x034F, 0x115F, 0x1160, 0x3164, 0xFFA0, *range(0xFE00, 0xFE10), *range(0xE0100, 0xE01F0)]
)


def _escaped(text: str) -> str:
    """``text`` with every character a terminal acts on or does not show written as ``\\uNNNN``
    (``\\UNNNNNNNN`` past the BMP); ordinary spaces stay."""
    shown: list[str] = []
    for character in text:
        code = ord(character)
        if character == " " or (character.isprintable() and code not in _SHOWN_ESCAPED):
            shown.append(character)
        elif code <= 0xFFFF:
            shown.append(f"\\u{code:04x}")
        else:
            shown.append(f"\\U{code:08x}")
    return "".join(shown)


def _quote(text: str) -> str:
    """A bounded, terminal-safe quotation of ``text``."""
    if len(text) > QUOTE_LENGTH:
        text = text[: QUOTE_LENGTH - 1] + "…"
    return f"“{_escaped(text)}”"


def _excerpt(text: str, match: re.Match[str]) -> str:
    """The matched words with a little context on each side, bounded by ``QUOTE_LENGTH``."""
    start, end = match.span()
    room = max(0, QUOTE_LENGTH - 2 - (end - start)) // 2
    left, right = max(0, start - room), min(len(text), end + room)
    return _quote(("…" if left > 0 else "") + text[left:right] + ("…" if right < len(text) else ""))


def _label(text: str) -> str:
    """A key of the definition as a part of a field's place, bounded and terminal-safe."""
    return _escaped(text if len(text) <= 40 else text[:39] + "…")


# --- the fields of a definition -----------------------------------------------------------------


@dataclass(frozen=True)
class _Field:
    where: str
    """Where the text sits, as a reader would look it up: ``description``,
    ``inputSchema.properties.path.description``, ``annotations.title``, ``name``."""
    text: str
    is_key: bool = False
    """A property name rather than a value: only the character rules read it."""


def _place(where: str) -> str:
    """A field's place, bounded: a deep schema keeps its start and its end."""
    return where if len(where) <= 160 else where[:50] + "…" + where[-109:]


def _schema_fields(value: Any, where: str, depth: int = 0) -> Iterator[_Field]:
    if depth > MAX_DEPTH:
        return
    if isinstance(value, str):
        yield _Field(_place(where), value)
    elif isinstance(value, Mapping):
        for key, item in value.items():
            key_text = str(key)
            yield _Field(f"{_place(where)} (the key {_quote(key_text)})", key_text, is_key=True)
            yield from _schema_fields(item, f"{where}.{_label(key_text)}", depth + 1)
    elif isinstance(value, list | tuple):
        for index, item in enumerate(value):
            yield from _schema_fields(item, f"{where}[{index}]", depth + 1)


def _fields(definition: Mapping[str, Any]) -> Iterator[_Field]:
    for key in ("name", "title", "description"):
        value = definition.get(key)
        if isinstance(value, str):
            yield _Field(key, value)
    # The wire spelling first; ``ToolDefinition.to_dict`` spells the schemas in snake case.
    for wire, snake in (("inputSchema", "input_schema"), ("outputSchema", "output_schema")):
        schema = definition.get(wire, definition.get(snake))
        if schema is not None:
            yield from _schema_fields(schema, wire)
    annotations = definition.get("annotations")
    if isinstance(annotations, Mapping):
        for key, value in annotations.items():
            yield from _schema_fields(value, f"annotations.{_label(str(key))}")
    # A prompt's definition reads the same, with its arguments' names and descriptions.
    arguments = definition.get("arguments")
    if isinstance(arguments, list):
        yield from _schema_fields(arguments, "arguments")


# --- characters ---------------------------------------------------------------------------------

_TAG_BLOCK = range(0xE0000, 0xE0080)
_INVISIBLE = frozenset(
    [
        0x00AD,  # soft hyphen
        0x034F,  # combining grapheme joiner
        0x115F,
        0x1160,
        0x3164,
        0xFFA0,  # Hangul fillers
        0x17B4,
        0x17B5,  # Khmer inherent vowels
        0x180E,  # Mongolian vowel separator
        0x200B,  # zero-width space (the non-joiner and joiner are _JOINERS)
        *range(0x2060, 0x2065),  # word joiner, invisible operators
        *range(0x206A, 0x2070),  # deprecated format characters
        0xFEFF,  # zero-width no-break space (BOM)
        *range(0xFFF9, 0xFFFC),  # interlinear annotation
        0x1D173,
        0x1D174,
        0x1D175,
        0x1D176,
        0x1D177,
        0x1D178,
        0x1D179,
        0x1D17A,  # musical format characters
        *range(0xE0100, 0xE01F0),  # supplementary variation selectors (hidden bytes)
        *_TAG_BLOCK,
    ]
)
_JOINERS = frozenset([0x200C, 0x200D])
# Embeddings, overrides and isolates reorder what the reader sees (Trojan Source).
_BIDI_REORDERING = frozenset([*range(0x202A, 0x202F), *range(0x2066, 0x206A)])
# The marks only nudge direction: ordinary in right-to-left text, pointless elsewhere.
_BIDI_MARKS = frozenset([0x200E, 0x200F, 0x061C])


def _is_pictograph(character: str) -> bool:
    return ord(character) >= 0x1F000 or unicodedata.category(character) == "So" or ord(character) == 0xFE0F


def _is_script_letter(character: str) -> bool:
    return not character.isascii() and unicodedata.category(character)[0] in "LM"


def _joiner_is_ordinary(text: str, index: int) -> bool:
    """A zero-width joiner or non-joiner between two emoji (a family, a flag) or two letters of a
    script that needs it (Persian, the Indic scripts) does its ordinary job; in ASCII it only
    hides a word from a filter."""
    if index == 0 or index == len(text) - 1:
        return False
    before, after = text[index - 1], text[index + 1]
    return (_is_pictograph(before) and _is_pictograph(after)) or (
        _is_script_letter(before) and _is_script_letter(after)
    )


def _character_name(code: int) -> str:
    return unicodedata.name(chr(code), "") or ("TAG CHARACTER" if code in _TAG_BLOCK else "FORMAT CHARACTER")


def _count(number: int, noun: str) -> str:
    return f"{number} {noun}{'s' if number != 1 else ''}"


def _counted(codes: Sequence[int]) -> str:
    counts: dict[int, int] = {}
    for code in codes:
        counts[code] = counts.get(code, 0) + 1
    shown = [
        f"U+{code:04X} {_character_name(code)}" + (f" ×{count}" if count > 1 else "")
        for code, count in list(counts.items())[:4]
    ]
    if len(counts) > 4:
        shown.append(f"{len(counts) - 4} other kinds")
    return ", ".join(shown)


def _invisible_warning(field: _Field) -> str | None:
    text = field.text
    found = [
        ord(character)
        for index, character in enumerate(text)
        if ord(character) in _INVISIBLE
        or (ord(character) in _JOINERS and not _joiner_is_ordinary(text, index))
    ]
    if not found:
        return None
    message = f"{_count(len(found), 'invisible character')} in {field.where} ({_counted(found)})"
    # Tag characters mirror ASCII (U+E0041 is an invisible "A"): show what they spell.
    hidden = "".join(chr(code - 0xE0000) for code in found if 0xE0020 <= code <= 0xE007E)
    if hidden:
        message += f", spelling the hidden text {_quote(hidden)}"
    return message


def _bidi_warning(field: _Field) -> str | None:
    text = field.text
    right_to_left = any(
        unicodedata.bidirectional(character) in ("R", "AL")
        for character in text
        if ord(character) not in _BIDI_MARKS  # the right-to-left mark is itself of class R
    )
    found = [
        ord(character)
        for character in text
        if ord(character) in _BIDI_REORDERING or (ord(character) in _BIDI_MARKS and not right_to_left)
    ]
    if not found:
        return None
    return (
        f"{_count(len(found), 'bidirectional control')} in {field.where} "
        f"({_counted(found)}): the text shown can differ from the text the model reads"
    )


# --- words --------------------------------------------------------------------------------------

# Invisible and bidi characters dropped, curly quotes straightened, in one ``str.translate``.
_FOR_WORDS: Final[dict[int, str | None]] = {
    **dict.fromkeys(_INVISIBLE | _JOINERS | _BIDI_REORDERING | _BIDI_MARKS),
    **{ord(curly): "'" for curly in "\u2018\u2019\u02bc"},
    **{ord(curly): '"' for curly in "\u201c\u201d"},
}
_SPACES = re.compile(r"[^\S\n]+")
_LINE_BREAKS = re.compile(r" ?\n\s*")


@functools.lru_cache(maxsize=256)
def _normalised(text: str) -> str:
    """``text`` as the text rules read it: compatibility forms folded (full-width letters,
    ligatures), invisible and bidi characters dropped, quotes straightened, whitespace runs as
    one space (line breaks kept as one, since a role marker starts a line). Cached: four rules
    read each field."""
    visible = unicodedata.normalize("NFKC", text).translate(_FOR_WORDS)
    return _LINE_BREAKS.sub("\n", _SPACES.sub(" ", visible)).strip()


def _words(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern, re.IGNORECASE)


_NOT = r"(?:do\s+not|don't|never|must\s+not|should\s+not)"
_MODEL = r"(?:assistant|ai(?:\s+assistant)?|llm|language\s+model|agent|chatbot)"

# Each pattern of "model-instructions", with what the warning calls it.
_MODEL_INSTRUCTIONS: Final = (
    (
        _words(
            r"\b(?:ignore|disregard|forget|override|bypass)\s+(?:all\s+|any\s+)?(?:of\s+)?"
            r"(?:the\s+|your\s+|these\s+|those\s+)?"
            r"(?:previous|prior|preceding|above|earlier|former|existing|other|original|system|safety)\s+"
            r"(?:instructions?|prompts?|rules|directions|guidelines|messages|context|constraints|polic(?:y|ies))"
        ),
        "an instruction to the model to set aside its other instructions",
    ),
    (
        _words(
            r"\b(?:ignore|disregard|forget)\s+(?:all\s+|any\s+)?(?:of\s+)?(?:the\s+|your\s+)?"
            r"(?:instructions?|rules|prompts?)\s+(?:above|before|so\s+far|you\s+(?:were|have\s+been)\s+given)\b|"
            r"\b(?:ignore|disregard|forget)\s+(?:everything|all|anything)\s+"
            r"(?:above|before|else|you\s+(?:were|have\s+been)\s+told)\b"
        ),
        "an instruction to the model to set aside its other instructions",
    ),
    (
        _words(
            rf"\b(?:{_NOT}\s+(?:tell|inform|notify|alert|let|show|ask|warn)|"
            r"without\s+(?:telling|informing|notifying|alerting|letting|showing|warning))\s+"
            r"(?:this\s+|it\s+|that\s+|anything\s+)?(?:to\s+)?(?:the\s+)?(?:user|human|operator)s?\b"
        ),
        "an instruction to keep something from the user",
    ),
    (
        _words(
            rf"\b{_NOT}\s+(?:mention|reveal|disclose|admit|acknowledge)\b|"
            r"\b(?:hide|conceal|keep)\s+(?:this|it|that)\s+(?:secret\s+)?from\s+(?:the\s+)?user\b|"
            r"\bthe\s+user\s+(?:must|should|need)\s+(?:not|never)\s+(?:know|see|notice|be\s+told)\b"
        ),
        "an instruction to keep something from the user",
    ),
    (
        _words(
            r"\b(?:secretly|covertly|quietly|silently|discreetly)\s+"
            r"(?:call|invoke|send|read|include|add|pass|forward|upload|copy|post|email|transmit|run|execute)\b"
        ),
        "an instruction to act behind the user's back",
    ),
    (
        _words(
            r"\byou\s+(?:must|should|need\s+to|have\s+to|are\s+required\s+to)\s+(?:always\s+)?first\b|"
            r"\byou\s+must\s+(?:also\s+|always\s+)?"
            r"(?:call|invoke|execute|run|read|send|upload|forward|include)\b|"
            r"\b(?:before|prior\s+to)\s+(?:using|calling|invoking|running)\s+(?:this|any|the)\s+"
            r"(?:other\s+)?tools?\s*,?\s+(?:you\s+(?:must|need\s+to|have\s+to|should)|always|first|"
            r"read|call|invoke|send|pass|fetch|upload|include)\b"
        ),
        "an order to the model to do something first",
    ),
    (
        # "the send_email tool must …", "other tools should …": rules for tools it is not.
        _words(r"\b(?:[\w-]*[_-][\w-]*|other|all\s+other)\s+tools?\s+(?:must|shall|should)\b"),
        "an instruction about how other tools must behave",
    ),
    (
        _words(
            rf"\byou\s+are\s+(?:now\s+)?(?:a|an|the|my)\s+(?:[\w-]+\s+){{0,3}}?{_MODEL}\b|"
            r"\bas\s+an?\s+(?:ai|language\s+model|llm|ai\s+assistant)\b|"
            rf"\b(?:the|this)\s+{_MODEL}\s+(?:must|shall|is\s+required\s+to|needs\s+to|will\s+now)\b|"
            r"\b(?:your|new|updated)\s+(?:system\s+prompt|instructions)\b|"
            r"\bfrom\s+now\s+on\s*,?\s+(?:you|always|never)\b|"
            rf"\bnote\s+(?:to|for)\s+(?:the\s+)?{_MODEL}\s*:|"
            rf"\byou\s+(?:must|shall)\s+(?:always|never)\b"
        ),
        "system-prompt style text addressed to the model",
    ),
)

_HIDDEN_MARKUP: Final = (
    (
        _words(
            r"<\s*/?\s*(?:important|system|system[-_ ]?(?:prompt|message|reminder|instructions?)|"
            r"instructions?|hidden|secret[-_ ]?instructions?|assistant|ai[-_ ]?instructions?|"
            r"note[-_ ]?(?:to|for)[-_ ]?(?:the[-_ ]?)?(?:ai|model|assistant|llm))\b[^>]{0,200}>"
        ),
        "an instruction tag",
    ),
    (_words(r"\[\s*/?\s*(?:important|system|inst|instructions?|hidden)\s*\]"), "an instruction tag"),
    (_words(r"<\|[\w.-]{1,40}\|>|<<\s*/?\s*SYS\s*>>"), "a chat-template token"),
    (_words(r"<!--"), "an HTML comment, which a reader of rendered text does not see"),
    (re.compile(r"(?:^|\n)\s*#*\s*(?:system|assistant)\s*:", re.IGNORECASE), "a chat role marker"),
)

_SECRETS: Final = (
    (
        _words(r"\.ssh\b|\bid_(?:rsa|dsa|ecdsa|ed25519)(?:\.pub)?\b|\bauthorized_keys\b"),
        "SSH keys",
    ),
    (_words(r"(?<![\w.-])\.env(?:\.[\w-]+)?(?![\w-])"), "a .env file"),
    (
        _words(
            r"\.aws/|\baws/credentials\b|\.azure/|\.config/gcloud\b|\bgcloud/(?:credentials|"
            r"application_default)|\.kube/config\b|\.docker/config\.json\b"
        ),
        "cloud credentials",
    ),
    (
        _words(
            r"(?<![\w-])\.(?:netrc|npmrc|pypirc|git-credentials|pgpass|gnupg)\b|/etc/shadow\b|"
            r"/proc/(?:self|\d+)/environ\b|\.(?:bash|zsh)_history\b|\blogin\.keychain"
        ),
        "a credential or history file",
    ),
    (
        _words(
            r"\bmcpfleet/(?:state|tokens?|approvals?)|\.config/mcpfleet\b|\.local/state/mcpfleet\b|"
            r"\bMCPFLEET_HOME\b|(?<![\w-])\.mcpfleet/"
        ),
        "mcpfleet's own state or config",
    ),
    (
        _words(
            r"\.cursor/mcp\.json\b|\bclaude_desktop_config\.json\b|(?<![\w-])\.claude\.json\b|"
            r"\.codex/config\.toml\b|\.gemini/settings\.json\b|(?<![\w/-])\.mcp\.json\b"
        ),
        "another MCP host's config, with its servers' keys",
    ),
)


def _text_rule(
    patterns: Sequence[tuple[re.Pattern[str], str]],
) -> Callable[[_Field], str | None]:
    def check(field: _Field) -> str | None:
        if field.is_key:
            return None
        text = _normalised(field.text)
        for pattern, what in patterns:
            match = pattern.search(text)
            if match:
                return f"{what} in {field.where}: {_excerpt(text, match)}"
        return None

    return check


def _secrets_warning(field: _Field) -> str | None:
    if field.is_key:
        return None
    text = _normalised(field.text)
    found = [(what, match) for pattern, what in _SECRETS if (match := pattern.search(text))]
    if not found:
        return None
    kinds = ", ".join(what for what, _ in found)
    first = min((match for _, match in found), key=lambda match: match.start())
    return f"a path to secrets ({kinds}) in {field.where}: {_excerpt(text, first)}"


# --- other servers' tools -----------------------------------------------------------------------

_DISTINCTIVE = re.compile(r"[_\-.]|\d|[a-z][A-Z]")
"""A bare tool name counts as a reference only when it could not be an ordinary word:
``read_file``, ``get-env``, ``createIssue``; ``search`` or ``echo`` match only in served form."""


@functools.lru_cache(maxsize=8192)
def _spellings(server: str, tool: str) -> frozenset[str]:
    """The ways a description can name ``tool`` of ``server``: as mcpfleet serves it
    (``mcp_<server>_<tool>``), as the gateway does (``<server>_<tool>``), as Claude Code does
    (``mcp__<server>__<tool>``), as ``<server>/<tool>``, and bare when distinctive."""
    spellings = {
        mcp_tool_name(server, tool),
        mcp_tool_name(server, tool, prefix=""),
        f"mcp__{server}__{tool}",
        f"{server}/{tool}",
    }
    if _DISTINCTIVE.search(tool) and len(tool) >= 4:
        spellings.add(tool)
    return frozenset(spellings)


_NAME_RUN = re.compile(r"[\w\-./]+")
_NAME_PARTS = re.compile(r"([./])")
MAX_NAME_PARTS: Final = 8
"""A run of names joined by ``.`` or ``/`` longer than this is looked up whole and part by part,
not in every sub-run (a hostile path of thousands of parts stays cheap)."""


@functools.lru_cache(maxsize=64)
def _owners(
    other_servers_tools: tuple[tuple[str, tuple[str, ...]], ...], own_tools: frozenset[str]
) -> Mapping[str, tuple[str, str]]:
    """Each spelling of another server's tool, lower-cased, to its ``(server, tool)``; none
    that is also the name of one of this server's own tools. Cached: a review reads every tool
    of a server against the same other servers."""
    own = {name.lower() for name in own_tools}
    owners: dict[str, tuple[str, str]] = {}
    for other_server, tools in other_servers_tools:
        for tool in tools:
            for spelling in _spellings(other_server, tool):
                if spelling.lower() not in own:
                    owners.setdefault(spelling.lower(), (other_server, tool))
    return owners


def _candidates(run: str) -> Iterator[str]:
    """Every name a run like ``see mail/search.`` can hold: the run, each of its parts
    between ``.`` and ``/``, and each sequence of neighbouring parts (``mail/search``)."""
    pieces = _NAME_PARTS.split(run.lower())
    parts = pieces[::2]
    if len(parts) > MAX_NAME_PARTS:
        yield "".join(pieces)
        yield from parts
        return
    for first in range(len(parts)):
        for last in range(first, len(parts)):
            yield "".join(pieces[2 * first : 2 * last + 1])


def _references_warning(field: _Field, owners: Mapping[str, tuple[str, str]]) -> str | None:
    if field.is_key or not owners:
        return None
    text = _normalised(field.text)
    named: dict[tuple[str, str], None] = {}
    first: re.Match[str] | None = None
    for run in _NAME_RUN.finditer(text):
        for candidate in _candidates(run.group()):
            owner = owners.get(candidate)
            if owner is not None:
                named.setdefault(owner)
                first = first or run
    if first is None:
        return None
    listed = list(named)
    shown = ", ".join(f"tool {_quote(tool)} of server {_quote(other)}" for other, tool in listed[:3])
    if len(listed) > 3:
        shown += f" and {len(listed) - 3} more"
    return f"a reference to another server's tool ({shown}) in {field.where}: {_excerpt(text, first)}"


# --- length -------------------------------------------------------------------------------------


def _description_length(definition: Mapping[str, Any]) -> int | None:
    description = definition.get("description")
    return len(description) if isinstance(description, str) and description.strip() else None


def _long_description_warning(
    definition: Mapping[str, Any], name: object, peers: Sequence[Mapping[str, Any]]
) -> str | None:
    length = _description_length(definition)
    peer_lengths = [
        peer_length
        for peer in peers
        if peer.get("name") != name and (peer_length := _description_length(peer)) is not None
    ]
    if length is None or len(peer_lengths) < LONG_MIN_PEERS:
        return None
    median = statistics.median(peer_lengths)
    if length <= LONG_FACTOR * median or length - median <= LONG_MIN_EXCESS:
        return None
    return (
        f"the description is {length} characters, {length / max(median, 1):.0f}× the median "
        f"({median:.0f}) of this server's {len(peer_lengths)} other tools: room for text the user "
        "never reads"
    )


# --- the rule set -------------------------------------------------------------------------------


def poisoning_warnings(
    definition: Mapping[str, Any],
    *,
    server: str,
    peers: Sequence[Mapping[str, Any]],
    other_servers_tools: Mapping[str, Collection[str]],
) -> list[PoisoningWarning]:
    """What in ``definition`` (one tool's JSON as ``tools/list`` gave it) looks written to
    steer the model: a list of warnings, in ``RULES`` order, empty for an ordinary tool.

    ``peers`` are the same server's other tools (the tool itself may be among them: it is left
    out by name), ``other_servers_tools`` maps every other server's name to its tool names.
    ``server`` is the name of the server being read, whose own served names
    (``mcp_<server>_<tool>``) are never a reference to another server.
    """
    name = definition.get("name")
    own_tools = {str(peer.get("name")) for peer in peers if isinstance(peer.get("name"), str)}
    if isinstance(name, str):
        own_tools.add(name)
    owners = _owners(
        tuple(
            (str(other), tuple(str(tool) for tool in tools))
            for other, tools in other_servers_tools.items()
            if other != server
        ),
        frozenset(own_tools),
    )
    checks: dict[str, Callable[[_Field], str | None]] = {
        "model-instructions": _text_rule(_MODEL_INSTRUCTIONS),
        "hidden-markup": _text_rule(_HIDDEN_MARKUP),
        "invisible-characters": _invisible_warning,
        "bidi-controls": _bidi_warning,
        "other-servers-tools": lambda field: _references_warning(field, owners),
        "secrets-paths": _secrets_warning,
    }
    found: dict[str, list[str]] = {rule: [] for rule in RULES}
    for field in _fields(definition):
        for rule, check in checks.items():
            text = check(field)
            if text is not None:
                found[rule].append(text)
    long_description = _long_description_warning(definition, name, peers)
    if long_description is not None:
        found["long-description"].append(long_description)

    warnings: list[PoisoningWarning] = []
    for rule in RULES:
        texts = found[rule]
        warnings.extend(PoisoningWarning(rule, text) for text in texts[:MAX_WARNINGS_PER_RULE])
        if len(texts) > MAX_WARNINGS_PER_RULE:
            left_out = len(texts) - MAX_WARNINGS_PER_RULE
            warnings.append(PoisoningWarning(rule, f"the same in {_count(left_out, 'more field')}"))
    return warnings
