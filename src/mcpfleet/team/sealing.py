"""Per-user upstream credentials sealed at rest: AES-256-GCM under ``MCPFLEET_TEAM_KEY``.

The state store (``team.state``) only ever holds what ``Sealer.seal`` returns. Each blob is
bound to its (user, server) pair as associated data, so a blob copied into another user's row,
or another server's, does not open: the store's keys cannot be swapped under the gateway.

The key is 32 random bytes in base64 (``openssl rand -base64 32``). ``MCPFLEET_TEAM_KEY`` may
hold several keys separated by commas: the first seals, every one opens. Rotation is therefore
"put the new key first, keep the old one after it": a blob sealed with an old key still opens,
and the credentials layer seals it again with the new key on that read (``Opened.stale``);
once every user has been through, the old key can go.

A blob is ``version (1 byte) | key id (4 bytes) | nonce (12 bytes) | ciphertext and tag``. The
key id (the first bytes of the key's SHA-256) only picks which key to try: it says nothing about
the key that a brute force could use.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import os
import secrets
from collections.abc import Mapping
from dataclasses import dataclass

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from mcpfleet.errors import ConfigError, MCPFleetError

TEAM_KEY_VARIABLE = "MCPFLEET_TEAM_KEY"
KEY_BYTES = 32
NONCE_BYTES = 12
KEY_ID_BYTES = 4
BLOB_VERSION = 1
HEADER_BYTES = 1 + KEY_ID_BYTES + NONCE_BYTES
MAKE_A_KEY = "make one with: openssl rand -base64 32"
_ASSOCIATED_DATA_LABEL = "mcpfleet team credential v1"


class TeamKeyError(ConfigError):
    """``MCPFLEET_TEAM_KEY`` is missing or is not a usable key (the message says how to make one)."""


class UnsealError(MCPFleetError):
    """A sealed blob does not open: sealed for another user or server, altered, or sealed with a
    key no longer in ``MCPFLEET_TEAM_KEY``. The message names the pair, never the blob."""


@dataclass(frozen=True, slots=True)
class Opened:
    """What a sealed blob held, and whether it was sealed with a key other than the current one."""

    plaintext: bytes
    stale: bool
    """Sealed with an older key of ``MCPFLEET_TEAM_KEY``: seal it again to finish a rotation."""


@dataclass(frozen=True, slots=True)
class _Key:
    aead: AESGCM
    key_id: bytes


class Sealer:
    """Seals and opens per-(user, server) credentials with the team key(s)."""

    def __init__(self, keys: list[bytes]) -> None:
        if not keys:
            raise TeamKeyError(f"{TEAM_KEY_VARIABLE} is not set; {MAKE_A_KEY}")
        self._keys = [_Key(AESGCM(key), hashlib.sha256(key).digest()[:KEY_ID_BYTES]) for key in keys]
        self._current = keys[0]

    @classmethod
    def from_environment(cls, environ: Mapping[str, str] | None = None) -> Sealer:
        """The sealer of ``MCPFLEET_TEAM_KEY`` (``TeamKeyError`` when it is missing or malformed)."""
        value = (os.environ if environ is None else environ).get(TEAM_KEY_VARIABLE, "")
        return cls(parse_team_keys(value))

    def seal(self, user: str, server: str, plaintext: bytes) -> bytes:
        """``plaintext`` encrypted with the current key, bound to ``(user, server)``."""
        current = self._keys[0]
        nonce = secrets.token_bytes(NONCE_BYTES)
        sealed = current.aead.encrypt(nonce, plaintext, _associated_data(user, server))
        return bytes([BLOB_VERSION]) + current.key_id + nonce + sealed

    def derived_key(self, purpose: str) -> bytes:
        """A key of its own for ``purpose`` (HKDF of the current team key): the connect pages sign
        their form tokens with one, so every replica with the same team key accepts them."""
        hkdf = HKDF(
            algorithm=hashes.SHA256(), length=KEY_BYTES, salt=None, info=f"mcpfleet {purpose}".encode()
        )
        return hkdf.derive(self._current)

    def open(self, user: str, server: str, blob: bytes) -> Opened:
        """What ``seal(user, server, …)`` sealed; ``UnsealError`` for anything else."""
        if len(blob) <= HEADER_BYTES or blob[0] != BLOB_VERSION:
            raise UnsealError(f'the stored credentials of user "{user}" for "{server}" are not a sealed blob')
        key_id = blob[1 : 1 + KEY_ID_BYTES]
        nonce, sealed = blob[1 + KEY_ID_BYTES : HEADER_BYTES], blob[HEADER_BYTES:]
        for position, key in enumerate(self._keys):
            if key.key_id != key_id:
                continue
            try:
                plaintext = key.aead.decrypt(nonce, sealed, _associated_data(user, server))
            except InvalidTag:
                continue
            return Opened(plaintext, stale=position > 0)
        raise UnsealError(
            f'the stored credentials of user "{user}" for "{server}" do not open with {TEAM_KEY_VARIABLE}: '
            "sealed for another user or server, altered, or sealed with a key no longer listed there; "
            f"the user connects to {server} again"
        )


def parse_team_keys(value: str) -> list[bytes]:
    """The keys of ``MCPFLEET_TEAM_KEY``: base64 (standard or URL-safe) of 32 bytes each,
    separated by commas, the current one first."""
    texts = [text.strip() for text in value.split(",") if text.strip()]
    if not texts:
        raise TeamKeyError(f"{TEAM_KEY_VARIABLE} is not set; {MAKE_A_KEY}")
    keys: list[bytes] = []
    for position, text in enumerate(texts, start=1):
        which = "" if len(texts) == 1 else f" (key {position} of {len(texts)})"
        try:
            key = base64.b64decode(text.replace("-", "+").replace("_", "/"), validate=True)
        except (binascii.Error, ValueError):
            raise TeamKeyError(
                f"{TEAM_KEY_VARIABLE}{which} is not base64; it must be {KEY_BYTES} random bytes in base64, "
                f"{MAKE_A_KEY}"
            ) from None
        if len(key) != KEY_BYTES:
            raise TeamKeyError(
                f"{TEAM_KEY_VARIABLE}{which} holds {len(key)} bytes, not {KEY_BYTES}; {MAKE_A_KEY}"
            )
        keys.append(key)
    return keys


def _associated_data(user: str, server: str) -> bytes:
    # JSON keeps the pair unambiguous: ("a,b", "c") and ("a", "b,c") are different data.
    return json.dumps([_ASSOCIATED_DATA_LABEL, user, server], ensure_ascii=False).encode()


__all__ = [
    "TEAM_KEY_VARIABLE",
    "Opened",
    "Sealer",
    "TeamKeyError",
    "UnsealError",
    "parse_team_keys",
]
