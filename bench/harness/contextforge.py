"""IBM ContextForge (PyPI ``mcp-contextforge-gateway``) as a peer of the HTTP benchmarks.

The Makefile installs it into ``.tools/bench-venvs/contextforge`` on Python 3.12 (its own
requirement); ``running_contextforge`` starts one worker of it offline on 127.0.0.1, its
SQLite database and home in a folder of the caller's, registers one backend (a streamable
HTTP URL, or a stdio command through ContextForge's own bridge, ``mcpgateway.translate``) as
a gateway, puts its ``echo``-like tool into a virtual server, and yields that server's MCP
endpoint with the admin's JWT (made by ContextForge's ``create_jwt_token``, as its docs say).

Settings, from ``mcpgateway/config.py``: fresh random secrets (its start refuses weak ones),
the admin UI and admin API off, the in-process cache (``CACHE_TYPE=memory``: no Redis),
loopback backends allowed (``SSRF_ALLOW_LOCALHOST``), and its rate limiter off: on by default
it lets an MCP client make 100 requests a minute (20 more in a burst), so with it every
figure would be that limit. ``stateful`` sets ``USE_STATEFUL_SESSIONS`` (off by default: then
each request to the MCP endpoint is a session of its own, opened and closed on the backend).
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shlex
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.harness.peers import VENVS_DIR

VERSION = "1.1.0"
VENV = VENVS_DIR / "contextforge"
PYTHON = VENV / "bin" / "python"
STAMP = VENV / f".installed-{VERSION}"
INSTALL_HINT = "make contextforge-venv (it needs Python 3.12: pyenv's, or python3.12 on PATH)"
READY_TIMEOUT_S = 180.0
"""Its first start creates and migrates the SQLite database: ~20 s on 2 idle cores."""
ADMIN_EMAIL = "admin@bench.example.com"
GATEWAY_NAME = "bench"
"""ContextForge names a gateway's tools ``<gateway slug>-<tool>``."""


class ContextForgeError(Exception):
    """ContextForge did not start, or refused the benchmark's set-up."""


@dataclass
class ContextForge:
    process: subprocess.Popen[bytes]
    port: int
    token: str
    server_id: str
    tool: str
    """The tool's name as the virtual server lists it."""
    bridge: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/servers/{self.server_id}/mcp"


def require_installed() -> None:
    """Refuse to run without the venv, saying how to make it."""
    if not (STAMP.is_file() and PYTHON.exists()):
        raise SystemExit(f"ContextForge {VERSION} is not installed in {VENV}: {INSTALL_HINT}")


def installed() -> bool:
    return STAMP.is_file() and PYTHON.exists()


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _environment(folder: Path, port: int, stateful: bool) -> dict[str, str]:
    password = f"Bench-{secrets.token_urlsafe(18)}!"
    keep = ("PATH", "LANG", "TMPDIR")
    return {
        **{name: os.environ[name] for name in keep if name in os.environ},
        "HOME": str(folder),
        "DATABASE_URL": f"sqlite:///{folder / 'contextforge.db'}",
        "HOST": "127.0.0.1",
        "PORT": str(port),
        "JWT_SECRET_KEY": secrets.token_hex(32),
        "AUTH_ENCRYPTION_SECRET": secrets.token_hex(32),
        "BASIC_AUTH_USER": "bench-admin",
        "BASIC_AUTH_PASSWORD": password,
        "PLATFORM_ADMIN_EMAIL": ADMIN_EMAIL,
        "PLATFORM_ADMIN_PASSWORD": password,
        "DEFAULT_USER_PASSWORD": password,
        "MCPGATEWAY_UI_ENABLED": "false",
        "MCPGATEWAY_ADMIN_API_ENABLED": "false",
        "CACHE_TYPE": "memory",
        "SSRF_ALLOW_LOCALHOST": "true",
        "RATE_LIMITING_ENABLED": "false",
        "USE_STATEFUL_SESSIONS": "true" if stateful else "false",
        "LOG_LEVEL": "ERROR",
        "PYTHONDONTWRITEBYTECODE": "1",
    }


def _stop(process: subprocess.Popen[bytes]) -> None:
    """SIGTERM to the process group it leads (its workers too), SIGKILL if it lingers."""
    if process.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(timeout=15)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)
    process.wait()


