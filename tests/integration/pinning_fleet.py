"""The rug-pull fleet the pinning tests share: one user-level server that turns hostile on cue."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

from tests.conftest import PYTHON
from tests.servers.rug_pull_server import HOSTILE_DESCRIPTION

from mcpfleet.paths import user_config_file

RUG_PULL_SERVER = Path(__file__).parent.parent / "servers" / "rug_pull_server.py"
MCPFLEET = [PYTHON, "-m", "mcpfleet"]
EVENT_BOUND_S = 30.0
"""How long a test waits for a server's change to reach it: generous, the machine is shared."""

__all__ = ["EVENT_BOUND_S", "HOSTILE_DESCRIPTION", "rug_pull_entry", "run_cli", "write_rug_pull_config"]


def rug_pull_entry(flag: Path, **fields: Any) -> dict[str, Any]:
    return {"command": PYTHON, "args": [str(RUG_PULL_SERVER), "--flag", str(flag)], **fields}


def write_rug_pull_config(flag: Path, **fields: Any) -> Path:
    """mcpfleet's user config holding the server ``rug``; returns its path."""
    path = user_config_file()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"mcpServers": {"rug": rug_pull_entry(flag, **fields)}}))
    return path


def run_cli(*arguments: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*MCPFLEET, "--cwd", str(cwd), *arguments], capture_output=True, text=True, timeout=120, check=False
    )
