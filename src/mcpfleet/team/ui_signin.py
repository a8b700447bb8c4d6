"""Signing an admin in to a team gateway's dashboard (``/ui``): OpenID Connect's authorization
code flow with PKCE against ``identity.issuer``, and the sessions it opens.

``/ui/signin`` makes a ``state``, a ``nonce`` and a PKCE verifier, seals them (with the team key,
``team.sealing``) into a short-lived *flow* cookie and sends the browser to the issuer's
``authorization_endpoint`` (from its discovery document, as ``team.jwks`` fetched it).
``/ui/callback`` takes the issuer's answer only when its ``state`` is the flow cookie's (and its
``iss``, when sent, the issuer: RFC 9207), trades the code at the ``token_endpoint`` with the
verifier, and checks the ID token: signed by the issuer's published key (the access tokens'
key lookup and algorithms, ``team.tokens``), ``iss`` the issuer, ``aud`` the dashboard's
``client_id``, not expired, and its ``nonce`` the flow's. Its ``sub``, ``email`` and groups
(``identity.groups_claim``) are matched against ``ui.admins`` as policies match ``users:`` and
``groups:`` (``Principal.policy_name``). An admin gets a *session* cookie; anyone else a 403
that says why.

Both cookies are sealed, not stored: every replica with the same ``MCPFLEET_TEAM_KEY`` opens
them, so the flow may start on one replica and end on another, behind a balancer with no
stickiness. Both are ``HttpOnly`` (no script reads them), ``Secure`` when ``public_url`` is
``https``, and bound to ``/ui/``. Their ``SameSite`` differ, each as tight as it can be:

- the flow cookie is ``SameSite=Lax``: the issuer's redirect back to ``/ui/callback`` is a
  top-level navigation from another site, which a ``Strict`` cookie would not ride;
- the session cookie is ``SameSite=Strict``: no request another site starts carries it, a
  link included. It is set by the callback's answer, which is itself the end of a cross-site
  navigation, so that answer is a page that moves on to ``/ui/`` by itself (a same-site
  navigation, which does carry it) rather than a redirect, which would still count as the
  issuer's.

A session holds the admin's identity and a CSRF token, and lasts ``SESSION_LIFETIME_S``;
membership of ``ui.admins`` is checked again on every request, so an admin removed from the team
file is out at the next page (one removed from the group at the identity provider, at the next
sign-in). Signing out forgets the cookie in that browser.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote_plus, urlencode, urlsplit

import httpx2
import jwt

from mcpfleet.errors import MCPFleetError
from mcpfleet.team.jwks import ASYMMETRIC_ALGORITHMS, MAX_DOCUMENT_BYTES, IssuerKeys, check_issuer_url
from mcpfleet.team.model import TeamFile, UiSettings
from mcpfleet.team.principal import Principal
from mcpfleet.team.sealing import Sealer, UnsealError
from mcpfleet.team.tokens import CLOCK_SKEW_S, JwtVerifier, TokenRejected

UI_PATH = "/ui"
CALLBACK_PATH = f"{UI_PATH}/callback"
SESSION_COOKIE = "mcpfleet_ui"
FLOW_COOKIE = "mcpfleet_ui_flow"
SESSION_LIFETIME_S = 8 * 3600
"""A working day: past it the admin signs in again (and the identity provider says who they are now)."""
FLOW_LIFETIME_S = 600
"""How long a sign-in at the identity provider may take."""
TOKEN_TIMEOUT_S = 10.0
"""The code's exchange at the token endpoint, whole."""
MAX_COOKIE_BYTES = 3072
"""A cookie longer than this is not one the gateway made (browsers keep 4 kB a cookie)."""
MAX_LOGIN_HINT = 256
_SEALED_AS = "mcpfleet ui"
"""The sealer's ``user`` for the dashboard's cookies (its ``server`` says which), so neither
opens as the other, nor as a connect pass or any user's stored credentials."""


class SignInFailed(MCPFleetError):
    """The sign-in did not give a verified identity; the message says why (shown on the page)."""


@dataclass(frozen=True, slots=True)
class UiSession:
    """A signed-in admin, as a request's session cookie says."""

    principal: Principal
    csrf: str
    expires: float

    @property
    def name(self) -> str:
        """How the pages name who is signed in."""
        return self.principal.policy_name


def is_admin(settings: UiSettings, principal: Principal) -> bool:
    """Whether ``ui.admins`` names ``principal``, as a policy's ``users:``/``groups:`` would."""
    if principal.policy_name in settings.admin_users:
        return True
    return not principal.groups.isdisjoint(settings.admin_groups)


def refusal_of(principal: Principal) -> str:
    """What a signed-in non-admin reads (their own identity, never the admins' list)."""
    groups = ", ".join(sorted(principal.groups)) or "none"
    return (
        f"{principal.policy_name} (groups: {groups}) is not an admin of this gateway: the team "
        "file's ui.admins names neither that user nor one of those groups; ask its owner to add you"
    )


