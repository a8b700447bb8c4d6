"""Literal credentials in a config (``--token X``, ``key=X``, a key-like argument, a URL's
query, an ``Authorization`` header) are masked in ``status``, ``config``, the ``-vv`` log and
the gateway's served instructions, while the servers still get them as written (real
subprocesses: the CLI, ``mcpfleet serve --no-daemon`` under the SDK's client, stdio and HTTP
test servers on 127.0.0.1)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client
from tests.integration.credentials_fleet import (
    CREDENTIAL_ARGS,
    MASKED_ARGS,
    PACKAGES,
    QUERY_LITERAL,
    assert_no_literal,
    assert_servers_got_the_real_values,
    http_entry,
)
from tests.servers.fixtures import FAKE_SERVER, HttpServer

from mcpfleet.paths import project_config_file

MCPFLEET = Path(sys.executable).parent / "mcpfleet"


def run(project: Path, *arguments: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(MCPFLEET), "--cwd", str(project), *arguments],
        input=stdin,
        capture_output=True,
        text=True,
        env={**os.environ, "COLUMNS": "400"},  # table cells on one line each
        timeout=120,
        check=False,
    )


def test_status_json_masks_literal_credentials_and_keeps_the_rest(
    tmp_path: Path, record_file: Path, credentials_server: HttpServer
) -> None:
    completed = run(tmp_path, "--json", "status")
    assert completed.returncode == 0, completed.stderr
    assert_no_literal(completed.stdout + completed.stderr)
    rows = {row["name"]: row for row in json.loads(completed.stdout)["servers"]}
    # Masked for display only: the servers got every value as written.
    assert rows["web"]["status"] == rows["argv"]["status"] == "connected"
    assert_servers_got_the_real_values(record_file)
    assert f"{FAKE_SERVER} --name cli {MASKED_ARGS})" in rows["cli"]["error"]
    assert f"unrecognized arguments: {MASKED_ARGS}" in rows["cli"]["error"]  # the server's own echo
    assert (
        f"HTTP 404 at http://127.0.0.1:{credentials_server.port}/nope?api_key=***&x=***;"
        in rows["down"]["error"]
    )


def test_the_debug_log_and_the_table_mask_literal_credentials(
    tmp_path: Path, record_file: Path, credentials_server: HttpServer
) -> None:
    verbose = run(tmp_path, "-vv", "status")
    assert verbose.returncode == 0, verbose.stderr
    assert_no_literal(verbose.stdout + verbose.stderr)
    # The SDK's and the HTTP client's own request lines, readable up to the query's values.
    assert f"127.0.0.1:{credentials_server.port}/mcp?api_key=***&x=***" in verbose.stderr
    assert "--token" in verbose.stdout and "HTTP 404" in verbose.stdout


def test_the_shell_and_tools_mask_literal_credentials(
    tmp_path: Path, record_file: Path, credentials_server: HttpServer
) -> None:
    shell = run(tmp_path, "--startup-timeout", "120000", "shell", stdin="/mcp list\n/exit\n")
    assert shell.returncode == 0, shell.stderr
    assert_no_literal(shell.stdout + shell.stderr)
    assert f"--name cli {MASKED_ARGS})" in shell.stdout and "✗ down: failed" in shell.stdout
    assert f"127.0.0.1:{credentials_server.port}/nope?api_key=***&x=***" in shell.stdout

    tools = run(tmp_path, "--startup-timeout", "120000", "--json", "tools")
    assert tools.returncode == 0, tools.stderr
    assert_no_literal(tools.stdout + tools.stderr)
    errors = {error["path"]: error["error"] for error in json.loads(tools.stdout)["errors"]}
    assert f"--name cli {MASKED_ARGS})" in errors["mcp:cli"]


def test_config_json_shows_a_pending_entry_with_its_credentials_masked(tmp_path: Path) -> None:
    project = tmp_path / "cloned"
    data = project / "data"
    config = project_config_file(project)
    config.parent.mkdir(parents=True)
    config.write_text(
        json.dumps(
            {
                "mcpServers": {
                    "local": {"command": "npx", "args": ["-y", *CREDENTIAL_ARGS, *PACKAGES, str(data)]},
                    "remote": http_entry(8123, "mcp"),
                }
            }
        )
    )
    completed = run(project, "--json", "config")
    assert completed.returncode == 0, completed.stderr
    assert_no_literal(completed.stdout + completed.stderr)
    reviews = {row["name"]: row["review"] for row in json.loads(completed.stdout)["servers"]}
    # Exact strings for everything that is not a secret.
    assert reviews["local"]["args"] == ["-y", "--token", "***", "key=***", "***", *PACKAGES, str(data)]
    assert reviews["remote"] == {
        "url": "http://127.0.0.1:8123/mcp?api_key=***&x=***",
        "headers": ["Authorization"],
    }

    table = run(project, "config")
    assert_no_literal(table.stdout + table.stderr)
    assert f"runs: npx -y {MASKED_ARGS} {' '.join(PACKAGES)}" in table.stdout


@pytest.mark.anyio
async def test_served_instructions_mask_literal_credentials(
    tmp_path: Path, record_file: Path, credentials_server: HttpServer
) -> None:
    # The start-up gate waits for every server (a generous bound): the instructions then name each.
    arguments = ["--startup-timeout", "120000", "serve", "--no-daemon"]
    params = StdioServerParameters(
        command=str(MCPFLEET), args=arguments, env=dict(os.environ), cwd=str(tmp_path)
    )
    with (tmp_path / "gateway-stderr.log").open("w") as errlog:
        async with Client(stdio_client(params, errlog=errlog), mode="legacy") as client:
            instructions = client.instructions or ""
            answer = await client.call_tool("argv_echo", {"message": QUERY_LITERAL})
    assert_no_literal(instructions)
    assert_no_literal((tmp_path / "gateway-stderr.log").read_text())
    assert "Serving: argv (1 tools)" in instructions and "web (" in instructions
    assert (
        f'cli: failed (MCP server "cli" ({sys.executable} {FAKE_SERVER} --name cli {MASKED_ARGS})'
        in instructions
    )
    assert f"http://127.0.0.1:{credentials_server.port}/nope?api_key=***&x=***" in instructions
    assert_servers_got_the_real_values(record_file)
    # A tool's own answer is the server's, not a printed command line: it is not masked.
    assert answer.structured_content == {"message": QUERY_LITERAL}
