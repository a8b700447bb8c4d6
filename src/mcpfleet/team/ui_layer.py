"""A team gateway's dashboard at ``/ui``: the local dashboard's pages (``dashboard.app``) over
this replica's fleet (``team.ui_fleet``), plus the audit log, for the admins ``ui:`` names.

``UiLayer`` stands in front of the gateway's other routes and answers every request under
``/ui``. The identity check lets those through without a bearer token (``ui_admission``): a
browser has none, and signs in here instead (``team.ui_signin``). It refuses, in this order:

* a team file without ``ui:``: 404, saying how to enable it;
* a ``Host`` other than ``public_url``'s: 403 (a page of another site whose name was re-pointed
  at the gateway, DNS rebinding, reads nothing);
* a ``POST`` whose ``Origin`` (or, without one, ``Referer``) is not ``public_url``'s origin: 403;
* any page, action or event stream without a live session cookie: 401, with the sign-in link
  (``/ui/signin`` and ``/ui/callback`` need none, nor the pages' style and script);
* a session whose admin ``ui.admins`` no longer names: 403;
* a ``POST`` whose form field ``csrf`` is not the session's: 403 (checked by the route).

The audit page reads the state store (``TeamState.audit_page``): filters by user, server, tool,
outcome and time, newest first, ``AUDIT_PAGE_SIZE`` records a page.
"""

from __future__ import annotations

import hmac
from collections.abc import Callable
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, TypeVar
from urllib.parse import urlencode, urlsplit

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, PlainTextResponse, RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.types import ASGIApp, Receive, Scope, Send

from mcpfleet.dashboard.access import request_origin
from mcpfleet.dashboard.app import CONTENT_SECURITY_POLICY, Pages, templates
from mcpfleet.team.state import AuditQuery, TeamStateError
from mcpfleet.team.ui_signin import (
    CALLBACK_PATH,
    FLOW_COOKIE,
    FLOW_LIFETIME_S,
    SESSION_COOKIE,
    SESSION_LIFETIME_S,
    UI_PATH,
    SignInFailed,
    UiSession,
    UiSignIn,
    is_admin,
    refusal_of,
)

if TYPE_CHECKING:
    from mcpfleet.dashboard.source import FleetSource
    from mcpfleet.gateway.http import Admission
    from mcpfleet.team.model import TeamFile
    from mcpfleet.team.state import TeamState

_Answer = TypeVar("_Answer", bound=Response)
SIGNIN_PATH = f"{UI_PATH}/signin"
STATIC_PATH = f"{UI_PATH}/static/"
AUDIT_PAGE_SIZE = 50
NOT_ENABLED = (
    "no dashboard here: add a ui: block to the team file (ui: {client_id: …, admins: {groups: [...]}}, "
    "see docs/team.md) to serve it at /ui to the admins it names"
)


def is_ui_path(path: str) -> bool:
    return path == UI_PATH or path.startswith(f"{UI_PATH}/")


def ui_admission(then: Admission) -> Admission:
    """``then`` (the identity check) for every request but those under ``/ui``, which
    ``UiLayer`` signs in its own way and never hands on."""

    async def admit(scope: Scope, send: Send) -> Scope | None:
        return scope if is_ui_path(scope["path"]) else await then(scope, send)

    return admit


