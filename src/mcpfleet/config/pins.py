"""The pinned tool definitions of every server (B15): what was approved, and what is withheld.

A server's tools are pinned the first time mcpfleet lists them (a user-level server) or the
first time after its approval (a project server: approving or revoking it forgets its pins,
so the next listing is its new baseline). A tool whose definition later differs from its pin,
or a tool the server adds later, is *pending*: kept here with its current definition until
``mcpfleet tools approve`` makes it the pin.

The store lives beside the approvals, outside any repository: one private (0600) JSON file per
server under ``<user state dir>/tool-pins/``, named by a digest of the server's key (its
config file's real path and its place in that file), each written atomically under a lock, so
that sessions, the gateway and the daemon may read and write it at once and a file's
modification is what tells a running fleet that something was approved.
"""

from __future__ import annotations

import datetime
import hashlib
import json
import os
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from mcpfleet import paths
from mcpfleet.config.model import ServerConfig, SourceInfo, canonical_json, fingerprint_of
from mcpfleet.config.readers import MAX_CONFIG_BYTES
from mcpfleet.config.writer import update_json_file
from mcpfleet.errors import ConfigWriteError

PINS_FOLDER = "tool-pins"
MAX_KEPT_DEFINITION_BYTES = 32 * 1024
"""A definition larger than this is pinned by its fingerprint alone (the review then cannot show
its text): one server's file must stay under the store's size limit whatever it lists."""

Definition = dict[str, Any]
"""A tool's model-facing definition: ``name``, ``title``, ``description``, ``inputSchema``,
``outputSchema`` and ``annotations`` (the keys ``tools/list`` uses)."""


def definition_fingerprint(definition: Mapping[str, Any]) -> str:
    """SHA-256 of the definition's canonical JSON (sorted keys, no whitespace)."""
    text = canonical_json(dict(definition))
    return hashlib.sha256(text.encode("utf-8", errors="surrogatepass")).hexdigest()


@dataclass(frozen=True)
class PinKey:
    """Which pins a server has: its config file's real path, its place in that file (two
    projects' entries in one file, such as Claude Code's per-project servers, are two keys) and
    the entry's fingerprint. An edited entry is another server, with a baseline of its own: the
    user's own edit of a user-level entry is no rug pull, and a project entry's edit needs a new
    approval anyway."""

    server: str
    path: str
    """The config file's real path; empty for a config built by hand (pinned by name)."""
    location: str
    entry: str
    """The entry's fingerprint (``ServerConfig.fingerprint``)."""

    @property
    def digest(self) -> str:
        text = f"{self.path}\0{self.location}\0{self.entry}"
        return hashlib.sha256(text.encode("utf-8", errors="surrogatepass")).hexdigest()[:32]


def pin_key(config: ServerConfig, source: SourceInfo | None) -> PinKey:
    entry = config.fingerprint or fingerprint_of(config)
    if source is None:
        return PinKey(config.name, "", "/" + config.name, entry)
    return PinKey(config.name, os.path.realpath(source.path), source.location or "/" + config.name, entry)


@dataclass(frozen=True)
class PinnedTool:
    fingerprint: str
    definition: Definition | None
    """``None`` when it was too large to keep (``MAX_KEPT_DEFINITION_BYTES``)."""
    at: str


@dataclass(frozen=True)
class ServerPins:
    """One server's file: its approved tools, and those seen since that differ (pending)."""

    server: str
    path: str
    location: str
    approved: Mapping[str, PinnedTool]
    pending: Mapping[str, PinnedTool]


def _now() -> str:
    return datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")


def _pinned(definition: Definition, at: str) -> PinnedTool:
    text = canonical_json(definition)
    kept = (
        definition if len(text.encode("utf-8", errors="surrogatepass")) <= MAX_KEPT_DEFINITION_BYTES else None
    )
    return PinnedTool(definition_fingerprint(definition), kept, at)


def _tool_json(tool: PinnedTool) -> dict[str, Any]:
    return {"fingerprint": tool.fingerprint, "definition": tool.definition, "at": tool.at}


