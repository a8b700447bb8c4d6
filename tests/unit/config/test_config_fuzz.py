"""Every config reader on generated and mutated files: discovery never raises, every error
it reports names the file, and the user's own server still loads.

Documents are generated in the shape the reader expects (servers with plausible and
implausible fields), written as JSON, JSONC, TOML or YAML, then optionally mutated:
characters that matter to the parsers inserted, deleted or replaced, or a run of opening
brackets pasted in. The examples are the same on every run (see ``tests/conftest.py``).
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from mcpfleet.config import load_all_mcp_configs

USER_SERVER = "user-own-server"
USER_COMMAND = "user-own-server-binary"

# Where each format is read from, and the key its servers sit under.
TARGETS: dict[str, tuple[str, str]] = {
    "json": (".mcp.json", "mcpServers"),
    "jsonc": (".vscode/mcp.json", "servers"),
    "toml": (".codex/config.toml", "mcp_servers"),
    "yaml": (".continue/mcpServers/fuzz.yaml", "mcpServers"),
}
PARSER_CHARACTERS = "[]{}()\"':,#&*!-=.<>|?@%`$\\/ \t\n"

# Numbers where conversions break: infinities, NaN, huge and negative values.
awkward_numbers = st.sampled_from(
    [math.inf, -math.inf, math.nan, 10**400, -1, 1e308, 0.5, "inf", "nan", "1e999", "-0"]
)
scalars = (
    awkward_numbers
    | st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats()
    | st.text(max_size=12)
    | st.sampled_from(
        ["stdio", "http", "sse", "${HOME}", "${env:X}", "!echo x", "$X", "{env:X}", "https://h/x"]
    )
)
values = st.recursive(
    scalars,
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=6), children, max_size=3)
    ),
    max_leaves=10,
)
text_lists = st.lists(st.text(max_size=10), max_size=3)
ENTRY_FIELDS: dict[str, st.SearchStrategy[Any]] = {
    "name": st.sampled_from(["github", "files"]) | st.text(max_size=10) | values,
    "type": st.sampled_from(["stdio", "http", "sse", "local", "remote", "websocket"]) | values,
    "command": st.sampled_from(["srv", "/usr/bin/srv", "npx"]) | st.text(max_size=10) | values,
    "args": text_lists | values,
    "env": st.dictionaries(st.text(max_size=6), st.text(max_size=10), max_size=3) | values,
    "cwd": st.text(max_size=10) | values,
    "url": st.sampled_from(["https://mcp.example/x", "http://127.0.0.1:1/"]) | values,
    "headers": st.dictionaries(st.text(max_size=6), st.text(max_size=10), max_size=2) | values,
    "enabled": values,
    "disabled": values,
    "timeout": awkward_numbers | values,
    "startup_timeout_sec": awkward_numbers | values,
    "toolTimeout": awkward_numbers | values,
    "includeTools": text_lists | values,
    "excludeTools": text_lists | values,
    "env_vars": text_lists | values,
    "bearer_token_env_var": st.text(max_size=6) | values,
    "oauth": values,
}
"""Every field some reader looks at, with plausible and implausible values."""
entries = st.fixed_dictionaries({}, optional=ENTRY_FIELDS)


@st.composite
def documents(draw: st.DrawFn, servers_key: str, listed: bool) -> Any:
    """A document in the shape its reader expects, or (sometimes) any value at all."""
    if draw(st.integers(0, 9)) == 0:
        return draw(values)
    names = st.sampled_from(["github", "files", "a.b", "x" * 101]) | st.text(max_size=8)
    if listed:
        servers: Any = draw(st.lists(entries, max_size=3))
    else:
        servers = draw(st.dictionaries(names, entries | values, max_size=3))
    return {servers_key: servers, **draw(st.dictionaries(st.text(max_size=6), values, max_size=2))}


def to_toml(document: Any) -> str:
    """A small TOML writer: every table inline, keys quoted, ``None`` left out."""

    def value(item: Any) -> str:
        if isinstance(item, bool):
            return "true" if item else "false"
        if isinstance(item, float) and not math.isfinite(item):
            return "nan" if math.isnan(item) else ("inf" if item > 0 else "-inf")
        if isinstance(item, int | float | str):
            return json.dumps(item, ensure_ascii=False)
        if isinstance(item, list):
            return "[" + ", ".join(value(element) for element in item if element is not None) + "]"
        pairs = [
            f"{json.dumps(str(key), ensure_ascii=False)} = {value(v)}"
            for key, v in item.items()
            if v is not None
        ]
        return "{" + ", ".join(pairs) + "}"

    if not isinstance(document, dict):
        return f"value = {value(document)}\n" if document is not None else ""
    return "".join(
        f"{json.dumps(str(key), ensure_ascii=False)} = {value(item)}\n"
        for key, item in document.items()
        if item is not None
    )


def serialise(document: Any, form: str) -> str:
    if form == "toml":
        return to_toml(document)
    if form == "yaml":
        return yaml.safe_dump(document, allow_unicode=True)
    text = json.dumps(document, indent=1, ensure_ascii=False)
    if form == "jsonc":
        # Comments and a trailing comma, as editors write them.
        text = "// generated\n" + text.replace("\n", " /* c */\n", 1)
        if text.endswith("}"):
            text = text[:-1] + ",}"
    return text


mutations = st.lists(
    st.tuples(
        st.integers(min_value=0, max_value=2**20),
        st.sampled_from(["insert", "delete", "replace", "nest"]),
        st.text(alphabet=PARSER_CHARACTERS, min_size=1, max_size=4) | st.text(min_size=1, max_size=3),
        st.integers(min_value=1, max_value=5000),
    ),
    max_size=4,
)


def mutate(text: str, edits: list[tuple[int, str, str, int]]) -> str:
    for position, kind, fragment, count in edits:
        at = position % (len(text) + 1)
        if kind == "insert":
            text = text[:at] + fragment + text[at:]
        elif kind == "delete":
            text = text[:at] + text[at + len(fragment) :]
        elif kind == "replace":
            text = text[:at] + fragment + text[at + len(fragment) :]
        else:
            text = text[:at] + fragment[0] * count + text[at:]
    return text


def assert_discovery_survives(project: Path, relative: str, content: str | bytes) -> None:
    for other, _ in TARGETS.values():  # the project folder is shared by a test's examples
        (project / other).unlink(missing_ok=True)
    path = project / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(content if isinstance(content, bytes) else content.encode())
    result = load_all_mcp_configs(project, trust_project=True)
    for error in result.errors:
        assert error.path == str(path), error
        assert str(path) in error.error, error
    assert result.configs[USER_SERVER].command == USER_COMMAND


def write_user_server(home: Path) -> None:
    (home / ".claude.json").write_text(json.dumps({"mcpServers": {USER_SERVER: {"command": USER_COMMAND}}}))


# Four readers × up to 100 examples of a few milliseconds each: a few seconds per test.
@settings(max_examples=80)
@given(data=st.data(), form=st.sampled_from(sorted(TARGETS)), edits=mutations)
def test_generated_and_mutated_files_never_break_discovery(
    project: Path, home: Path, data: st.DataObject, form: str, edits: list[tuple[int, str, str, int]]
) -> None:
    write_user_server(home)
    relative, servers_key = TARGETS[form]
    document = data.draw(documents(servers_key, listed=form == "yaml"))
    assert_discovery_survives(project, relative, mutate(serialise(document, form), edits))


@settings(max_examples=60)
@given(
    form=st.sampled_from(sorted(TARGETS)), content=st.text(alphabet=PARSER_CHARACTERS + "ab1", max_size=300)
)
def test_arbitrary_text_never_breaks_discovery(project: Path, home: Path, form: str, content: str) -> None:
    write_user_server(home)
    assert_discovery_survives(project, TARGETS[form][0], content)


@settings(max_examples=40)
@given(form=st.sampled_from(sorted(TARGETS)), content=st.binary(max_size=200))
def test_arbitrary_bytes_never_break_discovery(project: Path, home: Path, form: str, content: bytes) -> None:
    write_user_server(home)
    assert_discovery_survives(project, TARGETS[form][0], content)


@settings(max_examples=100)
@given(
    form=st.sampled_from(sorted(TARGETS)),
    field=st.sampled_from(sorted(ENTRY_FIELDS)),
    value=awkward_numbers | values,
)
def test_any_value_in_any_field_never_breaks_discovery(
    project: Path, home: Path, form: str, field: str, value: Any
) -> None:
    write_user_server(home)
    relative, servers_key = TARGETS[form]
    entry = {"name": "probe", "command": "srv", field: value}
    servers = [entry] if form == "yaml" else {"probe": entry}
    assert_discovery_survives(project, relative, serialise({servers_key: servers}, form))