class UiLayer:
    """The ASGI layer that serves ``/ui`` (see the module) and hands every other request to ``app``."""

    def __init__(
        self,
        app: ASGIApp,
        team: Callable[[], TeamFile],
        source: FleetSource,
        state: TeamState,
        sign_in: UiSignIn | None,
    ) -> None:
        self.app = app
        self.team = team
        self.state = state
        self.sign_in = sign_in
        self.templates = templates(UI_PATH, team=True)
        pages = Pages(source, self.templates)
        self.pages = Starlette(
            routes=[
                Mount(
                    UI_PATH,
                    routes=[
                        Route("/signin", self.start),
                        Route("/callback", self.callback),
                        Route("/signout", self.sign_out, methods=["POST"]),
                        Route("/audit", self.audit),
                        *pages.routes(),
                    ],
                )
            ]
        )

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not is_ui_path(scope["path"]):
            await self.app(scope, receive, send)
            return
        request = Request(scope)
        refusal = self._refusal(request)
        if refusal is not None:
            await refusal(scope, receive, send)
            return
        if scope["path"] == UI_PATH:
            await RedirectResponse(f"{UI_PATH}/", status_code=303)(scope, receive, send)
            return
        await self.pages(scope, receive, send)

    def _refusal(self, request: Request) -> Response | None:
        team = self.team()
        settings = team.ui
        if settings is None or self.sign_in is None:
            return PlainTextResponse(NOT_ENABLED, status_code=404)
        public = urlsplit(team.public_url)
        if request.headers.get("host", "") != public.netloc:
            return PlainTextResponse(
                f"not this gateway's address (Host): open {public.netloc}{UI_PATH}/", 403
            )
        if request.method == "POST" and not _same_origin(request, f"{public.scheme}://{public.netloc}"):
            return PlainTextResponse("a request from another site is refused", status_code=403)
        path = request.url.path
        state = request.scope.setdefault("state", {})
        state["dashboard_session"] = None
        if path in (SIGNIN_PATH, CALLBACK_PATH) or path.startswith(STATIC_PATH):
            return None
        session = self.sign_in.session_of(request.cookies.get(SESSION_COOKIE))
        if session is None:
            return self._page(
                request,
                "Sign in",
                "These pages are for the gateway's admins: sign in with your organisation's account.",
                401,
                link=(SIGNIN_PATH, "Sign in"),
            )
        if not is_admin(settings, session.principal):
            return self._page(request, "Not an admin", refusal_of(session.principal), 403)
        state["dashboard_session"] = session
        return None

    def _page(
        self, request: Request, title: str, text: str, status: int, link: tuple[str, str] | None = None
    ) -> HTMLResponse:
        session = request.scope.get("state", {}).get("dashboard_session")
        page = self.templates.get_template("signin.html").render(
            title=title,
            text=text,
            link=link[0] if link else None,
            link_text=link[1] if link else "",
            csrf=session.csrf if session is not None else "",
            signed_in=session.name if session is not None else None,
            said="",
            page="signin",
        )
        return _secured(HTMLResponse(page, status_code=status))

    # -- signing in ---------------------------------------------------------------------------------

    async def start(self, request: Request) -> Response:
        sign_in, settings = self.sign_in, self.team().ui
        assert sign_in is not None and settings is not None  # else refused in front
        try:
            location, flow = await sign_in.start(settings, request.query_params.get("login_hint"))
        except SignInFailed as error:
            return self._page(request, "Cannot sign in", str(error), 502)
        response = RedirectResponse(location, status_code=303)
        response.headers["set-cookie"] = sign_in.cookie_header(FLOW_COOKIE, flow, FLOW_LIFETIME_S, "Lax")
        return _secured(response)

    async def callback(self, request: Request) -> Response:
        sign_in, settings = self.sign_in, self.team().ui
        assert sign_in is not None and settings is not None
        forget_flow = sign_in.cookie_header(FLOW_COOKIE, "", 0, "Lax")
        try:
            principal = await sign_in.finish(
                settings, request.cookies.get(FLOW_COOKIE), dict(request.query_params)
            )
        except SignInFailed as error:
            response = self._page(
                request, "Not signed in", str(error), 400, link=(SIGNIN_PATH, "Sign in again")
            )
            response.headers["set-cookie"] = forget_flow
            return response
        if not is_admin(settings, principal):
            response = self._page(request, "Not an admin", refusal_of(principal), 403)
            response.headers["set-cookie"] = forget_flow
            return response
        # A page, not a redirect: see ``team.ui_signin`` on SameSite=Strict.
        response = self._page(
            request,
            "Signed in",
            f"Signed in as {principal.policy_name}.",
            200,
            link=(f"{UI_PATH}/", "Open the fleet"),
        )
        response.headers["refresh"] = f"0; url={UI_PATH}/"
        response.headers.append("set-cookie", forget_flow)
        response.headers.append(
            "set-cookie",
            sign_in.cookie_header(
                SESSION_COOKIE, sign_in.session_cookie(principal), SESSION_LIFETIME_S, "Strict"
            ),
        )
        return response

    async def sign_out(self, request: Request) -> Response:
        session: UiSession = request.scope["state"]["dashboard_session"]
        form = await request.form()
        submitted = form.get("csrf")
        if not (isinstance(submitted, str) and hmac.compare_digest(submitted, session.csrf)):
            return PlainTextResponse("the form's CSRF token is not this session's", status_code=403)
        assert self.sign_in is not None
        request.scope["state"]["dashboard_session"] = None
        response = self._page(
            request, "Signed out", "You are signed out of this dashboard.", 200, link=(SIGNIN_PATH, "Sign in")
        )
        response.headers["set-cookie"] = self.sign_in.cookie_header(SESSION_COOKIE, "", 0, "Strict")
        return response

    # -- the audit log ------------------------------------------------------------------------------

    async def audit(self, request: Request) -> Response:
        query = request.query_params
        filters = {
            name: query.get(name, "").strip()
            for name in ("user", "server", "tool", "outcome", "since", "until")
        }
        error = ""
        records: list[Any] = []
        try:
            offset = max(int(query.get("offset", "0") or 0), 0)
        except ValueError:
            offset = 0
        try:
            outcome = filters["outcome"] or None
            if outcome not in (None, "ok", "error", "denied"):
                raise ValueError(f"outcome {outcome!r} is none of ok, error, denied")
            selection = AuditQuery(
                user=filters["user"] or None,
                server=filters["server"] or None,
                tool=filters["tool"] or None,
                outcome=outcome,  # type: ignore[arg-type]
                since=_instant(filters["since"], "since"),
                until=_instant(filters["until"], "until"),
                limit=AUDIT_PAGE_SIZE,
                offset=offset,
            )
            records = await self.state.audit_page(selection)
        except ValueError as problem:
            error = str(problem)
        except TeamStateError as problem:
            error = f"the audit log cannot be read now: {problem}"
        kept = {name: value for name, value in filters.items() if value}
        older = (
            urlencode({**kept, "offset": offset + AUDIT_PAGE_SIZE})
            if len(records) == AUDIT_PAGE_SIZE
            else None
        )
        newer = urlencode({**kept, "offset": max(offset - AUDIT_PAGE_SIZE, 0)}) if offset > 0 else None
        session: UiSession = request.scope["state"]["dashboard_session"]
        page = self.templates.get_template("audit.html").render(
            csrf=session.csrf,
            signed_in=session.name,
            said="",
            page="audit",
            filters=filters,
            records=records,
            error=error,
            older=older,
            newer=newer,
        )
        return _secured(HTMLResponse(page, status_code=400 if error else 200))


def _instant(text: str, name: str) -> datetime | None:
    """An ISO 8601 time of the filters (``Z`` or an offset; none: UTC)."""
    if not text:
        return None
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        raise ValueError(f"{name} {text!r} is not an ISO 8601 time, e.g. 2026-01-31T09:00Z") from None
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


def _same_origin(request: Request, origin: str) -> bool:
    return request_origin(request) == origin


def _secured(response: _Answer) -> _Answer:
    response.headers["content-security-policy"] = CONTENT_SECURITY_POLICY
    response.headers["cache-control"] = "no-store"
    response.headers["referrer-policy"] = "same-origin"
    return response
