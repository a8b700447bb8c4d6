"""Running this checkout's ``mcpfleet serve --http 127.0.0.1:0 --team FILE`` for the team tests (and
the team benchmark): a real process on a free port, its service accounts' keys made with the real
``mcpfleet team key add``.

``running_team_gateway(team_file)`` starts the gateway in its own process group, reads its URL
from the ``serving on`` line of its stderr and, on exit, stops it with SIGTERM (SIGKILL after a
bound), so no backend outlives the test. ``add_key(team_file, name)`` is one service account's
key. ``team_document(servers, policies)`` is a team file that signs in with keys only (its issuer
is never asked: keys need none).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.integration.gateway.http_gateway import stop_process_group, wait_for_url
from tests.servers.fixtures import FAKE_SERVER

MCPFLEET = Path(sys.executable).parent / "mcpfleet"
UNUSED_ISSUER = "http://127.0.0.1:1"
"""Service-account keys never consult the issuer (its keys are fetched for a JWT only)."""


def fake(name: str, *tools: str) -> dict[str, Any]:
    """A fake stdio server's entry, with only ``tools`` (all of them when none is named)."""
    flags = [flag for tool in tools for flag in ("--tool", tool)]
    return {"command": sys.executable, "args": [str(FAKE_SERVER), "--name", name, *flags]}


def team_document(servers: dict[str, Any], policies: list[dict[str, Any]], **more: Any) -> dict[str, Any]:
    return {
        "public_url": "http://127.0.0.1/mcp",
        "servers": servers,
        "identity": {"issuer": UNUSED_ISSUER, "api_keys": "api-keys.json"},
        "policies": policies,
        **more,
    }


def write_team_file(path: Path, document: dict[str, Any]) -> Path:
    """Write the team file whole, at once (a gateway watching it never reads half of it)."""
    partial = path.with_name(path.name + ".partial")
    partial.write_text(json.dumps(document))
    partial.replace(path)
    return path


def add_key(team_file: Path, name: str, environ: dict[str, str] | None = None) -> str:
    """``name``'s key, added with the environment the gateway will have (``team key add`` loads
    the team file, whose ``${VAR}`` must be set)."""
    done = subprocess.run(
        [str(MCPFLEET), "team", "key", "add", name, "--team", str(team_file)],
        env=environ,
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def serve_command(team_file: Path, *serve_args: str) -> list[str]:
    return [str(MCPFLEET), "serve", "--http", "127.0.0.1:0", "--team", str(team_file), *serve_args]


@dataclass
class TeamGatewayProcess:
    url: str
    process: subprocess.Popen[bytes]
    stderr_path: Path

    @property
    def stderr(self) -> str:
        return self.stderr_path.read_text(errors="replace")


@contextmanager
def running_team_gateway(
    team_file: Path, *serve_args: str, environ: dict[str, str] | None = None
) -> Iterator[TeamGatewayProcess]:
    """``mcpfleet serve --http 127.0.0.1:0 --team FILE <serve_args>``, until the block ends."""
    stderr_path = team_file.parent / f"team-gateway-{time.monotonic_ns()}.stderr"
    command = serve_command(team_file, *serve_args)
    with stderr_path.open("wb") as stderr:
        process = subprocess.Popen(
            command,
            cwd=team_file.parent,
            env=environ if environ is not None else dict(os.environ),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=stderr,
            start_new_session=True,
        )
    try:
        yield TeamGatewayProcess(wait_for_url(process, stderr_path, "serve --team"), process, stderr_path)
    finally:
        stop_process_group(process)
