"""The issuer's signing keys: its discovery document, then its JWKS, fetched and cached.

A team gateway checks every access token's signature against the keys the identity provider
publishes. They are found the standard way (OpenID Connect Discovery's
``/.well-known/openid-configuration`` under the issuer, else RFC 8414's
``/.well-known/oauth-authorization-server`` inserted before the issuer's path), and the
document must name the configured issuer, so a look-alike cannot hand out its own keys.

The key set is cached. An issuer rotates keys by publishing a new one before it signs with
it, so a token whose ``kid`` is unknown makes the cache fetch again — but at most once per
``refresh_interval_s``: a flood of tokens with random ``kid`` values costs the issuer one
request per interval, not one per token. The set is also fetched again once it is older than
``max_age_s``, so a key the issuer withdrew stops working. When a fetch fails, the keys held
are kept and used (the issuer down for a minute must not sign everybody out); with none held
yet, the token is refused and the error names the URL. Every fetch has a deadline and a size
cap: the issuer is on the network, and the network is untrusted input.
"""

from __future__ import annotations

import ipaddress
import json
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import anyio
import httpx2
from jwt import PyJWK, PyJWKError

from mcpfleet.errors import MCPFleetError

logger = logging.getLogger(__name__)

FETCH_TIMEOUT_S = 5.0
"""The whole of one fetch (connect, send, read): a slow issuer delays a sign-in, never hangs it."""
MAX_DOCUMENT_BYTES = 512 * 1024
"""Far above any real discovery document or key set (a few kilobytes), far below memory."""
REFRESH_INTERVAL_S = 60.0
"""Fewest seconds between two fetches caused by unknown ``kid`` values."""
MAX_AGE_S = 3600.0
"""A key set older than this is fetched again on the next token (withdrawn keys stop working)."""

ASYMMETRIC_ALGORITHMS = frozenset(
    {"RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA"}
)
"""The only ``alg`` values a token may carry: signatures made with a private key the issuer
alone holds. ``none`` and the HMAC family (``HS*``) are refused before any key is looked at:
an HMAC "signed" with the issuer's *public* key is the classic forgery."""


class IssuerUnavailable(MCPFleetError):
    """The issuer's discovery document or key set could not be fetched or read (the message
    names the URL and what was wrong)."""


def check_issuer_url(issuer: str) -> str:
    """``issuer`` if a token may be checked against it: ``https://``, or ``http://`` on a loopback
    host (a local provider for development and tests). Raises ``IssuerUnavailable`` otherwise:
    keys fetched in clear over a network can be swapped by anyone on the path."""
    parts = urlsplit(issuer)
    if parts.scheme == "https" and parts.hostname:
        return issuer
    if parts.scheme == "http" and parts.hostname and _is_loopback_host(parts.hostname):
        return issuer
    raise IssuerUnavailable(
        f"identity.issuer {issuer!r}: an issuer must be an https:// URL (http:// is accepted for "
        "127.0.0.1, [::1] and localhost only); give the identity provider's https issuer"
    )


