"""Browsers reach the connect pages signed in: a one-time pass in the link, then a cookie.

The identity check admits bearer tokens, which an MCP client sends and a browser opening a link
does not. So the ``/connect/<server>`` link that a per-user server's first call answers with
carries a pass (``/connect/<server>/signin/<pass>``): who the caller is (their ``sub`` and
email), sealed with the team key (AES-256-GCM: nobody can read or forge one), good for
``PASS_LIFETIME_S`` and once, on any replica: its first opening claims it in the shared state
(``TeamShared.claim``, Redis past one replica), and while that cannot be reached no pass is
taken (the browser is told to try again). Opened in a browser, the pass is traded for a
cookie holding the same identity, sealed again and good for ``COOKIE_LIFETIME_S``, and the
browser is sent to the page without the pass, so the pass stays out of its history and of
``Referer`` headers.

The cookie is ``HttpOnly`` (no script reads it), ``Path=/connect`` (sent to the connect pages
only), ``Secure`` when ``public_url`` is ``https``, and ``SameSite=Lax``: the upstream's
redirect back to the callback page is a top-level navigation from another site, which must carry
it, while another site's POST must not (the forms also carry a token bound to the user). The
cookie admits requests to the connect pages only; the MCP endpoint never reads it.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import logging
import time
from collections.abc import Callable
from http.cookies import SimpleCookie
from typing import TYPE_CHECKING, Any
from urllib.parse import quote, urlsplit

from mcpfleet.team.principal import PRINCIPAL_SCOPE_KEY, Principal
from mcpfleet.team.sealing import Sealer, UnsealError
from mcpfleet.team.state import TeamStateError

if TYPE_CHECKING:
    from starlette.types import Scope, Send

    from mcpfleet.gateway.http import Admission
    from mcpfleet.team.shared import TeamShared

logger = logging.getLogger(__name__)

CONNECT_PATH = "/connect"
SIGN_IN_SEGMENT = "signin"
"""A link's pass is the last segment of its path, after this one (``/connect/<server>/signin/<pass>``):
in the path, not the query, because answers mask every query value of a URL they carry, and the
link is meant for its caller."""
COOKIE_NAME = "mcpfleet_connect"
PASS_LIFETIME_S = 600
"""How long a link's pass can be opened: as long as a connect may take."""
COOKIE_LIFETIME_S = 3600
"""How long a browser stays signed in to the connect pages once it opened a pass."""
MAX_SEALED_BYTES = 2048
"""A pass or cookie longer than this is not one the gateway made."""

_EXPIRED = (
    b"This link has expired or was already used. Call the tool again from your MCP client for a new link."
)
_UNCHECKED = (
    b"This link cannot be checked now: the gateway cannot reach its shared state (Redis). "
    b"Open it again in a moment."
)
_SEALED_AS = "mcpfleet connect pass"
"""The sealer's ``user`` for passes and cookies (its ``server`` says which), so neither opens as
the other, nor as any user's stored credentials."""


