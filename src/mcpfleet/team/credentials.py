"""Each user's own upstream credentials, kept sealed in the team state per (user, server).

One row per (user, server) in ``TeamState`` holds one sealed JSON record: the OAuth tokens,
when the access token expires, the client registration the gateway made for that user at the
upstream authorization server, and the metadata discovered on the way (so a refresh needs no
new discovery). ``SealedCredentialStore`` is that row seen as the ``CredentialStore`` the OAuth
provider of ``mcpfleet.auth`` reads and writes: every write seals the whole record again, every
read opens it, and a record sealed with an older team key is sealed again with the current one
on its first read (the rotation of ``team.sealing``).

Users are keyed by ``Principal.credentials_key`` (the token's ``sub``), never by an address.
"""

from __future__ import annotations

import json
import logging
import time
from typing import Any, TypeVar

import httpx2
from mcp.shared.auth import OAuthClientInformationFull, OAuthMetadata, OAuthToken, ProtectedResourceMetadata
from pydantic import BaseModel, ValidationError

from mcpfleet.team.sealing import Sealer, UnsealError
from mcpfleet.team.state import TeamState

logger = logging.getLogger(__name__)

REVOKE_TIMEOUT_S = 10.0
"""How long the upstream's revocation endpoint may take to answer, per token."""

ModelT = TypeVar("ModelT", bound=BaseModel)


class SealedCredentialStore:
    """One user's credentials for one server, sealed in the team state (a ``CredentialStore``)."""

    def __init__(self, state: TeamState, sealer: Sealer, user: str, server: str) -> None:
        self.state = state
        self.sealer = sealer
        self.user = user
        self.server = server

    async def get_tokens(self) -> OAuthToken | None:
        record = await self.read()
        tokens = _model(OAuthToken, record.get("tokens"))
        expires_at = record.get("expires_at")
        if tokens is not None and isinstance(expires_at, int | float):
            # The provider wants the time that is left, not the lifetime the token came with.
            tokens.expires_in = max(0, int(expires_at - time.time()))
        return tokens

    async def set_tokens(self, tokens: OAuthToken) -> None:
        expires_at = time.time() + tokens.expires_in if tokens.expires_in is not None else None
        await self._update({"tokens": _dump(tokens), "expires_at": expires_at})

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        return _model(OAuthClientInformationFull, (await self.read()).get("client_info"))

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        await self._update({"client_info": _dump(client_info)})

    async def get_server_metadata(self) -> tuple[ProtectedResourceMetadata | None, OAuthMetadata | None]:
        record = await self.read()
        return (
            _model(ProtectedResourceMetadata, record.get("protected_resource_metadata")),
            _model(OAuthMetadata, record.get("authorization_server_metadata")),
        )

    async def set_server_metadata(
        self, resource_metadata: ProtectedResourceMetadata | None, server_metadata: OAuthMetadata | None
    ) -> None:
        changes: dict[str, Any] = {}
        if resource_metadata is not None:
            changes["protected_resource_metadata"] = _dump(resource_metadata)
        if server_metadata is not None:
            changes["authorization_server_metadata"] = _dump(server_metadata)
        if changes:
            await self._update(changes)

    async def has_tokens(self) -> bool:
        """Whether the user holds tokens for the server (a connect finished, not revoked since)."""
        return isinstance((await self.read()).get("tokens"), dict)

    async def forget_tokens(self) -> None:
        """Drop the tokens, keep the client registration: a new connect reuses it."""
        await self._update({"tokens": None, "expires_at": None})

    async def revoke_upstream(self) -> bool:
        """Ask the upstream authorization server to revoke the stored tokens (RFC 7009), when
        its metadata names a revocation endpoint; whether it accepted them all.

        Best effort: the caller forgets the row whatever the answer (a revoked user must not be
        kept connected by an upstream that is down). The refresh token goes first: revoking it
        ends the access tokens issued from it too, on servers that link them.
        """
        record = await self.read()
        metadata = _model(OAuthMetadata, record.get("authorization_server_metadata"))
        client = _model(OAuthClientInformationFull, record.get("client_info"))
        tokens = _model(OAuthToken, record.get("tokens"))
        if metadata is None or metadata.revocation_endpoint is None or client is None or tokens is None:
            return False
        presented = [("refresh_token", tokens.refresh_token), ("access_token", tokens.access_token)]
        accepted = True
        async with httpx2.AsyncClient(timeout=REVOKE_TIMEOUT_S) as http:
            for hint, token in presented:
                if token is None:
                    continue
                data, auth = _client_authentication(client, {"token": token, "token_type_hint": hint})
                try:
                    response = await http.post(
                        str(metadata.revocation_endpoint), data=data, auth=auth or httpx2.USE_CLIENT_DEFAULT
                    )
                except httpx2.HTTPError as error:
                    logger.warning(
                        'Could not revoke the %s of user "%s" at "%s": %s',
                        hint,
                        self.user,
                        self.server,
                        type(error).__name__,
                    )
                    return False
                if response.status_code != 200:
                    logger.warning(
                        'The authorization server of "%s" refused to revoke a %s of user "%s" (HTTP %d)',
                        self.server,
                        hint,
                        self.user,
                        response.status_code,
                    )
                    accepted = False
        return accepted

    async def read(self) -> dict[str, Any]:
        """The whole record (empty when there is none, or when it no longer opens).

        A record that does not open (sealed for another row, altered, or with a key since
        dropped) counts as none: the user is asked to connect again, which replaces it. Only
        the pair is logged, never the blob.
        """
        blob = await self.state.get_credential(self.user, self.server)
        if blob is None:
            return {}
        try:
            opened = self.sealer.open(self.user, self.server, blob)
        except UnsealError as error:
            logger.warning("Ignoring unusable credentials: %s", error)
            return {}
        try:
            record = json.loads(opened.plaintext)
        except ValueError:
            logger.warning('Ignoring unreadable credentials of user "%s" for "%s"', self.user, self.server)
            return {}
        if not isinstance(record, dict):
            return {}
        if opened.stale:
            await self._write(record)
        return record

    async def _update(self, changes: dict[str, Any]) -> None:
        record = await self.read()
        record.update(changes)
        await self._write(record)

    async def _write(self, record: dict[str, Any]) -> None:
        plaintext = json.dumps(record, sort_keys=True, separators=(",", ":")).encode()
        await self.state.put_credential(
            self.user, self.server, self.sealer.seal(self.user, self.server, plaintext)
        )


def _client_authentication(
    client: OAuthClientInformationFull, data: dict[str, str]
) -> tuple[dict[str, str], httpx2.BasicAuth | None]:
    """The form and basic credentials that authenticate the user's client at the upstream."""
    secret = client.client_secret or ""
    if client.token_endpoint_auth_method == "client_secret_basic" and secret:
        return data, httpx2.BasicAuth(client.client_id, secret)
    # A public client's secret is the empty string, which RFC 6749 (2.3.1) lets a client send
    # or omit; it is sent, as some servers (the SDK's among them) require the field.
    return {**data, "client_id": client.client_id, "client_secret": secret}, None


def _dump(model: BaseModel) -> dict[str, Any]:
    return model.model_dump(mode="json", exclude_none=True)


def _model(model: type[ModelT], raw: object) -> ModelT | None:
    if not isinstance(raw, dict):
        return None
    try:
        return model.model_validate(raw)
    except ValidationError:
        return None


__all__ = ["SealedCredentialStore"]
