"""``roots=`` of ``MCPManager`` (and of an agent session): the working folder by default, the
folders given, or none (an empty ``roots/list``), which leaves a server that follows roots
(``tests/servers/roots_server.py``, as the reference filesystem server) its own folders."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
from tests.conftest import SERVERS_DIR

from mcpfleet.client.inbound import HostHooks
from mcpfleet.config.model import ServerConfig
from mcpfleet.fleet.manager import MCPManager

pytestmark = pytest.mark.anyio


def roots_server(allowed: Path) -> ServerConfig:
    return ServerConfig(
        name="docs",
        transport="stdio",
        command=sys.executable,
        args=(str(SERVERS_DIR / "roots_server.py"), "--allow", str(allowed)),
    )


@pytest.fixture
def root(tmp_path: Path) -> Path:
    """The manager's working folder, resolved, with the server's folder ``allowed`` and ``a`` in it."""
    (tmp_path / "allowed").mkdir()
    (tmp_path / "a").mkdir()
    return tmp_path.resolve()


async def seen_by_the_server(root: Path, **roots: Any) -> dict[str, Any]:
    async with MCPManager(root, cache=None, startup_timeout_ms=0, **roots) as manager:
        report = await manager.connect_servers({"docs": roots_server(root / "allowed")}, {})
        assert report.failures == []
        result = await manager.call_tool("docs", "client_roots", {})
    seen: dict[str, Any] = json.loads(result.content[0].text)
    return seen


async def test_the_working_folder_is_the_root_by_default(root: Path) -> None:
    seen = await seen_by_the_server(root)
    assert (seen["declared"], seen["roots"]) == (True, [root.as_uri()])


async def test_no_roots_leaves_the_server_its_own_folders(root: Path) -> None:
    seen = await seen_by_the_server(root, roots=None)
    assert seen == {"declared": True, "roots": [], "allowed": [str(root / "allowed")]}


async def test_the_folders_given_are_the_roots(root: Path) -> None:
    seen = await seen_by_the_server(root, roots=[root / "a", "/"])
    assert (seen["declared"], seen["roots"]) == (True, [(root / "a").as_uri(), "file:///"])


def test_roots_with_a_server_requests_handler_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="roots"):
        MCPManager(tmp_path, server_requests=HostHooks(None, None), roots=None)
