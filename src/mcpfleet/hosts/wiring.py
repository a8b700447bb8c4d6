"""Reading and wiring a host: does it use the gateway, and writing or removing its entry.

A write touches two files and no other: the host's user config file, replaced atomically
(temporary file in the same folder, then rename, the file's mode kept), and its backup
beside it (``<file>.mcpfleet-backup``, the file as it was before this change). The file is
confined as mcpfleet's own files are (``config/writer.py``): a symbolic link, or a folder
that resolves outside the home (or ``CODEX_HOME``…), is refused. Concurrent mcpfleet runs are
serialised by the writer's lock, held on a lock file in mcpfleet's state dir, not beside the
host's file. The host itself does not take that lock: the file is read again just before and
just after the rename, and an edit another program overwrote is made again on what it wrote
(``EDIT_ATTEMPTS``), else refused; a host that writes back, later, a copy it read before can
still undo the change, as with any editor. Codex's moved entries are a third file, mcpfleet's
own record in its state dir (``read_moved_entries``).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Collection, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from mcpfleet import paths
from mcpfleet.config.gateway_entry import (
    MOVED_SERVERS_KEY,
    GatewayEndpoint,
    moved_entries_file,
    own_gateway_reason,
    running_gateway_endpoints,
)
from mcpfleet.config.model import DiscoveredEntry, DiscoveryResult
from mcpfleet.config.normalise import Adapter, EntryError, SkippedEntry, build_server
from mcpfleet.config.readers import MAX_CONFIG_BYTES, MAX_USER_CONFIG_BYTES, read_document
from mcpfleet.config.writer import (
    ChangedMeanwhile,
    Unchanged,
    confined_target,
    exclusive_lock,
    remove_leftover_temporaries,
    write_bytes_atomically,
)
from mcpfleet.errors import ConfigError, ConfigWriteError
from mcpfleet.hosts.documents import HostDocument, MovedEntry, open_document
from mcpfleet.hosts.known import GATEWAY_ENTRY_NAME, Host, ScopeFile
from mcpfleet.hosts.toml_text import Piece

_BOM = b"\xef\xbb\xbf"
NEW_FILE_MODE = 0o600


def is_gateway_entry(host: Host, raw: Any, endpoints: Sequence[GatewayEndpoint] = ()) -> bool:
    """Whether ``raw``, an entry of ``host``'s server map, is the gateway's own."""
    return _runs_gateway(host.adapt, host.path, raw, endpoints)


@dataclass(frozen=True)
class HostStatus:
    """What ``mcpfleet hosts`` reports for one host."""

    host: Host
    found: bool
    gateway_entries: tuple[str, ...] = ()
    replaced: tuple[str, ...] = ()
    """Entries ``hosts install --replace`` moved aside."""
    error: str | None = None
    scopes: tuple[tuple[str, str], ...] = ()
    """(scope, name) of each gateway entry, ``user`` for the user file's (those of
    ``gateway_entries`` that ``hosts install`` manages), else the scope of another file the
    host reads for this project (``local``, ``project``)."""

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.host.id,
            "name": self.host.name,
            "found": self.found,
            "path": str(self.host.path),
            "gateway": bool(self.gateway_entries),
            "gateway_entries": list(self.gateway_entries),
            "replaced": list(self.replaced),
            "error": self.error,
            "gateway_scopes": [{"scope": scope, "name": name} for scope, name in self.scopes],
        }


def host_status(host: Host, endpoints: Sequence[GatewayEndpoint] | None = None) -> HostStatus:
    """Whether ``host`` is installed here and whether its user config has the gateway entry."""
    found = host.found
    try:
        text = _read(host.path)[0]
        document = open_document(host, text, read_moved_entries(host))
    except ConfigError as error:
        return HostStatus(host, found, error=str(error))
    endpoints = running_gateway_endpoints() if endpoints is None else endpoints
    servers = document.servers
    gateway = tuple(name for name, raw in servers.items() if is_gateway_entry(host, raw, endpoints))
    # Copies of what was not moved aside sit in both maps; the host only misses the others.
    replaced = tuple(name for name in document.moved_aside if name not in servers)
    scopes = [("user", name) for name in gateway]
    for scope in host.other_scopes:
        scopes += [(scope.level, name) for name in _gateway_entries_in(scope, endpoints)]
    names = tuple(dict.fromkeys(name for _, name in scopes))
    return HostStatus(host, found, names, replaced, scopes=tuple(scopes))


def _gateway_entries_in(scope: ScopeFile, endpoints: Sequence[GatewayEndpoint]) -> list[str]:
    """Names of the gateway's entries in another scope's file; none when it cannot be read
    (its own errors are discovery's to report: `mcpfleet config`)."""
    try:
        limit = MAX_CONFIG_BYTES if scope.level == "project" else MAX_USER_CONFIG_BYTES
        node = read_document(scope.path, max_bytes=limit)
    except ConfigError:
        return []
    for key in scope.servers_at:
        node = node.get(key) if isinstance(node, dict) else None
    if not isinstance(node, dict):
        return []
    return [name for name, raw in node.items() if _runs_gateway(scope.adapt, scope.path, raw, endpoints)]


def _runs_gateway(adapt: Adapter, path: Path, raw: Any, endpoints: Sequence[GatewayEndpoint]) -> bool:
    if not isinstance(raw, dict):
        return False
    try:
        # The name plays no part in recognising the entry; a fixed one keeps any name readable.
        config = build_server("entry", adapt(raw), base_dir=path.parent)
    except (EntryError, SkippedEntry):
        return False
    return own_gateway_reason(config, endpoints) is not None


def served_entries(discovery: DiscoveryResult, host: Host) -> frozenset[str]:
    """Names in ``host``'s server map that the gateway serves, per ``discovery``: active
    entries, and shadowed entries (by name or as an alias) that run exactly as an active one:
    discovery resolves both, defaults applied, so a ``cwd`` left out and the same folder
    written out are the same server."""
    prefix = f"/{_escape_pointer(host.servers_key)}/"
    active = {_identity(entry) for entry in discovery.entries if entry.state == "active"}
    served: set[str] = set()
    for entry in discovery.entries:
        if entry.source.path != str(host.path) or not entry.source.location.startswith(prefix):
            continue
        if entry.state == "active" or (entry.state == "shadowed" and _identity(entry) in active):
            served.add(entry.name)
    return frozenset(served)


def _identity(entry: DiscoveredEntry) -> str | None:
    return entry.config.connection_identity() if entry.config is not None else None


def _escape_pointer(key: str) -> str:
    return key.replace("~", "~0").replace("/", "~1")


@dataclass
class WiringReport:
    """What ``install_gateway`` or ``uninstall_gateway`` did to one host's file."""

    host: Host
    gateway_entries: list[str] = field(default_factory=list)
    """The gateway's entries in the server map before the change."""
    added: list[str] = field(default_factory=list)
    moved_aside: list[str] = field(default_factory=list)
    restored: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    backup: Path | None = None

    @property
    def changed(self) -> bool:
        return bool(self.added or self.moved_aside or self.restored or self.removed)

    def to_json(self) -> dict[str, Any]:
        return {
            "host": self.host.id,
            "path": str(self.host.path),
            "changed": self.changed,
            "gateway_entries": self.gateway_entries,
            "added": self.added,
            "moved_aside": self.moved_aside,
            "restored": self.restored,
            "removed": self.removed,
            "backup": str(self.backup) if self.backup is not None else None,
        }


def install_gateway(
    host: Host,
    command: Sequence[str],
    *,
    replace: bool = False,
    served: Collection[str] = (),
    serve_options: Sequence[str] = (),
) -> WiringReport:
    """Write the gateway's entry into ``host``'s user config, unless it has one already.

    ``serve_options`` follow ``serve`` in the entry (``--profile NAME``). With ``replace``,
    the entries of ``served`` (see ``served_entries``) are moved aside too.
    Raises ``ConfigError`` for a file that cannot be edited (with the fix in the message),
    ``UnsafeConfigPathError`` for a link, ``ConfigWriteError`` when writing fails.
    """
    report = WiringReport(host)
    endpoints = running_gateway_endpoints()

    def edit(document: HostDocument) -> None:
        servers = document.servers
        report.added = []  # an edit made again on a file another program rewrote starts afresh
        report.gateway_entries = [
            name for name, raw in servers.items() if is_gateway_entry(host, raw, endpoints)
        ]
        if not report.gateway_entries:
            if GATEWAY_ENTRY_NAME in servers:
                raise ConfigError(
                    f'{host.path} already has a server named "{GATEWAY_ENTRY_NAME}" that is not the gateway; '
                    "rename it in that file, then run this again",
                    path=str(host.path),
                )
            document.add_server(GATEWAY_ENTRY_NAME, host.gateway_entry(command, serve_options))
            report.added.append(GATEWAY_ENTRY_NAME)
        if replace:
            keep = set(report.gateway_entries) | set(report.added)
            report.moved_aside = [name for name in document.servers if name in served and name not in keep]
            if report.moved_aside:
                document.move_aside(report.moved_aside)

    report.backup = _edit(host, edit)
    return report


def uninstall_gateway(host: Host) -> WiringReport:
    """Remove the gateway's entries from ``host``'s user config and put back what
    ``install_gateway(replace=True)`` moved aside."""
    report = WiringReport(host)
    endpoints = running_gateway_endpoints()

    def remove_gateway_entries(document: HostDocument) -> list[str]:
        removed = [name for name, raw in document.servers.items() if is_gateway_entry(host, raw, endpoints)]
        for name in removed:
            document.remove_server(name)
        return removed

    def edit(document: HostDocument) -> None:
        report.removed = report.gateway_entries = remove_gateway_entries(document)
        report.restored = []
        if document.moved_aside:
            restored = document.restore()
            # The gateway's entry written before --replace was moved aside with the rest of
            # the map, so it came back with them: it goes now.
            again = remove_gateway_entries(document)
            report.restored = [name for name in restored if name not in again]
            report.removed = list(dict.fromkeys([*report.removed, *again]))

    report.backup = _edit(host, edit)
    return report


def _lock_path(target: Path) -> Path:
    """Where edits of ``target`` are serialised: mcpfleet's state dir, never the host's folder."""
    folder = paths.make_private_folder(paths.user_state_dir() / "locks")
    return folder / f"{hashlib.sha256(str(target).encode()).hexdigest()[:32]}.lock"


EDIT_ATTEMPTS = 3
"""How many times an edit is made again on the current file when another program (the host
itself, an editor) wrote the file between mcpfleet's read and its rename."""


def _edit(host: Host, edit: Callable[[HostDocument], None]) -> Path | None:
    """Run ``edit`` on ``host``'s document under the lock; write the result if it changed.
    Returns the backup written, if any.

    The file is read again just before and just after the rename: when another program wrote
    it meanwhile, the edit is made again on what it wrote (so both changes are kept), up to
    ``EDIT_ATTEMPTS`` times, then refused; a write that was lost is never reported as done."""
    target = confined_target(host.path, host.root)
    if not target.parent.is_dir():
        raise ConfigError(
            f"{host.name} does not seem to be set up here: {target.parent} does not exist; "
            f"run {host.name} once (or create that folder), then run this again",
            path=str(host.path),
        )
    try:
        with exclusive_lock(target, lock_path=_lock_path(target)):
            remove_leftover_temporaries(target)
            remove_leftover_temporaries(target.with_name(host.backup_path.name))
            for _ in range(EDIT_ATTEMPTS):
                try:
                    return _edit_once(host, target, edit)
                except ChangedMeanwhile:
                    continue
    except OSError as error:
        raise ConfigWriteError(
            f"cannot write {host.path}: {error.strerror or error}", path=str(host.path)
        ) from error
    raise ConfigWriteError(
        f"cannot write {host.path}: another program rewrote it while mcpfleet was editing it "
        f"({EDIT_ATTEMPTS} times), so the change is not in it; quit {host.name} (it rewrites that "
        "file), then run this again",
        path=str(host.path),
    )


def _edit_once(host: Host, target: Path, edit: Callable[[HostDocument], None]) -> Path | None:
    text, original, mode = _read(target)
    moved = read_moved_entries(host)
    document = open_document(host, text, moved)
    edit(document)
    if document.text == text:
        return None
    bom = _BOM if original is not None and original.startswith(_BOM) else b""
    backup = None
    if original is not None:
        backup = target.with_name(host.backup_path.name)
        write_bytes_atomically(backup, original, mode)
    # The record of what moved aside is written before the file loses those entries and
    # after it gets them back: a run stopped in between leaves a server in both places
    # (discovery keeps the file's), never in neither.
    gained = any(moved.get(name) != entry for name, entry in document.moved.items())
    if gained:
        _write_moved_entries(host, document.moved)
    write_bytes_atomically(target, bom + document.text.encode("utf-8"), mode, unchanged=Unchanged(original))
    if not gained and document.moved != moved:
        _write_moved_entries(host, document.moved)
    return backup


def read_moved_entries(host: Host) -> dict[str, MovedEntry]:
    """The entries ``--replace`` moved out of ``host``'s file into mcpfleet's state, in the
    order they were moved (none for a host whose entries move within its file)."""
    record = moved_entries_file(host.id, host.path)
    try:
        data = json.loads(record.read_text(encoding="utf-8"))
        entries, pieces = data[MOVED_SERVERS_KEY], data["pieces"]
        moved = {
            name: MovedEntry(entry, tuple(Piece(**piece) for piece in pieces[name]))
            for name, entry in entries.items()
        }
        for name, entry in moved.items():
            if not isinstance(name, str) or not isinstance(entry.entry, dict):
                raise TypeError(f"{name!r} is not a server entry")
            for piece in entry.pieces:
                if not (isinstance(piece.offset, int) and isinstance(piece.text, str)):
                    raise TypeError(f"a piece of {name!r} is not an offset and a text")
        return moved
    except FileNotFoundError:
        return {}
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as error:
        raise ConfigError(
            f"cannot read {record}, mcpfleet's record of the servers `hosts install --replace` moved out "
            f"of {host.path} ({error}); put them back in that file by hand, then remove the record",
            path=str(record),
        ) from error


def _write_moved_entries(host: Host, moved: dict[str, MovedEntry]) -> None:
    record = moved_entries_file(host.id, host.path)
    if not moved:
        record.unlink(missing_ok=True)
        return
    paths.make_private_folder(record.parent)
    data = {
        "host": host.id,
        "path": str(host.path),
        MOVED_SERVERS_KEY: {name: entry.entry for name, entry in moved.items()},
        "pieces": {name: [asdict(piece) for piece in entry.pieces] for name, entry in moved.items()},
    }
    text = json.dumps(data, indent=2, ensure_ascii=False) + "\n"
    write_bytes_atomically(record, text.encode("utf-8", "surrogatepass"), NEW_FILE_MODE)


def _read(path: Path) -> tuple[str, bytes | None, int]:
    """(text, raw bytes or None when missing, mode) of ``path``; refuses what is too big or not text."""
    try:
        status = path.stat()
        if status.st_size > MAX_USER_CONFIG_BYTES:
            raise ConfigError(
                f"cannot edit {path}: file too large ({status.st_size} bytes, limit "
                f"{MAX_USER_CONFIG_BYTES}); add the gateway entry by hand",
                path=str(path),
            )
        data = path.read_bytes()
    except FileNotFoundError:
        return "", None, NEW_FILE_MODE
    except OSError as error:
        raise ConfigError(f"cannot read {path}: {error.strerror or error}", path=str(path)) from error
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        raise ConfigError(
            f"cannot edit {path}: not UTF-8 text ({error.reason}); fix the file first", path=str(path)
        ) from error
    return text, data, status.st_mode & 0o7777
