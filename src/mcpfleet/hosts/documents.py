"""A host's config file as an editable document: its server map, the entries moved aside,
and the few edits ``hosts install`` and ``hosts uninstall`` make, for JSON(C) and TOML.

Every edit is a text splice (``jsonc.py``, ``toml_text.py``) checked the same way: the new
text is parsed and must hold exactly the data the edit meant, else ``EditCheckError`` and
nothing is written. So a layout the splicing does not understand (a TOML server written as
an inline table, say) can cost a refusal, never a file with other data changed.

How ``--replace`` keeps entries restorable exactly (JSON): the whole server map is renamed
to ``REPLACED_KEY`` in place (its text untouched) and a new server map, holding the gateway
entry and the entries the gateway does not serve, is added at the end; uninstalling removes
that new map and renames the old one back. TOML (Codex, which warns about a table it does
not know) cuts each served ``[mcp_servers.NAME]`` table out into ``moved`` (kept in mcpfleet's
state by ``wiring``) and puts the text back where it was; tables an older mcpfleet renamed to
``[replaced_by_mcpfleet.NAME]`` are renamed back.
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from mcpfleet.config.gateway_entry import REPLACED_KEY
from mcpfleet.config.readers import parse_text
from mcpfleet.errors import ConfigError
from mcpfleet.hosts import jsonc, toml_text
from mcpfleet.hosts.known import Host


class EditCheckError(ConfigError):
    """An edit would not have produced exactly the intended data; nothing was written."""


class HostDocument(ABC):
    """The text of a host's file and the data it parses to; edits replace both."""

    def __init__(self, host: Host, text: str, moved: Mapping[str, MovedEntry] | None = None) -> None:
        self.host = host
        self.path = host.path
        self.key = host.servers_key
        self.text = text
        self.moved: dict[str, MovedEntry] = dict(moved or {})
        """Entries moved aside into mcpfleet's state (Codex), in the order they were moved."""
        self.data = self._parse(text)
        for key in (self.key, REPLACED_KEY):
            if key in self.data and not isinstance(self.data[key], dict):
                raise ConfigError(
                    f'cannot edit {self.path}: "{key}" is not a table of servers; fix the file first',
                    path=str(self.path),
                )

    def _parse(self, text: str) -> dict[str, Any]:
        if not text.strip():
            return {}
        try:
            document = _fast_json(text) if self.host.format == "json" else None
            if document is None:
                document = parse_text(text, self.host.format, path=self.path)
        except ConfigError as error:
            fix = "" if "; fix" in str(error) else "; fix the file (or move it away), then run this again"
            raise ConfigError(f"cannot edit {error}{fix}", path=str(self.path)) from error
        if not isinstance(document, dict):
            raise ConfigError(
                f"cannot edit {self.path}: the top level is not an object; fix the file first",
                path=str(self.path),
            )
        return document

    @property
    def servers(self) -> dict[str, Any]:
        found = self.data.get(self.key)
        return found if isinstance(found, dict) else {}

    @property
    def replaced(self) -> dict[str, Any] | None:
        found = self.data.get(REPLACED_KEY)
        return found if isinstance(found, dict) else None

    @property
    def moved_aside(self) -> list[str]:
        """Every entry moved aside: under ``REPLACED_KEY``, and into mcpfleet's state."""
        return list(dict.fromkeys([*(self.replaced or ()), *self.moved]))

    def _accept(self, new_text: str, expected: dict[str, Any], what: str) -> None:
        """Take ``new_text`` if it parses to ``expected``; otherwise refuse the whole edit."""
        try:
            parsed = self._parse(new_text)
        except ConfigError:
            parsed = None
        if parsed is None or _comparable(parsed, self.key) != _comparable(expected, self.key):
            raise EditCheckError(
                f"cannot {what} in {self.path} without changing more of the file than that "
                "(its layout is one mcpfleet does not edit); nothing was written: make the change by "
                "hand, as docs/gateway.md (Hosts) shows",
                path=str(self.path),
            )
        self.text, self.data = new_text, parsed

    @abstractmethod
    def add_server(self, name: str, entry: dict[str, Any]) -> None:
        """Add ``entry`` as ``name`` at the end of the server map (created when missing)."""

    @abstractmethod
    def remove_server(self, name: str) -> None:
        """Remove ``name`` from the server map (and the map, when it is left empty)."""

    @abstractmethod
    def move_aside(self, names: Sequence[str]) -> None:
        """Take ``names`` out of the server map into ``REPLACED_KEY``."""

    @abstractmethod
    def restore(self) -> list[str]:
        """Put the entries moved aside back into the server map; returns the names the host
        gets back (not the copies it kept seeing). A server the host wrote under the same name
        since then wins over the one moved aside.
        Call it once the gateway's entries are out of the server map."""

    def _expected(self) -> dict[str, Any]:
        """A copy of the data to state an edit's intent on: the top level and the two server
        maps are copied (edits change nothing deeper), the rest is shared, so a file of
        megabytes costs no deep copy."""
        expected = dict(self.data)
        for key in (self.key, REPLACED_KEY):
            if isinstance(expected.get(key), dict):
                expected[key] = dict(expected[key])
        return expected


