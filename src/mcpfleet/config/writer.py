"""Atomic edits of mcpfleet's own JSON files (its configs and its approval store).

Every edit takes an exclusive ``flock`` on a lock file next to the target, re-reads the
file, applies the change, writes a temporary file in the same folder and renames it over
the target: a reader never sees half a file and two concurrent editors never lose each
other's change. Owner-only permissions are kept (group/other bits are dropped). Other
tools' files are never written here: decisions about their servers go to mcpfleet's user
file. (``mcpfleet hosts`` edits a host's user file on request, with this module's
confinement, lock and atomic write; see ``mcpfleet.hosts``.)

Links are never followed: a cloned repository could ship ``.mcpfleet/mcp.json`` as a link
to another tool's config (or link the ``.mcpfleet`` folder itself), and an edit would then
rewrite that file. So a target that is a symbolic link, or whose folder resolves outside
the folder it belongs to (the project, or mcpfleet's user dir), is refused.
"""

from __future__ import annotations

import contextlib
import copy
import fcntl
import json
import os
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, TypeVar

from mcpfleet import paths
from mcpfleet.config.normalise import EntryError, adapt_standard, build_server
from mcpfleet.config.readers import MAX_CONFIG_BYTES, parse_text
from mcpfleet.errors import ConfigError, ConfigWriteError, MCPFleetError, UnsafeConfigPathError

T = TypeVar("T")
Scope = Literal["project", "user"]
NEW_FILE_MODE = 0o600


def own_config_file(scope: Scope, project_root: Path) -> Path:
    """mcpfleet's config file for ``scope``."""
    return paths.project_config_file(project_root) if scope == "project" else paths.user_config_file()


def own_config_root(scope: Scope, project_root: Path) -> Path:
    """The folder ``own_config_file(scope, …)`` must stay in: the project, or mcpfleet's user dir."""
    return project_root if scope == "project" else paths.user_config_dir()


def confined_target(path: Path, root: Path) -> Path:
    """Where an edit of ``path`` is written: ``path`` in its real folder.

    Raises ``UnsafeConfigPathError`` when ``path`` is a symbolic link or its folder
    resolves outside ``root`` (both compared by their real paths, so a ``root`` reached
    through a link of its own is fine).
    """
    if path.is_symlink():
        raise UnsafeConfigPathError(
            f"refusing to edit {path}: it is a symbolic link (to {os.readlink(path)}); "
            "mcpfleet never writes through links: remove the link (or replace it with a copy of the file)",
            path=str(path),
        )
    real_folder = Path(os.path.realpath(path.parent))
    real_root = Path(os.path.realpath(root))
    if real_folder != real_root and real_root not in real_folder.parents:
        raise UnsafeConfigPathError(
            f"refusing to edit {path}: its folder resolves to {real_folder}, outside {root}; "
            "remove the link in its path",
            path=str(path),
        )
    return real_folder / path.name


@contextlib.contextmanager
def exclusive_lock(target: Path, *, lock_path: Path | None = None) -> Iterator[None]:
    """Hold an exclusive ``flock`` for editing ``target``: on ``lock_path``, by default a
    ``.<name>.lock`` file beside it (mcpfleet's own files). The lock is never the target
    itself, which the atomic rename replaces while the lock is held."""
    lock_path = lock_path if lock_path is not None else target.with_name(f".{target.name}.lock")
    # O_NOFOLLOW: a planted lock-file link must not make us create or open a file elsewhere.
    descriptor = os.open(lock_path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, NEW_FILE_MODE)
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX)
        yield
    finally:
        os.close(descriptor)  # closing releases the lock


def update_json_file(path: Path, mutate: Callable[[dict[str, Any]], T], *, root: Path | None = None) -> T:
    """Apply ``mutate`` to the JSON object in ``path`` under an exclusive lock and save it.

    A missing file starts as ``{}``; nothing is written when ``mutate`` changes nothing.
    ``path`` must be a regular file (or missing) whose folder lies in ``root`` (default:
    its own folder); otherwise ``UnsafeConfigPathError`` is raised and nothing is touched.
    """
    target = confined_target(path, root if root is not None else path.parent)
    try:
        paths.make_private_folder(target.parent)
        with exclusive_lock(target):
            remove_leftover_temporaries(target)
            document, mode = _load_for_edit(target)
            before = copy.deepcopy(document)
            result = mutate(document)
            if document != before:
                _write_atomically(target, document, NEW_FILE_MODE if mode is None else mode)
            return result
    except OSError as error:
        raise ConfigWriteError(f"cannot write {path}: {error.strerror or error}", path=str(path)) from error


