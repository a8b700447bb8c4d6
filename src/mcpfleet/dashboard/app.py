"""The dashboard's pages: the fleet, a server, approvals, the playground and the plots.

Each page is a Jinja2 template of the package (``templates/``), its style and its one small
script in ``static/``, served from the package: the pages load nothing from anywhere else,
and their Content-Security-Policy says so to the browser. Every action is a ``POST`` of a
form that carries the session's CSRF token (``access.require_csrf``), answered by a redirect
back to the page with what was done. The live parts (the fleet table, a server's state and
log tail) are pushed by ``live.py``'s event streams.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from importlib import resources
from typing import Any
from urllib.parse import quote, urlencode

import jinja2
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, PlainTextResponse, RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp, Receive, Scope, Send

from mcpfleet.dashboard import charts
from mcpfleet.dashboard.access import (
    LOGIN_PATH,
    METRICS_PATH,
    SESSION_COOKIE,
    Access,
    require_csrf,
)
from mcpfleet.dashboard.forms import ArgumentError, arguments_from, form_fields
from mcpfleet.dashboard.source import BackendRow, FleetSource
from mcpfleet.errors import ConfigError, MCPFleetError

CONTENT_SECURITY_POLICY = (
    "default-src 'self'; img-src 'self' data:; style-src 'self' 'unsafe-inline'; "
    "script-src 'self'; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
)
"""Only this dashboard's own files; pygal's SVG carries an inline ``<style>``, images of a
tool's result come as ``data:`` URLs."""


