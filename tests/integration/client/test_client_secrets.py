"""Connect-time secret substitution: ``!command``, environment names, empty values, redaction."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.servers.fixtures import fake_server_config, first_text

from mcpfleet.client import connect_to_server
from mcpfleet.client.secrets import clear_secret_cache, is_secret_key, resolve_secret_values
from mcpfleet.errors import SecretResolutionError


@pytest.fixture(autouse=True)
def fresh_secret_cache() -> Iterator[None]:
    clear_secret_cache()
    yield
    clear_secret_cache()


def test_values_resolve_from_commands_env_names_and_literals(tmp_path: Path) -> None:
    values = {
        "FROM_COMMAND": "!echo '  s3cret  '",
        "FROM_ENV": "MY_TOKEN_VAR",
        "LITERAL": "plain value",
        "EMPTY_ENV": "EMPTY_VAR",
        "EMPTY": "",
    }
    resolved = resolve_secret_values("srv", values, env={"MY_TOKEN_VAR": "t0ken", "EMPTY_VAR": ""})
    assert resolved == {"FROM_COMMAND": "s3cret", "FROM_ENV": "t0ken", "LITERAL": "plain value"}


def test_command_results_are_cached_per_process(tmp_path: Path) -> None:
    counter = tmp_path / "runs"
    command = f"!echo run >> {counter}; echo value"
    for _ in range(3):
        assert resolve_secret_values("srv", {"KEY": command}) == {"KEY": "value"}
    assert counter.read_text().count("run") == 1


def test_failures_are_reported_without_the_value_and_backed_off(tmp_path: Path) -> None:
    counter = tmp_path / "runs"
    command = f"!echo run >> {counter}; echo leaked-secret; exit 3"
    with pytest.raises(SecretResolutionError) as caught:
        resolve_secret_values("srv", {"API_KEY": command})
    message = str(caught.value)
    assert message.startswith('MCP server "srv": the !command for API_KEY exited with status 3')
    assert "leaked-secret" not in message
    with pytest.raises(SecretResolutionError, match="not retried"):
        resolve_secret_values("srv", {"API_KEY": command})
    assert counter.read_text().count("run") == 1
    with pytest.raises(SecretResolutionError, match="exited with status 0 but printed nothing"):
        resolve_secret_values("srv", {"API_KEY": "!true"})


def test_secret_looking_keys_are_recognised() -> None:
    # Their values are remembered for masking even when they are written in the file itself.
    keys = ["Authorization", "GITHUB_TOKEN", "OPENAI_API_KEY", "CLIENT_SECRET", "db_password"]
    assert all(is_secret_key(key) for key in keys)
    assert not any(is_secret_key(key) for key in ["PATH", "X-Custom"])


@pytest.mark.anyio
async def test_stdio_env_gets_resolved_secrets_only_when_approved(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MCPFLEET_TEST_SOURCE", "value-from-env")
    config = fake_server_config(
        "sec", env={"FROM_CMD": "!echo from-command", "FROM_NAME": "MCPFLEET_TEST_SOURCE"}
    )
    async with connect_to_server("sec", config, cwd=tmp_path) as connection:
        assert first_text(await connection.call_tool("env", {"name": "FROM_CMD"})) == "from-command"
        assert first_text(await connection.call_tool("env", {"name": "FROM_NAME"})) == "value-from-env"
    async with connect_to_server("sec", config, cwd=tmp_path, resolve_secrets=False) as connection:
        assert first_text(await connection.call_tool("env", {"name": "FROM_CMD"})) == "!echo from-command"
        assert first_text(await connection.call_tool("env", {"name": "FROM_NAME"})) == "MCPFLEET_TEST_SOURCE"


@pytest.mark.anyio
async def test_a_failing_secret_fails_the_connect_before_spawning(tmp_path: Path) -> None:
    config = fake_server_config("badsec", env={"TOKEN": "!exit 7"})
    with pytest.raises(
        SecretResolutionError, match='MCP server "badsec": the !command for TOKEN exited with status 7'
    ):
        async with connect_to_server("badsec", config, cwd=tmp_path):
            pass
