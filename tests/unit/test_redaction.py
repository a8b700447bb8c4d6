"""Secrets remembered by substitution and connect-time resolution are masked in text and
log records; values that are not secrets (paths, short flags) are left readable."""

from __future__ import annotations

import json
import logging
import shlex
import uuid
from pathlib import Path
from urllib.parse import quote, quote_plus

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mcpfleet.client.secrets import resolve_secret_values
from mcpfleet.config import load_all_mcp_configs
from mcpfleet.redaction import (
    RedactingLogFilter,
    redact_args,
    redact_command_line,
    redact_text,
    redact_url,
    remember_credentials,
    remember_secret,
)


def unique(prefix: str) -> str:
    """A value no other test remembers (the set of secrets is per process)."""
    return f"{prefix}-{uuid.uuid4().hex[:12]}"


def test_a_secret_is_masked_raw_and_url_encoded() -> None:
    secret = unique("p@ss word/+")
    remember_secret(secret)
    text = f"raw {secret} in a path {quote(secret)} in a query {quote_plus(secret)}"
    assert redact_text(text) == "raw *** in a path *** in a query ***"


def test_short_values_are_not_masked() -> None:
    remember_secret("on")
    assert redact_text("connection refused") == "connection refused"


def test_log_records_are_masked_in_message_and_traceback() -> None:
    secret = unique("token")
    remember_secret(secret)
    try:
        raise ValueError(f"bad {secret}")
    except ValueError as error:
        record = logging.LogRecord("httpx2", logging.INFO, __file__, 1, "GET %s", (f"/x?k={secret}",), None)
        record.exc_info = (type(error), error, error.__traceback__)
    assert RedactingLogFilter().filter(record)
    assert record.getMessage() == "GET /x?k=***"
    assert record.exc_text is not None and secret not in record.exc_text and "bad ***" in record.exc_text


