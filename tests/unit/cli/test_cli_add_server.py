"""``mcpfleet add`` and ``/mcp add`` read the same options and write the same entry."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mcpfleet.cli.add_server import AddServerUsageError, NewServer, add_new_server, parse_shell_add
from mcpfleet.cli.main import build_parser
from mcpfleet.config import load_all_mcp_configs
from mcpfleet.paths import project_config_file, user_config_file


def from_the_command_line(*words: str) -> NewServer:
    return NewServer.from_arguments(build_parser().parse_args(["add", *words]))


@pytest.mark.parametrize(
    "words",
    [
        ("web", "--url", "https://w/mcp", "--header", "X-Key=v", "--transport", "sse"),
        ("tool", "--command", "python3", "--arg=-m", "--arg", "pkg", "--env", "A=1", "--project"),
        ("bare", "--command", "server"),
    ],
)
def test_both_read_the_same_options_into_the_same_server(words: tuple[str, ...]) -> None:
    assert parse_shell_add(words) == from_the_command_line(*words)


def test_the_shell_also_takes_the_command_after_a_double_dash() -> None:
    server = parse_shell_add(
        ["extra", "--env", "A=1", "--", "python", "server.py", "--name", "x", "--project"]
    )
    assert server == NewServer(
        "extra", {"command": "python", "args": ["server.py", "--name", "x", "--project"], "env": {"A": "1"}}
    )
    assert server.scope == "user"


@pytest.mark.parametrize(
    ("words", "message", "show_usage"),
    [
        (["web", "--transport", "ftp", "--url", "x"], "Invalid --transport value. Use http or sse.", False),
        (["nothing"], "Use either --url or a command, exactly one.", True),
        (["both", "--url", "x", "--", "cmd"], "Use either --url or a command, exactly one.", True),
        (["two", "--command", "a", "--", "b"], "Use either --url or a command, exactly one.", True),
        ([], "Server name required.", True),
        (["--url", "x"], "Server name required.", True),
        (["q", "--url"], "Argument --url: expected one argument.", True),
        (["q", "--bogus"], "Unrecognized arguments: --bogus.", True),
        (["q", "--env", "novalue", "--", "cmd"], "Argument --env: expected KEY=VALUE, got 'novalue'.", True),
        (["q", "--help"], "Unrecognized arguments: --help.", True),
    ],
)
def test_the_shell_reports_a_mistake_and_never_exits(
    words: list[str], message: str, show_usage: bool
) -> None:
    with pytest.raises(AddServerUsageError) as caught:
        parse_shell_add(words)
    assert (str(caught.value), caught.value.show_usage) == (message, show_usage)


def test_a_user_entry_lands_in_the_user_file(tmp_path: Path) -> None:
    path = add_new_server(parse_shell_add(["web", "--url", "https://w/mcp"]), tmp_path)
    assert path == user_config_file()
    assert json.loads(path.read_text())["mcpServers"]["web"] == {"type": "http", "url": "https://w/mcp"}


def test_a_project_entry_the_user_typed_needs_no_separate_approval(tmp_path: Path) -> None:
    path = add_new_server(parse_shell_add(["tool", "--project", "--", "server-command", "--flag"]), tmp_path)
    assert path == project_config_file(tmp_path)
    discovery = load_all_mcp_configs(tmp_path)
    [entry] = [entry for entry in discovery.entries if entry.name == "tool"]
    assert entry.state == "active", entry.reason
