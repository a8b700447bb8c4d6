"""Per-file limits: nesting depth in every format, YAML aliases, the size of a file being
edited. A file over a limit is one error naming it; every other source still loads and
nothing raises out of discovery (a ``RecursionError`` would lose the user's own servers)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from tests.unit.config.config_helpers import WriteFile, discover

from mcpfleet import paths
from mcpfleet.config.readers import MAX_CONFIG_BYTES, MAX_NESTING_DEPTH, MAX_YAML_VALUES
from mcpfleet.config.writer import add_server
from mcpfleet.errors import ConfigWriteError

DEEP = 100_000
"""Far past Python's recursion limit: a recursive parser handed this text raises ``RecursionError``."""


@pytest.fixture
def own_server(home: Path, write: WriteFile) -> None:
    write(home / ".claude.json", {"mcpServers": {"mine": {"command": "my-server"}}})


def only_error(project: Path) -> str:
    result = discover(project, trust_project=True)
    assert result.configs["mine"].command == "my-server"  # the user's own server survives
    assert len(result.errors) == 1, result.errors
    error = result.errors[0]
    assert error.error.startswith(f"{error.path}: ")
    return f"{error.path} | {error.error}"


@pytest.mark.usefixtures("own_server")
@pytest.mark.parametrize(
    ("relative", "content"),
    [
        (".mcp.json", "[" * DEEP + "]" * DEEP),
        (".mcp.json", '{"mcpServers": {"a": {"command": "x", "args": ' + "[" * DEEP + "]" * DEEP + "}}}"),
        (".vscode/mcp.json", "// jsonc\n" + "{" + '"a":{' * DEEP + "1" + "}" * DEEP + ",}"),
        (".codex/config.toml", "a = " + "[" * DEEP + "]" * DEEP + "\n"),
        (".codex/config.toml", "a = " + "{b = " * DEEP + "1" + "}" * DEEP + "\n"),
        (".codex/config.toml", "a" + ".a" * DEEP + " = 1\n"),
        (".continue/mcpServers/deep.yaml", "mcpServers: " + "[" * DEEP + "]" * DEEP + "\n"),
        (".continue/mcpServers/deep.yaml", "mcpServers:\n" + "- " * DEEP + "x\n"),
    ],
    ids=[
        "json",
        "json-in-entry",
        "jsonc",
        "toml-array",
        "toml-inline-table",
        "toml-dotted-key",
        "yaml",
        "yaml-block",
    ],
)
def test_deep_nesting_is_one_error_naming_the_file(
    project: Path, write: WriteFile, relative: str, content: str
) -> None:
    path = write(project / relative, content)
    text = only_error(project)
    assert str(path) in text and f"nesting deeper than {MAX_NESTING_DEPTH} levels" in text


@pytest.mark.usefixtures("own_server")
def test_nesting_at_the_limit_still_parses(project: Path, write: WriteFile) -> None:
    # mcpServers → s → oauth → (MAX - 4 nested lists): exactly MAX levels from the top object.
    inner = "[" * (MAX_NESTING_DEPTH - 4) + "]" * (MAX_NESTING_DEPTH - 4)
    write(project / ".mcp.json", '{"mcpServers": {"s": {"url": "https://s", "oauth": {"x": ' + inner + "}}}}")
    result = discover(project, trust_project=True)
    assert result.errors == [] and "s" in result.configs


BILLION_LAUGHS = (
    "a: &a [lol,lol,lol,lol,lol,lol,lol,lol,lol]\n"
    + "".join(
        f"{name}: &{name} [{','.join(['*' + previous] * 9)}]\n"
        for previous, name in zip("abcdefgh", "bcdefghi", strict=True)
    )
    + 'mcpServers: [{name: bomb, url: "https://x", oauth: {z: *i}}]\n'
)


@pytest.mark.usefixtures("own_server")
def test_yaml_alias_bomb_is_rejected_fast(project: Path, write: WriteFile) -> None:
    assert len(BILLION_LAUGHS) < 400  # 9**9 strings once expanded
    path = write(project / ".continue" / "mcpServers" / "bomb.yaml", BILLION_LAUGHS)
    started = time.monotonic()
    text = only_error(project)
    # Generous: the bound is about not expanding 387 million values, not about speed.
    assert time.monotonic() - started < 10
    assert str(path) in text and f"more than {MAX_YAML_VALUES} values" in text


@pytest.mark.usefixtures("own_server")
def test_recursive_yaml_alias_is_rejected(project: Path, write: WriteFile) -> None:
    path = write(
        project / ".continue" / "mcpServers" / "loop.yaml",
        'mcpServers: [{name: loop, url: "https://x", oauth: &o {self: *o}}]\n',
    )
    text = only_error(project)
    assert str(path) in text and "refers to itself" in text


def test_ordinary_yaml_anchors_still_work(project: Path, write: WriteFile) -> None:
    write(
        project / ".continue" / "mcpServers" / "anchors.yaml",
        "common: &args [--verbose, --port, '3000']\n"
        "mcpServers:\n"
        "  - {name: one, command: srv, args: *args}\n"
        "  - {name: two, command: other, args: *args}\n",
    )
    result = discover(project, trust_project=True)
    assert result.errors == []
    assert result.configs["one"].args == result.configs["two"].args == ("--verbose", "--port", "3000")


def test_an_oversized_own_file_is_not_read_for_an_edit(write: WriteFile) -> None:
    path = write(paths.user_config_file(), '{"mcpServers": {}, "pad": "' + "x" * MAX_CONFIG_BYTES + '"}')
    with pytest.raises(ConfigWriteError, match="too large") as caught:
        add_server(path, "a", {"command": "a"})
    assert str(path) in str(caught.value)


def test_a_deep_own_file_is_an_error_not_a_crash(write: WriteFile) -> None:
    path = write(paths.user_config_file(), "[" * DEEP + "]" * DEEP)
    with pytest.raises(ConfigWriteError, match="nesting deeper") as caught:
        add_server(path, "a", {"command": "a"})
    assert str(path) in str(caught.value)