def _parse_tools(value: Any) -> dict[str, PinnedTool]:
    if not isinstance(value, dict):
        return {}
    tools: dict[str, PinnedTool] = {}
    for name, item in value.items():
        if isinstance(item, dict) and isinstance(item.get("fingerprint"), str):
            definition = item.get("definition")
            tools[str(name)] = PinnedTool(
                item["fingerprint"],
                definition if isinstance(definition, dict) else None,
                str(item.get("at", "")),
            )
    return tools


CatalogKind = Literal["prompts", "resources", "resourceTemplates"]
"""The other model-facing lists a server's descriptions are pinned in."""
CATALOG_KINDS: tuple[CatalogKind, ...] = ("prompts", "resources", "resourceTemplates")


@dataclass(frozen=True)
class CatalogPins:
    """One server's pinned prompts, resources or resource templates, by name or URI."""

    approved: Mapping[str, PinnedTool]
    pending: Mapping[str, PinnedTool]


def _parse_catalog(document: Any, kind: CatalogKind) -> CatalogPins | None:
    catalog = document.get("catalog") if isinstance(document, dict) else None
    section = catalog.get(kind) if isinstance(catalog, dict) else None
    if not isinstance(section, dict) or not isinstance(section.get("approved"), dict):
        return None
    return CatalogPins(_parse_tools(section["approved"]), _parse_tools(section.get("pending")))


def _catalog_json(approved: Mapping[str, PinnedTool], pending: Mapping[str, PinnedTool]) -> dict[str, Any]:
    return {
        "approved": {name: _tool_json(item) for name, item in approved.items()},
        "pending": {name: _tool_json(item) for name, item in pending.items()},
    }


Header = tuple[str, str, str, str]
"""(server, path, location, entry fingerprint) of a pin file, whatever it pins."""


def _header(document: Any) -> Header | None:
    if not isinstance(document, dict):
        return None
    return (
        str(document.get("server", "")),
        str(document.get("path", "")),
        str(document.get("location", "")),
        str(document.get("entry", "")),
    )


def _set_header(document: dict[str, Any], key: PinKey) -> None:
    document.setdefault("version", 1)
    document.update(server=key.server, path=key.path, location=key.location, entry=key.entry)


MAX_PIN_FILE_BYTES = MAX_CONFIG_BYTES * 3 // 4
"""What one pin file may grow to, below the limit the store reads and edits files up to:
past it, the definitions kept for the review go (pending first), and the fingerprints stay."""


def _sections(document: dict[str, Any]) -> list[dict[str, Any]]:
    """The document's maps of pinned items, pending ones first."""
    found: list[dict[str, Any]] = []
    catalog = document.get("catalog")
    holders = [document, *(catalog.values() if isinstance(catalog, dict) else [])]
    for part in ("pending", "approved"):
        found.extend(
            holder[part]
            for holder in holders
            if isinstance(holder, dict) and isinstance(holder.get(part), dict)
        )
    return found


class PinsTooLargeError(ConfigWriteError):
    """A server lists more than its pin file can hold, even as fingerprints alone."""


def _within_budget(document: dict[str, Any], server: str) -> None:
    """Keep the document under ``MAX_PIN_FILE_BYTES``: a server listing more than fits loses the
    definitions kept for its review, never its fingerprints (a file the store could not read
    again would be no pins at all)."""

    def size() -> int:
        # Measured as the writer writes it (indented), which is what the reader's limit is about.
        text = json.dumps(document, indent=2, ensure_ascii=False)
        return len(text.encode("utf-8", errors="surrogatepass"))

    if size() <= MAX_PIN_FILE_BYTES:
        return
    for section in _sections(document):
        for item in section.values():
            if isinstance(item, dict):
                item["definition"] = None
        if size() <= MAX_PIN_FILE_BYTES:
            return
    raise PinsTooLargeError(
        f"the pins of MCP server {server!r} would take more than {MAX_PIN_FILE_BYTES} bytes; "
        'it lists too much to pin: lower its "maxTools", or set "pinning": "off" for it',
        server=server,
    )


def _parse(document: Any) -> ServerPins | None:
    if not isinstance(document, dict) or not isinstance(document.get("approved"), dict):
        return None
    return ServerPins(
        server=str(document.get("server", "")),
        path=str(document.get("path", "")),
        location=str(document.get("location", "")),
        approved=_parse_tools(document["approved"]),
        pending=_parse_tools(document.get("pending")),
    )


