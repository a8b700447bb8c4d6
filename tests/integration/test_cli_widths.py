"""Tables and words as the real CLI prints them, through a pipe: every table fits ``COLUMNS``
when its words can, uses the full width when piped without ``COLUMNS`` (each row one line),
and never breaks a word; counts have the right plural, and a bad ``--config`` says what it is."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from tests.conftest import PYTHON
from tests.servers.fixtures import FAKE_SERVER

from mcpfleet.paths import user_config_file

CLI = [sys.executable, "-m", "mcpfleet.cli.main"]
LONG_NAME = "a-project-server-with-a-name-long-enough-to-need-the-room"
PENDING_WORDS = ["pending-approval", "--trust-project)", "`mcpfleet"]


def run(project: Path, *arguments: str, columns: int | None = None, stdin: str | None = None) -> str:
    env = {key: value for key, value in os.environ.items() if key not in ("COLUMNS", "LINES")}
    if columns is not None:
        env["COLUMNS"] = str(columns)
    # --startup-timeout 0: every server's own tools, never a "(deferred)" mark that comes and goes.
    completed = subprocess.run(
        [*CLI, "--cwd", str(project), "--startup-timeout", "0", *arguments],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        check=False,
    )
    assert completed.returncode == 0, completed.stderr
    return completed.stdout


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A user server and a project server awaiting approval (a long name, a long reason)."""
    path = user_config_file()
    path.parent.mkdir(parents=True, exist_ok=True)
    entry = {"command": PYTHON, "args": [str(FAKE_SERVER), "--name", "files", "--tool", "echo"]}
    path.write_text(json.dumps({"mcpServers": {"files": entry}}))
    (Path.home() / ".cursor").mkdir()
    folder = tmp_path / "p"
    folder.mkdir()
    (folder / ".mcp.json").write_text(json.dumps({"mcpServers": {LONG_NAME: {"command": "true"}}}))
    return folder


def widest(text: str) -> int:
    return max(len(line) for line in text.splitlines())


def assert_whole(words: list[str], text: str) -> None:
    for word in words:
        assert word in text, f"{word!r} was broken or lost:\n{text}"


@pytest.mark.parametrize("command", [["config"], ["status"], ["hosts"], ["tools"]], ids=" ".join)
def test_a_table_fits_columns_when_its_words_can(project: Path, command: list[str]) -> None:
    natural = widest(run(project, *command))
    narrower = natural - 5  # each table has a cell of several words that can take two lines
    fitted = run(project, *command, columns=narrower)
    assert widest(fitted) <= narrower, fitted


@pytest.mark.parametrize("command", [["config"], ["status"]], ids=" ".join)
def test_piped_without_columns_each_row_is_one_line(project: Path, command: list[str]) -> None:
    output = run(project, *command)
    [row] = [line for line in output.splitlines() if LONG_NAME in line and line.startswith("│")]
    assert "pending-approval" in row and "--trust-project)" in row
    assert widest(output) > 200  # the old fixed width cut this row in two


@pytest.mark.parametrize("command", [["config"], ["status"], ["hosts"]], ids=" ".join)
def test_no_word_is_broken_however_narrow(project: Path, command: list[str]) -> None:
    for columns in (80, 40):
        output = run(project, *command, columns=columns)
        if command == ["hosts"]:
            assert_whole([str(Path.home() / ".cursor" / "mcp.json")], output)
        else:
            assert_whole([LONG_NAME, *PENDING_WORDS], output)
            # A broken word shows as a fragment of it ending a cell: "pending-appro │".
            assert not re.search(r"pending-appr?o?v?a?\s*│", output.replace("pending-approval", ""))


def test_counts_are_in_the_right_number(project: Path) -> None:
    assert re.search(r"^ *1 MCP tool *$", run(project, "tools", "--server", "files"), re.MULTILINE)
    banner = run(project, "shell", stdin="/exit\n").splitlines()[0]
    assert banner.startswith("1 tool from 1 server (")


def test_an_unknown_profile_of_a_config_without_profiles_says_so(tmp_path: Path) -> None:
    completed = subprocess.run(
        [*CLI, "--cwd", str(tmp_path), "tools", "--profile", "work"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert completed.returncode == 2
    assert completed.stderr.rstrip().endswith("(it defines none yet)")


@pytest.mark.parametrize(
    ("kind", "says"),
    [
        ("device", "not a regular file"),
        ("folder", "is a folder, not a file"),
        ("missing", "file not found"),
        ("empty", "the file is empty"),
    ],
)
def test_a_bad_config_option_says_what_is_wrong(tmp_path: Path, kind: str, says: str) -> None:
    path = {"device": Path("/dev/null"), "folder": tmp_path, "missing": tmp_path / "absent.json"}.get(kind)
    if path is None:
        path = tmp_path / "empty.json"
        path.touch()
    completed = subprocess.run(
        [*CLI, "--cwd", str(tmp_path), "--config", str(path), "config"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert completed.returncode == 2
    assert completed.stderr.startswith(f"mcpfleet: --config {path}: {says}")
