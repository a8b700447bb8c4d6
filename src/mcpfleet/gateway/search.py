"""Ranking served tools against a natural-language query: what ``find_tools`` and
``mcpfleet tools --search`` answer.

The ranking is Okapi BM25 over one weighted bag of words per tool (the BM25F idea: each
field's words count as often as the field's weight), built from

* the served name and the backend's own name (weight 3), split at ``_``, ``-``, ``.``,
  ``/`` and camelCase humps, so ``get_file_info``, ``getFileInfo`` and ``get-file-info``
  read alike, and the server's prefix is just one more word;
* the title (2), the names of the input schema's properties (1.5), the description (1), and
  the descriptions of the properties (0.5).

Words are lower-cased, light-stemmed (``directories`` and ``directory``, ``creating`` and
``create`` meet) and stripped of a few words that carry no meaning in a request ("the",
"please", "me"). A query word also matches its close synonyms from a small table (``remove``
finds ``delete``, ``folder`` finds ``directory``), at half weight, because descriptions and
people rarely use the same verb.

It is written here rather than taken from a library: the corpus is a few hundred short
documents rebuilt when a list changes, the BM25 packages on PyPI bring numpy (``rank-bm25``,
``bm25s``) or a search engine (``tantivy``) for what is forty lines, and none of them splits
identifiers. Nothing here does I/O or imports the SDK: the CLI ranks with it too.

Results are stable: the same query over the same tools gives the same order (ties broken by
served name).
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

K1 = 1.2
"""How quickly repeating a word stops adding to a tool's score (BM25's usual value)."""
B = 0.75
"""How much a long description is discounted (BM25's usual value)."""

NAME_WEIGHT = 3.0
TITLE_WEIGHT = 2.0
PROPERTY_NAME_WEIGHT = 1.5
DESCRIPTION_WEIGHT = 1.0
PROPERTY_DESCRIPTION_WEIGHT = 0.5
SYNONYM_WEIGHT = 0.5
"""A synonym of a query word counts half as much as the word itself."""

_WORD = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|[0-9]+")
_STOPWORDS = frozenset(
    [
        "a",
        "an",
        "and",
        "any",
        "are",
        "as",
        "at",
        "be",
        "by",
        "can",
        "could",
        "do",
        "does",
        "for",
        "from",
        "give",
        "how",
        "i",
        "in",
        "into",
        "is",
        "it",
        "its",
        "me",
        "my",
        "of",
        "on",
        "or",
        "please",
        "show",
        "some",
        "that",
        "the",
        "this",
        "to",
        "tool",
        "use",
        "using",
        "want",
        "what",
        "which",
        "with",
        "would",
        "you",
        "your",
    ]
)
_SYNONYM_GROUPS = (
    ("delete", "remove", "erase", "drop", "destroy"),
    ("directory", "folder", "dir"),
    ("create", "make", "new", "add"),
    ("read", "get", "fetch", "retrieve", "open", "load", "view"),
    ("write", "save", "store", "overwrite"),
    ("edit", "modify", "change", "update", "replace", "patch"),
    ("find", "search", "lookup", "locate", "query"),
    ("list", "enumerate", "ls"),
    ("move", "rename", "mv"),
    ("file", "document"),
    ("time", "clock", "date", "hour"),
    ("timezone", "zone", "tz"),
    ("convert", "translate", "transform"),
    ("sum", "add", "total", "plus"),
    ("diff", "difference", "changes", "compare"),
    ("commit", "record"),
    ("log", "history"),
    ("branch", "branches"),
    ("env", "environment", "variable"),
    ("image", "picture", "png", "logo"),
    ("compress", "gzip", "zip"),
    ("entity", "node", "entities"),
    ("observation", "fact", "note"),
    ("relation", "link", "connection"),
    ("graph", "memory", "knowledge"),
    ("echo", "repeat"),
    ("unstage", "reset"),
    ("stage", "add"),
    ("checkout", "switch"),
    ("status", "state"),
)


def stem(word: str) -> str:
    """A light suffix stripper, so that plural and verb forms of one word meet.

    Not a full Porter stemmer: enough for tool descriptions, and predictable (``files`` and
    ``file`` → ``fil``, ``directories`` and ``directory`` → ``directori``).
    """
    if len(word) <= 3:
        return word
    if word.endswith("ies"):
        word = word[:-3] + "i"
    elif word.endswith(("sses", "ches", "shes", "xes", "zes")):
        word = word[:-2]
    elif word.endswith("s") and not word.endswith(("ss", "us", "is")):
        word = word[:-1]
    elif word.endswith("ing") and len(word) > 5:
        word = word[:-3]
    elif word.endswith("ed") and len(word) > 4:
        word = word[:-2]
    if word.endswith("y"):
        word = word[:-1] + "i"
    if word.endswith("e") and len(word) > 3:
        word = word[:-1]
    return word


def words(text: str) -> list[str]:
    """The stemmed words of ``text``: identifiers split at separators and camelCase humps,
    lower-cased, with the meaningless ones left out."""
    found = (match.group().lower() for match in _WORD.finditer(text))
    return [stem(word) for word in found if word not in _STOPWORDS]


def _synonyms() -> dict[str, frozenset[str]]:
    table: dict[str, set[str]] = {}
    for group in _SYNONYM_GROUPS:
        stems = {stem(word) for word in group}
        for member in stems:
            table.setdefault(member, set()).update(stems - {member})
    return {word: frozenset(others) for word, others in table.items()}


_SYNONYMS = _synonyms()


@dataclass(frozen=True)
class SearchHit:
    """One tool a query found, and how well it matched (higher is better)."""

    tool: Mapping[str, Any]
    score: float

    @property
    def name(self) -> str:
        return str(self.tool.get("name", ""))


def _document(tool: Mapping[str, Any], backend_name: str | None) -> dict[str, float]:
    """The weighted bag of words of one tool."""
    bag: dict[str, float] = {}

    def add(text: object, weight: float) -> None:
        if isinstance(text, str):
            for word in words(text):
                bag[word] = bag.get(word, 0.0) + weight

    add(tool.get("name"), NAME_WEIGHT)
    if backend_name is not None and backend_name != tool.get("name"):
        add(backend_name, NAME_WEIGHT)
    add(tool.get("title"), TITLE_WEIGHT)
    annotations = tool.get("annotations")
    if isinstance(annotations, Mapping):
        add(annotations.get("title"), TITLE_WEIGHT)
    add(tool.get("description"), DESCRIPTION_WEIGHT)
    schema = tool.get("inputSchema")
    properties = schema.get("properties") if isinstance(schema, Mapping) else None
    if isinstance(properties, Mapping):
        for property_name, definition in properties.items():
            add(property_name, PROPERTY_NAME_WEIGHT)
            if isinstance(definition, Mapping):
                add(definition.get("description"), PROPERTY_DESCRIPTION_WEIGHT)
    return bag


class ToolIndex:
    """A BM25 index over one list of tools (as served: JSON objects with ``name``)."""

    def __init__(
        self, tools: Sequence[Mapping[str, Any]], backend_names: Mapping[str, str] | None = None
    ) -> None:
        """``backend_names`` maps a served name to the backend's own name of that tool, so a
        query naming the tool as its server spells it still finds it."""
        backend_names = backend_names or {}
        self._tools = list(tools)
        self._documents = [_document(tool, backend_names.get(str(tool.get("name")))) for tool in tools]
        self._lengths = [sum(document.values()) for document in self._documents]
        self._average_length = (sum(self._lengths) / len(self._lengths)) if self._lengths else 0.0
        document_frequency: Counter[str] = Counter()
        for document in self._documents:
            document_frequency.update(document.keys())
        count = len(self._documents)
        self._idf = {
            word: math.log(1 + (count - frequency + 0.5) / (frequency + 0.5))
            for word, frequency in document_frequency.items()
        }

    def __len__(self) -> int:
        return len(self._tools)

    def search(self, query: str, limit: int = 8) -> list[SearchHit]:
        """The ``limit`` best tools for ``query``, best first; tools that share no word with
        the query (or its synonyms) are left out."""
        weights = _query_weights(query)
        scored: list[SearchHit] = []
        for tool, document, length in zip(self._tools, self._documents, self._lengths, strict=True):
            score = 0.0
            for word, weight in weights.items():
                frequency = document.get(word, 0.0)
                if frequency:
                    norm = K1 * (1 - B + B * length / self._average_length)
                    score += weight * self._idf[word] * frequency * (K1 + 1) / (frequency + norm)
            if score > 0:
                scored.append(SearchHit(tool, round(score, 6)))
        scored.sort(key=lambda hit: (-hit.score, hit.name))
        return scored[: max(limit, 0)]


def _query_weights(query: str) -> dict[str, float]:
    """Each query word with weight 1, and each synonym not in the query with ``SYNONYM_WEIGHT``."""
    weights: dict[str, float] = {}
    query_words = words(query)
    for word in query_words:
        weights[word] = 1.0
    for word in query_words:
        for synonym in _SYNONYMS.get(word, ()):
            weights.setdefault(synonym, SYNONYM_WEIGHT)
    return weights
