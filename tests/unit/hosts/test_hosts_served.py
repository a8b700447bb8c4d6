"""What ``hosts install --replace`` moves aside: exactly the entries of the host's server map
that the gateway serves (discovery decides), never one it would not start."""

from __future__ import annotations

import json
from pathlib import Path

from mcpfleet import paths
from mcpfleet.config import load_all_mcp_configs
from mcpfleet.hosts import find_host, served_entries


def test_served_means_active_or_an_alias_of_an_active_entry(isolated_home: Path, tmp_path: Path) -> None:
    cursor = find_host("cursor")
    cursor.path.parent.mkdir(parents=True)
    cursor.path.write_text(
        json.dumps(
            {
                "mcpServers": {
                    "plain": {"command": "plain-mcp"},
                    "same-as-mine": {"command": "shared-mcp", "args": ["--x"]},
                    "named-like-mine": {"command": "other-mcp"},
                    "switched-off": {"command": "off-mcp"},
                    "broken": {"command": 7},
                    "fleet": {"command": "mcpfleet", "args": ["serve"]},
                }
            }
        )
    )
    own = paths.user_config_file()
    own.parent.mkdir(parents=True)
    own.write_text(
        json.dumps(
            {
                "mcpServers": {
                    "mine": {"command": "shared-mcp", "args": ["--x"]},
                    "named-like-mine": {"command": "my-own-mcp"},
                },
                "disabledServers": ["switched-off"],
            }
        )
    )
    discovery = load_all_mcp_configs(tmp_path, enable_project_config=False)
    assert served_entries(discovery, cursor) == {"plain", "same-as-mine"}
    assert served_entries(discovery, find_host("zed")) == frozenset()


def test_an_entry_equal_but_for_a_defaulted_field_is_served(isolated_home: Path, tmp_path: Path) -> None:
    """The same server in two hosts' files, or written with the folder it would run in
    anyway (``cwd`` the home, the neutral folder), is one served server: ``--replace`` moves
    it aside, so the host does not run it beside the gateway."""
    time_server = {"command": "uvx", "args": ["mcp-server-time"]}
    gemini, cursor = find_host("gemini"), find_host("cursor")
    for host, servers in (
        (gemini, {"time": time_server}),
        (
            cursor,
            {"time": time_server, "clock": {"command": "clock-mcp"}, "in-home": {"command": "home-mcp"}},
        ),
    ):
        host.path.parent.mkdir(parents=True)
        host.path.write_text(json.dumps({"mcpServers": servers}))
    own = paths.user_config_file()
    own.parent.mkdir(parents=True)
    own.write_text(
        json.dumps(
            {
                "mcpServers": {
                    "clock": {"command": "clock-mcp", "cwd": str(isolated_home)},
                    "mine": {"command": "home-mcp", "cwd": "~"},
                }
            }
        )
    )
    discovery = load_all_mcp_configs(tmp_path, enable_project_config=False)
    assert served_entries(discovery, gemini) == {"time"}
    assert served_entries(discovery, cursor) == {"time", "clock", "in-home"}
    states = {(entry.name, entry.source.path): entry.state for entry in discovery.entries}
    assert states[("in-home", str(cursor.path))] == "shadowed"  # one backend, not two
