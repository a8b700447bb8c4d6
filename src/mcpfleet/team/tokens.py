"""Access tokens checked: a JWT signed by the issuer, for this gateway, valid now.

A token is accepted when all of these hold, and refused with a ``TokenRejected`` saying which
did not (the text goes to the client in the 401's ``error_description``, so it names the rule,
never a secret):

- it is a JWS: three base64url parts. Anything else is an *opaque* token, which only its
  issuer can read; they are refused (RFC 7662 introspection would cost a round trip to the
  issuer per request, and every issuer named in docs/team.md can issue JWT access tokens);
- its ``alg`` is an asymmetric one (``jwks.ASYMMETRIC_ALGORITHMS``): ``none`` and HMAC are
  refused before any key is looked at;
- its signature checks against the issuer's published key named by its ``kid``;
- ``iss`` is the configured issuer, ``aud`` is (or lists) the configured audience (RFC 8707:
  a token the same issuer made for another resource is refused), ``exp`` is present and not
  past, ``nbf`` and ``iat`` not ahead, each within ``CLOCK_SKEW_S``;
- ``sub`` is a non-empty string, and not ``service:…``, the service accounts' names;
- it is not an ID token, where that can be told: a ``typ`` other than an access token's or a
  JWT's, or a claim only ID tokens carry (``nonce``, ``at_hash``, ``c_hash``). An ID token
  whose ``aud`` is the gateway (a client registered under the gateway's own client id) would
  otherwise pass for an access token.

The principal it yields carries ``sub``, ``email`` (unless the token says
``email_verified: false``: an address the user typed without proof must not match a policy
written for its real owner) and the groups listed under the configured claim.
"""

from __future__ import annotations

import binascii
import json
from base64 import urlsafe_b64decode
from typing import Any

import jwt

from mcpfleet.errors import MCPFleetError
from mcpfleet.team.api_keys import SERVICE_SUBJECT_PREFIX
from mcpfleet.team.jwks import ASYMMETRIC_ALGORITHMS, IssuerKeys, IssuerUnavailable
from mcpfleet.team.model import IdentitySettings
from mcpfleet.team.principal import Principal

CLOCK_SKEW_S = 60
"""How far the gateway's clock and the issuer's may disagree on ``exp``/``nbf``/``iat``; no
more, so an expired token is refused a minute after its end at the latest."""
MAX_TOKEN_BYTES = 16 * 1024
"""Far above any real access token (a few kilobytes with many groups), far below memory."""
MAX_GROUPS = 1000
ACCESS_TOKEN_TYPES = frozenset({"at+jwt", "application/at+jwt", "jwt"})
"""``typ`` values a token may carry (RFC 9068's, and the plain ``JWT`` most providers send)."""
ID_TOKEN_CLAIMS = ("nonce", "at_hash", "c_hash")


class TokenRejected(MCPFleetError):
    """An access token that this gateway does not accept; the message says why, for the client."""


