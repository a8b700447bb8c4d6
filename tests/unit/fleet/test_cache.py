"""The persistent tool cache on real SQLite files in tmp_path."""

from __future__ import annotations

import json
import logging
import sqlite3
import stat
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from mcpfleet.client.definitions import LEGACY_ERA, ServerInfo, ToolDefinition
from mcpfleet.errors import CacheUnavailableError
from mcpfleet.fleet import cache as cache_module
from mcpfleet.fleet.cache import FORMAT_VERSION, CachedServer, MCPToolCache

FINGERPRINT = "a" * 64
OTHER_FINGERPRINT = "b" * 64
TOOLS = (
    ToolDefinition(
        name="read_text_file",
        description="Read a file",
        input_schema={"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]},
        output_schema={"type": "object"},
        title="Read",
        annotations={"readOnlyHint": True},
    ),
    ToolDefinition(name="list_directory"),
)
SERVER_INFO = ServerInfo(name="files", version="1.2.3", protocol_version="2025-06-18", instructions="Be nice")


class FakeClock:
    def __init__(self, now: float = 1_700_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def cache_path(tmp_path: Path) -> Path:
    return tmp_path / "cache" / "tools.sqlite3"


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def cache(cache_path: Path, clock: FakeClock) -> Iterator[MCPToolCache]:
    opened = MCPToolCache(cache_path, clock=clock)
    yield opened
    opened.close()


def write_raw_row(path: Path, **overrides: object) -> None:
    """Replace the row of server ``files`` behind the cache's back."""
    row: dict[str, object] = {
        "server_name": "files",
        "fingerprint": FINGERPRINT,
        "format_version": FORMAT_VERSION,
        "payload": json.dumps({"tools": [{"name": "t"}], "server_info": None}),
        "protocol_version": None,
        "listed_at": 1_700_000_000.0,
        "written_at": 1_700_000_000.0,
    }
    row.update(overrides)
    with sqlite3.connect(path) as connection:
        connection.execute(
            f"INSERT OR REPLACE INTO server_tools ({', '.join(row)}) VALUES ({', '.join('?' * len(row))})",
            tuple(row.values()),
        )
    connection.close()


def test_round_trip_keeps_every_field_and_survives_reopening(
    cache: MCPToolCache, cache_path: Path, clock: FakeClock
) -> None:
    assert cache.get("files", FINGERPRINT) is None
    assert cache.put("files", FINGERPRINT, TOOLS, server_info=SERVER_INFO, listed_at=clock.now - 1) is True

    expected = CachedServer(
        tools=TOOLS,
        server_info=SERVER_INFO,
        protocol_version="2025-06-18",
        written_at=clock.now,
        listed_at=clock.now - 1,
    )
    assert cache.get("files", FINGERPRINT) == expected
    with MCPToolCache(cache_path, clock=clock) as reopened:
        assert reopened.get("files", FINGERPRINT) == expected
        assert reopened.get("other", FINGERPRINT) is None


def test_protocol_version_is_remembered_for_reconnects(cache: MCPToolCache) -> None:
    assert cache.get("files", FINGERPRINT) is None
    cache.put("files", FINGERPRINT, TOOLS, protocol_version="2024-11-05")
    remembered = cache.get("files", FINGERPRINT)
    assert remembered is not None and remembered.protocol_version == "2024-11-05"
    assert cache.get("files", OTHER_FINGERPRINT) is None

    cache.put("plain", FINGERPRINT, TOOLS)
    cached = cache.get("plain", FINGERPRINT)
    assert cached is not None
    assert cached.protocol_version is None
    assert cached.server_info is None


def test_the_era_verdict_is_remembered_with_the_catalog(cache: MCPToolCache) -> None:
    discover = {"supportedVersions": ["2026-07-28"], "capabilities": {"tools": {}}, "ttlMs": 0}
    cache.put("modern", FINGERPRINT, TOOLS, era=discover)
    cache.put("legacy", FINGERPRINT, TOOLS, era=LEGACY_ERA)
    cache.put("unknown", FINGERPRINT, TOOLS)
    modern, legacy, unknown = (cache.get(name, FINGERPRINT) for name in ("modern", "legacy", "unknown"))
    assert modern is not None and modern.era == discover
    assert legacy is not None and legacy.era == LEGACY_ERA
    assert unknown is not None and unknown.era is None


def test_a_row_written_before_era_verdicts_reads_as_probe_again(
    cache: MCPToolCache, cache_path: Path
) -> None:
    write_raw_row(cache_path, payload=json.dumps({"tools": [{"name": "t"}], "server_info": None}))
    cached = cache.get("files", FINGERPRINT)
    assert cached is not None and cached.era is None and cached.tools == (ToolDefinition(name="t"),)


def test_entry_expires_after_the_ttl(cache_path: Path, clock: FakeClock) -> None:
    with MCPToolCache(cache_path, ttl_seconds=100, clock=clock) as cache:
        cache.put("files", FINGERPRINT, TOOLS)
        clock.now += 99
        assert cache.get("files", FINGERPRINT) is not None
        clock.now += 1
        assert cache.get("files", FINGERPRINT) is None

        # The next write prunes expired rows of every server, not only its own.
        cache.put("other", FINGERPRINT, TOOLS)
    with sqlite3.connect(cache_path) as connection:
        names = [row[0] for row in connection.execute("SELECT server_name FROM server_tools")]
    connection.close()
    assert names == ["other"]


def test_default_ttl_is_thirty_days(cache: MCPToolCache, clock: FakeClock) -> None:
    cache.put("files", FINGERPRINT, TOOLS)
    clock.now += 29 * 24 * 3600
    assert cache.get("files", FINGERPRINT) is not None
    clock.now += 24 * 3600
    assert cache.get("files", FINGERPRINT) is None


def test_empty_tool_list_is_never_cached_and_leaves_the_row_alone(
    cache: MCPToolCache, clock: FakeClock
) -> None:
    assert cache.put("files", FINGERPRINT, []) is False
    assert cache.get("files", FINGERPRINT) is None

    cache.put("files", FINGERPRINT, TOOLS, listed_at=clock.now)
    assert cache.put("files", FINGERPRINT, (), listed_at=clock.now + 10) is False
    cached = cache.get("files", FINGERPRINT)
    assert cached is not None
    assert cached.tools == TOOLS


def test_stored_empty_tool_list_reads_as_a_miss(cache: MCPToolCache, cache_path: Path) -> None:
    write_raw_row(cache_path, payload=json.dumps({"tools": [], "server_info": None}))
    assert cache.get("files", FINGERPRINT) is None


def test_other_fingerprint_is_a_miss_and_a_new_fingerprint_replaces_the_row(
    cache: MCPToolCache, cache_path: Path, clock: FakeClock, caplog: pytest.LogCaptureFixture
) -> None:
    cache.put("files", FINGERPRINT, TOOLS, listed_at=clock.now)
    with caplog.at_level(logging.WARNING, logger="mcpfleet.fleet.cache"):
        assert cache.get("files", OTHER_FINGERPRINT) is None
    assert "'files'" in caplog.text
    assert "another config" in caplog.text

    new_tools = (ToolDefinition(name="only_tool"),)
    assert cache.put("files", OTHER_FINGERPRINT, new_tools, listed_at=clock.now + 1) is True
    cached = cache.get("files", OTHER_FINGERPRINT)
    assert cached is not None
    assert cached.tools == new_tools
    assert cache.get("files", FINGERPRINT) is None
    with sqlite3.connect(cache_path) as connection:
        assert connection.execute("SELECT count(*) FROM server_tools").fetchone() == (1,)
    connection.close()


@pytest.mark.parametrize(
    "overrides",
    [
        {"payload": "not json {"},
        {"payload": json.dumps({"tools": [{"description": "no name"}]})},
        {"payload": json.dumps({"tools": "not a list of tools"})},
        {"payload": json.dumps({"server_info": None})},
        {"payload": json.dumps([1, 2, 3])},
        {"payload": json.dumps({"tools": [{"name": "t"}], "server_info": {"name": "x"}})},
        {"protocol_version": b"\x00binary"},
        {"payload": json.dumps({"tools": [{"name": "t"}], "server_info": None, "era": 42})},
        {"listed_at": "yesterday"},
    ],
    ids=[
        "not-json",
        "tool-without-name",
        "tools-not-a-list",
        "no-tools",
        "not-an-object",
        "bad-info",
        "bad-era",
        "bad-era-verdict",
        "bad-time",
    ],
)
def test_row_that_fails_to_parse_is_a_miss_with_a_warning(
    cache: MCPToolCache, cache_path: Path, caplog: pytest.LogCaptureFixture, overrides: dict[str, object]
) -> None:
    write_raw_row(cache_path, **overrides)
    with caplog.at_level(logging.WARNING, logger="mcpfleet.fleet.cache"):
        assert cache.get("files", FINGERPRINT) is None
    assert "failed to parse" in caplog.text
    assert "'files'" in caplog.text

    # A fresh answer repairs the entry.
    assert cache.put("files", FINGERPRINT, TOOLS, listed_at=2_000_000_000.0) is True
    assert cache.get("files", FINGERPRINT) is not None


def test_other_format_version_is_a_miss_with_a_warning(
    cache: MCPToolCache, cache_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    write_raw_row(cache_path, format_version=FORMAT_VERSION + 1)
    with caplog.at_level(logging.WARNING, logger="mcpfleet.fleet.cache"):
        assert cache.get("files", FINGERPRINT) is None
    assert "format version" in caplog.text


def test_older_answer_never_overwrites_a_newer_one(cache: MCPToolCache) -> None:
    newer = (ToolDefinition(name="newer"),)
    older = (ToolDefinition(name="older"),)
    assert cache.put("files", FINGERPRINT, newer, listed_at=200.0, protocol_version="2025-06-18") is True
    assert cache.put("files", FINGERPRINT, older, listed_at=100.0, protocol_version="2024-11-05") is False
    # Not even for another config: the row holds the freshest answer any process saw.
    assert cache.put("files", OTHER_FINGERPRINT, older, listed_at=150.0) is False
    cached = cache.get("files", FINGERPRINT)
    assert cached is not None
    assert (cached.tools, cached.listed_at, cached.protocol_version) == (newer, 200.0, "2025-06-18")

    newest = (ToolDefinition(name="newest"),)
    assert cache.put("files", FINGERPRINT, newest, listed_at=300.0) is True
    cached = cache.get("files", FINGERPRINT)
    assert cached is not None
    assert cached.tools == newest


def test_delete_and_clear(cache: MCPToolCache) -> None:
    for name in ("a", "b", "c"):
        cache.put(name, FINGERPRINT, TOOLS)
    cache.delete("a")
    assert cache.get("a", FINGERPRINT) is None
    assert cache.get("b", FINGERPRINT) is not None
    cache.delete("never-cached")
    cache.clear()
    assert cache.get("b", FINGERPRINT) is None
    assert cache.get("c", FINGERPRINT) is None


def test_closed_cache_misses_and_skips_writes(cache: MCPToolCache) -> None:
    cache.put("files", FINGERPRINT, TOOLS)
    cache.close()
    assert cache.get("files", FINGERPRINT) is None
    assert cache.put("files", FINGERPRINT, TOOLS) is False
    cache.delete("files")
    cache.clear()
    cache.close()


def test_random_bytes_file_is_moved_aside_and_recreated(
    cache_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    cache_path.parent.mkdir()
    garbage = bytes(range(256)) * 64
    cache_path.write_bytes(garbage)

    with caplog.at_level(logging.WARNING, logger="mcpfleet.fleet.cache"), MCPToolCache(cache_path) as cache:
        assert cache.get("files", FINGERPRINT) is None
        assert cache.put("files", FINGERPRINT, TOOLS) is True
        assert cache.get("files", FINGERPRINT) is not None

    assert "corrupt" in caplog.text
    moved = list(cache_path.parent.glob("tools.sqlite3.corrupt-*"))
    assert [path.read_bytes() for path in moved] == [garbage]


def test_corruption_found_while_reading_is_moved_aside_and_recreated(
    cache_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with MCPToolCache(cache_path) as cache:
        for index in range(50):
            cache.put(f"server-{index}", FINGERPRINT, TOOLS)
    # Keep page 1 (the schema) valid so the file opens, then wreck every table page.
    content = cache_path.read_bytes()
    cache_path.write_bytes(content[:4096] + b"\xff" * (len(content) - 4096))

    with caplog.at_level(logging.WARNING, logger="mcpfleet.fleet.cache"), MCPToolCache(cache_path) as cache:
        assert cache.get("server-1", FINGERPRINT) is None
        assert "corrupt" in caplog.text
        assert cache.put("server-1", FINGERPRINT, TOOLS) is True
        assert cache.get("server-1", FINGERPRINT) is not None
    assert len(list(cache_path.parent.glob("tools.sqlite3.corrupt-*"))) == 1


def test_directory_in_place_of_the_file_raises_a_clear_error(cache_path: Path) -> None:
    cache_path.mkdir(parents=True)
    with pytest.raises(CacheUnavailableError) as raised:
        MCPToolCache(cache_path)
    assert str(cache_path) in str(raised.value)
    assert "--no-cache" in str(raised.value)
    assert raised.value.path == str(cache_path)


def test_file_in_place_of_the_folder_raises_a_clear_error(tmp_path: Path) -> None:
    (tmp_path / "cache").write_text("not a folder")
    with pytest.raises(CacheUnavailableError):
        MCPToolCache(tmp_path / "cache" / "tools.sqlite3")


def test_open_default_uses_the_user_cache_dir_with_a_private_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MCPFLEET_HOME", str(tmp_path / "fleet"))
    cache = MCPToolCache.open_default()
    assert cache is not None
    try:
        assert cache.path == tmp_path / "fleet" / "cache" / "tools.sqlite3"
        assert cache.put("files", FINGERPRINT, TOOLS) is True
        assert cache.path.is_file()
        assert stat.S_IMODE(cache.path.parent.stat().st_mode) == 0o700
    finally:
        cache.close()


def test_open_default_that_cannot_open_warns_and_returns_none(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("MCPFLEET_HOME", str(tmp_path / "fleet"))
    (tmp_path / "fleet" / "cache" / "tools.sqlite3").mkdir(parents=True)
    with caplog.at_level(logging.WARNING, logger="mcpfleet.fleet.cache"):
        assert MCPToolCache.open_default() is None
    assert "MCP tool cache unavailable" in caplog.text
    assert "continuing without a tool cache" in caplog.text


def test_write_lock_held_too_long_is_a_warning_and_reads_still_work(
    cache_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(cache_module, "BUSY_TIMEOUT_SECONDS", 0.05)
    with MCPToolCache(cache_path) as cache:
        cache.put("files", FINGERPRINT, TOOLS, listed_at=1.0)
        other_process_writer = sqlite3.connect(cache_path, isolation_level=None)
        try:
            other_process_writer.execute("BEGIN IMMEDIATE")
            with caplog.at_level(logging.WARNING, logger="mcpfleet.fleet.cache"):
                assert cache.put("files", FINGERPRINT, TOOLS, listed_at=2.0) is False
                # WAL: readers are never blocked by a writer.
                cached = cache.get("files", FINGERPRINT)
            assert cached is not None
            assert cached.listed_at == 1.0
            assert "'files'" in caplog.text
            assert "locked" in caplog.text
            other_process_writer.execute("ROLLBACK")
        finally:
            other_process_writer.close()
        assert cache.put("files", FINGERPRINT, TOOLS, listed_at=3.0) is True


def test_one_cache_object_is_safe_across_threads(cache: MCPToolCache) -> None:
    failures: list[BaseException] = []

    def hammer(thread_index: int) -> None:
        try:
            for step in range(100):
                tools = (ToolDefinition(name=f"tool_{thread_index}_{step}"),)
                # The clock is frozen, so every answer ties and a tie is written.
                assert cache.put(f"server-{step % 3}", FINGERPRINT, tools)
                cached = cache.get(f"server-{step % 3}", FINGERPRINT)
                assert cached is not None and len(cached.tools) == 1
        except BaseException as error:
            failures.append(error)

    threads = [threading.Thread(target=hammer, args=(index,)) for index in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert failures == []


def test_importing_the_cache_stays_light() -> None:
    code = (
        "import sys, mcpfleet.fleet.cache\n"
        "heavy = ('mcp', 'mcp_types', 'pydantic', 'rich', 'httpx', 'httpx2')\n"
        "print(sorted(name for name in heavy if name in sys.modules))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=30, check=True
    )
    assert result.stdout.strip() == "[]"


def test_tools_that_cannot_be_serialised_are_skipped_with_a_warning(
    cache: MCPToolCache, caplog: pytest.LogCaptureFixture
) -> None:
    unserialisable = (ToolDefinition(name="odd", input_schema={"type": "object", "default": {1, 2}}),)
    with caplog.at_level(logging.WARNING, logger="mcpfleet.fleet.cache"):
        assert cache.put("files", FINGERPRINT, unserialisable) is False
    assert "'files'" in caplog.text
    assert cache.get("files", FINGERPRINT) is None


def test_a_tool_is_kept_exactly_as_the_server_listed_it(cache: MCPToolCache) -> None:
    listed = {
        "name": "fancy",
        "inputSchema": {"type": "object"},
        "icons": [{"src": "https://example.com/i.png"}],
        "_meta": {"example.com/k": 1},
        "execution": {"taskSupport": "forbidden"},
    }
    tool = ToolDefinition(name="fancy", raw=listed)
    cache.put("files", FINGERPRINT, (tool,))

    cached = cache.get("files", FINGERPRINT)

    assert cached is not None and cached.tools[0].raw == listed


def test_listings_beside_the_tools_round_trip_per_config(cache: MCPToolCache, clock: FakeClock) -> None:
    listings: dict[str, list[dict[str, Any]]] = {
        "resources": [{"uri": "fake://readme", "name": "readme"}],
        "resource_templates": [{"uriTemplate": "fake://notes/{id}", "name": "note"}],
        "prompts": [{"name": "greet", "arguments": [{"name": "who"}]}],
    }
    assert cache.get_listings("files", FINGERPRINT) is None
    assert cache.put_listings("files", FINGERPRINT, listings) is True

    assert cache.get_listings("files", FINGERPRINT) == listings
    assert cache.get_listings("files", OTHER_FINGERPRINT) is None
    clock.now += cache.ttl_seconds
    assert cache.get_listings("files", FINGERPRINT) is None


def test_forgetting_a_server_forgets_its_listings_too(cache: MCPToolCache) -> None:
    cache.put("files", FINGERPRINT, TOOLS)
    cache.put_listings("files", FINGERPRINT, {"prompts": [{"name": "greet"}]})
    cache.delete("files")
    assert cache.get_listings("files", FINGERPRINT) is None

    cache.put_listings("files", FINGERPRINT, {"prompts": [{"name": "greet"}]})
    cache.clear()
    assert cache.get_listings("files", FINGERPRINT) is None
