"""The console script's routing: which ``serve`` goes to the daemon, and with which fleet.

The entry reads the command line with a parser of its own (``cli/main.py``'s loads too much
for a shim), built from the same option table (``mcpfleet.contract.options``); these tests
hold it to the same options and the same meaning as the CLI's.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mcpfleet.cli import entry, output
from mcpfleet.cli.main import build_parser as cli_parser
from mcpfleet.cli.options import serve_fleet_spec
from mcpfleet.contract import defaults
from mcpfleet.contract.wire import FleetSpec
from mcpfleet.daemon_client import shim


@pytest.fixture(autouse=True)
def daemon_allowed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MCPFLEET_NO_DAEMON", raising=False)


def option_table(parser: argparse.ArgumentParser) -> dict[str, tuple[Any, ...]]:
    """Each option of ``parser`` (help aside): where it goes, whether it takes a value, its
    choices and default."""
    table: dict[str, tuple[Any, ...]] = {}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction) or "--help" in action.option_strings:
            continue
        choices = tuple(action.choices) if action.choices is not None else None
        entry_row = (action.dest, action.nargs == 0, choices, action.default)
        table.update(dict.fromkeys(action.option_strings, entry_row))
    return table


def serve_parser(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    [subparsers] = [action for action in parser._actions if isinstance(action, argparse._SubParsersAction)]
    serve: argparse.ArgumentParser = subparsers.choices["serve"]
    return serve


def test_the_entry_knows_the_cli_options_and_reads_them_alike() -> None:
    cli, own = cli_parser(), entry.build_parser()
    assert option_table(own) == option_table(cli)
    assert option_table(serve_parser(own)) == option_table(serve_parser(cli))
    for parser in (own, serve_parser(own)):
        assert {"-h", "--help"} <= set(parser._option_string_actions)


def spec_from_cli(arguments: list[str]) -> FleetSpec:
    """The fleet ``mcpfleet.cli.main`` would serve for ``arguments``."""
    return serve_fleet_spec(cli_parser().parse_args(arguments))


GLOBAL_WORDS = st.sampled_from(
    [
        ["--trust-project"],
        ["--trust"],
        ["--no-project-config"],
        ["--startup-timeout", "0"],
        ["--startup", "1500"],
        ["--startup-timeout=40"],
        ["--cwd", "/"],
        ["--cwd=/tmp"],
        ["--json"],
        ["--strict"],
        ["-v"],
        ["-vv"],
        ["--startup-timeout", "-1"],
        ["--startup-timeout", "soon"],
    ]
)
SERVE_WORDS = st.sampled_from(
    [
        ["--prefix", "none"],
        ["--prefix", "sometimes"],
        ["--max-name-length", "40"],
        ["--max-name", "48"],
        ["--max-name-length", "9"],
        ["--max-name-length", "10"],
        ["--tools", "search"],
        ["--tools=all"],
        ["--max-tools", "12"],
        ["--max-tools", "0"],
        ["--profile", "work"],
        ["--prof", "home"],
        ["--unknown"],
    ]
)


@given(
    global_options=st.lists(GLOBAL_WORDS, max_size=4),
    serve_options=st.lists(SERVE_WORDS, max_size=4),
)
def test_a_serve_command_line_means_the_same_fleet_to_the_shim_and_to_the_cli(
    global_options: list[list[str]], serve_options: list[list[str]]
) -> None:
    arguments = [*(word for option in global_options for word in option), "serve"]
    arguments += [word for option in serve_options for word in option]
    route = entry.serve_route(arguments)
    try:
        expected = spec_from_cli(arguments)
    except SystemExit:
        assert route.settings is None  # the CLI says what is wrong with it
        return
    assert route.settings is not None
    assert route.settings.fleet == expected
    assert route.settings.verbose == any(option in (["-v"], ["-vv"]) for option in global_options)


def test_the_project_is_the_current_folder_resolved(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    real = tmp_path / "real"
    real.mkdir()
    (tmp_path / "link").symlink_to(real)
    monkeypatch.chdir(tmp_path / "link")
    route = entry.serve_route(["serve"])
    assert route.settings is not None and route.settings.fleet.cwd == str(real)
    monkeypatch.setenv("HOME", str(tmp_path))
    route = entry.serve_route(["--cwd", "~/link", "serve"])
    assert route.settings is not None and route.settings.fleet.cwd == str(real)


def test_the_trust_variable_counts_as_the_flag(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MCPFLEET_TRUST_PROJECT", "yes")
    route = entry.serve_route(["serve"])
    assert route.settings is not None and route.settings.fleet.trust_project


@pytest.mark.parametrize(
    "arguments",
    [
        ["serve", "--no-daemon"],
        ["serve", "--no-d"],
        ["serve", "--http", "8765"],
        ["serve", "--auth-token", "t"],  # the CLI refuses it without --http
        ["serve", "--help"],
        ["--help", "serve"],
        ["serve", "-h"],
        ["--cwd", "serve", "status"],  # "serve" is the folder here
        ["serve", "extra"],
    ],
)
def test_these_serve_in_process_without_a_word(arguments: list[str]) -> None:
    assert entry.serve_route(arguments) == entry.ServeRoute()


@pytest.mark.parametrize(
    ("arguments", "option"),
    [(["--no-cache", "serve"], "--no-cache"), (["--config", "extra.json", "serve"], "--config")],
)
def test_a_fleet_of_its_own_serves_in_process_and_says_so(arguments: list[str], option: str) -> None:
    route = entry.serve_route(arguments)
    assert route.settings is None
    assert route.notice is not None and route.notice.startswith(f"serve {option} runs in this process")


@pytest.mark.parametrize(
    ("variable", "value"),
    [("MCPFLEET_NO_DAEMON", "1"), ("MCPFLEET_NO_DAEMON", "true"), ("MCPFLEET_GATEWAY_PID", "4242")],
)
def test_the_environment_can_keep_serve_in_process(
    variable: str, value: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(variable, value)
    assert entry.serve_route(["serve"]) == entry.ServeRoute()


def test_an_unset_or_false_variable_leaves_the_daemon_on(monkeypatch: pytest.MonkeyPatch) -> None:
    for value in ("", "0", "no"):
        monkeypatch.setenv("MCPFLEET_NO_DAEMON", value)
        assert entry.serve_route(["serve"]).settings is not None


def test_the_shim_keeps_the_contract_s_exit_codes_and_the_gateway_s_limits() -> None:
    from mcpfleet.fleet import tools
    from mcpfleet.gateway.stdio import MAX_MESSAGE_BYTES

    MIN_TOOL_NAME_LENGTH = vars(tools)["MIN_TOOL_NAME_LENGTH"]

    assert defaults.MIN_TOOL_NAME_LENGTH == MIN_TOOL_NAME_LENGTH
    shortest = ["serve", "--max-name-length", str(MIN_TOOL_NAME_LENGTH)]
    assert entry.serve_route(shortest).settings is not None
    too_short = ["serve", "--max-name-length", str(MIN_TOOL_NAME_LENGTH - 1)]
    assert entry.serve_route(too_short) == entry.ServeRoute()
    assert (vars(shim)["EXIT_OK"], vars(shim)["EXIT_FAILED"], vars(shim)["EXIT_USAGE"]) == (
        output.EXIT_OK,
        output.EXIT_FAILED,
        output.EXIT_USAGE,
    )
    assert shim.MAX_HOST_LINE_BYTES == MAX_MESSAGE_BYTES


def test_the_gateway_mark_has_one_name() -> None:
    from mcpfleet.config.gateway_entry import GATEWAY_PID_VARIABLE

    assert vars(entry)["GATEWAY_PID_VARIABLE"] == GATEWAY_PID_VARIABLE
    assert os.environ.get(GATEWAY_PID_VARIABLE) is None