class JwtVerifier:
    """Checks access tokens for one gateway: its issuer's keys, its audience."""

    def __init__(self, settings: IdentitySettings, keys: IssuerKeys | None = None) -> None:
        self.settings = settings
        self.keys = keys if keys is not None else IssuerKeys(settings.issuer)

    async def principal_for(self, token: str) -> Principal:
        """Who ``token`` says the caller is, once it has passed every check (else ``TokenRejected``)."""
        header = _jws_header(token)
        alg = header.get("alg")
        if alg not in ASYMMETRIC_ALGORITHMS:
            raise TokenRejected(
                f"the token's alg {alg!r} is not accepted: only tokens signed with the issuer's "
                f"private key are ({', '.join(sorted(ASYMMETRIC_ALGORITHMS))})"
            )
        typ = header.get("typ")
        if typ is not None and (not isinstance(typ, str) or typ.lower() not in ACCESS_TOKEN_TYPES):
            raise TokenRejected(f"the token's typ {typ!r} is not an access token's (at+jwt or JWT)")
        kid = header.get("kid")
        if kid is not None and not isinstance(kid, str):
            raise TokenRejected("the token's kid is not a string")
        try:
            key = await self.keys.key_for(kid, alg)
        except LookupError as error:
            raise TokenRejected(str(error.args[0])) from None
        except IssuerUnavailable as error:
            raise TokenRejected(
                f"the issuer's keys cannot be fetched, so no token can be checked: {error}"
            ) from None
        claims = self._decode(token, key, alg)
        return self._principal(claims)

    def _decode(self, token: str, key: jwt.PyJWK, alg: str) -> dict[str, Any]:
        audience, issuer = self.settings.audience, self.settings.issuer
        try:
            return jwt.decode(
                token,
                key,
                algorithms=[alg],
                audience=audience,
                issuer=issuer,
                leeway=CLOCK_SKEW_S,
                options={"require": ["exp", "iss", "aud", "sub"]},
            )
        except jwt.ExpiredSignatureError:
            raise TokenRejected("the token has expired: sign in again (or refresh it)") from None
        except jwt.ImmatureSignatureError:
            raise TokenRejected(
                "the token is not valid yet (its nbf or iat is ahead of this gateway's clock)"
            ) from None
        except jwt.InvalidAudienceError:
            raise TokenRejected(
                f"the token is not for this gateway: its aud is not {audience!r}; ask the issuer for a "
                f"token with resource={audience} (RFC 8707)"
            ) from None
        except jwt.InvalidIssuerError:
            raise TokenRejected(f"the token's iss is not this gateway's issuer {issuer!r}") from None
        except jwt.MissingRequiredClaimError as error:
            raise TokenRejected(
                f"the token has no {error.claim!r} claim; an access token must carry one"
            ) from None
        except jwt.InvalidSignatureError:
            raise TokenRejected("the token's signature does not verify against the issuer's key") from None
        except jwt.InvalidTokenError as error:
            raise TokenRejected(f"the token cannot be read as a JWT ({error})") from None

    def _principal(self, claims: dict[str, Any]) -> Principal:
        found = [claim for claim in ID_TOKEN_CLAIMS if claim in claims]
        principal = self.principal_of_claims(claims, self.settings.groups_claim)
        if found:
            raise TokenRejected(f"the token is an ID token (it has {found[0]!r}): send an access token")
        return principal

    @staticmethod
    def principal_of_claims(claims: dict[str, Any], groups_claim: str) -> Principal:
        """Who verified claims name (an access token's, or the dashboard's ID token's): ``sub``
        (not a service account's), ``email`` unless unverified, the groups of ``groups_claim``."""
        subject = claims.get("sub")
        if not isinstance(subject, str) or not subject:
            raise TokenRejected("the token's sub is not a non-empty string")
        if subject.startswith(SERVICE_SUBJECT_PREFIX):
            raise TokenRejected(
                f"the token's sub starts with {SERVICE_SUBJECT_PREFIX!r}, which names service accounts"
            )
        email = claims.get("email")
        if not isinstance(email, str) or not email or claims.get("email_verified") is False:
            email = None
        return Principal(subject=subject, email=email, groups=_groups(claims.get(groups_claim)))


def _groups(value: object) -> frozenset[str]:
    """The groups a claim lists: a list of strings, or one string (some providers send a single
    group so); anything else lists none."""
    if isinstance(value, str):
        return frozenset({value})
    if isinstance(value, list):
        return frozenset(item for item in value[:MAX_GROUPS] if isinstance(item, str))
    return frozenset()


def looks_like_jws(token: str) -> bool:
    """Whether ``token`` has a JWS's shape (three dot-separated parts), not an opaque token's."""
    return token.count(".") == 2


def _jws_header(token: str) -> dict[str, Any]:
    """The token's protected header, read (not trusted) to pick the algorithm and the key."""
    if len(token) > MAX_TOKEN_BYTES:
        raise TokenRejected(f"the token is over {MAX_TOKEN_BYTES} bytes")
    if not looks_like_jws(token):
        raise TokenRejected(
            "the token is opaque, not a JWT: this gateway checks JWT access tokens only; configure "
            "the identity provider to issue JWT access tokens for this gateway's audience"
        )
    encoded = token.split(".", 1)[0]
    try:
        header = json.loads(urlsafe_b64decode(encoded + "=" * (-len(encoded) % 4)))
    except (ValueError, binascii.Error):
        raise TokenRejected("the token's header is not base64url-encoded JSON") from None
    if not isinstance(header, dict):
        raise TokenRejected("the token's header is not a JSON object")
    if "crit" in header:
        raise TokenRejected("the token's header has critical extensions (crit) this gateway does not know")
    return header