def _fast_json(text: str) -> Any:
    """``text`` parsed as plain JSON, or None when it is not (comments, trailing commas, a
    repeated key, an error): then the JSONC reader parses it, with its limits and its error
    messages. Every edit parses the whole file again to check itself, and ``~/.claude.json``
    runs to megabytes: the C parser keeps that to a fraction of a second."""
    try:
        return json.loads(text, object_pairs_hook=_unique_keys)
    except (ValueError, RecursionError):
        return None


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    found = dict(pairs)
    if len(found) != len(pairs):
        raise ValueError("a repeated key")  # left to the JSONC reader, which names it
    return found


def _comparable(data: dict[str, Any], key: str) -> dict[str, Any]:
    """``data`` with an empty server map or replaced map dropped: TOML cannot tell an empty
    table that is written from one that is not, and an emptied JSON map is removed."""
    return {name: value for name, value in data.items() if not (name in (key, REPLACED_KEY) and value == {})}


class JsonDocument(HostDocument):
    def _root(self) -> tuple[jsonc.JsonObject, jsonc.Layout]:
        if not self.text.strip():
            self.text = "{}\n"
        root = jsonc.parse_object(self.text)
        return root, jsonc.Layout.of(self.text, root)

    def _map(self, root: jsonc.JsonObject, key: str) -> tuple[jsonc.Member, jsonc.JsonObject]:
        member = root.member(key)
        assert member is not None  # the callers check the data first
        return member, jsonc.parse_object(self.text, member.value_start)

    def add_server(self, name: str, entry: dict[str, Any]) -> None:
        root, layout = self._root()
        expected = self._expected()
        expected.setdefault(self.key, {})[name] = entry
        if root.member(self.key) is None:
            indent = jsonc.member_indent(self.text, root, layout)
            new_text = jsonc.append_member(
                self.text, root, self.key, layout.render({name: entry}, indent), layout
            )
        else:
            _, servers = self._map(root, self.key)
            indent = jsonc.member_indent(self.text, servers, layout)
            new_text = jsonc.append_member(self.text, servers, name, layout.render(entry, indent), layout)
        self._accept(new_text, expected, f'add the server "{name}"')

    def remove_server(self, name: str) -> None:
        root, _ = self._root()
        holder, servers = self._map(root, self.key)
        member = servers.member(name)
        assert member is not None
        expected = self._expected()
        del expected[self.key][name]
        if len(servers.members) == 1:
            del expected[self.key]
            new_text = jsonc.remove_member(self.text, root, holder)
        else:
            new_text = jsonc.remove_member(self.text, servers, member)
        self._accept(new_text, expected, f'remove the server "{name}"')

    def move_aside(self, names: Sequence[str]) -> None:
        if self.replaced is None:
            self._rename_map_aside(names)
            return
        for name in names:
            root, layout = self._root()
            _, servers = self._map(root, self.key)
            member = servers.member(name)
            assert member is not None
            value_text = self.text[member.value_start : member.value_end]
            self.remove_server(name)
            root, layout = self._root()
            _, aside = self._map(root, REPLACED_KEY)
            self._set_member(aside, REPLACED_KEY, name, value_text, layout)

    def _set_member(
        self, container: jsonc.JsonObject, key: str, name: str, value_text: str, layout: jsonc.Layout
    ) -> None:
        """``container`` (the map at ``key``) with ``name`` set to the value written as ``value_text``."""
        expected = self._expected()
        existing = container.member(name)
        if existing is not None:
            new_text = jsonc.replace_value(self.text, existing, value_text)
        else:
            new_text = jsonc.append_member(self.text, container, name, value_text, layout)
        expected[key][name] = self._parse("{" + '"v": ' + value_text + "}")["v"]
        self._accept(new_text, expected, f'move the server "{name}"')

    def _rename_map_aside(self, names: Sequence[str]) -> None:
        root, layout = self._root()
        holder, servers = self._map(root, self.key)
        kept = [jsonc.member_text(self.text, member) for member in servers.members if member.key not in names]
        renamed = jsonc.rename_member(self.text, holder, REPLACED_KEY)
        root = jsonc.parse_object(renamed)
        indent = jsonc.member_indent(renamed, root, layout)
        new_text = jsonc.append_member(
            renamed, root, self.key, jsonc.object_text(kept, indent, layout), layout
        )
        expected = self._expected()
        expected[REPLACED_KEY] = expected[self.key]
        expected[self.key] = {name: entry for name, entry in self.servers.items() if name not in names}
        self._accept(new_text, expected, "move the servers the gateway serves aside")

    def restore(self) -> list[str]:
        aside = self.replaced
        assert aside is not None
        # The new map holds copies of what was not moved aside, and what the host added or
        # changed since: those win over what was moved aside.
        hidden = [name for name in aside if name not in self.servers]
        root, _ = self._root()
        changed: dict[str, str] = {}
        if root.member(self.key) is not None:
            holder, servers = self._map(root, self.key)
            for member in servers.members:
                if aside.get(member.key) != self.servers[member.key]:
                    changed[member.key] = self.text[member.value_start : member.value_end]
            expected = self._expected()
            del expected[self.key]
            self._accept(jsonc.remove_member(self.text, root, holder), expected, "remove the new server map")
        root, _ = self._root()
        holder, _ = self._map(root, REPLACED_KEY)
        expected = self._expected()
        expected[self.key] = expected.pop(REPLACED_KEY)
        self._accept(jsonc.rename_member(self.text, holder, self.key), expected, "put the servers back")
        for name, value_text in changed.items():
            root, layout = self._root()
            _, servers = self._map(root, self.key)
            self._set_member(servers, self.key, name, value_text, layout)
        return hidden


