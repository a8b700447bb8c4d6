"""Who may use the dashboard: the holder of a one-time login link, in the browser it opened.

The dashboard listens on loopback, where every local user can connect; the link is what
tells the daemon's own user apart. ``mcpfleet ui`` gets it over the daemon's socket (whose
peer is checked to be that user) and opens it. Its token works once, for
``LOGIN_TOKEN_TTL_S``, and is exchanged for a session: an HttpOnly, SameSite=Strict cookie
holding a random id, and a CSRF token bound to that session that every form carries.

Every page lives under a secret path (``Access.root``, random per dashboard), and the cookie
is bound to it (``Path=<root>/``): a browser sends a cookie of 127.0.0.1 to every port of
127.0.0.1, so a server another local user runs on another port would otherwise be handed it
by any page of theirs the user opens.

``AccessGate`` (an ASGI layer in front of every route) refuses, in this order:

* a ``Host`` that is not this listener's own (``127.0.0.1:PORT`` or ``localhost:PORT``): a
  page of another site whose name was re-pointed at 127.0.0.1 (DNS rebinding) is 403;
* a ``POST`` whose ``Origin`` (or, without one, ``Referer``) is another site's: 403;
* a path outside the secret root, and any request but the link's without a live session
  cookie: 401;
* a ``POST`` whose form field ``csrf`` is not the session's token: 403 (checked by the
  route, which reads the form: ``require_csrf``).

``/metrics`` under the root (Prometheus text) is also read by scrapers, which hold no cookie:
a ``GET`` of it with ``Authorization: Bearer <Access.metrics_token>`` is let through too. That
token is the dashboard's, given by the daemon over its socket only (``mcpfleet ui --metrics``),
and opens nothing else.
"""

from __future__ import annotations

import hmac
import secrets
import time
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from starlette.requests import Request
from starlette.responses import PlainTextResponse
from starlette.types import ASGIApp, Receive, Scope, Send

SESSION_COOKIE = "mcpfleet_dashboard"
LOGIN_PATH = "/login"
"""Under the root, as every page."""
METRICS_PATH = "/metrics"
"""Under the root too."""
LOGIN_TOKEN_TTL_S = 300.0
"""How long a login link works when nobody opens it: long enough to find the browser."""
MAX_SESSIONS = 64
"""Sessions kept at once; the oldest goes first (each `mcpfleet ui` makes one)."""


@dataclass
class DashboardSession:
    id: str
    csrf: str
    since: float = field(default_factory=time.time)


class Access:
    """The login tokens not yet used and the sessions they opened, in the daemon's memory
    (a restarted daemon forgets them: `mcpfleet ui` again)."""

    def __init__(self) -> None:
        self.root = f"/{secrets.token_urlsafe(16)}"
        """The secret path every page is under."""
        self.metrics_token = secrets.token_urlsafe(32)
        """What a scraper of ``<root>/metrics`` sends as its bearer token (no session needed)."""
        self._tokens: dict[str, float] = {}
        self._sessions: dict[str, DashboardSession] = {}

    def new_login_token(self) -> str:
        now = time.monotonic()
        self._tokens = {token: due for token, due in self._tokens.items() if due > now}
        token = secrets.token_urlsafe(32)
        self._tokens[token] = now + LOGIN_TOKEN_TTL_S
        return token

    def redeem(self, token: str) -> DashboardSession | None:
        """A new session for ``token`` if it is a live one; the token is spent either way."""
        due = self._tokens.pop(token, None)
        if due is None or due < time.monotonic():
            return None
        session = DashboardSession(secrets.token_urlsafe(32), secrets.token_urlsafe(32))
        while len(self._sessions) >= MAX_SESSIONS:
            del self._sessions[next(iter(self._sessions))]
        self._sessions[session.id] = session
        return session

    def session_of(self, request: Request) -> DashboardSession | None:
        cookie = request.cookies.get(SESSION_COOKIE)
        if not cookie:
            return None
        # Compared in constant time against each, as a lookup by value would not be.
        for session_id, session in self._sessions.items():
            if hmac.compare_digest(session_id, cookie):
                return session
        return None


def require_csrf(session: DashboardSession, submitted: object) -> bool:
    return isinstance(submitted, str) and hmac.compare_digest(submitted, session.csrf)


class AccessGate:
    """The ASGI layer that refuses what the module says, before any route runs."""

    def __init__(self, app: ASGIApp, access: Access, port: int) -> None:
        self.app = app
        self.access = access
        self.hosts = {f"127.0.0.1:{port}", f"localhost:{port}"}
        self.origins = {f"http://{host}" for host in self.hosts}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        request = Request(scope)
        refusal = self._refusal(request)
        if refusal is not None:
            status, text = refusal
            await PlainTextResponse(text, status_code=status)(scope, receive, send)
            return
        scope.setdefault("state", {})["dashboard_session"] = self.access.session_of(request)
        await self.app(scope, receive, send)

    def _refusal(self, request: Request) -> tuple[int, str] | None:
        if request.headers.get("host", "") not in self.hosts:
            return 403, "not this dashboard's address (Host): open the link `mcpfleet ui` prints"
        if request.method == "POST" and not self._same_origin(request):
            return 403, "a request from another site is refused"
        path = request.url.path
        if path != self.access.root and not path.startswith(self.access.root + "/"):
            return 401, "sign in with the link `mcpfleet ui` prints (each link works once)"
        if path == self.access.root + LOGIN_PATH and request.method == "GET":
            return None
        if path == self.access.root + METRICS_PATH and self._scraper(request):
            return None
        if self.access.session_of(request) is None:
            return 401, "sign in with the link `mcpfleet ui` prints (each link works once)"
        return None

    def _scraper(self, request: Request) -> bool:
        scheme, _, token = request.headers.get("authorization", "").partition(" ")
        return (
            request.method in ("GET", "HEAD")
            and scheme.lower() == "bearer"
            and hmac.compare_digest(token.strip().encode(), self.access.metrics_token.encode())
        )

    def _same_origin(self, request: Request) -> bool:
        return request_origin(request) in self.origins


def request_origin(request: Request) -> str | None:
    """The site a request says it comes from: its ``Origin``, else its ``Referer``'s scheme and
    host, else ``None`` (which no check should take for its own)."""
    origin = request.headers.get("origin")
    if origin is not None:
        return origin
    referer = request.headers.get("referer")
    if referer is None:
        return None
    parts = urlsplit(referer)
    return f"{parts.scheme}://{parts.netloc}"
