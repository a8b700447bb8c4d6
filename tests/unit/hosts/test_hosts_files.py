"""``hosts install`` and ``hosts uninstall`` on each host's own file format: the gateway
entry in the host's key and shape, every other byte kept, a backup of the file as it was,
the file's mode kept, idempotence, ``--replace`` undone exactly, and refusals that leave the
file untouched."""

from __future__ import annotations

import json
import os
import tomllib
from pathlib import Path
from typing import Any

import pytest

from mcpfleet.config.gateway_entry import MOVED_SERVERS_KEY, REPLACED_KEY, moved_entries_file
from mcpfleet.config.readers import parse_text
from mcpfleet.errors import ConfigError, UnsafeConfigPathError
from mcpfleet.hosts import Host, find_host, host_status, install_gateway, uninstall_gateway
from mcpfleet.hosts.documents import EditCheckError

COMMAND = ["/opt/fleet/bin/mcpfleet"]

ORIGINALS: dict[str, str] = {
    "claude-code": (
        "{\n"
        '  "numStartups": 41,\n'
        '  "projects": {\n'
        '    "/work/app": {"mcpServers": {"local-one": {"command": "l"}}, "allowedTools": []}\n'
        "  },\n"
        '  "mcpServers": {\n'
        '    "github": {\n'
        '      "type": "stdio",\n'
        '      "command": "npx",\n'
        '      "args": ["-y", "@modelcontextprotocol/server-github"],\n'
        '      "env": {}\n'
        "    }\n"
        "  },\n"
        '  "tipsHistory": {"new-user-warmup": 1}\n'
        "}\n"
    ),
    "cursor": '{\n    "mcpServers": {\n        "github": {"command": "npx", "args": ["gh"]}\n    }\n}\n',
    "vscode": (
        "// User MCP servers\n"
        "{\n"
        '\t"inputs": [],\n'
        '\t"servers": {\n'
        '\t\t"github": {"type": "stdio", "command": "npx", "args": ["gh"]}, // my token is in env\n'
        '\t\t"ask": {"type": "stdio", "command": "ask", "env": {"KEY": "${input:key}"}},\n'
        "\t},\n"
        "}\n"
    ),
    "codex": (
        'model = "o3"\n'
        "\n"
        "# MCP servers\n"
        "[mcp_servers.github]\n"
        'command = "npx"\n'
        'args = ["-y", "gh"]\n'
        "\n"
        "[mcp_servers.github.env]\n"
        'TOKEN_NAME = "GH"\n'
        "\n"
        "# the rest\n"
        "[tui]\n"
        "notifications = true\n"
    ),
    "gemini": (
        '{\r\n  "theme": "Default",\r\n  "mcpServers": {\r\n    "github": {"command": "npx"}\r\n  }\r\n}\r\n'
    ),
    "claude-desktop": '{"mcpServers": {"github": {"command": "npx"}}, "preferences": {"x": true}}',
    "windsurf": '\ufeff{\n  "mcpServers": {\n    "github": {"command": "npx", "disabled": false}\n  }\n}\n',
    "zed": (
        "// Zed settings\n"
        "//\n"
        "// For information on how to configure Zed, see the Zed documentation.\n"
        "{\n"
        '  "theme": "One Dark",\n'
        '  "context_servers": {\n'
        '    "github": {\n'
        '      "command": "npx", // from npm\n'
        '      "args": ["gh"]\n'
        "    },\n"
        '    "from-extension": {"settings": {}}\n'
        "  }\n"
        "}\n"
    ),
}
"""A user config file per host, each with something a careless writer would lose."""

SERVED = frozenset({"github"})
"""What the gateway serves of each file above (VS Code's ``ask`` needs an input, Zed's
extension entry is Zed's own: neither is served)."""


def _data(host: Host) -> Any:
    return parse_text(host.path.read_text(encoding="utf-8-sig"), host.format, path=host.path)


def _write(host: Host, text: str, mode: int = 0o640) -> None:
    host.path.parent.mkdir(parents=True, exist_ok=True)
    host.path.write_bytes(text.encode("utf-8"))
    os.chmod(host.path, mode)


@pytest.fixture(params=sorted(ORIGINALS))
def host(request: pytest.FixtureRequest) -> Host:
    found = find_host(request.param)
    _write(found, ORIGINALS[found.id])
    return found


def test_install_writes_the_host_own_entry_and_keeps_everything_else(host: Host) -> None:
    before = _data(host)
    report = install_gateway(host, COMMAND)
    assert report.added == ["mcpfleet"] and report.changed
    after = _data(host)
    entry = after[host.servers_key]["mcpfleet"]
    assert entry["command"] == COMMAND[0] and entry["args"] == ["serve"]
    assert ("type" in entry) == (host.id in ("claude-code", "cursor", "vscode"))
    del after[host.servers_key]["mcpfleet"]
    assert after == before
    assert host.path.stat().st_mode & 0o777 == 0o640
    assert host.backup_path.read_bytes() == ORIGINALS[host.id].encode("utf-8")
    assert host.backup_path.stat().st_mode & 0o777 == 0o640
    assert host_status(host).gateway_entries == ("mcpfleet",)


