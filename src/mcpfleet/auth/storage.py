"""The OAuth token store: one JSON file per server URL, private to the user.

The SDK's ``TokenStorage`` on disk: the file is named by the SHA-256 of the normalised server
URL, written atomically (a temporary file, then ``os.replace``) with mode 0600 in a 0700
folder under the user state folder.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import tempfile
import time
from collections.abc import Mapping
from contextlib import suppress
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import urlsplit, urlunsplit

import anyio
import anyio.to_thread
from mcp.shared.auth import OAuthClientInformationFull, OAuthMetadata, OAuthToken, ProtectedResourceMetadata
from pydantic import ValidationError

from mcpfleet import paths

logger = logging.getLogger(__name__)


def normalise_server_url(url: str) -> str:
    """The form of a server URL that keys its token file: case-insensitive parts lowered,
    default ports and fragments dropped, no trailing slash."""
    parts = urlsplit(url.strip())
    scheme = parts.scheme.lower()
    host = (parts.hostname or "").lower()
    if ":" in host:
        host = f"[{host}]"
    port = parts.port
    default_port = {"http": 80, "https": 443}.get(scheme)
    netloc = host if port is None or port == default_port else f"{host}:{port}"
    path = parts.path.rstrip("/")
    return urlunsplit((scheme, netloc, path, parts.query, ""))


class CredentialStore(Protocol):
    """Where a provider keeps one server's OAuth credentials: the SDK's ``TokenStorage`` plus the
    discovered server metadata. ``FileTokenStorage`` keeps them in a file for the local user; a
    team gateway keeps each user's sealed in its state store (``mcpfleet.team.credentials``)."""

    async def get_tokens(self) -> OAuthToken | None: ...

    async def set_tokens(self, tokens: OAuthToken) -> None: ...

    async def get_client_info(self) -> OAuthClientInformationFull | None: ...

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None: ...

    async def get_server_metadata(
        self,
    ) -> tuple[ProtectedResourceMetadata | None, OAuthMetadata | None]: ...

    async def set_server_metadata(
        self, resource_metadata: ProtectedResourceMetadata | None, server_metadata: OAuthMetadata | None
    ) -> None: ...


def tokens_directory() -> Path:
    """Folder of the OAuth token files, under the user state dir."""
    return paths.user_state_dir() / "oauth"


class FileTokenStorage:
    """The SDK's ``TokenStorage`` on disk: one JSON file per server URL.

    The file is named by the SHA-256 of the normalised URL, written atomically (temporary
    file, then ``os.replace``) with mode 0600 in a 0700 folder. Besides the tokens and the
    client registration it keeps when the access token expires (the SDK only knows a
    relative ``expires_in``) and the discovered server metadata, so a later process can
    refresh at the right endpoint without a fresh discovery.
    """

    def __init__(self, server_url: str, *, directory: Path | None = None) -> None:
        self.server_url = server_url
        self.directory = directory if directory is not None else tokens_directory()
        digest = hashlib.sha256(normalise_server_url(server_url).encode()).hexdigest()
        self.path = self.directory / f"{digest}.json"

    async def get_tokens(self) -> OAuthToken | None:
        record = await anyio.to_thread.run_sync(self._read)
        raw_tokens = record.get("tokens")
        if not isinstance(raw_tokens, dict):
            return None
        try:
            tokens = OAuthToken.model_validate(raw_tokens)
        except ValidationError:
            logger.warning("Ignoring unreadable OAuth tokens in %s", self.path)
            return None
        expires_at = record.get("expires_at")
        if isinstance(expires_at, int | float):
            # Hand the SDK the time that is left, not the lifetime it was issued with.
            tokens.expires_in = max(0, int(expires_at - time.time()))
        return tokens

    async def set_tokens(self, tokens: OAuthToken) -> None:
        expires_at = time.time() + tokens.expires_in if tokens.expires_in is not None else None
        await anyio.to_thread.run_sync(
            self._update,
            {"tokens": tokens.model_dump(mode="json", exclude_none=True), "expires_at": expires_at},
        )

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        record = await anyio.to_thread.run_sync(self._read)
        raw_client = record.get("client_info")
        if not isinstance(raw_client, dict):
            return None
        try:
            return OAuthClientInformationFull.model_validate(raw_client)
        except ValidationError:
            logger.warning("Ignoring an unreadable OAuth client registration in %s", self.path)
            return None

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        await anyio.to_thread.run_sync(
            self._update, {"client_info": client_info.model_dump(mode="json", exclude_none=True)}
        )

    async def get_server_metadata(self) -> tuple[ProtectedResourceMetadata | None, OAuthMetadata | None]:
        """The protected-resource and authorization-server metadata found at the last login."""
        record = await anyio.to_thread.run_sync(self._read)
        resource_metadata: ProtectedResourceMetadata | None = None
        server_metadata: OAuthMetadata | None = None
        with suppress(ValidationError):
            if isinstance(record.get("protected_resource_metadata"), dict):
                resource_metadata = ProtectedResourceMetadata.model_validate(
                    record["protected_resource_metadata"]
                )
            if isinstance(record.get("authorization_server_metadata"), dict):
                server_metadata = OAuthMetadata.model_validate(record["authorization_server_metadata"])
        return resource_metadata, server_metadata

    async def set_server_metadata(
        self, resource_metadata: ProtectedResourceMetadata | None, server_metadata: OAuthMetadata | None
    ) -> None:
        changes: dict[str, Any] = {}
        if resource_metadata is not None:
            changes["protected_resource_metadata"] = resource_metadata.model_dump(
                mode="json", exclude_none=True
            )
        if server_metadata is not None:
            changes["authorization_server_metadata"] = server_metadata.model_dump(
                mode="json", exclude_none=True
            )
        if changes:
            await anyio.to_thread.run_sync(self._update, changes)

    async def forget_tokens(self) -> None:
        """Drop the tokens but keep the client registration (a new login reuses it)."""
        await anyio.to_thread.run_sync(self._update, {"tokens": None, "expires_at": None})

    def has_tokens(self) -> bool:
        return isinstance(self._read().get("tokens"), dict)

    def clear(self) -> bool:
        """Forget everything stored for this server; ``True`` if there was something."""
        try:
            self.path.unlink()
        except FileNotFoundError:
            return False
        return True

    def _read(self) -> dict[str, Any]:
        try:
            text = self.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return {}
        try:
            record = json.loads(text)
        except json.JSONDecodeError:
            logger.warning("Ignoring a corrupt OAuth token file %s; a new login will replace it", self.path)
            return {}
        return record if isinstance(record, dict) else {}

    def _update(self, changes: Mapping[str, Any]) -> None:
        record = self._read()
        record.update(changes)
        record["server_url"] = self.server_url
        self._write(record)

    def _write(self, record: Mapping[str, Any]) -> None:
        paths.make_private_folder(self.directory)
        # A token folder left more open by an earlier version is closed again.
        os.chmod(self.directory, 0o700)
        descriptor, temporary = tempfile.mkstemp(prefix=".tokens-", suffix=".tmp", dir=self.directory)
        try:
            # mkstemp creates the file 0600, so the tokens are never readable by others.
            with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
                json.dump(record, handle, indent=2, sort_keys=True)
                handle.flush()
                os.fsync(handle.fileno())
            os.replace(temporary, self.path)
        except BaseException:
            with suppress(FileNotFoundError):
                os.unlink(temporary)
            raise


__all__ = ["CredentialStore", "FileTokenStorage", "normalise_server_url", "tokens_directory"]