def _wait_http(url: str, process: subprocess.Popen[bytes], log: Path, what: str) -> None:
    import httpx2

    deadline = time.monotonic() + READY_TIMEOUT_S
    while True:
        if process.poll() is not None or time.monotonic() > deadline:
            tail = log.read_text(errors="replace")[-2000:] if log.exists() else ""
            raise ContextForgeError(f"{what} did not start (see {log}): {tail}")
        with contextlib.suppress(httpx2.HTTPError):
            if httpx2.get(url, timeout=2).status_code < 500:
                return
        time.sleep(0.25)


def _spawn(command: list[str], folder: Path, env: dict[str, str], log_name: str) -> subprocess.Popen[bytes]:
    with (folder / log_name).open("wb") as log:
        return subprocess.Popen(
            command,
            cwd=folder,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )


def _checked(answer: Any, what: str) -> Any:
    if answer.status_code >= 300:
        raise ContextForgeError(
            f"ContextForge refused {what}: HTTP {answer.status_code}: {answer.text[:500]}"
        )
    return answer.json()


def _register(port: int, token: str, backend_url: str, tool: str) -> tuple[str, str]:
    """The backend as a gateway, its ``tool`` in a new virtual server: (server id, tool name)."""
    import httpx2

    base = f"http://127.0.0.1:{port}"
    with httpx2.Client(base_url=base, headers={"Authorization": f"Bearer {token}"}, timeout=60) as http:
        gateway = {"name": GATEWAY_NAME, "url": backend_url, "transport": "STREAMABLEHTTP"}
        _checked(http.post("/gateways", json=gateway), "the backend's registration")
        tools = _checked(http.get("/tools"), "the tool list")
        found = [entry for entry in tools if entry.get("originalName") == tool]
        if not found:
            names = [entry.get("originalName") for entry in tools]
            raise ContextForgeError(f"ContextForge lists no tool {tool!r} of the backend (it lists {names})")
        server = {"server": {"name": "bench-server", "associated_tools": [found[0]["id"]]}}
        created = _checked(http.post("/servers", json=server), "the virtual server")
    return str(created["id"]), str(found[0]["name"])


def _token(env: dict[str, str]) -> str:
    """A JWT for the platform admin, signed with this run's secret by ContextForge's own tool."""
    command = [str(PYTHON), "-m", "mcpgateway.utils.create_jwt_token", "--username", ADMIN_EMAIL]
    command += ["--exp", "120", "--secret", env["JWT_SECRET_KEY"]]
    made = subprocess.run(command, env=env, cwd=env["HOME"], capture_output=True, text=True, timeout=120)
    lines = made.stdout.strip().splitlines()
    if made.returncode != 0 or not lines:
        raise ContextForgeError(f"create_jwt_token failed: {made.stderr[-1000:]}")
    return lines[-1].strip()


@contextmanager
def running_contextforge(
    folder: Path,
    *,
    stateful: bool,
    backend_url: str | None = None,
    stdio_backend: list[str] | None = None,
    tool: str = "echo",
) -> Iterator[ContextForge]:
    """One ContextForge worker in front of ``backend_url`` (streamable HTTP) or of the stdio
    command ``stdio_backend`` through its bridge; everything it started is stopped on exit."""
    require_installed()
    folder.mkdir(parents=True, exist_ok=True)
    port = free_port()
    env = _environment(folder, port, stateful)
    started: list[subprocess.Popen[bytes]] = []
    try:
        bridge = None
        if stdio_backend is not None:
            bridge_port = free_port()
            command = [str(PYTHON), "-m", "mcpgateway.translate", "--stdio", shlex.join(stdio_backend)]
            command += ["--expose-streamable-http", "--host", "127.0.0.1", "--port", str(bridge_port)]
            bridge = _spawn(command, folder, env, "bridge.log")
            started.append(bridge)
            backend_url = f"http://127.0.0.1:{bridge_port}/mcp"
            _wait_http(backend_url, bridge, folder / "bridge.log", "ContextForge's stdio bridge")
        if backend_url is None:
            raise ValueError("running_contextforge needs backend_url or stdio_backend")
        command = [str(VENV / "bin" / "mcpgateway"), "--host", "127.0.0.1", "--port", str(port)]
        process = _spawn(command, folder, env, "contextforge.log")
        started.append(process)
        _wait_http(f"http://127.0.0.1:{port}/health", process, folder / "contextforge.log", "ContextForge")
        token = _token(env)
        server_id, tool_name = _register(port, token, backend_url, tool)
        yield ContextForge(process, port, token, server_id, tool_name, bridge)
    finally:
        for process in reversed(started):
            _stop(process)
