"""Literal credentials of a config (``--token X``, ``key=X``, a key-like argument, a URL's
query, an ``Authorization`` header) through a real daemon (logging at debug): masked in its log,
in ``daemon status``, in what ``status`` prints through it and in the instructions a host's
session is served through the shim, while its servers get every value as written."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client
from tests.integration.credentials_fleet import (
    MASKED_ARGS,
    assert_no_literal,
    assert_servers_got_the_real_values,
)
from tests.integration.daemon.daemon_harness import MCPFLEET, DaemonProcess
from tests.servers.fixtures import HttpServer

from mcpfleet.daemon_client import paths


def start_verbose_daemon(isolated_home: Path) -> DaemonProcess:
    """``mcpfleet -vv daemon run``: the SDK's and the HTTP client's debug lines reach its log too."""
    stderr_path = isolated_home / "daemon-stderr.log"
    with stderr_path.open("wb") as stderr:
        process = subprocess.Popen(
            [str(MCPFLEET), "-vv", "daemon", "run"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=stderr,
            start_new_session=True,
        )
    daemon = DaemonProcess(process, stderr_path)
    daemon.wait_ready()
    return daemon


def mcpfleet(project: Path, *arguments: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(MCPFLEET), "--cwd", str(project), *arguments],
        capture_output=True,
        text=True,
        timeout=120,
        env=dict(os.environ),
        check=False,
    )


@pytest.mark.anyio
async def test_the_daemon_log_and_its_reports_mask_literal_credentials(
    isolated_home: Path, tmp_path: Path, record_file: Path, credentials_server: HttpServer
) -> None:
    daemon = start_verbose_daemon(isolated_home)
    try:
        # A host's session through the shim: the daemon starts the servers and serves the instructions.
        arguments = ["--startup-timeout", "120000", "serve"]
        params = StdioServerParameters(
            command=str(MCPFLEET), args=arguments, env=dict(os.environ), cwd=str(tmp_path)
        )
        with (tmp_path / "shim-stderr.log").open("w") as errlog:
            async with Client(stdio_client(params, errlog=errlog), mode="legacy") as client:
                instructions = client.instructions or ""
                status = mcpfleet(tmp_path, "--startup-timeout", "120000", "--json", "status")
                daemon_status = mcpfleet(tmp_path, "--json", "daemon", "status")
        assert status.returncode == daemon_status.returncode == 0, status.stderr + daemon_status.stderr
        log = paths.log_path().read_text()
        for text in (instructions, status.stdout, status.stderr, daemon_status.stdout, log, daemon.stderr):
            assert_no_literal(text)
        assert_no_literal((tmp_path / "shim-stderr.log").read_text())

        # The readable parts are still there.
        assert "Serving: argv (1 tools)" in instructions and f"--name cli {MASKED_ARGS})" in instructions
        rows = {row["name"]: row for row in json.loads(status.stdout)["servers"]}
        assert rows["web"]["status"] == rows["argv"]["status"] == "connected"
        assert f"--name cli {MASKED_ARGS})" in rows["cli"]["error"]
        assert f"127.0.0.1:{credentials_server.port}/nope?api_key=***&x=***" in rows["down"]["error"]
        assert (
            f"127.0.0.1:{credentials_server.port}/mcp?api_key=***&x=***" in log
        )  # the HTTP client's debug lines
        assert {row["name"] for row in json.loads(daemon_status.stdout)["servers"]} >= {"argv", "web"}
        # Masked for display only: the servers got every value as written.
        assert_servers_got_the_real_values(record_file)
    finally:
        daemon.process.terminate()
        daemon.wait_exit()
