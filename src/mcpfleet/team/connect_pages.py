"""The pages a user opens to connect their own accounts: ``/connect``, ``/connect/<server>``,
``/connect/<server>/callback``, served by the team gateway behind its identity layer.

Every page is the signed-in user's own: it reads the ``Principal`` the identity layer put in
the request's scope, and a request without one is refused (401). What changes state is a POST
carrying a form token bound to that user (``PerUserCredentials.form_token``), so another site
cannot connect or revoke on a user's behalf; the callback is accepted only for a flow the same
user started, once, before it expires, on whichever replica it lands (``team.connect_handoff``).
The pages never show a token.
"""

from __future__ import annotations

import html
import logging
from urllib.parse import unquote

from mcp.shared.auth import AuthorizationCodeResult
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response
from starlette.routing import Route, Router
from starlette.types import ASGIApp, Receive, Scope, Send

from mcpfleet.team.connect_handoff import UNKNOWN, Callback
from mcpfleet.team.per_user import CONNECT_PATH, PerUserCredentials
from mcpfleet.team.principal import Principal, principal_of_scope

logger = logging.getLogger(__name__)

FORM_FIELD = "form_token"


def connect_routes(credentials: PerUserCredentials) -> list[Route]:
    """The routes of the connect pages, for the team gateway's Starlette app."""
    pages = _ConnectPages(credentials)
    return [
        Route(CONNECT_PATH, pages.overview, methods=["GET"]),
        Route(f"{CONNECT_PATH}/{{server}}", pages.server_page, methods=["GET"]),
        Route(f"{CONNECT_PATH}/{{server}}", pages.start, methods=["POST"]),
        Route(f"{CONNECT_PATH}/{{server}}/revoke", pages.revoke, methods=["POST"]),
        Route(f"{CONNECT_PATH}/{{server}}/callback", pages.callback, methods=["GET"]),
    ]


class ConnectLayer:
    """An ASGI layer that serves the connect pages and hands every other request to ``app``.

    It sits behind the identity layer (which puts the principal in the scope) and in front of
    the gateway's MCP endpoint: ``ConnectLayer(gate, credentials)``.
    """

    def __init__(self, app: ASGIApp, credentials: PerUserCredentials) -> None:
        self.app = app
        self.pages = Router(routes=connect_routes(credentials))

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = scope.get("path", "") if scope["type"] == "http" else ""
        if path == CONNECT_PATH or path.startswith(f"{CONNECT_PATH}/"):
            await self.pages(scope, receive, send)
        else:
            await self.app(scope, receive, send)