def test_a_second_install_changes_nothing(host: Host) -> None:
    install_gateway(host, COMMAND)
    written = host.path.read_bytes()
    again = install_gateway(host, ["/elsewhere/mcpfleet"], replace=True, served=frozenset())
    assert not again.changed and again.gateway_entries == ["mcpfleet"]
    assert host.path.read_bytes() == written


def test_uninstall_gives_back_the_original_bytes(host: Host) -> None:
    install_gateway(host, COMMAND)
    report = uninstall_gateway(host)
    assert report.removed == ["mcpfleet"]
    assert host.path.read_bytes() == ORIGINALS[host.id].encode("utf-8")
    assert not uninstall_gateway(host).changed


def test_replace_moves_served_entries_aside_and_uninstall_restores_exactly(host: Host) -> None:
    before = _data(host)
    report = install_gateway(host, COMMAND, replace=True, served=SERVED)
    assert report.moved_aside == ["github"]
    after = _data(host)
    assert "github" not in after[host.servers_key]
    record = moved_entries_file(host.id, host.path)
    if host.id == "codex":  # Codex warns about a table it does not know: mcpfleet's state keeps them
        assert REPLACED_KEY not in after
        assert (
            json.loads(record.read_text())[MOVED_SERVERS_KEY]["github"] == before[host.servers_key]["github"]
        )
    else:
        assert after[REPLACED_KEY]["github"] == before[host.servers_key]["github"]
        assert not record.exists()
    unserved = set(before[host.servers_key]) - SERVED
    assert set(after[host.servers_key]) == unserved | {"mcpfleet"}, "what the gateway does not serve stays"
    assert host_status(host).replaced == ("github",)
    assert not install_gateway(host, COMMAND, replace=True, served=SERVED).changed
    restored = uninstall_gateway(host)
    assert restored.restored == ["github"] and restored.removed == ["mcpfleet"]
    assert host.path.read_bytes() == ORIGINALS[host.id].encode("utf-8")
    assert not record.exists()


def test_install_then_replace_then_uninstall_restores_exactly(host: Host) -> None:
    install_gateway(host, COMMAND)
    install_gateway(host, COMMAND, replace=True, served=SERVED)
    uninstall_gateway(host)
    assert host.path.read_bytes() == ORIGINALS[host.id].encode("utf-8")


def test_what_the_host_added_after_replace_survives_uninstall(host: Host) -> None:
    install_gateway(host, COMMAND, replace=True, served=SERVED)
    # The host (or the user) adds a server to the map it reads, by rewriting the file.
    data = _data(host)
    data[host.servers_key]["added-later"] = {"command": "later"}
    if host.format == "toml":
        with host.path.open("a", encoding="utf-8") as handle:
            handle.write('\n[mcp_servers.added-later]\ncommand = "later"\n')
    else:
        host.path.write_text(json.dumps(data, indent=2))
    uninstall_gateway(host)
    restored = _data(host)
    assert restored[host.servers_key]["added-later"] == {"command": "later"}
    assert "github" in restored[host.servers_key] and REPLACED_KEY not in restored
    assert "mcpfleet" not in restored[host.servers_key]


def test_a_missing_file_is_created_private(isolated_home: Path) -> None:
    cursor = find_host("cursor")
    cursor.path.parent.mkdir(parents=True)
    report = install_gateway(cursor, COMMAND)
    assert report.backup is None and not cursor.backup_path.exists()
    assert cursor.path.stat().st_mode & 0o777 == 0o600
    assert _data(cursor) == {
        "mcpServers": {"mcpfleet": {"type": "stdio", "command": COMMAND[0], "args": ["serve"]}}
    }


def test_a_host_that_is_not_set_up_is_refused(isolated_home: Path) -> None:
    with pytest.raises(
        ConfigError, match=r"does not seem to be set up here: .*\.codex does not exist; run OpenAI Codex"
    ):
        install_gateway(find_host("codex"), COMMAND)
    assert not (isolated_home / ".codex").exists()


def test_a_symlinked_file_is_refused_and_its_target_untouched(isolated_home: Path, tmp_path: Path) -> None:
    zed = find_host("zed")
    zed.path.parent.mkdir(parents=True)
    target = tmp_path / "dotfiles-zed.json"
    target.write_text(ORIGINALS["zed"])
    zed.path.symlink_to(target)
    with pytest.raises(UnsafeConfigPathError, match="symbolic link"):
        install_gateway(zed, COMMAND)
    assert target.read_text() == ORIGINALS["zed"] and zed.path.is_symlink()
    assert not zed.backup_path.exists()


