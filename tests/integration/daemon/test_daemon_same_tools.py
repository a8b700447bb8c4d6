"""One definition of "the tools of this fleet" (issue 23, item 8): the reference server-everything
lists its sampling, elicitation and roots tools only to a client that declares those
capabilities, and the same fleet listed 59 tools through the daemon and 56 in-process. Real
server-everything (``.tools/everything``), the console script, a real daemon."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
from tests.integration.daemon.conftest import StartDaemon
from tests.integration.daemon.daemon_harness import user_config
from tests.integration.daemon.test_cli_through_daemon import mcpfleet

from mcpfleet.fleet.questions import FLEET_SAMPLING_CAPABILITY
from mcpfleet.gateway.relay import relayed_sampling_capability

ROOT = Path(__file__).resolve().parents[3]
ENTRY = ROOT / ".tools/everything/node_modules/@modelcontextprotocol/server-everything/dist/index.js"
NODE = shutil.which("node")
SAMPLING_TOOL = "everything/trigger-sampling-request"

requires_everything = pytest.mark.skipif(
    NODE is None or not ENTRY.exists(),
    reason="server-everything is not installed in .tools/everything; run: make test",
)


def tool_names(result: subprocess.CompletedProcess[str]) -> list[str]:
    document = json.loads(result.stdout)
    return sorted(f"{row['server']}/{row['mcp_name']}" for row in document["tools"])


def test_a_fleet_declares_what_the_relay_declares() -> None:
    assert relayed_sampling_capability() == FLEET_SAMPLING_CAPABILITY


@requires_everything
def test_the_tools_of_a_fleet_are_the_same_in_process_and_through_the_daemon(
    isolated_home: Path, start_daemon: StartDaemon
) -> None:
    user_config({"everything": {"command": NODE, "args": [str(ENTRY), "stdio"]}})
    in_process = mcpfleet(isolated_home, "--startup-timeout", "0", "--json", "tools", in_process=True)
    assert in_process.returncode == 0, in_process.stderr
    start_daemon()
    through_daemon = mcpfleet(isolated_home, "--startup-timeout", "0", "--json", "tools")
    assert through_daemon.returncode == 0, through_daemon.stderr
    assert tool_names(in_process) == tool_names(through_daemon)
    assert SAMPLING_TOOL in tool_names(in_process)
    # Listed in-process, so callable in-process: the server's question is refused (no model
    # here), and the tool says so, rather than the tool being unknown.
    called = mcpfleet(
        isolated_home, "--json", "call", SAMPLING_TOOL, '{"prompt": "hi", "maxTokens": 5}', in_process=True
    )
    assert "no tool named" not in called.stdout + called.stderr
    assert "Sampling not supported" in called.stdout + called.stderr, (called.stdout, called.stderr)
    # And listed through the daemon, so callable through it: it answers for the tool too.
    called = mcpfleet(isolated_home, "--json", "call", SAMPLING_TOOL, '{"prompt": "hi", "maxTokens": 5}')
    document = json.loads(called.stdout)
    assert document["is_error"] is True
    assert "sampling" in json.dumps(document).lower(), document
    assert "no tool named" not in called.stdout + called.stderr