def test_discovery_remembers_variables_but_not_paths(
    tmp_path: Path, isolated_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    token = unique("tok")
    monkeypatch.setenv("MY_TOKEN", token)
    project = tmp_path / "some-project"
    (project / ".cursor").mkdir(parents=True)
    (project / ".cursor" / "mcp.json").write_text(
        json.dumps(
            {
                "mcpServers": {
                    "s": {
                        "command": "srv",
                        "args": ["--token=${env:MY_TOKEN}", "${workspaceFolder}", "${userHome}"],
                        "env": {
                            "A": "${env:MY_TOKEN}",
                            "B": "!echo literal",
                            "C": "MY_TOKEN",
                            "D": "${env:HOME}",
                        },
                    }
                }
            }
        )
    )
    config = load_all_mcp_configs(project, trust_project=True).configs["s"]
    assert redact_text(" ".join(config.args)) == f"--token=*** {project} {isolated_home}"
    assert redact_text(config.env["D"]) == str(isolated_home)
    # Substituted values are final text; values written in the file keep their connect-time meaning.
    assert config.literal_env_keys == {"A", "D"}
    resolved = resolve_secret_values("s", {"A": "MY_TOKEN", "C": "MY_TOKEN"}, literal_keys={"A"})
    assert resolved == {"A": "MY_TOKEN", "C": token}


def test_a_malformed_log_record_passes_through() -> None:
    remember_secret(unique("token"))
    record = logging.LogRecord("app", logging.INFO, __file__, 1, "two %s %s", ("one",), None)
    assert RedactingLogFilter().filter(record)
    assert record.args == ("one",)  # left for the handler to report


# -- literal credentials: what looks like one is masked, everything else stays exact ------------------

KEY_LIKE = "Qx7Lm2Vb9Tz4Rk8Wn3Hp6Jd"


@pytest.mark.parametrize(
    ("args", "masked"),
    [
        (["--token", "abc123def"], ["--token", "***"]),
        (["--api-key", "abc123def", "--port", "8080"], ["--api-key", "***", "--port", "8080"]),
        (["-password", "s3cret"], ["-password", "***"]),
        (["--password=hunter22"], ["--password=***"]),
        (["--client-secret=xyz"], ["--client-secret=***"]),
        (
            ["key=v4lue", "GITHUB_PERSONAL_ACCESS_TOKEN=abcd", "apiKey=zz"],
            ["key=***", "GITHUB_PERSONAL_ACCESS_TOKEN=***", "apiKey=***"],
        ),
        (["-e", "PGPASSWORD=pw1234"], ["-e", "PGPASSWORD=***"]),
        (["--header", "Authorization: Bearer abcdefgh"], ["--header", "Authorization: Bearer ***"]),
        (["--header", "X-API-Key:abcdefgh"], ["--header", "X-API-Key:***"]),
        (["--header=Authorization: Bearer abcdefgh"], ["--header=Authorization: Bearer ***"]),
        ([KEY_LIKE], ["***"]),
        (["sk-proj-abcdefghijklmnop1234"], ["***"]),
        (["ghp_abcdefghijklmnopqrstuvwxyz0123456789"], ["***"]),
        (["xoxb-1234567890-abcdefghij"], ["***"]),
        (["AKIAIOSFODNN7EXAMPLE"], ["***"]),
        (["0123456789abcdef0123456789abcdef"], ["***"]),
        (["--token", "--verbose"], ["--token", "--verbose"]),  # a switch, then the next flag
        (
            ["https://u:pa55@host.example/a/b?api_key=k&x=1#top"],
            ["https://u:***@host.example/a/b?api_key=***&x=***#top"],
        ),
        (["postgresql://app:pw1234@localhost:5432/db"], ["postgresql://app:***@localhost:5432/db"]),
        (
            ["--url=https://host.example/mcp?token=tt&format=json"],
            ["--url=https://host.example/mcp?token=***&format=***"],
        ),
    ],
)
def test_credential_arguments_are_masked(args: list[str], masked: list[str]) -> None:
    assert redact_args(args) == masked


def test_a_command_line_shows_masks_unquoted_and_everything_else_shell_quoted() -> None:
    line = redact_command_line(
        "npx", ["-y", "@scope/server", "--token", "abc123def", "my folder", "key=abcd"]
    )
    assert line == "npx -y @scope/server --token *** 'my folder' key=***"


def test_credential_headers_are_remembered_and_the_others_kept() -> None:
    headers = {
        "Authorization": "Bearer abc.def.ghi",
        "Proxy-Authorization": "Basic dXNlcjpwYXNz",
        "X-API-Key": "k-123456",
        "x-goog-api-key": "k-654321",
        "Cookie": "session=abcdef",
        "Accept": "application/json, text/event-stream",
        "X-Tenant": "acme",
        "X-Trace": f"id {KEY_LIKE}",
    }
    remember_credentials(headers=headers)
    shown = redact_text(" | ".join(f"{name}={value}" for name, value in headers.items()))
    assert shown == (
        "Authorization=*** | Proxy-Authorization=*** | X-API-Key=*** | x-goog-api-key=*** | Cookie=*** | "
        "Accept=application/json, text/event-stream | X-Tenant=acme | X-Trace=id ***"
    )
    # The token after its scheme word is a secret on its own too (a server may echo it alone).
    assert redact_text("got abc.def.ghi and dXNlcjpwYXNz") == "got *** and ***"


def test_a_url_keeps_its_scheme_host_port_and_path_exact() -> None:
    assert redact_url("https://mcp.example.com:8443/v1/mcp") == "https://mcp.example.com:8443/v1/mcp"
    assert (
        redact_url("http://127.0.0.1:9/mcp?api_key=abc&x=1&flag")
        == "http://127.0.0.1:9/mcp?api_key=***&x=***&flag"
    )
    assert redact_url(f"https://{KEY_LIKE}@github.com/o/r.git") == "https://***@github.com/o/r.git"
    assert redact_url("https://alice@github.com/o/r.git") == "https://alice@github.com/o/r.git"


def test_free_text_masks_urls_schemes_and_named_values_but_not_words() -> None:
    text = (
        'cannot reach http://h:1/mcp?key=abcd&x=1; sent "Authorization: Bearer abcdefgh", token=abc '
        '{"api_key": "abcd"} X-API-Key: abcdefgh'
    )
    assert redact_text(text) == (
        'cannot reach http://h:1/mcp?key=***&x=***; sent "Authorization: Bearer ***", token=*** '
        '{"api_key": "***"} X-API-Key: ***'
    )
    words = "every request needs a bearer token; invalid key: foo; use --auth-token-file FILE; see https://x.io/docs."
    assert redact_text(words) == words


def test_literal_credentials_are_remembered_where_a_server_echoes_them() -> None:
    token, query_value = unique("literal"), unique("qv")
    remember_credentials(
        args=["--token", token, "--port", "8080"],
        url=f"https://h/mcp?api_key={query_value}&x=1",
        headers={"Authorization": "Bearer bearer-lit-1", "Accept": "application/json"},
    )
    echo = f"error: unrecognized arguments --token {token}; key {query_value}; got bearer-lit-1; port 8080"
    assert redact_text(echo) == "error: unrecognized arguments --token ***; key ***; got ***; port 8080"
    # Masked in a URL because every query value is, but no secret anywhere else.
    assert redact_text("x 1 application/json") == "x 1 application/json"


def test_the_log_filter_masks_a_url_query_with_no_secret_remembered() -> None:
    record = logging.LogRecord(
        "httpx2", logging.INFO, __file__, 1, "HTTP Request: POST %s", ("http://h/mcp?k=v1",), None
    )
    assert RedactingLogFilter().filter(record)
    assert record.getMessage() == "HTTP Request: POST http://h/mcp?k=***"


_WORD = st.from_regex(r"[a-z][a-z0-9]{0,9}(-[a-z0-9]{1,8}){0,2}", fullmatch=True)
_SEGMENT = st.from_regex(r"[A-Za-z0-9][A-Za-z0-9 _.-]{0,15}", fullmatch=True)
_PATH = st.builds(lambda parts: "/" + "/".join(parts), st.lists(_SEGMENT, min_size=1, max_size=6))
_PACKAGE = st.one_of(
    st.builds("@{}/{}".format, _WORD, _WORD),
    st.builds("{}=={}.{}.{}".format, _WORD, *[st.integers(0, 99)] * 3),
    st.builds("{}@{}".format, _WORD, st.sampled_from(["latest", "1.2.3", "next"])),
)
_FLAG = st.sampled_from(
    [
        "-y",
        "--port",
        "--host",
        "--root",
        "--db-path",
        "--max-tokens",
        "--token-file",
        "--key-id",
        "--log-level",
        "--name",
        "--read-only",
        "--no-password",
        "--transport",
        "--api-key-env",
    ]
)
_SHORT_VALUE = st.one_of(
    _WORD, st.integers(0, 10**6).map(str), st.sampled_from(["stdio", "true", "INFO", "0.0.0.0"])
)
_ORDINARY = st.one_of(
    _WORD,
    _PATH,
    _PACKAGE,
    _FLAG,
    _SHORT_VALUE,
    st.builds("{}={}".format, _FLAG, _SHORT_VALUE),
    st.builds("https://{}.example.com{}".format, _WORD, _PATH),
    st.uuids().map(str),
    st.sampled_from(["MyVeryLongClassName2023Final", "Test_Case_1_Run_2_Final", "${workspaceFolder}"]),
)


@given(st.lists(_ORDINARY, max_size=12))
def test_ordinary_arguments_are_left_exact(args: list[str]) -> None:
    # No flag of _FLAG names a credential, so a value after one is no credential either.
    assert redact_args(args) == args
    assert redact_command_line("server", args) == shlex.join(["server", *args])


@given(_PATH)
def test_paths_in_free_text_are_left_exact(path: str) -> None:
    assert (
        redact_text(f"working directory {path} does not exist") == f"working directory {path} does not exist"
    )


@pytest.mark.parametrize(
    "text",
    ["a." * 100_000, "a-" * 100_000, "x://" + "a:" * 100_000, "token " * 30_000 + "=", "sk-x " * 40_000],
)
def test_hostile_text_is_read_once_through(text: str) -> None:
    # Each pattern starts only where a word does and bounds its name: these took minutes
    # (quadratic backtracking) before, and come back unchanged now.
    assert redact_text(text) == text