def test_a_folder_linked_out_of_the_home_is_refused(isolated_home: Path, tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere-cursor"
    elsewhere.mkdir()
    (isolated_home / ".cursor").symlink_to(elsewhere)
    with pytest.raises(UnsafeConfigPathError, match="outside"):
        install_gateway(find_host("cursor"), COMMAND)
    assert list(elsewhere.iterdir()) == []


@pytest.mark.parametrize("host_id", ["zed", "codex"])
def test_an_unparsable_file_is_refused_untouched(isolated_home: Path, host_id: str) -> None:
    broken = find_host(host_id)
    _write(broken, '{"context_servers": {' if broken.format == "json" else "[mcp_servers.x\n")
    with pytest.raises(ConfigError, match=rf"cannot edit {broken.path}: .*fix the file"):
        install_gateway(broken, COMMAND)
    assert not broken.backup_path.exists()
    assert host_status(broken).error is not None


def test_a_repeated_key_is_refused_as_discovery_refuses_it(isolated_home: Path) -> None:
    cursor = find_host("cursor")
    original = '{"mcpServers": {"a": {"command": "x"}, "a": {"command": "y"}}}'
    _write(cursor, original)
    with pytest.raises(ConfigError, match="duplicate key 'a'"):
        install_gateway(cursor, COMMAND)
    assert cursor.path.read_text() == original


def test_a_foreign_server_named_mcpfleet_is_not_overwritten(isolated_home: Path) -> None:
    cursor = find_host("cursor")
    _write(cursor, '{"mcpServers": {"mcpfleet": {"command": "my-own-fleet-tool"}}}')
    with pytest.raises(
        ConfigError, match='already has a server named "mcpfleet" that is not the gateway; rename it'
    ):
        install_gateway(cursor, COMMAND)


def test_a_gateway_entry_under_another_name_counts_as_installed(isolated_home: Path) -> None:
    gemini = find_host("gemini")
    original = '{"mcpServers": {"fleet": {"command": "uvx", "args": ["mcpfleet", "serve"]}}}'
    _write(gemini, original)
    report = install_gateway(gemini, COMMAND)
    assert not report.changed and report.gateway_entries == ["fleet"]
    assert uninstall_gateway(gemini).removed == ["fleet"]
    assert _data(gemini) == {}


def test_a_codex_server_written_inline_is_not_moved_but_refused(isolated_home: Path) -> None:
    codex = find_host("codex")
    original = '[mcp_servers]\ngithub = { command = "npx" }\n'
    _write(codex, original)
    with pytest.raises(EditCheckError, match="nothing was written: make the change by hand"):
        install_gateway(codex, COMMAND, replace=True, served=SERVED)
    assert codex.path.read_text() == original
    assert tomllib.loads(original) == {"mcp_servers": {"github": {"command": "npx"}}}


def test_a_claude_json_of_megabytes_is_edited_and_restored_exactly(isolated_home: Path) -> None:
    claude = find_host("claude-code")
    history = [{"display": "fix the flaky test " * 10, "pastedContents": {}} for _ in range(20)]
    data = {
        "numStartups": 900,
        "projects": {
            f"/work/project-{index}": {"history": history, "allowedTools": []} for index in range(500)
        },
        "mcpServers": {"github": {"type": "stdio", "command": "npx", "args": ["gh"], "env": {}}},
    }
    original = json.dumps(data, indent=2) + "\n"
    assert len(original) > 2_000_000
    _write(claude, original, mode=0o600)
    assert install_gateway(claude, COMMAND, replace=True, served=SERVED).moved_aside == ["github"]
    assert _data(claude)["projects"] == data["projects"]
    uninstall_gateway(claude)
    assert claude.path.read_text() == original


def test_codex_tables_moved_aside_come_back_after_the_file_changed(isolated_home: Path) -> None:
    """Edited since the move, the file cannot take the cut text back in its place: the tables
    go at the end, the edit kept; tables an older mcpfleet renamed in place come back too."""
    codex = find_host("codex")
    _write(codex, ORIGINALS["codex"] + '\n[replaced_by_mcpfleet.old]\ncommand = "old-mcp"\n')
    install_gateway(codex, COMMAND, replace=True, served=SERVED)
    assert host_status(codex).replaced == ("old", "github")
    codex.path.write_text('model = "o4"\n' + codex.path.read_text().split("\n", 1)[1])
    report = uninstall_gateway(codex)
    assert sorted(report.restored) == ["github", "old"]
    data = _data(codex)
    assert data["model"] == "o4"
    assert data["mcp_servers"]["github"] == tomllib.loads(ORIGINALS["codex"])["mcp_servers"]["github"]
    assert data["mcp_servers"]["old"] == {"command": "old-mcp"} and REPLACED_KEY not in data
    assert not moved_entries_file(codex.id, codex.path).exists()
