"""Reading config documents safely: JSON (with JSONC comments and trailing commas), TOML
and YAML, each file size-capped, BOM-tolerant and strict about duplicate keys.

The parsers of all three formats recurse once per nesting level, so text nested deeper
than Python's recursion limit would raise ``RecursionError`` out of them (and TOML dotted
keys cost memory quadratic in their length). Nesting is therefore measured *before* a
parser sees the text: a linear scan of brackets and dotted keys for JSON and TOML, and a
depth bound inside the YAML composer, which builds the node graph before any object
exists. YAML aliases are bounded by the number of values they expand to, so a few
hundred bytes cannot stand for a billion strings.

Every failure becomes one ``ConfigError`` naming the file and what is wrong, so that
discovery can record it and carry on with the other sources.
"""

from __future__ import annotations

import functools
import json
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from mcpfleet.errors import ConfigError, MCPFleetError

if TYPE_CHECKING:
    import yaml

DocumentFormat = Literal["json", "toml", "yaml"]

MAX_CONFIG_BYTES = 1024 * 1024
"""A project's config files (a repository's, so possibly hostile) are small; a bigger one is
a mistake or an attack on the parser."""
MAX_USER_CONFIG_BYTES = 64 * 1024 * 1024
"""The user's own files may legitimately be large: Claude Code keeps its per-project history
in ``~/.claude.json`` beside the ``mcpServers`` mcpfleet reads, and it grows to megabytes."""
MAX_NESTING_DEPTH = 64
"""Config documents nest a handful of levels; far below Python's recursion limit."""
MAX_YAML_VALUES = 100_000
"""Values a YAML document may hold once its aliases are expanded (``*name`` repeats ``&name``)."""


def format_of(path: Path) -> DocumentFormat:
    """The format a file is parsed as, from its suffix (JSON when unsure)."""
    suffix = path.suffix.lower()
    if suffix == ".toml":
        return "toml"
    if suffix in (".yaml", ".yml"):
        return "yaml"
    return "json"


def read_document(path: Path, *, project_root: Path | None = None, max_bytes: int = MAX_CONFIG_BYTES) -> Any:
    """Parse one config file of at most ``max_bytes``; ``None`` when it does not exist.

    When ``path`` lies inside ``project_root``, its real path must too: a symlink that
    leaves the project could make a repository read (and run) files it does not own.
    """
    text = _read_text(path, project_root, max_bytes)
    if text is None:
        return None
    return parse_text(text, format_of(path), path=path)


def parse_text(text: str, document_format: DocumentFormat, *, path: Path) -> Any:
    """Parse already-read text; raises ``ConfigError`` naming ``path`` on malformed or
    over-limit input (see the module docstring for the limits)."""
    try:
        if document_format == "toml":
            import tomllib

            _check_nesting(_toml_nesting(text))
            document = tomllib.loads(text)
            # Table headers nest too, without brackets: the parsed tree is measured as well.
            _check_nesting(_tree_depth(document))
            return document
        if document_format == "yaml":
            return _parse_yaml(text)
        json_text = strip_jsonc(text)
        _check_nesting(_json_nesting(json_text))
        return json.loads(json_text, object_pairs_hook=_reject_duplicate_keys)
    except _LimitError as error:
        raise ConfigError(f"{path}: {error}; fix or remove the file", path=str(path)) from error
    except RecursionError as error:
        # The scans above are approximate about strings in broken files; the parser's own
        # depth guard then still ends as an error for this file, never as a crash.
        raise ConfigError(
            f"{path}: nesting deeper than {MAX_NESTING_DEPTH} levels; fix or remove the file", path=str(path)
        ) from error
    except json.JSONDecodeError as error:
        raise ConfigError(
            f"{path}: invalid JSON at line {error.lineno} column {error.colno}: {error.msg}", path=str(path)
        ) from error
    except _DuplicateKeyError as error:
        raise ConfigError(f"{path}: {error}; keep only one of them", path=str(path)) from error
    except ValueError as error:  # tomllib.TOMLDecodeError is a ValueError
        raise ConfigError(f"{path}: invalid {document_format.upper()}: {error}", path=str(path)) from error
    except _yaml_error_types() as error:
        raise ConfigError(f"{path}: invalid YAML: {error}", path=str(path)) from error


class _LimitError(MCPFleetError, ValueError):
    """A document over one of the limits; the message says which."""


def _check_nesting(depth: int) -> None:
    if depth > MAX_NESTING_DEPTH:
        raise _LimitError(f"nesting deeper than {MAX_NESTING_DEPTH} levels")


