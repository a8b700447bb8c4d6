"""``LastGoodFiles``: a file that stops parsing is read as it last parsed, by any discovery
given the store; a deleted file is forgotten; only what discovery reads is kept."""

from __future__ import annotations

from pathlib import Path

from tests.unit.config.config_helpers import WriteFile

from mcpfleet.config import LastGoodFiles, load_all_mcp_configs


def test_a_file_that_stops_parsing_is_read_as_it_last_parsed(
    home: Path, project: Path, write: WriteFile
) -> None:
    codex = write(home / ".codex" / "config.toml", '[mcp_servers.time]\ncommand = "time-server"\n')
    write(home / ".cursor" / "mcp.json", {"mcpServers": {"time": {"command": "other-time-server"}}})
    last_good = LastGoodFiles()
    first = load_all_mcp_configs(project, last_good=last_good)
    assert first.sources["time"].path == str(codex)

    codex.write_text('[mcp_servers.time]\ncommand = "time-server"\n[mcp_servers.broken\n')
    kept = load_all_mcp_configs(project, last_good=last_good)
    assert kept.configs == first.configs and kept.sources == first.sources  # Cursor's time stays shadowed
    [error] = kept.errors
    assert error.subject == str(codex) and error.message.endswith(
        "until then its servers run as it last parsed"
    )
    # Without the store (a fresh command) the file's servers are simply missing.
    fresh = load_all_mcp_configs(project)
    assert fresh.sources["time"].provider == "cursor"
    assert "until then" not in fresh.errors[0].message

    codex.unlink()
    assert load_all_mcp_configs(project, last_good=last_good).sources["time"].provider == "cursor"
    write(codex, "[mcp_servers.time\n")
    gone = load_all_mcp_configs(project, last_good=last_good)
    assert gone.sources["time"].provider == "cursor"  # deleted, then broken: nothing to keep


def test_only_what_discovery_reads_is_kept(home: Path, project: Path, write: WriteFile) -> None:
    claude = write(
        home / ".claude.json",
        {
            "mcpServers": {"user": {"command": "u"}},
            "projects": {str(project): {"mcpServers": {"local": {"command": "l"}}, "history": ["x" * 1000]}},
            "history": ["y" * 1000],
        },
    )
    last_good = LastGoodFiles()
    load_all_mcp_configs(project, last_good=last_good)
    assert last_good.recall(claude) == {
        "mcpServers": {"user": {"command": "u"}},
        "projects": {str(project): {"mcpServers": {"local": {"command": "l"}}}},
    }
    claude.write_text("{broken")
    kept = load_all_mcp_configs(project, last_good=last_good)
    assert sorted(kept.configs) == ["local", "user"]