def _load_for_edit(path: Path) -> tuple[dict[str, Any], int | None]:
    try:
        status = path.stat()
        if status.st_size > MAX_CONFIG_BYTES:
            raise ConfigWriteError(
                f"cannot edit {path}: file too large ({status.st_size} bytes, limit {MAX_CONFIG_BYTES}); "
                "fix or remove the file first",
                path=str(path),
            )
        data = path.read_bytes()
        mode = status.st_mode & 0o700
    except FileNotFoundError:
        return {}, None
    try:
        document = parse_text(data.decode("utf-8-sig"), "json", path=path) if data.strip() else {}
    except (ConfigError, UnicodeDecodeError) as error:
        raise ConfigWriteError(
            f"cannot edit {path}: {error}; fix or remove the file first", path=str(path)
        ) from error
    if not isinstance(document, dict):
        raise ConfigWriteError(f"cannot edit {path}: expected a JSON object at the top level", path=str(path))
    return document, mode


def _write_atomically(path: Path, document: dict[str, Any], mode: int) -> None:
    text = json.dumps(document, indent=2, ensure_ascii=False) + "\n"
    write_bytes_atomically(path, text.encode("utf-8"), mode)


TEMPORARY_SUFFIX = ".tmp"


class ChangedMeanwhile(MCPFleetError):
    """The target was not what the edit was computed from, just before its rename or just
    after it: another program wrote it meanwhile. Nothing of the edit is left in the file
    (before the rename) or the other program's write replaced it (after); the caller edits
    the current file again or refuses."""


def _temporary_prefix(path: Path) -> str:
    return f".{path.name}."


def remove_leftover_temporaries(path: Path) -> list[Path]:
    """Remove the temporary files an earlier write of ``path`` left beside it (a process
    killed mid-write); returns them. Call it holding the lock every writer of ``path``
    takes: no live write's temporary file can exist then. Only regular files of this user
    named as ``write_bytes_atomically`` names them are touched, never a link."""
    prefix = _temporary_prefix(path)
    removed: list[Path] = []
    try:
        entries = list(os.scandir(path.parent))
    except OSError:
        return removed
    for entry in entries:
        if not (entry.name.startswith(prefix) and entry.name.endswith(TEMPORARY_SUFFIX)):
            continue
        try:
            if (
                entry.is_file(follow_symlinks=False)
                and entry.stat(follow_symlinks=False).st_uid == os.geteuid()
            ):
                os.unlink(entry.path)
                removed.append(Path(entry.path))
        except FileNotFoundError:
            continue
    return removed


@dataclass(frozen=True)
class Unchanged:
    """What the target held when an edit was computed from it (``None``: it did not exist)."""

    content: bytes | None


def write_bytes_atomically(path: Path, data: bytes, mode: int, *, unchanged: Unchanged | None = None) -> None:
    """Replace ``path`` with ``data`` (mode ``mode``): a temporary file in the same folder,
    synced, then renamed over it, so a reader sees the old file or the new one, never half.

    The temporary file is its owner's only while it is one (``mode`` without the group and
    other bits): a process killed mid-write leaves nothing another user can read, whatever
    the file holds; the rename makes it the target, and only then does it get ``mode``. It
    is removed on every path out of here that does not rename it.

    With ``unchanged`` (what the edit was computed from), the target is read again just
    before the rename and just after it; ``ChangedMeanwhile`` when it differs (another
    program wrote it meanwhile), so that a lost write is never reported as done.
    """
    descriptor, temporary = tempfile.mkstemp(
        dir=path.parent, prefix=_temporary_prefix(path), suffix=TEMPORARY_SUFFIX
    )
    try:
        with os.fdopen(descriptor, "wb") as handle:
            os.fchmod(handle.fileno(), mode & 0o700)
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
            if unchanged is not None and _current_bytes(path) != unchanged.content:
                raise ChangedMeanwhile(f"{path} changed before the rename")
            os.replace(temporary, path)
            os.fchmod(handle.fileno(), mode)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temporary)
        raise
    if unchanged is not None and _current_bytes(path) != data:
        raise ChangedMeanwhile(f"{path} was rewritten right after the rename")


