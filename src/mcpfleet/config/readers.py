"""Reading config documents safely: JSON (with JSONC comments and trailing commas), TOML
and YAML, each file size-capped, BOM-tolerant and strict about duplicate keys.

Every failure becomes one ``ConfigError`` naming the file and what is wrong, so that
discovery can record it and carry on with the other sources.
"""

from __future__ import annotations

import functools
import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from mcpfleet.errors import ConfigError

if TYPE_CHECKING:
    import yaml

DocumentFormat = Literal["json", "toml", "yaml"]

MAX_CONFIG_BYTES = 1024 * 1024
"""Config files are small; a bigger file is a mistake or an attack on the parser."""


def format_of(path: Path) -> DocumentFormat:
    """The format a file is parsed as, from its suffix (JSON when unsure)."""
    suffix = path.suffix.lower()
    if suffix == ".toml":
        return "toml"
    if suffix in (".yaml", ".yml"):
        return "yaml"
    return "json"


def read_document(path: Path, *, project_root: Path | None = None) -> Any:
    """Parse one config file; ``None`` when it does not exist.

    When ``path`` lies inside ``project_root``, its real path must too: a symlink that
    leaves the project could make a repository read (and run) files it does not own.
    """
    text = _read_text(path, project_root)
    if text is None:
        return None
    return parse_text(text, format_of(path), path=path)


def parse_text(text: str, document_format: DocumentFormat, *, path: Path) -> Any:
    """Parse already-read text; raises ``ConfigError`` naming ``path`` on malformed input."""
    try:
        if document_format == "toml":
            import tomllib

            return tomllib.loads(text)
        if document_format == "yaml":
            return _parse_yaml(text)
        return json.loads(strip_jsonc(text), object_pairs_hook=_reject_duplicate_keys)
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


def _read_text(path: Path, project_root: Path | None) -> str | None:
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
        if size > MAX_CONFIG_BYTES:
            raise ConfigError(
                f"{path}: file too large ({size} bytes, limit {MAX_CONFIG_BYTES}); "
                "a config file should be a few kilobytes",
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


class _DuplicateKeyError(ValueError):
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
        """``yaml.safe_load`` semantics, but a repeated mapping key is an error."""

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


def _yaml_error_types() -> tuple[type[Exception], ...]:
    import sys

    # Only consult PyYAML when it was imported, so JSON-only runs never load it.
    yaml_module = sys.modules.get("yaml")
    return (yaml_module.YAMLError,) if yaml_module is not None else ()
