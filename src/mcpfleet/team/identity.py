"""The team gateway as an OAuth 2.1 protected resource: who is asking, for every request.

``IdentityCheck`` stands where the local gateway checks its single bearer token: its ``admit``
is the gateway's ``Admission`` (``serve_http(admission=…)``), which sees each request's
headers before any body is read. It

- serves the protected resource metadata (RFC 9728) at ``/.well-known/oauth-protected-resource``
  and at its path-suffixed form (``…/oauth-protected-resource/mcp`` for ``public_url``
  ``https://host/mcp``), naming the resource and the issuer: that is how a client that
  implements MCP's authorization (the SDK, Claude Code, mcpfleet) finds where to sign in;
- answers a request without a valid credential with 401 and
  ``WWW-Authenticate: Bearer resource_metadata="…"`` (plus ``error="invalid_token"`` and an
  ``error_description`` saying what was wrong when a credential was presented);
- takes ``Authorization: Bearer <credential>`` where the credential is a service account's API
  key (``api_keys``) or a JWT access token (``tokens``), and puts the ``Principal`` it names
  in the ASGI scope (``principal.PRINCIPAL_SCOPE_KEY``) for what comes after: policy, audit,
  per-user credentials;
- lets the paths in ``open_paths`` through without a credential (``/healthz`` and ``/readyz``
  by default; ``/metrics`` too when the team file says ``metrics: public``).

More than one ``Authorization`` header is refused (two proxies could each read a different
one). Everything else the local gateway checks (body cap, request ids, 503 once stopping) is
done by its ``BearerGate`` as ever, which a team gateway runs with no token of its own and this
check as its admission: a request is read past its headers only once it is admitted.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from mcpfleet.team.api_keys import KEY_PREFIX, ApiKeyStore
from mcpfleet.team.model import TeamFile
from mcpfleet.team.principal import PRINCIPAL_SCOPE_KEY, Principal
from mcpfleet.team.tokens import JwtVerifier, TokenRejected

if TYPE_CHECKING:
    from starlette.types import Scope, Send

logger = logging.getLogger(__name__)

METADATA_PATH = "/.well-known/oauth-protected-resource"
DEFAULT_OPEN_PATHS = frozenset({"/healthz", "/readyz"})
RESOURCE_NAME = "mcpfleet team gateway"


def metadata_paths(public_url: str) -> frozenset[str]:
    """Where the metadata is served: the root form, and the form with the resource's path
    appended (RFC 9728 section 3.1), which clients try first."""
    path = urlsplit(public_url).path.rstrip("/")
    return frozenset({METADATA_PATH, METADATA_PATH + path})


def metadata_url(public_url: str) -> str:
    """The metadata's address as the 401 names it: the path-suffixed form, on ``public_url``'s origin."""
    parts = urlsplit(public_url)
    return f"{parts.scheme}://{parts.netloc}{METADATA_PATH}{parts.path.rstrip('/')}"


def resource_metadata(public_url: str, issuer: str, scopes: tuple[str, ...] = ()) -> dict[str, Any]:
    """The protected resource metadata document (RFC 9728): this resource, its one issuer, and
    the scopes to ask it for, when the team file names some."""
    document: dict[str, Any] = {
        "resource": public_url,
        "authorization_servers": [issuer],
        "bearer_methods_supported": ["header"],
        "resource_name": RESOURCE_NAME,
    }
    if scopes:
        document["scopes_supported"] = list(scopes)
    return document


class IdentityCheck:
    """Answer the metadata routes, refuse requests without a valid credential, and admit every
    other request with its principal in its scope (see the module's notes)."""

    def __init__(
        self,
        *,
        public_url: str,
        tokens: JwtVerifier,
        api_keys: ApiKeyStore | None = None,
        open_paths: Iterable[str] = DEFAULT_OPEN_PATHS,
    ) -> None:
        self.tokens = tokens
        self.api_keys = api_keys
        self.open_paths = frozenset(open_paths)
        self._metadata_paths = metadata_paths(public_url)
        settings = tokens.settings
        self._metadata = json.dumps(resource_metadata(public_url, settings.issuer, settings.scopes)).encode()
        self._challenge = f'Bearer resource_metadata="{metadata_url(public_url)}"'
        if settings.scopes:
            # What the client is to ask for (the MCP specification's scope selection).
            self._challenge += f', scope="{" ".join(settings.scopes)}"'

    async def admit(self, scope: Scope, send: Send) -> Scope | None:
        """The HTTP request's scope with its principal, or ``None`` once answered (the
        metadata, or a 401); paths in ``open_paths`` pass as they are."""
        path = scope["path"]
        if path in self._metadata_paths:
            await self._answer_metadata(scope, send)
            return None
        if path in self.open_paths:
            return scope
        presented = [value for key, value in scope["headers"] if key == b"authorization"]
        if not presented:
            await self._refuse(
                send,
                None,
                "this gateway needs Authorization: Bearer <token>; sign in with the "
                "identity provider its resource metadata names",
            )
            return None
        if len(presented) > 1:
            await self._refuse(send, "invalid_request", "send one Authorization header, not several")
            return None
        try:
            principal = await self.principal_for(presented[0])
        except TokenRejected as error:
            await self._refuse(send, "invalid_token", str(error))
            return None
        return {**scope, PRINCIPAL_SCOPE_KEY: principal}

    async def principal_for(self, header: bytes) -> Principal:
        """Who an ``Authorization`` header's value names (``TokenRejected`` saying why not)."""
        scheme, _, credential_bytes = header.strip().partition(b" ")
        if scheme.lower() != b"bearer":
            raise TokenRejected("the Authorization header must be 'Bearer <token>'")
        try:
            credential = credential_bytes.strip().decode("ascii")
        except UnicodeDecodeError:
            raise TokenRejected("the token must be ASCII") from None
        if credential.startswith(KEY_PREFIX):
            found = self.api_keys.principal_for(credential) if self.api_keys is not None else None
            if found is None:
                raise TokenRejected("the API key is not one this gateway knows (revoked, or never added)")
            return found
        return await self.tokens.principal_for(credential)

    async def _answer_metadata(self, scope: Scope, send: Send) -> None:
        if scope["method"] == "OPTIONS":  # a browser-based client's preflight
            await _respond(send, 204, b"", [*_CORS, (b"access-control-allow-methods", b"GET, HEAD")])
            return
        if scope["method"] not in ("GET", "HEAD"):
            await _respond(send, 405, b"GET only", [(b"allow", b"GET, HEAD")])
            return
        headers = [(b"content-type", b"application/json"), *_CORS]
        await _respond(send, 200, self._metadata if scope["method"] == "GET" else b"", headers)

    async def _refuse(self, send: Send, error: str | None, description: str) -> None:
        challenge = self._challenge
        if error is not None:
            challenge += f', error="{error}", error_description="{_quoted(description)}"'
        await _respond(
            send, 401, description.encode("utf-8"), [(b"www-authenticate", challenge.encode("utf-8"))]
        )


_CORS = [(b"access-control-allow-origin", b"*"), (b"access-control-allow-headers", b"*")]
"""The metadata is public by design (RFC 9728): any web client may read where to sign in."""


def _quoted(text: str) -> str:
    """``text`` fit for an auth-param's quoted string: visible ASCII, no quote or backslash."""
    return "".join(char if " " <= char <= "~" and char not in '"\\' else "'" for char in text)


async def _respond(send: Send, status: int, body: bytes, headers: list[tuple[bytes, bytes]]) -> None:
    if not any(name == b"content-type" for name, _ in headers):
        headers = [(b"content-type", b"text/plain; charset=utf-8"), *headers]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def identity_check(team: TeamFile, *, open_paths: Iterable[str] = DEFAULT_OPEN_PATHS) -> IdentityCheck:
    """The identity check of a team file (``serve_http(admission=check.admit)``): tokens checked
    against ``identity.issuer`` for ``identity.audience``, keys read from ``identity.api_keys``;
    ``/metrics`` open too when the team file says ``metrics: public``."""
    identity = team.identity
    api_keys = ApiKeyStore(identity.api_keys) if identity.api_keys is not None else None
    opened = frozenset(open_paths) | ({"/metrics"} if team.metrics == "public" else set())
    return IdentityCheck(
        public_url=team.public_url, tokens=JwtVerifier(identity), api_keys=api_keys, open_paths=opened
    )