def _current_bytes(path: Path) -> bytes | None:
    try:
        return path.read_bytes()
    except FileNotFoundError:
        return None


def _servers(document: dict[str, Any], path: Path) -> dict[str, Any]:
    servers = document.setdefault("mcpServers", {})
    if not isinstance(servers, dict):
        raise ConfigWriteError(f'cannot edit {path}: "mcpServers" must be an object', path=str(path))
    return servers


def add_server(path: Path, name: str, entry: dict[str, Any], *, root: Path | None = None) -> None:
    """Add ``entry`` under ``mcpServers[name]``; refuses invalid entries and existing names.

    ``root`` is the folder ``path`` must stay in (see ``update_json_file``).
    """
    try:
        build_server(name, adapt_standard(entry), base_dir=path.parent)
    except EntryError as error:
        raise ConfigError(f'invalid server "{name}": {error}', path=str(path), server=name) from error

    def insert(document: dict[str, Any]) -> None:
        servers = _servers(document, path)
        if name in servers:
            raise ConfigWriteError(
                f'server "{name}" already exists in {path}; remove it first', path=str(path), server=name
            )
        servers[name] = entry

    update_json_file(path, insert, root=root)


def remove_server(path: Path, name: str, *, root: Path | None = None) -> None:
    """Remove ``mcpServers[name]``; an unknown name is an error. ``root`` as for ``add_server``."""

    def delete(document: dict[str, Any]) -> None:
        servers = _servers(document, path)
        if name not in servers:
            raise ConfigWriteError(f'server "{name}" not found in {path}', path=str(path), server=name)
        del servers[name]
        if not servers:
            del document["mcpServers"]

    update_json_file(path, delete, root=root)


def _declares(path: Path, name: str, *, root: Path) -> bool:
    # A planted link is reported here rather than skipped: whether the name is declared
    # cannot be told without following it.
    target = confined_target(path, root)
    try:
        document, _ = _load_for_edit(target)
    except ConfigWriteError:
        return False
    servers = document.get("mcpServers")
    return isinstance(servers, dict) and isinstance(servers.get(name), dict)


def _set_enabled(document: dict[str, Any], path: Path, name: str, enabled: bool) -> None:
    entry = _servers(document, path)[name]
    if enabled:
        entry.pop("enabled", None)
        entry.pop("disabled", None)
    else:
        entry["enabled"] = False


def _edit_name_list(document: dict[str, Any], key: str, name: str, *, present: bool) -> None:
    names = document.get(key)
    current = {item for item in names if isinstance(item, str)} if isinstance(names, list) else set()
    current = current | {name} if present else current - {name}
    if current:
        document[key] = sorted(current)
    else:
        document.pop(key, None)


def set_server_enabled(name: str, enabled: bool, *, project_root: Path) -> Path:
    """Enable or disable ``name``; returns the file that records the decision.

    A server declared in one of mcpfleet's own files gets ``enabled`` edited there (the
    project file first, as it takes precedence). Any other server is recorded in the user
    file's ``disabledServers`` (deny, always wins) or ``enabledServers`` (force-enable over
    another tool's ``enabled: false``); enabling clears a deny entry and disabling clears a
    force-enable entry, so the two lists never disagree.
    """
    project_file = paths.project_config_file(project_root)
    user_file = paths.user_config_file()
    in_project = _declares(project_file, name, root=project_root)
    if in_project:
        update_json_file(
            project_file,
            lambda document: _set_enabled(document, project_file, name, enabled),
            root=project_root,
        )

    def edit_user(document: dict[str, Any]) -> bool:
        servers = document.get("mcpServers")
        declared_here = not in_project and isinstance(servers, dict) and isinstance(servers.get(name), dict)
        if declared_here:
            _set_enabled(document, user_file, name, enabled)
        record_in_lists = not in_project and not declared_here
        _edit_name_list(document, "disabledServers", name, present=not enabled and record_in_lists)
        _edit_name_list(document, "enabledServers", name, present=enabled and record_in_lists)
        return declared_here

    update_json_file(user_file, edit_user, root=paths.user_config_dir())
    return project_file if in_project else user_file