_JSON_SPECIAL = re.compile(r'["\[\]{}]')
_TOML_SPECIAL = re.compile(r"[\"'#\[\]{}=,.\n]")


def _json_nesting(text: str) -> int:
    """How deep the brackets of JSON ``text`` nest, strings skipped; stops past the limit."""
    depth = deepest = position = 0
    while deepest <= MAX_NESTING_DEPTH:
        match = _JSON_SPECIAL.search(text, position)
        if match is None:
            break
        char, position = match.group(), match.end()
        if char == '"':
            end = _string_end(text, position, '"', escapes=True, multiline=False)
            if end is None:
                break  # the parser stops at this string too: nothing after it is read
            position = end
        elif char in "[{":
            depth += 1
            deepest = max(deepest, depth)
        else:
            depth -= 1
    return deepest


def _toml_nesting(text: str) -> int:
    """How deep TOML ``text`` nests: brackets plus the dots of a dotted key or table header.

    Dots are counted between separators (``=``, ``,``, brackets, newlines), so the one
    dot of a float or a time adds a level at most; comments and strings are skipped.
    """
    depth = deepest = dots = position = 0
    while deepest <= MAX_NESTING_DEPTH:
        match = _TOML_SPECIAL.search(text, position)
        if match is None:
            break
        char, position = match.group(), match.end()
        if char in "\"'":
            multiline = text.startswith(char * 3, match.start())
            quote = char * 3 if multiline else char
            end = _string_end(
                text, match.start() + len(quote), quote, escapes=char == '"', multiline=multiline
            )
            if end is None:
                break  # the parser stops at this string too: nothing after it is read
            position = end
        elif char == "#":
            newline = text.find("\n", position)
            position = len(text) if newline == -1 else newline
        elif char == ".":
            dots += 1
            deepest = max(deepest, depth + dots)
        else:
            dots = 0
            if char in "[{":
                depth += 1
                deepest = max(deepest, depth)
            elif char in "]}":
                depth -= 1
    return deepest


def _string_end(text: str, start: int, quote: str, *, escapes: bool, multiline: bool) -> int | None:
    """Index just past the string whose body starts at ``start``; ``None`` when it never ends
    (on its line, for a single-line string)."""
    position = start
    while True:
        found = text.find(quote, position)
        if found == -1:
            return None
        if not multiline and text.find("\n", position, found) != -1:
            return None
        backslashes = 0
        while escapes and found - backslashes > start and text[found - backslashes - 1] == "\\":
            backslashes += 1
        if backslashes % 2 == 0:
            end = found + len(quote)
            # A TOML multi-line string may end with one or two quotes before its delimiter.
            while multiline and end < len(text) and end - found < len(quote) + 2 and text[end] == quote[0]:
                end += 1
            return end
        position = found + 1


def _tree_depth(document: Any) -> int:
    """How deep a parsed document nests (the top object is level 1); stops past the limit."""
    deepest = 0
    pending: list[tuple[Any, int]] = [(document, 1)]
    while pending and deepest <= MAX_NESTING_DEPTH:
        node, depth = pending.pop()
        children = node.values() if isinstance(node, dict) else node if isinstance(node, list) else None
        if children is not None:
            deepest = max(deepest, depth)
            pending.extend((child, depth + 1) for child in children)
    return deepest


def _read_text(path: Path, project_root: Path | None, max_bytes: int) -> str | None:
    if not os.path.lexists(path):
        return None
    real = Path(os.path.realpath(path))
    if project_root is not None and _is_within(Path(os.path.abspath(path)), project_root):
        real_root = Path(os.path.realpath(project_root))
        if not _is_within(real, real_root):
            raise ConfigError(
                f"{path}: symlink leaves the project (points to {real}); "
                "copy the file into the project or remove the link",
                path=str(path),
            )
    if not real.exists():
        return None
    if not real.is_file():
        raise ConfigError(f"{path}: not a regular file", path=str(path))
    try:
        size = real.stat().st_size
        if size > max_bytes:
            raise ConfigError(
                f"{path}: file too large ({size} bytes, limit {max_bytes}); "
                "trim the file or move what it holds elsewhere",
                path=str(path),
            )
        data = real.read_bytes()
    except OSError as error:
        raise ConfigError(f"{path}: cannot read: {error.strerror or error}", path=str(path)) from error
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        raise ConfigError(f"{path}: not UTF-8 text ({error.reason})", path=str(path)) from error


def _is_within(path: Path, root: Path) -> bool:
    return path == root or root in path.parents


class _DuplicateKeyError(MCPFleetError, ValueError):
    pass