class _ConnectPages:
    def __init__(self, credentials: PerUserCredentials) -> None:
        self.credentials = credentials

    async def overview(self, request: Request) -> Response:
        principal = principal_of_scope(request.scope)
        if principal is None:
            return _not_signed_in()
        user = principal.credentials_key
        connected = set(await self.credentials.connected_servers(user))
        rows = []
        for server in sorted(self.credentials.servers):
            link = f'<a href="{html.escape(self.credentials.connect_url(server))}">{html.escape(server)}</a>'
            if server in connected:
                rows.append(f"<li>{link}: connected {self._revoke_form(user, server)}</li>")
            else:
                rows.append(f"<li>{link}: not connected</li>")
        body = f"<ul>{''.join(rows)}</ul>" if rows else "<p>No server here uses your own account.</p>"
        return _page(f"Your connected servers, {principal.policy_name}", body)

    async def server_page(self, request: Request) -> Response:
        subject = self._subject(request)
        if isinstance(subject, Response):
            return subject
        principal, server = subject
        user = principal.credentials_key
        connected = await self.credentials.store(user, server).has_tokens()
        state = "connected" if connected else "not connected"
        action = "Connect again" if connected else "Connect"
        form = (
            f'<form method="post" action="{html.escape(self.credentials.connect_url(server))}">'
            f'<input type="hidden" name="{FORM_FIELD}" value="{self.credentials.form_token(user)}">'
            f'<button type="submit">{action}</button></form>'
        )
        revoke = self._revoke_form(user, server) if connected else ""
        body = f"<p>{html.escape(server)}: {state}.</p>{form}{revoke}"
        return _page(f"{server} for {principal.policy_name}", body)

    async def start(self, request: Request) -> Response:
        subject = self._subject(request)
        if isinstance(subject, Response):
            return subject
        principal, server = subject
        user = principal.credentials_key
        if not await self._form_ok(request, user):
            return _page("Not accepted", "<p>This form is stale or not yours; open the page again.</p>", 403)
        flow = await self.credentials.flows.start(
            user,
            server,
            self.credentials.servers[server],
            self.credentials.store(user, server),
            redirect_uri=self.credentials.callback_url(server),
            connect_url=self.credentials.connect_url(server),
        )
        if flow.failure is not None or flow.authorize_url is None:
            reason = flow.failure or "the server offered no way to sign in"
            return _page(f"Cannot connect {server}", f"<p>{html.escape(reason)}</p>", 502)
        return RedirectResponse(flow.authorize_url, status_code=303)

    async def callback(self, request: Request) -> Response:
        subject = self._subject(request)
        if isinstance(subject, Response):
            return subject
        principal, server = subject
        query = request.query_params
        failure: str | None = None
        code: AuthorizationCodeResult | None = None
        if "error" in query:
            failure = f"the authorization server refused: {query['error']}"
        elif "code" not in query:
            failure = "the authorization server sent no code"
        else:
            code = AuthorizationCodeResult(code=query["code"], state=query.get("state"), iss=query.get("iss"))
        state = query.get("state", "")
        if not state:
            return _page("Not accepted", f"<p>{html.escape(UNKNOWN.reason or '')}</p>", UNKNOWN.status)
        outcome = await self.credentials.flows.callback(
            Callback(principal.credentials_key, server, state, code, failure)
        )
        if outcome.connected:
            back = f'<p><a href="{CONNECT_PATH}">Your connected servers</a></p>'
            return _page(
                f"{server} connected",
                f"<p>Your calls to {html.escape(server)} now use your account.</p>{back}",
            )
        reason = html.escape(outcome.reason or "the connect did not finish")
        if outcome.status in (400, 403):
            return _page("Not accepted", f"<p>{reason}</p>", outcome.status)
        again = f'<p><a href="{html.escape(self.credentials.connect_url(server))}">Start again</a></p>'
        return _page(f"Cannot connect {server}", f"<p>{reason}</p>{again}", outcome.status)

    async def revoke(self, request: Request) -> Response:
        subject = self._subject(request)
        if isinstance(subject, Response):
            return subject
        principal, server = subject
        user = principal.credentials_key
        if not await self._form_ok(request, user):
            return _page("Not accepted", "<p>This form is stale or not yours; open the page again.</p>", 403)
        await self.credentials.revoke(user, server)
        logger.info('User "%s" revoked their credentials for "%s"', user, server)
        return RedirectResponse(CONNECT_PATH, status_code=303)

    def _subject(self, request: Request) -> tuple[Principal, str] | Response:
        """Who asks about which per-user server, or the page that says why the request cannot
        be served (not signed in, or no such server)."""
        principal = principal_of_scope(request.scope)
        if principal is None:
            return _not_signed_in()
        server = unquote(str(request.path_params.get("server", "")))
        if server not in self.credentials.servers:
            return _unknown_server(request)
        return principal, server

    async def _form_ok(self, request: Request, user: str) -> bool:
        form = await request.form()
        token = form.get(FORM_FIELD)
        return isinstance(token, str) and self.credentials.form_token_matches(user, token)

    def _revoke_form(self, user: str, server: str) -> str:
        action = html.escape(f"{self.credentials.connect_url(server)}/revoke")
        return (
            f'<form method="post" action="{action}" style="display:inline">'
            f'<input type="hidden" name="{FORM_FIELD}" value="{self.credentials.form_token(user)}">'
            f'<button type="submit">Revoke</button></form>'
        )


def _page(title: str, body: str, status: int = 200) -> HTMLResponse:
    document = (
        f'<!doctype html><html><head><meta charset="utf-8"><title>{html.escape(title)}</title></head>'
        f"<body><h1>{html.escape(title)}</h1>{body}</body></html>\n"
    )
    # The pages are the user's own: never cached, never framed by another site.
    headers = {"Cache-Control": "no-store", "X-Frame-Options": "DENY", "Referrer-Policy": "no-referrer"}
    return HTMLResponse(document, status_code=status, headers=headers)


def _not_signed_in() -> HTMLResponse:
    return _page(
        "Sign in first",
        "<p>These pages are your own: sign in to the team gateway, then open them again.</p>",
        401,
    )


def _unknown_server(request: Request) -> HTMLResponse:
    server = unquote(str(request.path_params.get("server", "")))
    return _page(
        "Unknown server", f"<p>No server here named {html.escape(server)} uses your own account.</p>", 404
    )


__all__ = ["FORM_FIELD", "ConnectLayer", "connect_routes"]
