"""Approval of project-level servers.

A project config is code execution: its servers start only once the user approved them.
Approvals live outside the repository (``<user state dir>/approvals.json``) and are keyed
by the config file's real path, the server name and the fingerprint of the unresolved
entry, so editing an approved entry (a ``git pull`` changing its command) makes it
pending again.

Approving or revoking a server also forgets its pinned tool definitions (``config.pins``,
kept beside the approvals): the first tool set seen after an approval is its baseline.
"""

from __future__ import annotations

import datetime
import json
import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mcpfleet import paths
from mcpfleet.config.model import DiscoveredEntry
from mcpfleet.config.pins import PINS_FOLDER, PinStore
from mcpfleet.config.writer import update_json_file
from mcpfleet.errors import ConfigError

ApprovalKey = tuple[str, str, str]
"""(real path of the config file, server name, fingerprint)."""


@dataclass(frozen=True)
class Approval:
    path: str
    name: str
    fingerprint: str
    approved_at: str

    @property
    def key(self) -> ApprovalKey:
        return (self.path, self.name, self.fingerprint)


def real_path(path: str | Path) -> str:
    return os.path.realpath(path)


class ApprovalStore:
    """The persisted approvals; safe to use from several processes at once."""

    def __init__(self, path: Path | None = None) -> None:
        self.path = path if path is not None else paths.user_state_dir() / "approvals.json"
        self.pins = PinStore(self.path.parent / PINS_FOLDER)

    def approvals(self) -> list[Approval]:
        """Every stored approval; an unreadable store approves nothing."""
        try:
            document = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return []
        return _parse(document)

    def approved_keys(self) -> frozenset[ApprovalKey]:
        return frozenset(approval.key for approval in self.approvals())

    def is_approved(self, config_path: str | Path, name: str, fingerprint: str) -> bool:
        return (real_path(config_path), name, fingerprint) in self.approved_keys()

    def approve(self, entry: DiscoveredEntry) -> Approval:
        """Approve this exact entry (its file, name and current content)."""
        if entry.config is None:
            raise ConfigError(
                f'server "{entry.name}" in {entry.source.path} cannot be approved: {entry.reason}',
                path=entry.source.path,
                server=entry.name,
            )
        approval = Approval(
            path=real_path(entry.source.path),
            name=entry.name,
            fingerprint=entry.config.fingerprint,
            approved_at=datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        )

        def add(document: dict[str, Any]) -> None:
            # One approval per (file, name): approving the new content replaces the old one.
            kept = [
                item for item in _parse(document) if (item.path, item.name) != (approval.path, approval.name)
            ]
            _store(document, [*kept, approval])

        update_json_file(self.path, add)
        self.pins.forget(approval.name, lambda path: path == approval.path)
        return approval

    def revoke(self, config_path: str | Path, name: str) -> int:
        """Forget approvals of ``name`` in that file; returns how many were removed."""
        target = real_path(config_path)
        self.pins.forget(name, lambda path: path == target)
        return self._remove(lambda item: item.path == target and item.name == name)

    def revoke_in_project(self, project_root: Path, name: str) -> int:
        """Forget approvals of ``name`` in any file under ``project_root``."""
        root = real_path(project_root)
        self.pins.forget(name, lambda path: _is_under(path, root))
        return self._remove(lambda item: item.name == name and _is_under(item.path, root))

    def _remove(self, matches: Callable[[Approval], bool]) -> int:
        def remove(document: dict[str, Any]) -> int:
            current = _parse(document)
            kept = [item for item in current if not matches(item)]
            if len(kept) != len(current):
                _store(document, kept)
            return len(current) - len(kept)

        removed: int = update_json_file(self.path, remove)
        return removed


def _is_under(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)


def _parse(document: Any) -> list[Approval]:
    items = document.get("approvals") if isinstance(document, dict) else None
    if not isinstance(items, list):
        return []
    fields = ("path", "name", "fingerprint", "approved_at")
    return [
        Approval(*(str(item[field]) for field in fields))
        for item in items
        if isinstance(item, dict) and all(isinstance(item.get(field), str) for field in fields)
    ]


def _store(document: dict[str, Any], approvals: Iterable[Approval]) -> None:
    document["version"] = 1
    document["approvals"] = [
        {
            "path": item.path,
            "name": item.name,
            "fingerprint": item.fingerprint,
            "approved_at": item.approved_at,
        }
        for item in approvals
    ]


def approve_project_servers(
    entries: Iterable[DiscoveredEntry],
    names: Iterable[str],
    *,
    store: ApprovalStore | None = None,
    source: str | Path | None = None,
) -> tuple[list[Approval], list[str]]:
    """Approve, for each name in ``names``, one project-level entry (the CLI's ``approve NAME…``).

    That is the entry that would be active once approved (the first in precedence order),
    or the one in the config file ``source``. Other project entries of the same name stay
    pending: approving a name must never approve an entry the user was not shown, which
    would start unasked the day the first one goes away. ``entries`` is a discovery's
    entry list, in precedence order. Returns the approvals made and the names that match
    no approvable project entry.
    """
    store = store if store is not None else ApprovalStore()
    wanted = list(dict.fromkeys(names))
    source_path = real_path(source) if source is not None else None
    approvable = [
        entry
        for entry in entries
        if entry.source.level == "project"
        and entry.config is not None
        and entry.state not in ("invalid", "filtered")
        and (source_path is None or real_path(entry.source.path) == source_path)
    ]
    chosen: dict[str, DiscoveredEntry] = {}
    for entry in approvable:
        chosen.setdefault(entry.name, entry)
    made = [store.approve(chosen[name]) for name in wanted if name in chosen]
    return made, [name for name in wanted if name not in chosen]
