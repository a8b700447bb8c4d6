"""``/healthz`` and ``/readyz`` of a team gateway: what a load balancer and Kubernetes probe.

- ``/healthz``: 200 whenever the process serves HTTP (a liveness probe: failing it gets the
  replica restarted, so it says nothing about the state store or the backends, and stays 200
  while the replica drains).
- ``/readyz``: 200 ``{"ready": true}`` when this replica can take new work: not draining
  (``gateway.draining``), each named check passing within ``CHECK_TIMEOUT_S`` (the team state
  answers, the issuer's signing keys are held: ``team.serving`` names them), and
  the backends settled: every server the replica started with connected or failed its start,
  none still starting (once settled, a server that a reload of the team file adds is not waited
  for: every replica reloads at once, and all of them leaving the balancer together would be an
  outage). Otherwise 503 ``{"ready": false, "not_ready": {WHAT: WHY}}``, one entry per failing
  part (``draining``, ``servers``, and the checks' names), each reason one line, so the probe's
  output in ``kubectl describe pod`` says what to fix.

Both need no token (``team.identity`` lets them through); they answer GET and HEAD. The checks
run concurrently on each probe, each under its deadline: a state store that hangs makes the
replica unready within ``CHECK_TIMEOUT_S`` rather than hanging the probe.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING

import anyio

from mcpfleet.fleet.registry import Phase

if TYPE_CHECKING:
    from starlette.types import ASGIApp, Receive, Scope, Send

    from mcpfleet.fleet.manager import MCPManager
    from mcpfleet.gateway.draining import Drain

HEALTH_PATH = "/healthz"
READY_PATH = "/readyz"
CHECK_TIMEOUT_S = 3.0
"""Each readiness check's deadline: below the probes' ``timeoutSeconds`` in deploy/kubernetes."""

Check = Callable[[], Awaitable[None]]
"""Raises (an ``MCPFleetError`` naming what and where) unless its part answers now."""


class Readiness:
    """Whether this replica can take new work, and if not what is missing (see the module)."""

    def __init__(self, fleet: MCPManager, checks: Mapping[str, Check], drain: Drain | None = None) -> None:
        self.fleet = fleet
        self.checks = dict(checks)
        self.drain = drain
        self.settled = False
        """Every server the replica started with has connected or failed: from then on a server
        a reload adds is not waited for (every replica would leave the balancer at once)."""

    async def not_ready(self) -> dict[str, str]:
        """Each part that is not ready, with why; empty when the replica is ready."""
        problems: dict[str, str] = {}
        if self.drain is not None and self.drain.draining:
            problems["draining"] = "the replica is shutting down (SIGTERM): it takes no new sessions"
        if not self.settled:
            servers = self.fleet.servers.items()
            starting = sorted(name for name, state in servers if state.state == Phase.CONNECTING)
            if starting:
                problems["servers"] = f"still starting: {', '.join(starting)}"
            self.settled = not starting
        async with anyio.create_task_group() as task_group:
            for name, check in self.checks.items():
                task_group.start_soon(_run_check, name, check, problems)
        return problems


async def _run_check(name: str, check: Check, problems: dict[str, str]) -> None:
    with anyio.move_on_after(CHECK_TIMEOUT_S) as deadline:
        try:
            await check()
        except Exception as error:  # every failure of a part is a reason not to be ready
            problems[name] = " ".join(str(error).split()) or type(error).__name__
            return
    if deadline.cancelled_caught:
        problems[name] = f"did not answer within {CHECK_TIMEOUT_S:g} s"


class HealthRoutes:
    """``/healthz`` and ``/readyz`` answered in front of ``app`` (everything else goes to it)."""

    def __init__(self, app: ASGIApp, readiness: Readiness) -> None:
        self.app = app
        self.readiness = readiness

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = scope.get("path") if scope["type"] == "http" else None
        if path not in (HEALTH_PATH, READY_PATH):
            await self.app(scope, receive, send)
            return
        if scope["method"] not in ("GET", "HEAD"):
            await _respond(send, scope, 405, {"error": "GET or HEAD only"}, [(b"allow", b"GET, HEAD")])
            return
        if path == HEALTH_PATH:
            await _respond(send, scope, 200, {"status": "serving"})
            return
        problems = await self.readiness.not_ready()
        if problems:
            await _respond(send, scope, 503, {"ready": False, "not_ready": problems})
        else:
            await _respond(send, scope, 200, {"ready": True})


async def _respond(
    send: Send,
    scope: Scope,
    status: int,
    document: dict[str, object],
    headers: list[tuple[bytes, bytes]] | None = None,
) -> None:
    body = json.dumps(document).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"cache-control", b"no-store"),
                *(headers or []),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body if scope["method"] != "HEAD" else b""})
