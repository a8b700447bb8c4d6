"""The dashboard's listener: uvicorn on a port of 127.0.0.1 the kernel picks, in its owner's
task group, for as long as its owner runs (``serve_dashboard``).

The socket is bound here, before uvicorn runs, so the port is known at once (the login link
names it) and ``AccessGate`` checks the ``Host`` against it. uvicorn's own signal handlers are
kept out: the daemon owns SIGTERM and SIGINT, and closes its servers on them.
"""

from __future__ import annotations

import contextlib
import logging
import socket
from collections.abc import Iterator

import anyio
import anyio.abc
import uvicorn

from mcpfleet.dashboard.access import LOGIN_PATH, METRICS_PATH, Access, AccessGate
from mcpfleet.dashboard.app import dashboard_app
from mcpfleet.dashboard.source import FleetSource

logger = logging.getLogger(__name__)

SHUTDOWN_GRACE_S = 1
"""What open pages (their event streams) get to end when the owner stops."""


class _QuietUvicorn(uvicorn.Server):
    """uvicorn that says when it listens, with the owner's signal handlers left in place."""

    def __init__(self, config: uvicorn.Config) -> None:
        super().__init__(config)
        self.listening = anyio.Event()

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets)
        self.listening.set()

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


class Dashboard:
    """A dashboard listening: its address and its login links."""

    def __init__(self, access: Access, port: int) -> None:
        self.access = access
        self.port = port

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}{self.access.root}/"

    @property
    def metrics_url(self) -> str:
        """``/metrics``, read with the session cookie or ``access.metrics_token`` as a bearer."""
        return f"http://127.0.0.1:{self.port}{self.access.root}{METRICS_PATH}"

    def login_link(self) -> str:
        """A new link that signs one browser in, once."""
        root = self.access.root
        return f"http://127.0.0.1:{self.port}{root}{LOGIN_PATH}?token={self.access.new_login_token()}"


async def serve_dashboard(
    source: FleetSource, *, task_status: anyio.abc.TaskStatus[Dashboard] = anyio.TASK_STATUS_IGNORED
) -> None:
    """Serve the dashboard of ``source`` until cancelled; ``task_status`` gets it once it listens."""
    listening = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    with contextlib.closing(listening):
        listening.bind(("127.0.0.1", 0))
        listening.listen(64)
        port = listening.getsockname()[1]
        access = Access()
        server = _QuietUvicorn(
            uvicorn.Config(
                AccessGate(dashboard_app(source, access), access, port),
                lifespan="off",
                log_config=None,
                access_log=False,
                proxy_headers=False,
                server_header=False,
                ws="none",
                timeout_graceful_shutdown=SHUTDOWN_GRACE_S,
            )
        )
        async with anyio.create_task_group() as task_group:
            task_group.start_soon(_serve_until_told, server, listening)
            try:
                await server.listening.wait()
                dashboard = Dashboard(access, port)
                logger.info("dashboard on %s", dashboard.url)
                task_status.started(dashboard)
                await anyio.sleep_forever()
            finally:
                server.should_exit = True


async def _serve_until_told(server: uvicorn.Server, listening: socket.socket) -> None:
    """uvicorn's run, shielded: it stops when told (``should_exit``), within its grace."""
    with anyio.CancelScope(shield=True):
        await server.serve(sockets=[listening])
