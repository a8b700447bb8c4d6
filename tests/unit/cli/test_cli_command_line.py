"""The command line itself (DESIGN.md "The command line"): global options before or after any
command or action mean the same, ``--version``, and every command's ``--help`` has a
description and examples."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from mcpfleet import __version__
from mcpfleet.cli.main import build_parser, command_parsers, main
from mcpfleet.contract.options import merge_global_options

COMMAND_LINES: dict[tuple[str, ...], list[str]] = {
    ("config",): ["config"],
    ("status",): ["status"],
    ("tools",): ["tools", "--server", "git"],
    ("call",): ["call", "git/log", "{}"],
    ("shell",): ["shell"],
    ("demo",): ["demo"],
    ("approve",): ["approve", "docs"],
    ("revoke",): ["revoke", "docs"],
    ("add",): ["add", "time", "--command", "uvx"],
    ("remove",): ["remove", "time"],
    ("enable",): ["enable", "time"],
    ("disable",): ["disable", "time"],
    ("login",): ["login", "linear"],
    ("logout",): ["logout", "linear"],
    ("serve",): ["serve", "--tools", "search"],
    ("hosts",): ["hosts"],
    ("hosts", "install"): ["hosts", "install", "cursor", "--replace"],
    ("hosts", "uninstall"): ["hosts", "uninstall", "cursor"],
    ("daemon", "run"): ["daemon", "run"],
    ("daemon", "start"): ["daemon", "start"],
    ("daemon", "stop"): ["daemon", "stop"],
    ("daemon", "status"): ["daemon", "status"],
    ("daemon", "logs"): ["daemon", "logs", "-n", "5"],
    ("ui",): ["ui", "--no-browser"],
    ("team", "check"): ["team", "check", "team.yaml"],
    ("team", "key", "add"): ["team", "key", "add", "ci", "--team", "team.yaml"],
    ("team", "key", "revoke"): ["team", "key", "revoke", "ci", "--team", "team.yaml"],
    ("audit",): ["audit", "--team", "team.yaml", "--user", "alice", "--since", "2026-12-02"],
}
"""One command line of every command and action the parser has (a test keeps it complete)."""

GLOBALS = [
    "--cwd",
    "/srv/project",
    "--config",
    "extra.json",
    "--no-project-config",
    "--trust-project",
    "--startup-timeout",
    "0",
    "--no-cache",
    "--json",
    "--strict",
    "-v",
]


PARSER = build_parser()


def parsed(arguments: list[str]) -> argparse.Namespace:
    return merge_global_options(PARSER.parse_args(arguments))


def without_handler(args: argparse.Namespace) -> dict[str, object]:
    return {key: value for key, value in vars(args).items() if key != "handler"}


def test_the_table_names_every_command_and_action() -> None:
    paths = {path for path, _ in command_parsers(build_parser())}
    # `daemon`, `team` and `team key` alone are no command lines: they need an action.
    assert paths == {*COMMAND_LINES, ("daemon",), ("team",), ("team", "key")}


@pytest.mark.parametrize("path", list(COMMAND_LINES), ids=" ".join)
def test_global_options_after_the_command_mean_what_they_mean_before(path: tuple[str, ...]) -> None:
    command = COMMAND_LINES[path]
    before = parsed([*GLOBALS, *command])
    after = parsed([*command, *GLOBALS])
    assert without_handler(after) == without_handler(before)
    assert before.handler is after.handler
    assert (after.cwd, after.extra_configs, after.startup_timeout) == (
        Path("/srv/project"),
        [Path("extra.json")],
        0,
    )
    assert after.json and after.strict and after.no_cache and after.trust_project and after.verbose == 1


@pytest.mark.parametrize("path", list(COMMAND_LINES), ids=" ".join)
def test_options_given_on_both_sides_add_up(path: tuple[str, ...]) -> None:
    command = COMMAND_LINES[path]
    args = parsed(
        ["--config", "a.json", "-v", "--startup-timeout", "5", *command, "--config", "b.json", "-vv"]
    )
    assert args.extra_configs == [Path("a.json"), Path("b.json")]
    assert args.verbose == 3
    assert args.startup_timeout == 5


def test_an_option_after_an_action_and_after_its_command_both_count() -> None:
    args = parsed(["daemon", "--config", "a.json", "status", "--config", "b.json", "--json"])
    assert (args.extra_configs, args.json, args.daemon_action) == (
        [Path("a.json"), Path("b.json")],
        True,
        "status",
    )


def test_a_bad_value_after_the_command_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        parsed(["status", "--startup-timeout", "soon"])
    assert exit_info.value.code == 2
    assert "expected a whole number of milliseconds" in capsys.readouterr().err


def test_version_prints_the_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["--version"])
    assert exit_info.value.code == 0
    assert capsys.readouterr().out == f"mcpfleet {__version__}\n"


@pytest.mark.parametrize("path", [path for path, _ in command_parsers(build_parser())], ids=" ".join)
def test_every_command_help_has_a_description_and_examples(
    path: tuple[str, ...], capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main([*path, "--help"])
    assert exit_info.value.code == 0
    text = capsys.readouterr().out
    _usage, _, rest = text.partition("\n\n")
    description = rest.split("\n\n", 1)[0]
    assert description and not description.startswith(("positional arguments", "options")), text
    examples = text.split("examples:\n", 1)[1].splitlines()
    assert examples and all(
        line.startswith(f"  mcpfleet {path[0]}") or "mcpfleet" in line for line in examples
    )
    assert "global options (also accepted before the command)" in text
