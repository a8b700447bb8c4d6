"""Bad input: every broken file or entry gives one error naming the file, and every other
source still loads; discovery never raises for a discovered file."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from tests.unit.config.config_helpers import WriteFile, discover, entry

from mcpfleet.config.readers import MAX_CONFIG_BYTES, MAX_USER_CONFIG_BYTES, strip_jsonc


@pytest.fixture
def healthy(home: Path, write: WriteFile) -> None:
    write(home / ".cursor" / "mcp.json", {"mcpServers": {"healthy": {"command": "healthy-server"}}})


def only_error(project: Path) -> str:
    result = discover(project)
    assert "healthy" in result.configs
    assert len(result.errors) == 1, result.errors
    return f"{result.errors[0].path} | {result.errors[0].error}"


@pytest.mark.usefixtures("healthy")
@pytest.mark.parametrize(
    ("relative", "content", "message"),
    [
        (".mcp.json", '{"mcpServers": {"a": {"command": "x"}', "invalid JSON at line 1"),
        (".mcp.json", '{"mcpServers": {"a": {"command": "x"}, "a": {"command": "y"}}}', "duplicate key 'a'"),
        (".mcp.json", '{"mcpServers": ["a"]}', '"mcpServers" must be an object'),
        (".mcp.json", '"just a string"', "expected an object at the top level"),
        (".codex/config.toml", "[mcp_servers.a\ncommand = 1", "invalid TOML"),
        (".codex/config.toml", '[mcp_servers.a]\ncommand = "x"\ncommand = "y"\n', "invalid TOML"),
        (".continue/mcpServers/b.yaml", "mcpServers: [\n  - name: x", "invalid YAML"),
        (
            ".continue/mcpServers/b.yaml",
            "mcpServers:\n  - name: a\n    command: x\n    command: y\n",
            "duplicate key",
        ),
        (".continue/mcpServers/b.yaml", "mcpServers: {a: 1}\n", '"mcpServers" must be a list'),
        (".mcp.json", b"\xff\xfe{}", "not UTF-8"),
    ],
)
def test_malformed_files(
    project: Path, write: WriteFile, relative: str, content: str | bytes, message: str
) -> None:
    path = project / relative
    if isinstance(content, bytes):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content)
    else:
        write(path, content)
    text = only_error(project)
    assert str(path) in text and message in text


def test_utf8_bom_and_jsonc_are_accepted(project: Path, write: WriteFile) -> None:
    (project / ".mcp.json").write_bytes(
        b"\xef\xbb\xbf{\n  // comment\n"
        b'  "mcpServers": {/* c */ "a": {"command": "x", "args": ["//not", "a,]"],},},\n}'
    )
    result = discover(project, trust_project=True)
    assert result.errors == []
    assert result.configs["a"].args == ("//not", "a,]")


def test_strip_jsonc_keeps_line_numbers() -> None:
    text = '{\n// x\n"a": 1, /* y\n */ }'
    assert strip_jsonc(text).count("\n") == text.count("\n")


@pytest.mark.usefixtures("healthy")
def test_file_too_large(project: Path, write: WriteFile) -> None:
    write(project / ".mcp.json", '{"mcpServers": {}, "pad": "' + "x" * MAX_CONFIG_BYTES + '"}')
    assert "file too large" in only_error(project)


def test_a_large_user_file_still_gives_its_servers(project: Path, home: Path, write: WriteFile) -> None:
    # Claude Code keeps its per-project history in ~/.claude.json, beside the servers: a
    # heavy user's file runs to megabytes, and it must not cost them their servers.
    history = {str(project / f"p{index}"): {"history": ["x" * 200] * 20} for index in range(600)}
    path = write(home / ".claude.json", {"mcpServers": {"big": {"command": "x"}}, "projects": history})
    assert MAX_CONFIG_BYTES < path.stat().st_size < MAX_USER_CONFIG_BYTES
    result = discover(project)
    assert result.errors == []
    assert "big" in result.configs


@pytest.mark.usefixtures("healthy")
@pytest.mark.skipif(os.geteuid() == 0, reason="root reads every file")
def test_unreadable_file(project: Path, write: WriteFile) -> None:
    path = write(project / ".mcp.json", '{"mcpServers": {}}')
    path.chmod(0)
    try:
        assert "cannot read" in only_error(project)
    finally:
        path.chmod(0o600)


@pytest.mark.usefixtures("healthy")
def test_symlink_leaving_the_project(project: Path, tmp_path: Path, write: WriteFile) -> None:
    outside = write(tmp_path / "outside.json", {"mcpServers": {"evil": {"command": "x"}}})
    (project / ".mcp.json").symlink_to(outside)
    assert "symlink leaves the project" in only_error(project)


def test_symlink_inside_the_project_is_fine(project: Path, write: WriteFile) -> None:
    target = write(project / "configs" / "real.json", {"mcpServers": {"inside": {"command": "x"}}})
    (project / ".mcp.json").symlink_to(target)
    assert discover(project, trust_project=True).configs["inside"].command == "x"


def test_directory_in_place_of_a_file(project: Path) -> None:
    (project / ".mcp.json").mkdir()
    assert "not a regular file" in discover(project).errors[0].error


@pytest.mark.usefixtures("healthy")
@pytest.mark.parametrize(
    ("server", "message"),
    [
        ({"command": "x", "url": "https://y"}, 'both "command" and "url"'),
        ({"type": "stdio"}, 'stdio server requires a "command"'),
        ({"type": "http"}, 'http server requires a "url"'),
        ({"type": "sse", "command": "x"}, 'sse server requires a "url"'),
        ({"type": "websocket", "url": "ws://x"}, "unknown server type 'websocket'"),
        ({}, 'needs a "command"'),
        ({"command": "x", "args": "not-a-list"}, '"args" must be a list'),
        ({"command": "x", "timeout": "soon"}, "is not a number"),
        ({"command": "x", "enabled": "maybe"}, '"enabled" must be true or false'),
        ("not an object", "must be an object"),
    ],
)
def test_invalid_entries_are_reported_and_skipped(
    project: Path, home: Path, write: WriteFile, server: object, message: str
) -> None:
    write(home / ".claude.json", {"mcpServers": {"broken": server, "fine": {"command": "ok"}}})
    result = discover(project)
    broken = entry(result, "broken")
    assert broken.state == "invalid" and message in broken.reason and '"broken"' in broken.reason
    assert {"fine", "healthy"} <= set(result.configs)
    assert result.errors[0].path == str(home / ".claude.json")


@pytest.mark.parametrize("name", ["has space", "x" * 101, "semi;colon", ""])
def test_invalid_names(project: Path, home: Path, write: WriteFile, name: str) -> None:
    write(home / ".claude.json", {"mcpServers": {name: {"command": "x"}}})
    result = discover(project)
    assert result.configs == {}
    assert result.entries[0].state == "invalid" and "server name" in result.entries[0].reason


def test_invalid_project_entry_does_not_hide_the_user_one(
    project: Path, home: Path, write: WriteFile
) -> None:
    write(project / ".mcp.json", {"mcpServers": {"s": {"type": "http"}}})
    write(home / ".claude.json", {"mcpServers": {"s": {"command": "user"}}})
    assert discover(project, trust_project=True).configs["s"].command == "user"