def templates(root: str, *, team: bool = False) -> jinja2.Environment:
    """The pages' templates; ``root`` is the path every address of theirs starts with (the
    daemon's secret one, or a team gateway's ``/ui``); ``team``: a team gateway's pages, which
    add the audit log and speak of the team file rather than of projects."""
    environment = jinja2.Environment(
        loader=jinja2.PackageLoader("mcpfleet.dashboard", "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
    )
    environment.filters["megabytes"] = lambda value: "" if value is None else f"{value / 1048576:.1f} MB"
    environment.filters["pretty_json"] = lambda value: json.dumps(value, indent=2, ensure_ascii=False)
    environment.globals["grouped"] = grouped
    environment.globals["root"] = root
    environment.globals["team"] = team
    return environment


def grouped(rows: list[BackendRow]) -> list[tuple[str, list[BackendRow]]]:
    """The fleet's backends by where they run: the user's shared ones, then each project's."""
    groups: dict[str, list[BackendRow]] = {}
    for row in rows:
        if row.share == "team":
            title = "the team file's servers, shared by every user"
        elif row.share == "user":
            title = "shared by every session (user servers)"
        elif row.share == "project":
            title = f"project {row.project}"
        else:
            title = f"project {row.project}, one backend per session"
        groups.setdefault(title, []).append(row)
    return sorted(groups.items(), key=lambda item: (not item[0].startswith("shared"), item[0]))


class Pages:
    """The routes under ``root``, over one fleet; who may use them is decided in front of them
    (``access.AccessGate`` for the daemon's, ``team.ui_access`` for a team gateway's), which puts
    the session (anything with a ``csrf``) in the scope's ``state["dashboard_session"]``."""

    def __init__(self, source: FleetSource, environment: jinja2.Environment) -> None:
        self.source = source
        self.templates = environment
        self.root: str = environment.globals["root"]  # type: ignore[assignment]

    def render(self, request: Request, name: str, status_code: int = 200, **context: Any) -> HTMLResponse:
        session = request.scope["state"]["dashboard_session"]
        page = self.templates.get_template(name).render(
            csrf=session.csrf if session is not None else "",
            signed_in=getattr(session, "name", None),
            said=request.query_params.get("said", ""),
            page=name.removesuffix(".html"),
            **context,
        )
        response = HTMLResponse(page, status_code=status_code)
        response.headers["content-security-policy"] = CONTENT_SECURITY_POLICY
        response.headers["cache-control"] = "no-store"
        # Not "no-referrer": a form posted under it says ``Origin: null``, which the gate refuses.
        response.headers["referrer-policy"] = "same-origin"
        return response

    # -- pages --------------------------------------------------------------------------------------

    async def fleet(self, request: Request) -> Response:
        return self.render(
            request, "fleet.html", rows=self.source.backends(), sessions=self.source.sessions()
        )

    async def server(self, request: Request) -> Response:
        detail = self.source.server(request.path_params["key"])
        if detail is None:
            return self.render(request, "missing.html", status_code=404, key=request.path_params["key"])
        return self.render(request, "server.html", detail=detail, fields=form_fields)

    async def approvals(self, request: Request) -> Response:
        return self.render(
            request, "approvals.html", pending=self.source.pending(), withheld=self.source.withheld()
        )

    async def playground(self, request: Request) -> Response:
        return await self._playground(request, None, {})

    async def plots(self, request: Request) -> Response:
        records = list(self.source.calls.records)
        return self.render(
            request,
            "plots.html",
            calls=len(records),
            over_time=charts.calls_over_time(records),
            latency=charts.latency_percentiles(records),
        )

    async def _playground(
        self, request: Request, result: dict[str, Any] | None, submitted: Mapping[str, Any], error: str = ""
    ) -> Response:
        rows = self.source.backends()
        key = request.query_params.get("server") or (rows[0].key if rows else "")
        detail = self.source.server(key) if key else None
        tool_name = request.query_params.get("tool") or (
            detail.tools[0].name if detail and detail.tools else ""
        )
        tool = next((tool for tool in detail.tools if tool.name == tool_name), None) if detail else None
        return self.render(
            request,
            "playground.html",
            rows=rows,
            detail=detail,
            tool=tool,
            fields=form_fields(tool.input_schema) if tool is not None else [],
            submitted=submitted,
            result=result,
            error=error,
        )

    # -- actions ------------------------------------------------------------------------------------

    async def _form(self, request: Request) -> tuple[Any, Mapping[str, Any]] | Response:
        session = request.scope["state"]["dashboard_session"]
        form = await request.form()
        if not require_csrf(session, form.get("csrf")):
            return Response("the form's CSRF token is not this session's", status_code=403)
        return session, form

    async def act(self, request: Request) -> Response:
        taken = await self._form(request)
        if isinstance(taken, Response):
            return taken
        action = request.path_params["action"]
        key = request.path_params["key"]
        back = f"{self.root}/servers/{quote(key, safe='')}"
        try:
            if action == "restart":
                said = await self.source.restart(key)
            elif action == "disable":
                said = await self.source.disable(key)
                back = f"{self.root}/"
            else:
                return Response(f"no action {action!r}: restart or disable", status_code=404)
        except MCPFleetError as error:
            said = str(error)
        return RedirectResponse(f"{back}?{urlencode({'said': said})}", status_code=303)

    async def approve_server(self, request: Request) -> Response:
        taken = await self._form(request)
        if isinstance(taken, Response):
            return taken
        _, form = taken
        try:
            said = await self.source.approve_server(
                str(form.get("project", "")), str(form.get("path", "")), str(form.get("name", ""))
            )
        except MCPFleetError as error:
            said = str(error)
        return RedirectResponse(f"{self.root}/approvals?{urlencode({'said': said})}", status_code=303)

    async def approve_tools(self, request: Request) -> Response:
        taken = await self._form(request)
        if isinstance(taken, Response):
            return taken
        _, form = taken
        try:
            said = await self.source.approve_tools(str(form.get("key", "")))
        except MCPFleetError as error:
            said = str(error)
        return RedirectResponse(f"{self.root}/approvals?{urlencode({'said': said})}", status_code=303)

    async def call(self, request: Request) -> Response:
        taken = await self._form(request)
        if isinstance(taken, Response):
            return taken
        session, form = taken
        detail = self.source.server(request.query_params.get("server", ""))
        wanted = request.query_params.get("tool")
        tool = next((tool for tool in detail.tools if tool.name == wanted), None) if detail else None
        if detail is None or tool is None:
            return await self._playground(request, None, form, "no such server or tool any more")
        try:
            arguments = arguments_from(form_fields(tool.input_schema), form)
            result = await self.source.call(detail.row.key, tool.name, arguments, session)
        except (ArgumentError, MCPFleetError) as error:
            return await self._playground(request, None, form, str(error))
        return await self._playground(request, result, form)

    def routes(self) -> list[Route | Mount]:
        """Every page, action, event stream and static file, relative to ``root``."""
        from mcpfleet.dashboard.live import LiveStreams

        live = LiveStreams(self.source, self.templates)
        static = StaticFiles(directory=str(resources.files("mcpfleet.dashboard") / "static"))
        return [
            Route("/", self.fleet),
            Route("/servers/{key}", self.server),
            Route("/servers/{key}/{action}", self.act, methods=["POST"]),
            Route("/approvals", self.approvals),
            Route("/approvals/server", self.approve_server, methods=["POST"]),
            Route("/approvals/tools", self.approve_tools, methods=["POST"]),
            Route("/playground", self.playground),
            Route("/playground", self.call, methods=["POST"]),
            Route("/plots", self.plots),
            Route("/events/fleet", live.fleet),
            Route("/events/servers/{key}", live.server),
            Route("/events/approvals", live.approvals),
            Route(METRICS_PATH, metrics_endpoint(), methods=["GET", "HEAD"]),
            Mount("/static", app=static),
        ]


class LocalLogin:
    """The daemon's dashboard's one-time login link (``access.Access``)."""

    def __init__(self, access: Access) -> None:
        self.access = access
        self.root = access.root

    async def login(self, request: Request) -> Response:
        session = self.access.redeem(request.query_params.get("token", ""))
        if session is None:
            return Response(
                "this login link was used already or has expired: run `mcpfleet ui` for a new one",
                status_code=401,
                media_type="text/plain",
            )
        response = RedirectResponse(f"{self.root}/", status_code=303)
        response.set_cookie(
            SESSION_COOKIE, session.id, httponly=True, samesite="strict", path=f"{self.root}/"
        )
        response.headers["referrer-policy"] = "no-referrer"
        return response


def dashboard_app(source: FleetSource, access: Access) -> Starlette:
    """The daemon's dashboard's routes (``AccessGate`` goes in front of them, ``server.py``)."""
    pages = Pages(source, templates(access.root))
    routes = Mount(
        access.root,
        routes=[Route(LOGIN_PATH, LocalLogin(access).login), *pages.routes()],
    )
    return Starlette(routes=[routes])


def metrics_endpoint() -> ASGIApp:
    """``/metrics``: this process's calls and fleet as Prometheus text, counted from now on;
    without ``prometheus_client`` (``mcpfleet[otel]``), a 501 that says what to install."""
    from mcpfleet import telemetry

    try:
        return _Endpoint(telemetry.metrics_app())
    except ConfigError as error:
        return PlainTextResponse(f"{error}\n", status_code=501)


class _Endpoint:
    """An ASGI application as a route's endpoint (Starlette takes a plain function for a
    request handler, so one is wrapped in an instance)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self.app(scope, receive, send)
