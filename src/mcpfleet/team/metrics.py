"""``/metrics`` of a team gateway: the Prometheus text of its calls and its fleet
(``mcpfleet.telemetry.prometheus``), in front of everything else it serves.

Who may read it is the identity check's decision, made before (``team.identity``): a member's
token or service key, or anyone when the team file says ``metrics: public``. Without
``prometheus_client`` (``mcpfleet[otel]``) the gateway serves on and ``/metrics`` answers 501
with what to install.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

from mcpfleet import telemetry
from mcpfleet.errors import ConfigError

if TYPE_CHECKING:
    from starlette.types import ASGIApp, Receive, Scope, Send

logger = logging.getLogger(__name__)

METRICS_PATH = "/metrics"


def record_for_metrics() -> bool:
    """Count calls for ``/metrics`` from now on; ``False`` (logged) when ``prometheus_client``
    is not installed."""
    try:
        telemetry.serve_prometheus()
    except ConfigError as error:
        logger.warning("%s; /metrics answers 501 until then", error)
        return False
    return True


def with_metrics(around: Callable[[ASGIApp], ASGIApp] | None) -> Callable[[ASGIApp], ASGIApp]:
    """``around`` (the team's other pages in front of the MCP application) with ``/metrics``
    answered in front of them."""

    def wrapped(app: ASGIApp) -> ASGIApp:
        inner = around(app) if around is not None else app
        active = telemetry.active()
        if active is None or active.prometheus is None:
            return _Unavailable(inner)
        from mcpfleet.telemetry.prometheus import MetricsRoute

        return MetricsRoute(inner, telemetry.metrics_app())

    return wrapped


class _Unavailable:
    """``/metrics`` answered 501 (``prometheus_client`` missing), every other path by ``app``."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] != METRICS_PATH:
            await self.app(scope, receive, send)
            return
        body = f"/metrics needs prometheus_client: {telemetry.EXTRA_HINT}".encode()
        headers = [(b"content-type", b"text/plain; charset=utf-8")]
        await send({"type": "http.response.start", "status": 501, "headers": headers})
        await send({"type": "http.response.body", "body": body})