FileStamp = tuple[int, int, int]
"""(inode, size, modification time in ns) of a pin file: it changes with every atomic write."""


class PinStore:
    """The pin files; safe to use from several processes at once."""

    def __init__(self, folder: Path | None = None) -> None:
        self.folder = folder if folder is not None else paths.user_state_dir() / PINS_FOLDER

    def file_for(self, key: PinKey, kind: CatalogKind | None = None) -> Path:
        """The server's tools file, or its file of prompts, resources or templates (each of its
        own, so that a long list of resources never crowds the tools out of the size limit)."""
        return self.folder / (f"{key.digest}.json" if kind is None else f"{key.digest}.{kind}.json")

    def stamp(self, key: PinKey, kind: CatalogKind | None = None) -> FileStamp | None:
        try:
            status = self.file_for(key, kind).stat()
        except OSError:
            return None
        return (status.st_ino, status.st_size, status.st_mtime_ns)

    def read(self, key: PinKey) -> ServerPins | None:
        """The server's pins; ``None`` when it has no baseline yet (or its file is unreadable,
        which the next listing then replaces with a new baseline)."""
        file = self.file_for(key)
        try:
            if file.stat().st_size > MAX_CONFIG_BYTES:
                return None
            return _parse(json.loads(file.read_text(encoding="utf-8")))
        except (OSError, ValueError):
            return None

    def baseline(self, key: PinKey, definitions: Iterable[Definition]) -> ServerPins:
        """The pins ``pin_baseline`` writes for ``definitions``, built in memory (no file is
        read or written); ``PinsTooLargeError`` as it raises."""
        at = _now()
        document: dict[str, Any] = {}
        _set_header(document, key)
        tools = {definition["name"]: _pinned(definition, at) for definition in definitions}
        document.update(approved={name: _tool_json(tool) for name, tool in tools.items()}, pending={})
        _within_budget(document, key.server)
        pins = _parse(document)
        assert pins is not None  # built with its "approved" object just above
        return pins

    def pin_baseline(self, key: PinKey, definitions: Iterable[Definition]) -> bool:
        """Pin ``definitions`` as the server's approved tools, unless it has pins already (a
        second process may have pinned first); True when this call pinned them."""
        at = _now()
        tools = {definition["name"]: _pinned(definition, at) for definition in definitions}

        def pin(document: dict[str, Any]) -> bool:
            if _parse(document) is not None:
                return False
            document.clear()
            _set_header(document, key)
            document.update(approved={name: _tool_json(tool) for name, tool in tools.items()}, pending={})
            _within_budget(document, key.server)
            return True

        pinned: bool = update_json_file(self.file_for(key), pin)
        if pinned:
            # The pins of the entry's earlier versions will never be read again.
            self._remove(
                lambda header, file: (
                    header[:3] == (key.server, key.path, key.location) and header[3] != key.entry
                )
            )
        return pinned

    def read_catalog(self, key: PinKey, kind: CatalogKind) -> CatalogPins | None:
        file = self.file_for(key, kind)
        try:
            if file.stat().st_size > MAX_CONFIG_BYTES:
                return None
            return _parse_catalog(json.loads(file.read_text(encoding="utf-8")), kind)
        except (OSError, ValueError):
            return None

    def screen_catalog(
        self, key: PinKey, kind: CatalogKind, listed: Mapping[str, Definition], *, pin_added: bool
    ) -> dict[str, PinnedTool | None]:
        """Compare one listing of ``kind`` with its pins, in one locked step: the first listing
        is the baseline; later, an item whose definition differs is kept pending, and so is an
        added one unless ``pin_added`` (then it is pinned as first seen). Returns each item not
        served as it is pinned, with its approved pin (``None``: added)."""
        at = _now()

        def screen(document: dict[str, Any]) -> dict[str, PinnedTool | None]:
            _set_header(document, key)
            catalog = document.get("catalog")
            if not isinstance(catalog, dict):
                catalog = document["catalog"] = {}
            pins = _parse_catalog(document, kind)
            if pins is None:
                catalog[kind] = _catalog_json({name: _pinned(item, at) for name, item in listed.items()}, {})
                _within_budget(document, key.server)
                return {}
            approved, pending = dict(pins.approved), dict(pins.pending)
            differing: dict[str, PinnedTool | None] = {}
            for name, item in listed.items():
                fingerprint = definition_fingerprint(item)
                pinned = approved.get(name)
                if pinned is not None and pinned.fingerprint == fingerprint:
                    continue
                if pinned is None and pin_added:
                    approved[name] = _pinned(item, at)
                    continue
                differing[name] = pinned
                if name not in pending or pending[name].fingerprint != fingerprint:
                    pending[name] = _pinned(item, at)
            catalog[kind] = _catalog_json(approved, pending)
            _within_budget(document, key.server)
            return differing

        differing: dict[str, PinnedTool | None] = update_json_file(self.file_for(key, kind), screen)
        return differing

    def approve_catalog(self, key: PinKey) -> dict[CatalogKind, list[str]]:
        """Make every pending prompt, resource and template the approved one; returns their names."""
        accepted: dict[CatalogKind, list[str]] = {}
        for kind in CATALOG_KINDS:
            if not self.file_for(key, kind).exists():
                continue

            def accept(document: dict[str, Any], kind: CatalogKind = kind) -> list[str]:
                pins = _parse_catalog(document, kind)
                if pins is None or not pins.pending:
                    return []
                document["catalog"][kind] = _catalog_json({**pins.approved, **pins.pending}, {})
                return sorted(pins.pending)

            names: list[str] = update_json_file(self.file_for(key, kind), accept)
            if names:
                accepted[kind] = names
        return accepted

    def note_pending(self, key: PinKey, definitions: Iterable[Definition]) -> None:
        """Keep the current definition of each changed or added tool for the review (a pending
        entry already holding that definition is left as it is, so its date stays the first
        sighting)."""
        at = _now()
        current = {definition["name"]: _pinned(definition, at) for definition in definitions}

        def note(document: dict[str, Any]) -> None:
            pins = _parse(document)
            if pins is None:
                return
            pending = dict(pins.pending)
            for name, tool in current.items():
                if name not in pending or pending[name].fingerprint != tool.fingerprint:
                    pending[name] = tool
            document["pending"] = {name: _tool_json(tool) for name, tool in pending.items()}
            _within_budget(document, key.server)

        update_json_file(self.file_for(key), note)

    def approve(self, key: PinKey, names: Iterable[str] | None = None) -> list[str]:
        """Make the pending definitions of ``names`` (every pending tool when ``None``) the
        approved ones; returns the names approved."""
        wanted = None if names is None else set(names)

        def accept(document: dict[str, Any]) -> list[str]:
            pins = _parse(document)
            if pins is None:
                return []
            chosen = sorted(name for name in pins.pending if wanted is None or name in wanted)
            approved = {**pins.approved, **{name: pins.pending[name] for name in chosen}}
            pending = {name: tool for name, tool in pins.pending.items() if name not in chosen}
            document["approved"] = {name: _tool_json(tool) for name, tool in approved.items()}
            document["pending"] = {name: _tool_json(tool) for name, tool in pending.items()}
            return chosen

        approved: list[str] = update_json_file(self.file_for(key), accept)
        return approved

    def forget(self, name: str, in_file: Callable[[str], bool]) -> int:
        """Drop the pins of server ``name`` of every config file whose real path ``in_file``
        accepts (at any place in it, any version of its entry), so that its next listing is a
        new baseline: what approving or revoking a project server does. Returns how many
        files were dropped."""
        return self._remove(lambda header, file: header[0] == name and in_file(header[1]))

    def _remove(self, matches: Callable[[Header, Path], bool]) -> int:
        removed = 0
        try:
            files = sorted(self.folder.glob("*.json"))
        except OSError:
            return 0
        for file in files:
            try:
                document = json.loads(file.read_text(encoding="utf-8"))
            except (OSError, ValueError):
                continue
            header = _header(document)
            if header is not None and matches(header, file):
                file.unlink(missing_ok=True)
                removed += 1
        return removed
