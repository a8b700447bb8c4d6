"""The gateway never serves itself: its own entry is recognised however it is launched,
discovery leaves it out (``filtered``, with the reason), HTTP entries pointing at a running
gateway are recognised too, and a ``serve`` started under a gateway's mark refuses."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from tests.unit.config.config_helpers import WriteFile, discover, entry

from mcpfleet.config.gateway_entry import (
    GATEWAY_PID_VARIABLE,
    GATEWAY_URL_VARIABLE,
    GLOBAL_FLAGS,
    GLOBAL_OPTIONS_WITH_VALUE,
    REPLACED_KEY,
    announce_gateway_endpoint,
    launches_gateway,
    mark_gateway_environment,
    nested_gateway_refusal,
    running_gateway_endpoints,
    same_endpoint,
)

GATEWAY_COMMAND_LINES = [
    ["mcpfleet", "serve"],
    ["mcpfleet", "serve", "--http", "8765"],
    ["/home/me/.local/bin/mcpfleet", "serve"],
    ["/work/project/.venv/bin/mcpfleet", "serve", "--prefix", "none"],
    ["C:\\Users\\me\\AppData\\Roaming\\Python\\Scripts\\mcpfleet.exe", "serve"],
    ["MCPFLEET.EXE", "serve"],
    ["mcpfleet", "--cwd", "/some/project", "--trust-project", "serve"],
    ["mcpfleet", "--cwd=/p", "--config", "extra.json", "--startup-timeout", "0", "-vv", "serve"],
    ["mcpfleet", "--trust", "--startup", "100", "serve"],  # argparse's abbreviations
    ["mcpfleet", "--json", "--no-cache", "--no-project-config", "--strict", "serve"],
    ["python", "-m", "mcpfleet.cli.main", "serve"],
    ["/usr/bin/python3.12", "-I", "-m", "mcpfleet", "--cwd", "x", "serve"],
    ["python3", "-mmcpfleet.cli.main", "serve"],
    ["python3", "/home/me/.venv/bin/mcpfleet", "serve"],
    ["uvx", "mcpfleet", "serve"],
    ["uvx", "mcpfleet@1.4.0", "serve"],
    ["uvx", "--from", "mcpfleet==1.4", "mcpfleet", "serve"],
    ["uv", "tool", "run", "--python", "3.12", "mcpfleet[http]", "serve"],
    ["pipx", "run", "mcpfleet", "serve"],
    ["pipx", "run", "--spec", "git+https://example.com/mcpfleet.git", "mcpfleet", "serve"],
    ["env", "FOO=1", "mcpfleet", "serve"],
    ["bash", "-lc", "source ~/.venv/bin/activate && exec mcpfleet serve"],
    ["cmd", "/c", "mcpfleet serve"],
    ["mcpfleet serve"],
    ["/Users/Jane Doe/bin/mcpfleet", "serve"],
    ["mcpfleet", "--", "serve"],
]

OTHER_COMMAND_LINES = [
    ["mcpfleet", "config"],
    ["mcpfleet", "--cwd", "serve", "status"],  # "serve" is --cwd's value here
    ["mcpfleet", "daemon", "start"],
    ["mcpfleet"],
    ["npx", "-y", "@modelcontextprotocol/server-filesystem", "/home/me/serve"],
    ["mcpfleet-notes", "serve"],
    ["python", "-m", "mcpfleet_other", "serve"],
    ["python", "server.py", "serve"],
    ["uvx", "--from", "mcpfleet", "other-tool", "serve"],
    ["docker", "run", "-i", "mcp/serve"],
    ["bash", "-c", "echo mcpfleet; serve"],
    ["sh", "-c", "'unclosed mcpfleet"],
]


@pytest.mark.parametrize("command_line", GATEWAY_COMMAND_LINES, ids=" ".join)
def test_every_way_of_launching_the_gateway_is_recognised(command_line: list[str]) -> None:
    assert launches_gateway(command_line[0], command_line[1:])


@pytest.mark.parametrize("command_line", OTHER_COMMAND_LINES, ids=" ".join)
def test_other_commands_are_not_the_gateway(command_line: list[str]) -> None:
    assert not launches_gateway(command_line[0], command_line[1:])


_global_option = st.one_of(
    st.sampled_from(sorted(GLOBAL_FLAGS | {"-v", "-vv"})),
    st.tuples(st.sampled_from(sorted(GLOBAL_OPTIONS_WITH_VALUE)), st.text(min_size=1, max_size=12)).map(
        lambda pair: f"{pair[0]}={pair[1]}"
    ),
)
_option_and_value = st.tuples(
    st.sampled_from(sorted(GLOBAL_OPTIONS_WITH_VALUE)), st.sampled_from(["serve", "config", "/p", "7"])
)
_launcher_word = st.text(alphabet="abcdefghijklmnopqrstuvwxyz-=./0123456789", min_size=1, max_size=10).filter(
    lambda word: "mcpfleet" not in word
)


@given(
    launcher=st.lists(_launcher_word, max_size=4),
    options=st.lists(
        st.one_of(_global_option.map(lambda word: [word]), _option_and_value.map(list)), max_size=5
    ),
    subcommand=st.sampled_from(["serve", "config", "status", "tools", "hosts", "daemon"]),
)
def test_global_options_before_the_subcommand_never_change_the_verdict(
    launcher: list[str], options: list[list[str]], subcommand: str
) -> None:
    words = [*launcher, "mcpfleet", *(word for option in options for word in option), subcommand]
    assert launches_gateway(words[0], words[1:]) == (subcommand == "serve")


def test_the_option_tables_match_the_command_line_parser() -> None:
    from mcpfleet.cli.main import build_parser

    parser = build_parser()
    with_value: set[str] = set()
    flags: set[str] = set()
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            continue
        long_names = {name for name in action.option_strings if name.startswith("--")}
        (with_value if action.nargs != 0 else flags).update(long_names)
    assert with_value == set(GLOBAL_OPTIONS_WITH_VALUE)
    assert flags == set(GLOBAL_FLAGS)


def test_endpoints_match_by_scheme_port_path_and_loopback() -> None:
    served = "http://127.0.0.1:8765/mcp"
    assert same_endpoint("http://localhost:8765/mcp/", served)
    assert same_endpoint("http://[::1]:8765/mcp", served)
    assert same_endpoint("http://localhost:8765/mcp", "http://0.0.0.0:8765/mcp")
    assert not same_endpoint("http://127.0.0.1:8766/mcp", served)
    assert not same_endpoint("https://127.0.0.1:8765/mcp", served)
    assert not same_endpoint("http://127.0.0.1:8765/other", served)
    assert not same_endpoint("http://example.com:8765/mcp", served)
    assert not same_endpoint("http://127.0.0.1:notaport/mcp", served)


def test_an_announced_endpoint_is_seen_while_it_is_served(isolated_home: Path) -> None:
    url = "http://127.0.0.1:8765/mcp"
    assert running_gateway_endpoints({}) == ()
    with announce_gateway_endpoint(url) as record:
        assert record.stat().st_mode & 0o777 == 0o600
        assert [(found.url, found.pid) for found in running_gateway_endpoints({})] == [(url, os.getpid())]
    assert running_gateway_endpoints({}) == ()


def test_a_record_left_by_a_dead_gateway_is_ignored(isolated_home: Path) -> None:
    finished = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True
    )
    dead_pid = int(finished.stdout)
    with announce_gateway_endpoint("http://127.0.0.1:1/mcp") as record:
        stale = record.with_name(f"{dead_pid}.json")
        stale.write_text(json.dumps({"url": "http://127.0.0.1:2/mcp", "pid": dead_pid}))
        record.with_name("broken.json").write_text("{not json")
        assert [found.url for found in running_gateway_endpoints({})] == ["http://127.0.0.1:1/mcp"]


def test_discovery_filters_the_gateway_entry_and_it_claims_no_name(
    project: Path, home: Path, write: WriteFile
) -> None:
    write(
        home / ".claude.json",
        {"mcpServers": {"fleet": {"command": "mcpfleet", "args": ["--cwd", ".", "serve"]}}},
    )
    write(home / ".cursor" / "mcp.json", {"mcpServers": {"fleet": {"command": "fleet-notes"}}})
    result = discover(project)
    own = entry(result, "fleet", "claude-code")
    assert own.state == "filtered"
    assert "gateway's own entry" in own.reason and "never serves itself" in own.reason
    assert result.sources["fleet"].provider == "cursor"


def test_a_project_gateway_entry_is_filtered_not_pending(project: Path, write: WriteFile) -> None:
    write(project / ".mcp.json", {"mcpServers": {"fleet": {"command": "uvx", "args": ["mcpfleet", "serve"]}}})
    assert entry(discover(project), "fleet").state == "filtered"


def test_substitution_can_reveal_the_gateway(
    project: Path, home: Path, write: WriteFile, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FLEET_ARGS_SERVE", "serve")
    write(
        home / ".claude.json",
        {"mcpServers": {"fleet": {"command": "${HOME}/bin/mcpfleet", "args": ["${FLEET_ARGS_SERVE}"]}}},
    )
    assert entry(discover(project), "fleet").state == "filtered"


def test_an_http_entry_pointing_at_a_running_gateway_is_filtered(
    project: Path, home: Path, write: WriteFile, monkeypatch: pytest.MonkeyPatch
) -> None:
    write(home / ".cursor" / "mcp.json", {"mcpServers": {"fleet": {"url": "http://localhost:8765/mcp"}}})
    assert entry(discover(project), "fleet").state == "active"
    with announce_gateway_endpoint("http://127.0.0.1:8765/mcp"):
        found = entry(discover(project), "fleet")
        assert found.state == "filtered" and "http://127.0.0.1:8765/mcp is served by mcpfleet" in found.reason
    monkeypatch.setenv(GATEWAY_URL_VARIABLE, "http://127.0.0.1:8765/mcp")
    assert entry(discover(project), "fleet").state == "filtered"


def test_entries_moved_aside_by_hosts_install_are_still_served(
    home: Path, project: Path, write: WriteFile
) -> None:
    write(
        home / ".cursor" / "mcp.json",
        {
            "mcpServers": {"mcpfleet": {"command": "mcpfleet", "args": ["serve"]}},
            REPLACED_KEY: {"github": {"command": "gh-server"}},
        },
    )
    result = discover(project)
    assert result.configs["github"].command == "gh-server"
    assert result.sources["github"].location == f"/{REPLACED_KEY}/github"
    assert entry(result, "mcpfleet").state == "filtered"


def test_a_serve_under_a_gateways_mark_is_refused() -> None:
    assert nested_gateway_refusal({}) is None
    environment: dict[str, str] = {}
    mark_gateway_environment(environment, url="http://127.0.0.1:9/mcp")
    assert environment == {
        GATEWAY_PID_VARIABLE: str(os.getpid()),
        GATEWAY_URL_VARIABLE: "http://127.0.0.1:9/mcp",
    }
    message = nested_gateway_refusal(environment)
    assert message is not None and "\n" not in message
    assert f"pid {os.getpid()}" in message and f"unset {GATEWAY_PID_VARIABLE}" in message
