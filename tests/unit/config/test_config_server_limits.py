"""Per-server limits: ``maxMessageBytes`` and ``toolTimeout``, their defaults, and fingerprints
that stay what they were for entries that do not set the newer fields."""

from __future__ import annotations

from pathlib import Path

from tests.unit.config.config_helpers import WriteFile, discover, entry

from mcpfleet.config.model import DEFAULT_MAX_MESSAGE_BYTES, ServerConfig


def test_max_message_bytes_is_read_and_defaults_to_64_mib(
    project: Path, home: Path, write: WriteFile
) -> None:
    write(
        home / ".claude.json",
        {"mcpServers": {"capped": {"command": "x", "maxMessageBytes": 1024}, "plain": {"command": "y"}}},
    )
    result = discover(project)
    assert result.configs["capped"].effective_max_message_bytes == 1024
    assert result.configs["plain"].max_message_bytes is None
    assert (
        result.configs["plain"].effective_max_message_bytes == DEFAULT_MAX_MESSAGE_BYTES == 64 * 1024 * 1024
    )


def test_an_unusable_max_message_bytes_makes_the_entry_invalid(
    project: Path, home: Path, write: WriteFile
) -> None:
    write(home / ".claude.json", {"mcpServers": {"bad": {"command": "x", "maxMessageBytes": "lots"}}})
    bad = entry(discover(project), "bad")
    assert bad.state == "invalid"
    assert '"maxMessageBytes" must be a whole number of bytes >= 1' in bad.reason


def test_entries_without_the_newer_fields_keep_their_fingerprint() -> None:
    config = ServerConfig(name="s", transport="stdio", command="x")
    assert "max_message_bytes" not in config.to_dict()
    capped = ServerConfig(name="s", transport="stdio", command="x", max_message_bytes=10)
    assert capped.to_dict()["max_message_bytes"] == 10
    assert capped.connection_identity() == config.connection_identity()
