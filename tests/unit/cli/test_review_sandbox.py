"""``config``'s review of a pending project entry shows the sandbox it declares: a repository
that turns its server's sandbox off, or opens folders to it, says so before approval."""

from __future__ import annotations

from mcpfleet.cli.render import EntryRow
from mcpfleet.config.model import DiscoveredEntry, Sandbox, ServerConfig, SourceInfo

SOURCE = SourceInfo("claude-code", "Claude Code", "/work/p/.mcp.json", "project")


def pending(sandbox: Sandbox | None) -> EntryRow:
    config = ServerConfig(name="proj", transport="stdio", command="node", args=("x.js",), sandbox=sandbox)
    return EntryRow.of(DiscoveredEntry("proj", "pending-approval", "not approved", SOURCE, config, "stdio"))


def test_a_pending_entry_that_turns_its_sandbox_off_says_so() -> None:
    row = pending(Sandbox(enabled=False))
    assert row.review is not None
    assert row.to_json()["review"]["sandbox"] == {"enabled": False}
    assert row.review_line().endswith("runs: node x.js  sandbox: off (runs with every right of yours)")


def test_a_pending_entry_that_opens_folders_names_them() -> None:
    row = pending(Sandbox(network=False, paths=("/data",), read_only_paths=("/home/u/models",)))
    assert row.review_line().endswith("sandbox: writes /data; reads /home/u/models; no network")
    assert row.to_json()["review"]["sandbox"] == {
        "enabled": True,
        "network": False,
        "paths": ["/data"],
        "read_only_paths": ["/home/u/models"],
    }


def test_an_entry_that_declares_no_sandbox_shows_none() -> None:
    row = pending(None)
    assert "sandbox" not in row.to_json()["review"]
    assert "sandbox" not in row.review_line()