def _reject_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for key, value in pairs:
        if key in result:
            raise _DuplicateKeyError(f"duplicate key {key!r}")
        result[key] = value
    return result


def strip_jsonc(text: str) -> str:
    """Blank out ``//`` and ``/* */`` comments and trailing commas, outside strings.

    Removed characters become spaces (newlines are kept), so the JSON parser's line and
    column numbers still point at the original text.
    """
    out = list(text)
    index = 0
    length = len(text)
    in_string = False
    pending_comma: int | None = None
    while index < length:
        char = text[index]
        if in_string:
            if char == "\\":
                index += 2
                continue
            if char == '"':
                in_string = False
            index += 1
            continue
        if char == "/" and index + 1 < length and text[index + 1] in "/*":
            end = text.find("\n", index) if text[index + 1] == "/" else text.find("*/", index + 2)
            end = length if end == -1 else end + (0 if text[index + 1] == "/" else 2)
            for position in range(index, end):
                if out[position] != "\n":
                    out[position] = " "
            index = end
            continue
        if char in "}]" and pending_comma is not None:
            out[pending_comma] = " "
        if char == ",":
            pending_comma = index
        elif not char.isspace():
            pending_comma = None
        if char == '"':
            in_string = True
        index += 1
    return "".join(out)


def _parse_yaml(text: str) -> Any:
    import yaml

    return yaml.load(text, Loader=_strict_yaml_loader())


@functools.cache
def _strict_yaml_loader() -> type[yaml.SafeLoader]:
    import yaml

    class StrictSafeLoader(yaml.SafeLoader):
        """``yaml.safe_load`` semantics, but a repeated mapping key is an error, nesting is
        bounded while the node graph is composed, and the graph is measured with its
        aliases expanded before any Python object is built from it."""

        def __init__(self, stream: str) -> None:
            super().__init__(stream)
            self.nesting = 0

        def compose_node(self, parent: yaml.Node | None, index: Any) -> yaml.Node | None:
            self.nesting += 1
            try:
                _check_nesting(self.nesting)
                return super().compose_node(parent, index)
            finally:
                self.nesting -= 1

        def compose_document(self) -> yaml.Node | None:
            root = super().compose_document()
            if root is not None:
                _check_expanded_size(root)
            return root

        def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
            seen: set[Any] = set()
            for key_node, _ in node.value:
                key = self.construct_object(key_node, deep=deep)
                if key in seen:
                    raise yaml.constructor.ConstructorError(
                        None, None, f"duplicate key {key!r}", key_node.start_mark
                    )
                seen.add(key)
            return super().construct_mapping(node, deep=deep)

    return StrictSafeLoader


def _check_expanded_size(root: yaml.Node) -> None:
    """Refuse a node graph whose aliases expand past the limits, or refer to themselves.

    Each node is visited once (depth-first, without recursion); its expanded size and
    depth are computed from its children's, so the cost is that of the file, not of the
    expansion.
    """
    sizes: dict[int, int] = {}
    depths: dict[int, int] = {}
    on_path: set[int] = set()
    pending: list[tuple[yaml.Node, Iterator[yaml.Node]]] = [(root, _yaml_children(root))]
    on_path.add(id(root))
    while pending:
        node, children = pending[-1]
        child = next(children, None)
        if child is None:
            pending.pop()
            on_path.discard(id(node))
            inner = list(_yaml_children(node))
            sizes[id(node)] = 1 + sum(sizes[id(item)] for item in inner)
            depths[id(node)] = 1 + max((depths[id(item)] for item in inner), default=0)
            _check_nesting(depths[id(node)])
            if sizes[id(node)] > MAX_YAML_VALUES:
                raise _LimitError(
                    f"YAML aliases expand to more than {MAX_YAML_VALUES} values; remove the aliases"
                )
        elif id(child) in on_path:
            raise _LimitError("a YAML alias refers to itself (a recursive anchor); remove it")
        elif id(child) not in sizes:
            _check_nesting(len(pending) + 1)
            on_path.add(id(child))
            pending.append((child, _yaml_children(child)))


def _yaml_children(node: yaml.Node) -> Iterator[yaml.Node]:
    import yaml

    if isinstance(node, yaml.SequenceNode):
        yield from node.value
    elif isinstance(node, yaml.MappingNode):
        for key, value in node.value:
            yield key
            yield value


def _yaml_error_types() -> tuple[type[Exception], ...]:
    import sys

    # Only consult PyYAML when it was imported, so JSON-only runs never load it.
    yaml_module = sys.modules.get("yaml")
    return (yaml_module.YAMLError,) if yaml_module is not None else ()
