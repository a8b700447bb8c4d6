"""Service accounts' API keys: made once, kept as hashes only, looked up in constant time.

``mcpfleet team key add NAME`` makes a key (``mcpfleet_sk_`` then 256 random bits, URL-safe)
and shows it once; the file ``identity.api_keys`` keeps only its SHA-256, so a copy of the
file lets nobody in. A plain hash suffices (no slow password hash): the key is random, not
chosen by a person, and 256 bits are not searched. The file::

    {"keys": {"ci": {"sha256": "<64 hex>", "created": "2026-12-02T07:00:00+00:00"}}}

is written 0600 under a lock by an atomic rename (``config.writer``), so a gateway reading it
meanwhile sees the old file or the new one. The gateway re-reads it when it changes (its
size, time or inode), checked on each request that carries a key: a revocation takes effect
on the next request, with no restart. A file that cannot be read leaves no key valid (fail
closed) and logs the reason once per change of the file.

A presented key is hashed and compared with every stored hash by ``hmac.compare_digest``,
without stopping at a match, so the time a lookup takes says nothing about which key matched
or how close a guess came.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import os
import re
import secrets
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from mcpfleet.errors import MCPFleetError
from mcpfleet.team.principal import Principal

logger = logging.getLogger(__name__)

KEY_PREFIX = "mcpfleet_sk_"
"""Marks a bearer credential as one of these keys (not a JWT) at a glance, for people and for
secret scanners."""
KEY_RANDOM_BYTES = 32
SERVICE_SUBJECT_PREFIX = "service:"
MAX_KEY_FILE_BYTES = 1024 * 1024
_NAME_SHAPE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
_HASH_SHAPE = re.compile(r"[0-9a-f]{64}")


class ApiKeyFileError(MCPFleetError):
    """The API key file cannot be read or written, or a key's name is not one it can hold (the
    message names the file and the fix)."""


def new_key() -> str:
    """A fresh service-account key."""
    return KEY_PREFIX + secrets.token_urlsafe(KEY_RANDOM_BYTES)


def key_digest(key: str) -> bytes:
    return hashlib.sha256(key.encode("utf-8")).digest()


def check_account_name(name: str) -> str:
    """``name`` if it can name a service account: letters, digits, ``.``, ``_``, ``-``, at most 64."""
    if not _NAME_SHAPE.fullmatch(name):
        raise ApiKeyFileError(
            f"service account name {name!r}: use 1 to 64 letters, digits, '.', '_' or '-', starting "
            "with a letter or digit"
        )
    return name


def add_key(path: Path, name: str) -> str:
    """Make a key for service account ``name``, store its hash in ``path``, and return the key.
    An account that has a key already is refused: revoke it first (a rotation is deliberate)."""
    from mcpfleet.config.writer import update_json_file
    from mcpfleet.errors import ConfigWriteError

    check_account_name(name)
    key = new_key()

    def store(document: dict[str, Any]) -> None:
        keys = _keys_section(document, path)
        if name in keys:
            raise ApiKeyFileError(
                f"{path}: service account {name!r} has a key already; revoke it first "
                f"(mcpfleet team key revoke {name} --team …), then add a new one"
            )
        keys[name] = {
            "sha256": key_digest(key).hex(),
            "created": datetime.now(UTC).isoformat(timespec="seconds"),
        }

    try:
        update_json_file(path, store)
    except ConfigWriteError as error:
        raise ApiKeyFileError(str(error)) from error
    os.chmod(path, 0o600)  # the file may predate mcpfleet's modes: hashes are for nobody else
    return key


def revoke_key(path: Path, name: str) -> bool:
    """Forget service account ``name``'s key; ``False`` when it had none."""
    from mcpfleet.config.writer import update_json_file
    from mcpfleet.errors import ConfigWriteError

    def forget(document: dict[str, Any]) -> bool:
        return _keys_section(document, path).pop(name, None) is not None

    try:
        return update_json_file(path, forget)
    except ConfigWriteError as error:
        raise ApiKeyFileError(str(error)) from error


def _keys_section(document: dict[str, Any], path: Path) -> dict[str, Any]:
    keys = document.setdefault("keys", {})
    if not isinstance(keys, dict):
        raise ApiKeyFileError(f'{path}: "keys" is not an object; fix the file or remove it')
    return keys


@dataclass(frozen=True)
class _Loaded:
    signature: tuple[int, int, int] | None
    """(inode, size, mtime in ns) of the file read; ``None``: there was no file."""
    digests: tuple[tuple[str, bytes], ...]


class ApiKeyStore:
    """The keys a gateway accepts: the file's hashes, re-read when the file changes."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._loaded = _Loaded(signature=None, digests=())
        self._reported: tuple[int, int, int] | None = None
        self._loaded = self._load(self._signature())

    def principal_for(self, key: str) -> Principal | None:
        """The service account whose key ``key`` is, or ``None``."""
        signature = self._signature()
        if signature != self._loaded.signature:
            self._loaded = self._load(signature)
        presented = key_digest(key)
        found: str | None = None
        for name, stored in self._loaded.digests:
            # No early exit: every stored hash is compared, match or not.
            if hmac.compare_digest(presented, stored):
                found = name
        if found is None:
            return None
        return Principal(subject=SERVICE_SUBJECT_PREFIX + found, service_account=found)

    def _signature(self) -> tuple[int, int, int] | None:
        try:
            status = self.path.stat()
        except FileNotFoundError:
            return None
        except OSError as error:
            return (-1, -1, error.errno or -1)  # unreadable: _load says why
        return (status.st_ino, status.st_size, status.st_mtime_ns)

    def _load(self, signature: tuple[int, int, int] | None) -> _Loaded:
        if signature is None:
            return _Loaded(signature=None, digests=())
        try:
            return _Loaded(signature, read_digests(self.path))
        except ApiKeyFileError as error:
            if signature != self._reported:
                logger.error("%s; no service-account key is accepted until it is fixed", error)
                self._reported = signature
            return _Loaded(signature, ())


def read_digests(path: Path) -> tuple[tuple[str, bytes], ...]:
    """The (name, SHA-256) pairs of the key file at ``path`` (``ApiKeyFileError`` naming the fix)."""
    try:
        with path.open("rb") as handle:
            data = handle.read(MAX_KEY_FILE_BYTES + 1)
    except OSError as error:
        raise ApiKeyFileError(f"{path}: cannot read the API key file ({error.strerror or error})") from error
    if len(data) > MAX_KEY_FILE_BYTES:
        raise ApiKeyFileError(f"{path}: the API key file is over {MAX_KEY_FILE_BYTES} bytes")
    try:
        document = json.loads(data.decode("utf-8")) if data.strip() else {}
    except (ValueError, UnicodeDecodeError):
        raise ApiKeyFileError(f"{path}: the API key file is not JSON; restore it or remove it") from None
    keys = document.get("keys", {}) if isinstance(document, dict) else None
    if not isinstance(keys, dict):
        raise ApiKeyFileError(f'{path}: the API key file needs {{"keys": {{NAME: {{"sha256": …}}}}}}')
    digests: list[tuple[str, bytes]] = []
    for name, entry in keys.items():
        digest = entry.get("sha256") if isinstance(entry, dict) else None
        if not isinstance(digest, str) or not _HASH_SHAPE.fullmatch(digest):
            raise ApiKeyFileError(
                f'{path}: key {name!r} has no "sha256" of 64 hex digits; revoke it and add it again'
            )
        digests.append((name, bytes.fromhex(digest)))
    return tuple(digests)
