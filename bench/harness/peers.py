"""Who is benchmarked: each peer library, how it is installed, and which of its scripts runs it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

BENCH_DIR = Path(__file__).resolve().parent.parent
REPO_ROOT = BENCH_DIR.parent
PEERS_DIR = BENCH_DIR / "peers"
VENVS_DIR = REPO_ROOT / ".tools" / "bench-venvs"
PROJECT_PYTHON = Path(sys.executable)
REQUIREMENTS_STAMP = ".bench-requirements"


@dataclass(frozen=True)
class Venv:
    """A virtualenv the harness creates under .tools/bench-venvs, or the project's own."""

    name: str
    requirements: tuple[str, ...]
    reported_packages: tuple[str, ...]
    """Installed distributions whose versions the report prints."""

    @property
    def is_project(self) -> bool:
        return self.name == "project"

    @property
    def python(self) -> Path:
        return PROJECT_PYTHON if self.is_project else VENVS_DIR / self.name / "bin" / "python"


PROJECT = Venv("project", (), ("mcpfleet", "mcp", "anyio", "pydantic"))
SDK = Venv("sdk", ("mcp==2.3.0",), ("mcp", "anyio", "pydantic"))
FASTMCP = Venv("fastmcp", ("fastmcp==4.1.6",), ("fastmcp", "fastmcp-slim", "mcp"))
OPENAI_AGENTS = Venv("openai-agents", ("openai-agents==0.24.0", "mcp==2.3.0"), ("openai-agents", "mcp"))
LANGCHAIN = Venv(
    "langchain", ("langchain-mcp-adapters==0.3.2",), ("langchain-mcp-adapters", "langchain-core", "mcp")
)
PYDANTIC_AI = Venv(
    "pydantic-ai", ("pydantic-ai-slim[mcp]==2.62.0",), ("pydantic-ai-slim", "fastmcp-slim", "mcp")
)
PLOT = Venv("plot", ("matplotlib==3.11.2",), ("matplotlib",))


@dataclass(frozen=True)
class Peer:
    """One way of using one library: a variant of a peer script, run in a venv."""

    key: str
    label: str
    venv: Venv
    script: str
    variant: str
    diagnostic: bool = False
    """A variant of mcpfleet that explains a number rather than competing."""


FLOOR = Peer("floor", "floor: raw JSON-RPC pipes, no library", PROJECT, "peer_floor.py", "raw-pipes")
MCPFLEET = Peer("mcpfleet", "**mcpfleet** (agent session)", PROJECT, "peer_mcpfleet.py", "agent-session")
MCPFLEET_PREIMPORTED = Peer(
    "mcpfleet-preimported",
    "mcpfleet, SDK imported before the clock (diagnostic)",
    PROJECT,
    "peer_mcpfleet.py",
    "sdk-preimported",
    diagnostic=True,
)
MCPFLEET_CONNECTION = Peer(
    "mcpfleet-connection",
    "mcpfleet, ServerConnection.call_tool (diagnostic)",
    PROJECT,
    "peer_mcpfleet.py",
    "connection-call",
    diagnostic=True,
)
SDK_RAW = Peer("sdk-raw", "SDK raw: one Client per server, own task", SDK, "peer_sdk.py", "client-per-server")
SDK_GROUP = Peer("sdk-group", "SDK ClientSessionGroup", SDK, "peer_sdk.py", "session-group")
FASTMCP_CONFIG = Peer(
    "fastmcp-config", "fastmcp Client(MCPConfig)", FASTMCP, "peer_fastmcp.py", "config-client"
)
FASTMCP_GROUP = Peer("fastmcp-group", "fastmcp ClientGroup", FASTMCP, "peer_fastmcp.py", "client-group")
OPENAI = Peer(
    "openai-agents",
    "openai-agents MCPServerManager (parallel)",
    OPENAI_AGENTS,
    "peer_openai_agents.py",
    "server-manager",
)
LANGCHAIN_CLIENT = Peer(
    "langchain",
    "langchain-mcp-adapters MultiServerMCPClient",
    LANGCHAIN,
    "peer_langchain.py",
    "multi-server-client",
)
PYDANTIC = Peer(
    "pydantic-ai", "pydantic-ai MCPToolset × N", PYDANTIC_AI, "peer_pydantic_ai.py", "combined-toolsets"
)

COMPETITORS = (SDK_RAW, SDK_GROUP, FASTMCP_CONFIG, FASTMCP_GROUP, OPENAI, LANGCHAIN_CLIENT, PYDANTIC)
PEER_VENVS = (SDK, FASTMCP, OPENAI_AGENTS, LANGCHAIN, PYDANTIC_AI)


def with_project_sdk(peer: Peer) -> Peer:
    """The SDK peer run from the project's venv (same ``mcp`` pin): the smoke run creates no venv."""
    return Peer(peer.key, peer.label, PROJECT, peer.script, peer.variant, peer.diagnostic)


def ensure_venv(venv: Venv, log: Path) -> None:
    """Create ``venv`` and install its pinned requirements, unless its stamp says they are there."""
    if venv.is_project:
        return
    folder = VENVS_DIR / venv.name
    stamp = folder / REQUIREMENTS_STAMP
    wanted = "\n".join(venv.requirements)
    if stamp.is_file() and stamp.read_text() == wanted and venv.python.exists():
        return
    print(f"  creating {folder} with {' '.join(venv.requirements)}", flush=True)
    with log.open("a") as out:
        if not venv.python.exists():
            subprocess.run([sys.executable, "-m", "venv", str(folder)], check=True, stdout=out, stderr=out)
        install = [str(venv.python), "-m", "pip", "install", "--quiet", *venv.requirements]
        subprocess.run(install, check=True, stdout=out, stderr=out)
    stamp.write_text(wanted)


def installed_versions(venv: Venv) -> dict[str, str]:
    """The versions of ``venv.reported_packages`` as installed in that venv."""
    code = (
        "import importlib.metadata as m, json, sys\n"
        "found = {}\n"
        "for name in sys.argv[1:]:\n"
        "    try:\n"
        "        found[name] = m.version(name)\n"
        "    except m.PackageNotFoundError:\n"
        "        pass\n"
        "print(json.dumps(found))\n"
    )
    command = [str(venv.python), "-c", code, *venv.reported_packages]
    output = subprocess.run(command, check=True, capture_output=True, text=True, env=dict(os.environ)).stdout
    versions: dict[str, str] = json.loads(output)
    return versions
