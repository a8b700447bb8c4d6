"""The fleet every framework test drives: real ``fake_server.py`` processes found in the user's
config (``HOME`` is the test's own), and a slow server whose tools are cached by a first run.

``files`` answers at once (``echo``, ``add``, ``fail``, ``sleep``; it logs the requests it
receives and the cancellations, see ``files_log``); ``slow`` is the same server behind a
``sleep ${DELAY_SLOW}``: the delay comes from the environment, so its config (and so its cache
key) is the same in the warm-up run, where it starts at once, and in the test's run, where it
starts well after the gate and its tools are deferred (served from the cache).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import pytest
from tests.conftest import PYTHON
from tests.servers.fixtures import FAKE_SERVER

from mcpfleet import open_agent_session
from mcpfleet.integrations._framework import installed
from mcpfleet.paths import user_config_file

SLOW_START_S = 2.0
"""How late ``slow`` starts in a test's run: far past the 250 ms gate, short enough for CI."""


def require(module: str, extra: str) -> None:
    """Skip the calling test module, naming the extra, when its framework is not installed."""
    if not installed(module):
        pytest.skip(
            f"{module} is not installed: pip install -e '.[{extra}]' (make test installs it)",
            allow_module_level=True,
        )


def write_fleet_config() -> Path:
    """The user config with ``files`` and ``slow`` (see the module's docstring)."""
    slow_script = (
        f'sleep "${{DELAY_SLOW:-0}}"; exec "{PYTHON}" "{FAKE_SERVER}" --name slow --tool echo --tool add'
    )
    servers: dict[str, Any] = {
        "files": {
            "command": PYTHON,
            "args": [
                str(FAKE_SERVER),
                "--name",
                "files",
                *("--tool", "echo", "--tool", "add", "--tool", "fail", "--tool", "sleep"),
                *("--request-log", str(files_log("requests")), "--cancel-log", str(files_log("cancelled"))),
            ],
        },
        "slow": {"command": "/bin/sh", "args": ["-c", slow_script]},
    }
    path = user_config_file()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"mcpServers": servers}))
    return path


def add_server(name: str, *flags: str, **fields: Any) -> None:
    """Add one more ``fake_server.py`` to the user config (``fields``: more keys of its entry)."""
    path = user_config_file()
    config = json.loads(path.read_text())
    config["mcpServers"][name] = {
        "command": PYTHON,
        "args": [str(FAKE_SERVER), "--name", name, *flags],
        **fields,
    }
    path.write_text(json.dumps(config))


def files_log(kind: str) -> Path:
    """Where ``files`` logs the requests it receives (``requests``) and the cancellations it
    receives (``cancelled``), one per line."""
    return user_config_file().parent / f"files-{kind}.log"


def logged(kind: str) -> str:
    """What ``files`` has logged so far (see ``files_log``)."""
    path = files_log(kind)
    return path.read_text() if path.exists() else ""


def starts_of_files() -> int:
    """How many ``files`` processes have started so far: each one's handshake opens with one
    ``initialize``, which ``files`` logs."""
    return logged("requests").splitlines().count("initialize")


def running_servers() -> list[int]:
    """The pids of the ``fake_server.py`` processes this test process started and that still run
    (``slow`` too: its shell ``exec``s the server, so the pid is the same)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            parent = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            command = (entry / "cmdline").read_bytes().split(b"\0")
        except (OSError, IndexError, ValueError):
            continue  # gone meanwhile
        if parent == os.getpid() and str(FAKE_SERVER).encode() in command:
            found.append(int(entry.name))
    return found


async def wait_until(condition: Callable[[], bool], within_s: float = 20.0) -> None:
    """Poll ``condition`` until it holds; fail after ``within_s``."""
    with anyio.fail_after(within_s):
        while True:
            if condition():
                return
            await anyio.sleep(0.05)


@pytest.fixture
async def project(tmp_path: Path) -> Path:
    """A project folder whose fleet is configured, with the tool cache warmed by a first run."""
    write_fleet_config()
    async with open_agent_session(tmp_path) as session:
        assert {tool.name for tool in session.tools} >= {"mcp_slow_echo", "mcp_files_echo"}
    return tmp_path


@pytest.fixture
def slow_start(monkeypatch: pytest.MonkeyPatch) -> float:
    """From now on ``slow`` starts ``SLOW_START_S`` late (its tools are deferred)."""
    monkeypatch.setenv("DELAY_SLOW", str(SLOW_START_S))
    return SLOW_START_S
