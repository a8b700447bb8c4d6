"""A config file that stops parsing never stops servers: a watched ``MCPManager`` (what a
watched library session and ``mcpfleet shell`` run) keeps the entries of a file as it
last parsed, says what is wrong once, and applies the file again once it is fixed. (The same
under a running daemon: ``integration/daemon/test_daemon_last_good_config.py``.)

The servers are ``tests/servers/fake_server.py`` processes, configured in Codex's
``~/.codex/config.toml`` (``time``, ``other``) and Cursor's ``~/.cursor/mcp.json`` (a ``time``
of its own, shadowed by Codex's, which comes first in provider order).
"""

from __future__ import annotations

import json
import logging
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tests.integration.gateway.gateway_harness import wait_until
from tests.servers.fixtures import FAKE_SERVER

from mcpfleet.fleet.manager import MCPManager

pytestmark = pytest.mark.anyio

TYPO = "\n[mcp_servers.broken\n"
"""What a user saves by mistake: a table header without its closing bracket."""


def codex_entry(name: str, *tools: str) -> str:
    args = [str(FAKE_SERVER), "--name", name, *(flag for tool in tools for flag in ("--tool", tool))]
    return f"[mcp_servers.{name}]\ncommand = {json.dumps(sys.executable)}\nargs = {json.dumps(args)}\n"


def replace_file(path: Path, text: str) -> Path:
    """Write ``path`` as editors save: a whole new file renamed over the old one (a watcher
    never reads it half written)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(path.name + ".saving")
    temporary.write_text(text)
    os.replace(temporary, path)
    return path


def write_codex(home: Path, text: str) -> Path:
    return replace_file(home / ".codex" / "config.toml", text)


def write_cursor(home: Path, servers: dict[str, list[str]]) -> Path:
    entries = {
        name: {"command": sys.executable, "args": [str(FAKE_SERVER), "--name", name, *args]}
        for name, args in servers.items()
    }
    return replace_file(home / ".cursor" / "mcp.json", json.dumps({"mcpServers": entries}))


CODEX = codex_entry("time", "echo") + codex_entry("other", "echo")
CURSOR = {"time": ["--tool", "add"]}


class ConfigWarnings(logging.Handler):
    """The warnings the fleet logs about config files."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        if record.getMessage().startswith("MCP config: "):
            self.messages.append(record.getMessage())


@pytest.fixture
def config_warnings() -> Iterator[ConfigWarnings]:
    handler = ConfigWarnings()
    logger = logging.getLogger("mcpfleet")
    logger.addHandler(handler)
    try:
        yield handler
    finally:
        logger.removeHandler(handler)


def tool_names(manager: MCPManager) -> list[str]:
    return sorted(tool.name for tool in manager.get_tools())


def pids(manager: MCPManager) -> dict[str, Any]:
    return {name: manager.get_server_state(name).pid for name in manager.get_all_server_names()}


async def test_a_watched_fleet_keeps_a_file_that_stops_parsing_and_applies_it_once_fixed(
    isolated_home: Path, tmp_path: Path, config_warnings: ConfigWarnings
) -> None:
    codex = write_codex(isolated_home, CODEX)
    write_cursor(isolated_home, CURSOR)
    async with MCPManager(
        tmp_path, cache=None, startup_timeout_ms=0, watch=True, watch_interval_s=0.05
    ) as manager:
        await manager.discover_and_connect()
        assert tool_names(manager) == ["mcp_other_echo", "mcp_time_echo"]
        before = pids(manager)
        assert all(isinstance(pid, int) for pid in before.values()), before

        write_codex(isolated_home, CODEX + TYPO)
        await wait_until(lambda: config_warnings.messages)
        assert pids(manager) == before
        assert tool_names(manager) == ["mcp_other_echo", "mcp_time_echo"]  # not Cursor's time
        source = manager.get_source("time")
        assert source is not None and source.path == str(codex)
        [warning] = config_warnings.messages
        assert str(codex) in warning and "until then its servers run as it last parsed" in warning
        assert manager.last_discovery is not None
        assert [error.subject for error in manager.last_discovery.errors] == [str(codex)]

        # Another file's edit re-reads the broken one: nothing stops, nothing is said again.
        write_cursor(isolated_home, {**CURSOR, "later": ["--tool", "echo"]})
        await wait_until(lambda: manager.get_connection_status("later") == "connected")
        assert {name: pid for name, pid in pids(manager).items() if name != "later"} == before
        assert len(config_warnings.messages) == 1

        write_codex(isolated_home, CODEX + codex_entry("broken", "echo"))
        await wait_until(lambda: manager.get_connection_status("broken") == "connected")
        assert {name: pid for name, pid in pids(manager).items() if name in before} == before
        assert manager.last_discovery.errors == []