class ConnectPasses:
    """Mints the passes of connect links, and admits a browser that carries one or its cookie."""

    def __init__(
        self,
        sealer: Sealer,
        public_url: str,
        shared: TeamShared,
        *,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.sealer = sealer
        self.secure = urlsplit(public_url).scheme == "https"
        self.shared = shared
        """Where each pass is claimed by its first opening, for every replica."""
        self.clock = clock

    def link(self, url: str, principal: Principal) -> str:
        """``url`` (a connect page) with a pass for ``principal``."""
        return f"{url}/{SIGN_IN_SEGMENT}/{self._sealed('pass', principal, PASS_LIFETIME_S)}"

    def admission(self, then: Admission) -> Admission:
        """An admission that lets a browser into the connect pages by its pass or cookie, and
        hands every other request (any with ``Authorization``, any other path, a page asked for
        with neither) to ``then``."""

        async def admit(scope: Scope, send: Send) -> Scope | None:
            path = scope["path"]
            if not (path == CONNECT_PATH or path.startswith(f"{CONNECT_PATH}/")):
                return await then(scope, send)
            if any(name == b"authorization" for name, _ in scope["headers"]):
                return await then(scope, send)
            page, marker, presented = path.rpartition(f"/{SIGN_IN_SEGMENT}/")
            if marker and page.startswith(f"{CONNECT_PATH}/") and presented and "/" not in presented:
                await self._trade(presented, page, send)
                return None
            cookie = _cookie_value(scope, COOKIE_NAME)
            opened = self._opened("cookie", cookie) if cookie is not None else None
            if opened is None:
                return await then(scope, send)  # no pass, no cookie (or a stale one): a token then
            return {**scope, PRINCIPAL_SCOPE_KEY: opened[0]}

        return admit

    async def _trade(self, presented: str, page: str, send: Send) -> None:
        """The pass for a cookie and a redirect to the page without it, or a page saying why not."""
        text = [(b"content-type", b"text/plain; charset=utf-8")]
        opened = self._opened("pass", presented)
        if opened is None:
            await _respond(send, 401, _EXPIRED, text)
            return
        principal, blob, expires = opened
        try:
            first = await self.shared.claim(
                f"pass:{hashlib.sha256(blob).hexdigest()}", expires - self.clock()
            )
        except TeamStateError as error:
            logger.warning("A connect link was not taken: %s", error)
            await _respond(send, 503, _UNCHECKED, text)
            return
        if not first:
            await _respond(send, 401, _EXPIRED, text)
            return
        cookie = f"{COOKIE_NAME}={self._sealed('cookie', principal, COOKIE_LIFETIME_S)}"
        cookie += f"; Path={CONNECT_PATH}; Max-Age={COOKIE_LIFETIME_S}; HttpOnly; SameSite=Lax"
        if self.secure:
            cookie += "; Secure"
        await _respond(
            send, 303, b"", [(b"location", quote(page).encode()), (b"set-cookie", cookie.encode())]
        )

    def _sealed(self, kind: str, principal: Principal, lifetime_s: int) -> str:
        document = {"sub": principal.subject, "email": principal.email, "exp": self.clock() + lifetime_s}
        blob = self.sealer.seal(_SEALED_AS, kind, json.dumps(document).encode())
        return base64.urlsafe_b64encode(blob).decode().rstrip("=")

    def _opened(self, kind: str, text: str) -> tuple[Principal, bytes, float] | None:
        """Who ``text`` names, the blob and when it expires, if it is an unexpired ``kind`` the
        gateway sealed."""
        if len(text) > MAX_SEALED_BYTES:
            return None
        try:
            blob = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
            document: Any = json.loads(self.sealer.open(_SEALED_AS, kind, blob).plaintext)
        except (binascii.Error, ValueError, UnsealError):
            return None
        if not isinstance(document, dict):
            return None
        subject, email, expires = document.get("sub"), document.get("email"), document.get("exp")
        if not isinstance(subject, str) or not isinstance(expires, int | float) or expires <= self.clock():
            return None
        principal = Principal(subject=subject, email=email if isinstance(email, str) else None)
        return principal, blob, float(expires)


def _cookie_value(scope: Scope, name: str) -> str | None:
    for key, value in scope["headers"]:
        if key != b"cookie":
            continue
        cookies: SimpleCookie = SimpleCookie()
        try:
            cookies.load(value.decode("latin-1"))
        except ValueError:
            continue
        if name in cookies:
            return cookies[name].value
    return None


async def _respond(send: Send, status: int, body: bytes, headers: list[tuple[bytes, bytes]]) -> None:
    headers = [*headers, (b"cache-control", b"no-store"), (b"referrer-policy", b"no-referrer")]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


__all__ = ["COOKIE_NAME", "PASS_LIFETIME_S", "ConnectPasses"]
