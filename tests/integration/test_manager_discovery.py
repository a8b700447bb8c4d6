"""The manager on top of discovery: servers that may not start are errors that say how
to fix them, and approved project servers start (S2, S3, B5)."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import anyio
import pytest
from tests.conftest import PYTHON
from tests.servers.fixtures import FAKE_SERVER, READS_TEST_SERVERS

from mcpfleet.config import ApprovalStore
from mcpfleet.fleet.manager import MCPManager
from mcpfleet.paths import project_config_file, user_config_file

pytestmark = pytest.mark.anyio


def fake_entry(name: str, *flags: str, **fields: Any) -> dict[str, Any]:
    return {"command": PYTHON, "args": [str(FAKE_SERVER), "--name", name, *flags], **fields}


def write(path: Path, servers: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"mcpServers": servers}))


async def test_pending_servers_are_errors_with_the_fix_and_disabled_ones_are_skipped(tmp_path: Path) -> None:
    write(project_config_file(tmp_path), {"project-tool": fake_entry("project-tool", "--tool", "echo")})
    write(
        user_config_file(), {"off": fake_entry("off", enabled=False), "on": fake_entry("on", "--tool", "add")}
    )
    async with MCPManager(tmp_path, cache=None, startup_timeout_ms=0) as manager:
        result = await manager.discover_and_connect()
        assert result.connected_servers == ["on"]
        assert [tool.name for tool in result.tools] == ["mcp_on_add"]
        assert "mcpfleet approve project-tool" in result.errors["project-tool"]
        # Disabled is the user's decision, not a failure: listed apart, never an error.
        assert "off" not in result.errors
        assert result.disabled_servers == ["off"]
        assert manager.get_connection_status("project-tool") == "disconnected"


async def test_an_approved_project_server_starts(tmp_path: Path) -> None:
    written = fake_entry("project-tool", "--tool", "echo", sandbox=READS_TEST_SERVERS)
    write(project_config_file(tmp_path), {"project-tool": written})
    async with MCPManager(tmp_path, cache=None, startup_timeout_ms=0) as manager:
        pending = manager.discover()
        [entry] = [e for e in pending.entries if e.name == "project-tool"]
        assert entry.state == "pending-approval"
        ApprovalStore().approve(entry)
        result = await manager.discover_and_connect()
    assert result.connected_servers == ["project-tool"]


async def test_trust_project_approves_for_one_run(tmp_path: Path) -> None:
    entry = fake_entry("project-tool", "--tool", "echo", sandbox=READS_TEST_SERVERS)
    write(project_config_file(tmp_path), {"project-tool": entry})
    async with MCPManager(tmp_path, cache=None, startup_timeout_ms=0, trust_project=True) as manager:
        result = await manager.discover_and_connect()
    assert result.connected_servers == ["project-tool"]
    async with MCPManager(tmp_path, cache=None, startup_timeout_ms=0) as manager:
        again = await manager.discover_and_connect()
    assert again.connected_servers == []


async def test_a_tool_listed_twice_by_one_server_is_registered_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # "late_tool" arrives twice with the re-list after list_changed; "echo" twice from the start.
    flags = ("--tool", "echo", "--duplicate-tool", "echo", "--list-changed-after", "0.3")
    # Its tools grow while it runs: pinning would withhold the added one (tests/integration/test_pinning.py).
    write(
        user_config_file(),
        {"dup": {**fake_entry("dup", *flags, "--duplicate-tool", "late_tool"), "pinning": "off"}},
    )
    with caplog.at_level(logging.WARNING, logger="mcpfleet"):
        async with MCPManager(tmp_path, cache=None, startup_timeout_ms=0) as manager:
            result = await manager.discover_and_connect()
            assert [tool.name for tool in result.tools] == ["mcp_dup_echo"]
            assert result.tools[0].description == "Echo a message back"  # the first definition
            relisted = anyio.Event()
            manager.subscribe(lambda event: relisted.set() if event.kind == "tools_changed" else None)
            with anyio.fail_after(20):
                await relisted.wait()
            assert [tool.name for tool in manager.get_tools()] == ["mcp_dup_echo", "mcp_dup_late_tool"]
    warnings = [record.getMessage() for record in caplog.records if record.levelno == logging.WARNING]
    assert any("dup" in text and "'echo'" in text and "more than once" in text for text in warnings)
    assert any("'late_tool'" in text and "more than once" in text for text in warnings)
