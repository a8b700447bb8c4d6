"""The live parts of the pages, pushed as server-sent events (sse-starlette).

A page's live part (the fleet table, a server's state and log tail, the approvals waiting)
has a ``data-live`` address; the page's script (``static/dashboard.js``) opens it and puts
each event's HTML in place. The stream renders the part from the fleet as it is every ``LOOK_INTERVAL_S`` and
sends it when it differs from what it sent last: a state change reaches the page without a
reload, and nothing is sent while nothing changes. A stream open holds the daemon as a
connection does (``FleetSource.hold``): a dashboard being watched is not idle.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable

import anyio
import jinja2
from sse_starlette import EventSourceResponse, ServerSentEvent
from starlette.requests import Request

from mcpfleet.dashboard.source import FleetSource

LOOK_INTERVAL_S = 0.5
"""How often a stream looks at the fleet: the longest a change waits to be shown."""
PING_S = 15
"""The keep-alive comment of a quiet stream."""


class LiveStreams:
    def __init__(self, source: FleetSource, templates: jinja2.Environment) -> None:
        self.source = source
        self.templates = templates

    async def fleet(self, request: Request) -> EventSourceResponse:
        template = self.templates.get_template("_fleet_table.html")
        return self._stream(
            lambda: template.render(rows=self.source.backends(), sessions=self.source.sessions())
        )

    async def server(self, request: Request) -> EventSourceResponse:
        key = request.path_params["key"]
        template = self.templates.get_template("_server_live.html")
        return self._stream(lambda: template.render(detail=self.source.server(key)))

    async def approvals(self, request: Request) -> EventSourceResponse:
        # Its forms carry the session's CSRF token, as the page's own do.
        csrf = request.scope["state"]["dashboard_session"].csrf
        template = self.templates.get_template("_approvals_live.html")
        return self._stream(
            lambda: template.render(csrf=csrf, pending=self.source.pending(), withheld=self.source.withheld())
        )

    def _stream(self, render: Callable[[], str]) -> EventSourceResponse:
        async def events() -> AsyncIterator[ServerSentEvent]:
            async with self.source.hold():
                sent: str | None = None
                while True:
                    html = render()
                    if html != sent:
                        sent = html
                        yield ServerSentEvent(data=html, event="update")
                    await anyio.sleep(LOOK_INTERVAL_S)

        return EventSourceResponse(events(), ping=PING_S, headers={"cache-control": "no-store"})