def _is_loopback_host(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def discovery_urls(issuer: str) -> list[str]:
    """Where the issuer's metadata may be, in the order tried: OpenID Connect Discovery, then
    RFC 8414 (well-known part inserted between host and path)."""
    parts = urlsplit(issuer)
    origin = f"{parts.scheme}://{parts.netloc}"
    path = parts.path.rstrip("/")
    return [
        f"{origin}{path}/.well-known/openid-configuration",
        f"{origin}/.well-known/oauth-authorization-server{path}",
    ]


@dataclass(frozen=True)
class _KeySet:
    keys: dict[str, dict[str, Any]]
    """The usable JWKs as published, by ``kid``; a key published without one is under ``""``."""
    fetched_at: float
    built: dict[tuple[str, str], PyJWK] = field(default_factory=dict)
    """Keys already made into verifiers, by (``kid``, ``alg``): loading a public key costs more
    than checking a signature with it."""


class IssuerKeys:
    """The signing keys of one issuer, fetched on first need and kept (see the module's notes).

    ``key_for(kid, alg)`` is what a token check calls; it is safe to call from many requests at
    once (one fetch at a time; the others wait for it and use its result).
    """

    def __init__(
        self,
        issuer: str,
        *,
        refresh_interval_s: float = REFRESH_INTERVAL_S,
        max_age_s: float = MAX_AGE_S,
        fetch_timeout_s: float = FETCH_TIMEOUT_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.issuer = check_issuer_url(issuer)
        self.refresh_interval_s = refresh_interval_s
        self.max_age_s = max_age_s
        self.fetch_timeout_s = fetch_timeout_s
        self._clock = clock
        self._jwks_uri: str | None = None
        self._metadata: dict[str, Any] | None = None
        self._key_set: _KeySet | None = None
        self._last_attempt: float | None = None
        self._last_error: IssuerUnavailable | None = None
        self._attempts = 0
        self._lock = anyio.Lock()
        self.fetches = 0
        """How many key sets were fetched and taken (the tests count the issuer's load with it)."""

    async def key_for(self, kid: str | None, alg: str) -> PyJWK:
        """The issuer's key for a token with this ``kid`` and ``alg``: ``IssuerUnavailable`` when no
        key set could be had, ``LookupError`` (its message says why) when the set has no such key."""
        key_set = self._key_set
        if key_set is None or (self._clock() - key_set.fetched_at > self.max_age_s and self._may_fetch_now()):
            key_set = await self._fetch_once(self._attempts)
        raw = _pick(key_set, kid)
        if raw is None and self._may_fetch_now():
            key_set = await self._fetch_once(self._attempts)  # a rotation: the issuer has a new key
            raw = _pick(key_set, kid)
        if raw is None:
            raise LookupError(
                f"the token's signing key (kid {kid!r}) is not among the issuer's published keys"
                if kid is not None
                else "the token names no signing key (kid) and the issuer publishes more than one"
            )
        published_alg = raw.get("alg")
        if published_alg is not None and published_alg != alg:
            # The issuer said what the key is for: a token may not pick another use of it.
            raise LookupError(f"the issuer's key {kid!r} is for {published_alg}, not the token's {alg}")
        built = key_set.built.get((kid or "", alg))
        if built is None:
            try:
                built = PyJWK(raw, algorithm=alg)
            except PyJWKError as error:
                raise LookupError(
                    f"the issuer's key {kid!r} cannot check an {alg} signature ({error})"
                ) from None
            key_set.built[(kid or "", alg)] = built
        return built

    async def provider_metadata(self) -> dict[str, Any]:
        """The issuer's discovery document (``IssuerUnavailable`` when it cannot be had): fetched
        once, with the first key set or for this, and kept (the dashboard's sign-in reads its
        ``authorization_endpoint`` and ``token_endpoint``)."""
        async with self._lock:
            if self._metadata is None:
                timeout = httpx2.Timeout(self.fetch_timeout_s)
                async with httpx2.AsyncClient(timeout=timeout, follow_redirects=False) as http:
                    self._jwks_uri = await self._discover(http)
            assert self._metadata is not None
            return self._metadata

    async def check(self) -> None:
        """Have a key set now (``IssuerUnavailable`` when none can be had)."""
        if self._key_set is None:
            await self._fetch_once(self._attempts)

    def require_held(self) -> None:
        """Raise ``IssuerUnavailable`` (the last fetch's error) unless a key set is held. For
        ``/readyz``, which never fetches itself: a probe's deadline cancelling a fetch half-way
        would count as an attempt and hold the next one back for ``refresh_interval_s``."""
        if self._key_set is None:
            raise IssuerUnavailable(str(self._last_error or f"{self.issuer}: the key set is not fetched yet"))

    async def keep_fetching(self) -> None:
        """Fetch until a key set is held: now, then once per ``refresh_interval_s`` (a team
        gateway runs this from its start, so it is ready without waiting for a first token)."""
        while self._key_set is None:
            try:
                await self._fetch_once(self._attempts)
            except IssuerUnavailable as error:
                logger.warning("%s; trying again in %g s", error, self.refresh_interval_s)
                await anyio.sleep(self.refresh_interval_s)

    def _may_fetch_now(self) -> bool:
        last = self._last_attempt
        return last is None or self._clock() - last >= self.refresh_interval_s

    async def _fetch_once(self, seen_attempts: int) -> _KeySet:
        """Fetch the key set, unless a fetch began since the caller looked (``seen_attempts``) or
        the last one is less than an interval old: then its outcome is the answer."""
        async with self._lock:
            if self._attempts == seen_attempts and self._may_fetch_now():
                self._attempts += 1
                self._last_attempt = self._clock()
                try:
                    self._key_set = await self._fetch_key_set()
                    self._last_error = None
                    self.fetches += 1
                except IssuerUnavailable as error:
                    self._last_error = error
                    if self._key_set is not None:
                        logger.warning("%s; keeping the keys fetched before", error)
            if self._key_set is None:
                # A new error each time: one raised again and again would keep every traceback.
                raise IssuerUnavailable(str(self._last_error or f"{self.issuer}: no key set fetched yet"))
            return self._key_set

    async def _fetch_key_set(self) -> _KeySet:
        timeout = httpx2.Timeout(self.fetch_timeout_s)
        async with httpx2.AsyncClient(timeout=timeout, follow_redirects=False) as http:
            if self._jwks_uri is None:
                self._jwks_uri = await self._discover(http)
            document = await _fetch_json(http, self._jwks_uri, "key set (JWKS)", self.fetch_timeout_s)
        return _KeySet(_usable_keys(document, self._jwks_uri), self._clock())

    async def _discover(self, http: httpx2.AsyncClient) -> str:
        tried: list[str] = []
        for url in discovery_urls(self.issuer):
            try:
                document = await _fetch_json(http, url, "discovery document", self.fetch_timeout_s)
            except IssuerUnavailable as error:
                tried.append(str(error))
                continue
            named = document.get("issuer")
            if named != self.issuer:
                raise IssuerUnavailable(
                    f"{url}: the discovery document names issuer {named!r}, not {self.issuer!r}; "
                    "identity.issuer must be exactly the provider's issuer (mind a trailing slash)"
                )
            jwks_uri = document.get("jwks_uri")
            if not isinstance(jwks_uri, str):
                raise IssuerUnavailable(
                    f"{url}: the discovery document has no jwks_uri; the issuer publishes no keys"
                )
            check_issuer_url(jwks_uri)  # https, or http on loopback, as for the issuer itself
            self._metadata = document
            return jwks_uri
        raise IssuerUnavailable("; ".join(tried))


async def _fetch_json(http: httpx2.AsyncClient, url: str, what: str, timeout_s: float) -> dict[str, Any]:
    """The JSON object at ``url``, read within ``timeout_s`` (the whole of it: a trickle of bytes
    resets a read timeout, not this one) and the size cap."""
    try:
        with anyio.fail_after(timeout_s):
            async with http.stream("GET", url, headers={"Accept": "application/json"}) as response:
                if response.status_code != 200:
                    raise IssuerUnavailable(
                        f"{url}: the issuer's {what} answered HTTP {response.status_code}"
                    )
                body = bytearray()
                async for chunk in response.aiter_bytes():
                    body += chunk
                    if len(body) > MAX_DOCUMENT_BYTES:
                        raise IssuerUnavailable(
                            f"{url}: the issuer's {what} is over {MAX_DOCUMENT_BYTES} bytes"
                        )
    except TimeoutError:
        raise IssuerUnavailable(f"{url}: the issuer's {what} did not arrive within {timeout_s:g} s") from None
    except httpx2.HTTPError as error:
        raise IssuerUnavailable(
            f"{url}: cannot fetch the issuer's {what} ({error or type(error).__name__})"
        ) from None
    try:
        document = json.loads(bytes(body))
    except ValueError:
        raise IssuerUnavailable(f"{url}: the issuer's {what} is not JSON") from None
    if not isinstance(document, dict):
        raise IssuerUnavailable(f"{url}: the issuer's {what} is not a JSON object")
    return document


def _usable_keys(document: dict[str, Any], url: str) -> dict[str, dict[str, Any]]:
    """The signature keys of a JWKS, by ``kid``. Encryption keys (``use: enc``), symmetric keys
    and keys of unknown types are left out: none of them may check a token's signature."""
    entries = document.get("keys")
    if not isinstance(entries, list):
        raise IssuerUnavailable(f'{url}: the key set has no "keys" list')
    usable: dict[str, dict[str, Any]] = {}
    for entry in entries:
        if not isinstance(entry, dict) or entry.get("use", "sig") != "sig" or entry.get("kty") == "oct":
            continue
        try:
            PyJWK(entry)  # a key that cannot be loaded is no key
        except PyJWKError:
            continue
        kid = entry.get("kid")
        usable[kid if isinstance(kid, str) else ""] = entry
    if not usable:
        raise IssuerUnavailable(f"{url}: the key set holds no signature key this gateway can use")
    return usable


def _pick(key_set: _KeySet, kid: str | None) -> dict[str, Any] | None:
    """The JWK for ``kid``; for a token without a ``kid``, the set's only key, if it has one."""
    if kid is None:
        keys = list(key_set.keys.values())
        return keys[0] if len(keys) == 1 else None
    return key_set.keys.get(kid)
