"""Who the gateway benchmark measures: ``mcpfleet serve`` and the gateways that do the same job, how
each is installed (its own venv under .tools/bench-venvs, or npm into .tools/), and how it is
launched and reached by the one client, ``bench/peers/gateway_client.py``.

Command lines may hold ``{config}`` (the run's ``mcpServers`` file) and ``{port}`` (a free loopback
port, for the HTTP gateways); URLs may hold ``{port}`` and ``{server}``.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.harness.peers import FASTMCP, PEERS_DIR, PROJECT, PROJECT_PYTHON, REPO_ROOT, Peer, Venv

MCP_PROXY = Venv("mcp-proxy", ("mcp-proxy==0.13.0",), ("mcp-proxy", "mcp"))
MCP_HUB_VERSION = "4.2.1"
MCP_HUB_DIR = REPO_ROOT / ".tools" / "mcp-hub"
MCP_HUB_CLI = MCP_HUB_DIR / "node_modules" / "mcp-hub" / "dist" / "cli.js"
CLIENT_SCRIPT = "gateway_client.py"


@dataclass(frozen=True)
class Gateway:
    """One gateway as the benchmark runs it."""

    key: str
    label: str
    transport: str
    """How the client reaches it: ``stdio``, ``streamable-http``, ``sse`` or ``direct`` (no gateway)."""
    venv: Venv = PROJECT
    """Where the gateway's Python runs from (the client always runs from the project's venv)."""
    command: tuple[str, ...] = ()
    url: str = ""
    call_tool: str = "tool_0"
    """The served name of backend ``s0``'s ``tool_0``, the tool every latency sample calls."""
    endpoint_per_server: bool = False
    """One endpoint per backend (``{server}`` in the URL) instead of one merged list."""
    warm: bool = False
    """mcpfleet's tool cache primed by an earlier start (every run of a scenario shares it)."""
    env: dict[str, str] = field(default_factory=dict)
    seed_mcp_hub_marketplace: bool = False
    call_params: dict[str, Any] = field(default_factory=dict)
    """Overrides of the latency parameters (fewer calls for a gateway that restarts backends per call)."""
    extra_runs: int = 0
    """Runs beyond the benchmark's count, for the figures a goal is judged on."""

    @property
    def peer(self) -> Peer:
        """The run as ``bench.harness.runner.run_peer`` sees it: the client script, in the project venv."""
        return Peer(self.key, self.label, PROJECT, CLIENT_SCRIPT, self.key)

    def spec(self) -> dict[str, Any]:
        """What the client needs to launch and reach this gateway."""
        return {
            "transport": self.transport,
            "command": list(self.command),
            "url": self.url,
            "call_tool": self.call_tool,
            "endpoint_per_server": self.endpoint_per_server,
            "env": self.env,
            "seed_mcp_hub_marketplace": self.seed_mcp_hub_marketplace,
        }


def _mcpfleet_command() -> tuple[str, ...]:
    # The in-process gateway, measured as it was: the daemon's figures are a section of their own.
    return (
        str(PROJECT_PYTHON.parent / "mcpfleet"),
        "--config",
        "{config}",
        "--no-project-config",
        "serve",
        "--no-daemon",
    )


DIRECT = Gateway("direct", "direct: one SDK `Client` per backend, no gateway", "direct")
MCPFLEET_COLD = Gateway(
    "mcpfleet-cold",
    "**mcpfleet serve**, cold (empty tool cache)",
    "stdio",
    PROJECT,
    _mcpfleet_command(),
    call_tool="s0_tool_0",
)
MCPFLEET_WARM = Gateway(
    "mcpfleet-warm",
    "**mcpfleet serve**, warm (second start, tool cache filled)",
    "stdio",
    PROJECT,
    _mcpfleet_command(),
    call_tool="s0_tool_0",
    warm=True,
    extra_runs=2,
)
FASTMCP_RUN = Gateway(
    "fastmcp-run",
    "fastmcp `run mcp.json` (proxy, fresh backend session per request)",
    "stdio",
    FASTMCP,
    (str(FASTMCP.python), "-m", "fastmcp.cli", "run", "{config}", "--no-banner"),
    call_tool="s0_tool_0",
    call_params={"warmup_calls": 0, "calls": 3, "call_budget_s": 10.0},
)
FASTMCP_PROXY = Gateway(
    "fastmcp-proxy",
    "fastmcp `create_proxy` over a connected `Client(mcpServers)`",
    "stdio",
    FASTMCP,
    (str(FASTMCP.python), str(PEERS_DIR / "fastmcp_proxy.py"), "{config}"),
    call_tool="s0_tool_0",
)
MCP_PROXY_NAMED = Gateway(
    "mcp-proxy",
    "mcp-proxy `--named-server-config` (one endpoint per server)",
    "streamable-http",
    MCP_PROXY,
    (str(MCP_PROXY.python), "-m", "mcp_proxy", "--named-server-config", "{config}", "--port", "{port}"),
    url="http://127.0.0.1:{port}/servers/{server}/mcp",
    endpoint_per_server=True,
)
MCP_HUB = Gateway(
    "mcp-hub",
    "mcp-hub (`/mcp` endpoint)",
    "sse",
    PROJECT,
    ("node", str(MCP_HUB_CLI), "--port", "{port}", "--config", "{config}"),
    url="http://127.0.0.1:{port}/mcp",
    call_tool="s0__tool_0",
    seed_mcp_hub_marketplace=True,
)

FULL = (DIRECT, FASTMCP_RUN, FASTMCP_PROXY, MCP_PROXY_NAMED, MCP_HUB, MCPFLEET_COLD, MCPFLEET_WARM)


def ensure_mcp_hub(log: Path) -> None:
    """Install the pinned mcp-hub from the npm registry into .tools/mcp-hub, unless it is there."""
    manifest = MCP_HUB_CLI.parent.parent / "package.json"
    if manifest.is_file() and json.loads(manifest.read_text()).get("version") == MCP_HUB_VERSION:
        return
    if shutil.which("npm") is None or shutil.which("node") is None:
        raise RuntimeError("the gateway benchmark needs node and npm on PATH for mcp-hub: install Node.js")
    print(f"  installing mcp-hub@{MCP_HUB_VERSION} into {MCP_HUB_DIR}", flush=True)
    command = ["npm", "install", "--silent", "--no-audit", "--no-fund", "--save-exact"]
    command += ["--prefix", str(MCP_HUB_DIR), f"mcp-hub@{MCP_HUB_VERSION}"]
    with log.open("a") as out:
        subprocess.run(command, check=True, stdout=out, stderr=out)


def node_version() -> str:
    completed = subprocess.run(["node", "--version"], capture_output=True, text=True, check=False)
    return completed.stdout.strip() or "unknown"
