"""Running this checkout's ``mcpfleet serve --http 127.0.0.1:0`` for tests that speak to it with real clients.

``running_http_gateway(home, servers, *serve_args)`` writes an ``mcpServers`` config, starts the
gateway in its own process group on a free port with a fresh bearer token in
``MCPFLEET_GATEWAY_TOKEN`` (``HttpGateway.headers`` carry it), reads the URL from the line it
prints on stderr once it listens (``mcpfleet: serving on http://…/mcp``) and, on exit, stops it
with SIGTERM (SIGKILL after a bound), so no backend outlives the test. A client that cannot send
a header (the conformance suite) is served with ``--insecure-no-auth`` in ``serve_args``.

The gateway answers its lists at once, without a backend still starting (and with no cache in a
fresh home it knows none of that backend's tools yet). ``wait_until_listed(url, tool, resource)``
waits until a backend has joined, as a host would on ``list_changed``, before a client that
lists only once (a conformance scenario, the Inspector) is let at it.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio

MCPFLEET = Path(sys.executable).parent / "mcpfleet"
READY_TIMEOUT_S = 30.0
STOP_TIMEOUT_S = 15.0
SERVING_LINE = re.compile(r"serving on (http://\S+/mcp)")


@dataclass
class HttpGateway:
    url: str
    process: subprocess.Popen[bytes]
    stderr_path: Path
    token: str

    @property
    def headers(self) -> dict[str, str]:
        """What every request to this gateway carries."""
        return {"Authorization": f"Bearer {self.token}"}

    @property
    def stderr(self) -> str:
        return self.stderr_path.read_text(errors="replace")


@contextmanager
def running_http_gateway(
    home: Path, servers: dict[str, dict[str, Any]], *serve_args: str
) -> Iterator[HttpGateway]:
    """``mcpfleet --config FILE serve --http 127.0.0.1:0 <serve_args>``, with ``servers`` configured."""
    config = home / "gateway-servers.json"
    config.write_text(json.dumps({"mcpServers": servers}), encoding="utf-8")
    stderr_path = home / f"http-gateway-{time.monotonic_ns()}.stderr"
    command = [str(MCPFLEET), "--cwd", str(home), "--no-project-config", "--config", str(config)]
    command += ["serve", "--http", "127.0.0.1:0", *serve_args]
    token = secrets.token_urlsafe(16)
    with stderr_path.open("wb") as stderr:
        process = subprocess.Popen(
            command,
            cwd=home,
            env={**os.environ, "MCPFLEET_GATEWAY_TOKEN": token},
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=stderr,
            start_new_session=True,
        )
    try:
        yield HttpGateway(wait_for_url(process, stderr_path), process, stderr_path, token)
    finally:
        stop_process_group(process)


def wait_for_url(process: subprocess.Popen[bytes], stderr_path: Path, command: str = "serve --http") -> str:
    """The URL of the ``serving on`` line ``process`` writes to ``stderr_path`` (bounded)."""
    deadline = time.monotonic() + READY_TIMEOUT_S
    while time.monotonic() < deadline:
        found = SERVING_LINE.search(stderr_path.read_text(errors="replace"))
        if found:
            return found.group(1)
        if process.poll() is not None:
            break
        time.sleep(0.05)
    raise RuntimeError(
        f"mcpfleet {command} printed no 'serving on' line (exit code {process.poll()}); "
        f"its stderr: {stderr_path.read_text(errors='replace')[-2000:]}"
    )


def stop_process_group(process: subprocess.Popen[bytes]) -> None:
    """SIGTERM to the gateway's process group, SIGKILL past ``STOP_TIMEOUT_S``: nothing outlives it."""
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()


def wait_until_listed(
    gateway: HttpGateway, tool: str, resource: str | None = None, timeout_s: float = READY_TIMEOUT_S
) -> None:
    """Poll the gateway (an SDK client, handshake era) until it lists ``tool`` and, when given,
    a resource whose URI ends with ``resource``."""
    import httpx2
    from mcp.client import Client
    from mcp.client.streamable_http import streamable_http_client

    async def served(client: Client) -> bool:
        if tool not in {listed.name for listed in (await client.list_tools()).tools}:
            return False
        if resource is None:
            return True
        return any(str(listed.uri).endswith(resource) for listed in (await client.list_resources()).resources)

    async def poll() -> None:
        http_client = httpx2.AsyncClient(headers=gateway.headers, timeout=httpx2.Timeout(20.0))
        async with Client(
            streamable_http_client(gateway.url, http_client=http_client), mode="legacy"
        ) as client:
            with anyio.fail_after(timeout_s):
                while True:
                    if await served(client):
                        return
                    await anyio.sleep(0.1)

    anyio.run(poll)