@dataclass(frozen=True)
class MovedEntry:
    """An entry ``--replace`` took out of a host's file into mcpfleet's state: its data (what
    discovery serves) and the text cut out of the file (what ``uninstall`` puts back)."""

    entry: dict[str, Any]
    pieces: tuple[toml_text.Piece, ...]


class TomlDocument(HostDocument):
    """Codex's ``config.toml``. Codex warns at every start about a table it does not know,
    so ``--replace`` cuts the served tables out into mcpfleet's state (``moved``) rather than
    renaming them; tables an older mcpfleet renamed to ``REPLACED_KEY`` are still put back."""

    def add_server(self, name: str, entry: dict[str, Any]) -> None:
        expected = self._expected()
        expected.setdefault(self.key, {})[name] = entry
        self._accept(toml_text.append_table(self.text, (self.key, name), entry), expected, f'add "{name}"')

    def remove_server(self, name: str) -> None:
        expected = self._expected()
        del expected[self.key][name]
        self._accept(toml_text.remove_tables(self.text, (self.key, name)), expected, f'remove "{name}"')

    def move_aside(self, names: Sequence[str]) -> None:
        for name in names:
            if self.replaced is not None and name in self.replaced:
                expected = self._expected()
                del expected[REPLACED_KEY][name]
                new_text = toml_text.remove_tables(self.text, (REPLACED_KEY, name))
                self._accept(new_text, expected, f'replace the copy of "{name}" moved aside earlier')
            entry = self.servers[name]
            try:
                json.dumps(entry)
            except (TypeError, ValueError) as error:
                raise ConfigError(
                    f'cannot move the server "{name}" aside in {self.path}: it holds a value mcpfleet '
                    "cannot keep (a date or time); nothing was written: move it by hand",
                    path=str(self.path),
                ) from error
            expected = self._expected()
            del expected[self.key][name]
            new_text, pieces = toml_text.cut_tables(self.text, (self.key, name))
            self._accept(new_text, expected, f'move the server "{name}" aside')
            self.moved.pop(name, None)
            self.moved[name] = MovedEntry(entry, tuple(pieces))

    def restore(self) -> list[str]:
        restored: list[str] = []
        for name in list(self.replaced or ()):
            expected = self._expected()
            entry = expected[REPLACED_KEY].pop(name)
            if name in self.servers:
                self._accept(
                    toml_text.remove_tables(self.text, (REPLACED_KEY, name)), expected, f'drop "{name}"'
                )
                continue
            expected.setdefault(self.key, {})[name] = entry
            new_text = toml_text.rename_tables(self.text, (REPLACED_KEY, name), self.key)
            self._accept(new_text, expected, f'put the server "{name}" back')
            restored.append(name)
        # The last moved first: each was cut from the text the ones after it were cut from.
        for name in reversed(list(self.moved)):
            moved = self.moved.pop(name)
            if name in self.servers:
                continue  # the host wrote a server of that name since: its own wins
            expected = self._expected()
            expected.setdefault(self.key, {})[name] = moved.entry
            new_text = toml_text.insert_pieces(self.text, moved.pieces)
            self._accept(new_text, expected, f'put the server "{name}" back')
            restored.append(name)
        return restored


def open_document(host: Host, text: str, moved: Mapping[str, MovedEntry] | None = None) -> HostDocument:
    """``text`` (the file's content, empty for a missing file) as ``host``'s document, with
    the entries moved aside into mcpfleet's state (``moved``, Codex only)."""
    return TomlDocument(host, text, moved) if host.format == "toml" else JsonDocument(host, text)
