"""Secrets remembered by substitution and connect-time resolution are masked in text and
log records; values that are not secrets (paths, short flags) are left readable."""

from __future__ import annotations

import json
import logging
import uuid
from pathlib import Path
from urllib.parse import quote, quote_plus

import pytest

from mcpfleet.client.secrets import resolve_secret_values
from mcpfleet.config import load_all_mcp_configs
from mcpfleet.redaction import RedactingLogFilter, redact_text, remember_secret


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