def callback_url(public_url: str) -> str:
    """The redirect URI to register at the identity provider: ``public_url``'s origin + ``/ui/callback``."""
    parts = urlsplit(public_url)
    return f"{parts.scheme}://{parts.netloc}{CALLBACK_PATH}"


def _pkce_challenge(verifier: str) -> str:
    digest = hashlib.sha256(verifier.encode("ascii")).digest()
    return base64.urlsafe_b64encode(digest).decode().rstrip("=")


class UiSignIn:
    """The flow and the cookies of one team gateway's dashboard (see the module)."""

    def __init__(
        self,
        team: Callable[[], TeamFile],
        keys: IssuerKeys,
        sealer: Sealer,
        *,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.team = team
        """The team file as it is now (reloads change ``ui:``)."""
        self.keys = keys
        self.sealer = sealer
        self.clock = clock

    @property
    def secure(self) -> bool:
        return urlsplit(self.team().public_url).scheme == "https"

    # -- the flow -----------------------------------------------------------------------------------

    async def start(self, settings: UiSettings, login_hint: str | None) -> tuple[str, str]:
        """Where to send the browser, and the flow cookie's value (``SignInFailed`` when the
        issuer's discovery document cannot be had)."""
        team = self.team()
        endpoint = _endpoint(await self._metadata(), "authorization_endpoint")
        state, nonce, verifier = (secrets.token_urlsafe(32) for _ in range(3))
        parameters = {
            "response_type": "code",
            "client_id": settings.client_id,
            "redirect_uri": callback_url(team.public_url),
            "scope": " ".join(settings.scopes),
            "state": state,
            "nonce": nonce,
            "code_challenge": _pkce_challenge(verifier),
            "code_challenge_method": "S256",
        }
        if login_hint and len(login_hint) <= MAX_LOGIN_HINT:
            parameters["login_hint"] = login_hint
        flow = {"state": state, "nonce": nonce, "verifier": verifier, "exp": self.clock() + FLOW_LIFETIME_S}
        separator = "&" if "?" in endpoint else "?"
        return f"{endpoint}{separator}{urlencode(parameters)}", self._seal("flow", flow)

    async def finish(self, settings: UiSettings, flow_cookie: str | None, query: dict[str, str]) -> Principal:
        """Who signed in, from the issuer's answer (``query``) to the flow of ``flow_cookie``;
        ``SignInFailed`` saying why not."""
        flow = self._open("flow", flow_cookie) if flow_cookie else None
        if flow is None:
            raise SignInFailed(
                "this sign-in was not started in this browser, or took too long: sign in again"
            )
        if not hmac.compare_digest(str(flow.get("state", "")), query.get("state", "")):
            raise SignInFailed("the identity provider's answer is for another sign-in (state): sign in again")
        issuer = self.team().identity.issuer
        if "iss" in query and query["iss"] != issuer:
            raise SignInFailed(f"the answer names issuer {query['iss']!r}, not {issuer!r}")
        if "error" in query:
            described = query.get("error_description", "")
            raise SignInFailed(f"the identity provider refused: {query['error']} {described}".strip())
        code = query.get("code")
        if not code:
            raise SignInFailed("the identity provider's answer carries no code")
        tokens = await self._exchange(settings, code, str(flow.get("verifier", "")))
        id_token = tokens.get("id_token")
        if not isinstance(id_token, str):
            raise SignInFailed("the token endpoint sent no ID token: ui.scopes must include openid")
        return await self._verified(settings, id_token, str(flow.get("nonce", "")))

    async def _metadata(self) -> dict[str, Any]:
        from mcpfleet.team.jwks import IssuerUnavailable

        try:
            return await self.keys.provider_metadata()
        except IssuerUnavailable as error:
            raise SignInFailed(f"the identity provider cannot be reached: {error}") from None

    async def _exchange(self, settings: UiSettings, code: str, verifier: str) -> dict[str, Any]:
        team = self.team()
        endpoint = _endpoint(await self._metadata(), "token_endpoint")
        form = {
            "grant_type": "authorization_code",
            "code": code,
            "redirect_uri": callback_url(team.public_url),
            "code_verifier": verifier,
        }
        headers = {"Accept": "application/json"}
        if settings.client_secret is None:
            form["client_id"] = settings.client_id
        else:
            # client_secret_basic (RFC 6749 2.3.1): each part form-encoded, then base64.
            pair = f"{quote_plus(settings.client_id)}:{quote_plus(settings.client_secret)}"
            headers["Authorization"] = "Basic " + base64.b64encode(pair.encode()).decode()
        try:
            async with httpx2.AsyncClient(
                timeout=httpx2.Timeout(TOKEN_TIMEOUT_S), follow_redirects=False
            ) as http:
                response = await http.post(endpoint, data=form, headers=headers)
        except httpx2.HTTPError as error:
            raise SignInFailed(
                f"{endpoint}: the code could not be exchanged ({error or type(error).__name__})"
            ) from None
        if len(response.content) > MAX_DOCUMENT_BYTES:
            raise SignInFailed(f"{endpoint}: the token endpoint's answer is over {MAX_DOCUMENT_BYTES} bytes")
        try:
            document = response.json()
        except ValueError:
            document = None
        if response.status_code != 200 or not isinstance(document, dict):
            said = document.get("error") if isinstance(document, dict) else None
            raise SignInFailed(
                f"{endpoint}: the token endpoint answered HTTP {response.status_code}"
                + (f" ({said})" if said else "")
                + "; check ui.client_id, ui.client_secret and the redirect URI registered there"
            )
        return document

    async def _verified(self, settings: UiSettings, id_token: str, nonce: str) -> Principal:
        """The ID token's principal, once every check of the module holds."""
        try:
            header = jwt.get_unverified_header(id_token)
        except jwt.InvalidTokenError as error:
            raise SignInFailed(f"the ID token cannot be read ({error})") from None
        alg = header.get("alg")
        if alg not in ASYMMETRIC_ALGORITHMS:
            raise SignInFailed(f"the ID token's alg {alg!r} is not an asymmetric signature")
        kid = header.get("kid")
        try:
            key = await self.keys.key_for(kid if isinstance(kid, str) else None, alg)
        except (LookupError, MCPFleetError) as error:
            raise SignInFailed(f"the ID token's key cannot be had: {error}") from None
        identity = self.team().identity
        try:
            claims = jwt.decode(
                id_token,
                key,
                algorithms=[alg],
                audience=settings.client_id,
                issuer=identity.issuer,
                leeway=CLOCK_SKEW_S,
                options={"require": ["exp", "iat", "iss", "aud", "sub"]},
            )
        except jwt.InvalidTokenError as error:
            raise SignInFailed(f"the ID token does not check out ({error})") from None
        if not nonce or not hmac.compare_digest(str(claims.get("nonce", "")), nonce):
            raise SignInFailed("the ID token's nonce is not this sign-in's: sign in again")
        try:
            return JwtVerifier.principal_of_claims(claims, identity.groups_claim)
        except TokenRejected as error:
            raise SignInFailed(f"the ID token names nobody this gateway accepts: {error}") from None

    # -- the cookies --------------------------------------------------------------------------------

    def session_cookie(self, principal: Principal) -> str:
        """A new session's cookie value, for ``principal``."""
        document = {
            "sub": principal.subject,
            "email": principal.email,
            "groups": sorted(principal.groups),
            "csrf": secrets.token_urlsafe(32),
            "exp": self.clock() + SESSION_LIFETIME_S,
        }
        return self._seal("session", document)

    def session_of(self, cookie: str | None) -> UiSession | None:
        """The session ``cookie`` holds, if it is a live one the gateway sealed."""
        document = self._open("session", cookie) if cookie else None
        if document is None:
            return None
        subject, email, groups, csrf = (document.get(key) for key in ("sub", "email", "groups", "csrf"))
        if not (isinstance(subject, str) and isinstance(csrf, str) and isinstance(groups, list)):
            return None
        principal = Principal(
            subject=subject,
            email=email if isinstance(email, str) else None,
            groups=frozenset(group for group in groups if isinstance(group, str)),
        )
        return UiSession(principal, csrf, float(document["exp"]))

    def cookie_header(self, name: str, value: str, max_age_s: int, same_site: str) -> str:
        cookie = f"{name}={value}; Path={UI_PATH}/; Max-Age={max_age_s}; HttpOnly; SameSite={same_site}"
        return cookie + ("; Secure" if self.secure else "")

    def _seal(self, kind: str, document: dict[str, Any]) -> str:
        blob = self.sealer.seal(_SEALED_AS, kind, json.dumps(document).encode())
        return base64.urlsafe_b64encode(blob).decode().rstrip("=")

    def _open(self, kind: str, text: str | None) -> dict[str, Any] | None:
        if text is None or len(text) > MAX_COOKIE_BYTES:
            return None
        try:
            blob = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
            document = json.loads(self.sealer.open(_SEALED_AS, kind, blob).plaintext)
        except (binascii.Error, ValueError, UnsealError):
            return None
        if not isinstance(document, dict):
            return None
        expires = document.get("exp")
        if not isinstance(expires, int | float) or expires <= self.clock():
            return None
        return document


def _endpoint(metadata: dict[str, Any], name: str) -> str:
    value = metadata.get(name)
    if not isinstance(value, str):
        raise SignInFailed(f"the identity provider's discovery document has no {name}")
    try:
        return check_issuer_url(value)
    except MCPFleetError as error:
        raise SignInFailed(f"its {name} {value!r} is not https (http on loopback only): {error}") from None
