"""``mcpfleet serve`` never serves itself: an entry that runs the gateway is left out by
discovery, and one that reaches it through a wrapper discovery cannot see through is refused
by the nested ``serve`` itself (the gateway's mark in its backends' environment)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from tests.integration.gateway.gateway_harness import MCPFLEET, fake, open_gateway, write_config

from mcpfleet.config.gateway_entry import GATEWAY_PID_VARIABLE

pytestmark = pytest.mark.anyio

WAIT_FOR_ALL = ("--startup-timeout", "0")


def _wrapper(home: Path, config: Path, log: Path) -> Path:
    """A script that starts this checkout's gateway on ``config`` (what the outer gateway
    serves): discovery sees only ``sh wrapper.sh``. It nests once at most, so that without
    the mark the test shows one served nested gateway instead of an endless chain."""
    script = home / "fleet-wrapper.sh"
    script.write_text(
        "#!/bin/sh\n"
        'if [ -n "$FLEET_WRAPPER_RAN" ]; then exit 3; fi\n'
        "export FLEET_WRAPPER_RAN=1\n"
        f'exec "{MCPFLEET}" --config "{config}" --startup-timeout 0 serve 2>>"{log}"\n'
    )
    return script


async def test_a_backend_running_serve_through_a_wrapper_does_not_serve_a_second_gateway(
    isolated_home: Path,
) -> None:
    log = isolated_home / "nested-serve.log"
    config = isolated_home / "gateway-servers.json"
    servers = {
        "alpha": fake("alpha"),
        "wrapped": {"command": "/bin/sh", "args": [str(_wrapper(isolated_home, config, log))]},
    }
    async with open_gateway(isolated_home, servers, global_args=WAIT_FOR_ALL) as run:
        names = {tool.name for tool in (await run.client.list_tools()).tools}
    assert "alpha_echo" in names
    assert not any(name.startswith("wrapped_") for name in names), names
    refusal = log.read_text()
    assert "refusing to serve" in refusal and "started by a backend of the gateway" in refusal


async def test_an_entry_that_runs_the_gateway_is_never_started(isolated_home: Path) -> None:
    config = isolated_home / "gateway-servers.json"
    marker = isolated_home / "started.txt"
    # Were it started, the entry would leave a trace before the gateway it runs.
    own = {
        "command": "/bin/sh",
        "args": ["-c", f'touch "{marker}"; exec "{MCPFLEET}" --config "{config}" serve'],
    }
    async with open_gateway(
        isolated_home, {"alpha": fake("alpha"), "fleet": own}, global_args=WAIT_FOR_ALL
    ) as run:
        names = {tool.name for tool in (await run.client.list_tools()).tools}
        instructions = run.client.instructions or ""
    assert "alpha_echo" in names and not any(name.startswith("fleet_") for name in names)
    assert "fleet (" not in instructions
    assert not marker.exists()


def test_serve_under_a_gateways_mark_refuses_at_once(isolated_home: Path) -> None:
    config = write_config(isolated_home, {"alpha": fake("alpha")})
    completed = subprocess.run(
        [str(MCPFLEET), "--config", str(config), "serve"],
        env={**os.environ, GATEWAY_PID_VARIABLE: "4242"},
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert completed.returncode == 2
    assert completed.stdout == ""
    lines = completed.stderr.strip().splitlines()
    assert len(lines) == 1 and "refusing to serve" in lines[0] and "pid 4242" in lines[0]
    assert f"unset {GATEWAY_PID_VARIABLE}" in lines[0]
