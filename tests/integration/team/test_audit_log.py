"""The audit log (``team.audit``) on real stores and a real file.

One record per call with the contract's fields, the arguments' digest always and their values
only when configured; the JSON-lines file private, one object per line, never interleaved; a
record that cannot be written failing the call unless the log fails open; and a record durable
once ``record`` returns: a process killed right after its call answered leaves its record.
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import stat
import subprocess
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from functools import partial
from pathlib import Path
from typing import Any

import anyio
import pytest
from tests.conftest import PYTHON

from mcpfleet.team.audit import AuditLog, AuditWriteError, arguments_digest
from mcpfleet.team.model import AuditSettings, StateSettings
from mcpfleet.team.state import Outcome
from mcpfleet.team.stores import open_team_state

pytestmark = pytest.mark.anyio

CONTRACT_FIELDS = {
    "time",
    "user",
    "client",
    "server",
    "tool",
    "outcome",
    "duration_ms",
    "arguments_digest",
}
ARGUMENTS: dict[str, Any] = {"repo": "acme/api", "title": "Crash on start", "labels": ["bug"], "ünï": "✓"}
CONCURRENT_CALLS = 200


def canonical_digest(arguments: Mapping[str, Any]) -> str:
    """The digest as a log shipper recomputes it: SHA-256 of sorted, space-free UTF-8 JSON."""
    text = json.dumps(arguments, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


async def call(log: AuditLog, *, user: str = "alice", outcome: Outcome = "ok", **arguments: object) -> None:
    await log.record(
        user=user,
        client="claude-code",
        server="github",
        tool="create_issue",
        arguments=arguments or ARGUMENTS,
        outcome=outcome,
        duration_ms=42.0,
    )


async def test_a_call_is_recorded_with_the_contract_fields(state_settings: StateSettings) -> None:
    state = await open_team_state(state_settings)
    try:
        log = AuditLog(AuditSettings(), state)
        before = datetime.now(UTC)
        returned = await log.record(
            user="alice",
            client="claude-code",
            server="github",
            tool="create_issue",
            arguments=ARGUMENTS,
            outcome="ok",
            duration_ms=42.0,
        )
        [stored] = await state.audit_records()

        assert stored == returned
        assert (stored.user, stored.client, stored.server, stored.tool) == (
            "alice",
            "claude-code",
            "github",
            "create_issue",
        )
        assert (stored.outcome, stored.duration_ms) == ("ok", 42.0)
        assert stored.arguments_digest == canonical_digest(ARGUMENTS)
        assert stored.arguments is None
        # It arrived duration_ms before it was recorded.
        assert before - timedelta(milliseconds=42) <= stored.time <= datetime.now(UTC)
    finally:
        await state.aclose()


async def test_denied_and_failed_calls_are_recorded_too(state_settings: StateSettings) -> None:
    state = await open_team_state(state_settings)
    try:
        log = AuditLog(AuditSettings(), state)
        await call(log, user="bob", outcome="denied")
        await call(log, user="alice", outcome="error")

        records = await state.audit_records()
        assert [(record.user, record.outcome) for record in records] == [
            ("bob", "denied"),
            ("alice", "error"),
        ]
    finally:
        await state.aclose()


async def test_values_are_kept_only_with_arguments_true(tmp_path: Path) -> None:
    state = await open_team_state(StateSettings(sqlite_path=tmp_path / "state.sqlite3"))
    try:
        log = AuditLog(AuditSettings(arguments=True, file=tmp_path / "audit.jsonl"), state)
        await call(log)

        [stored] = await state.audit_records()
        assert stored.arguments == ARGUMENTS
        [line] = (tmp_path / "audit.jsonl").read_text().splitlines()
        assert json.loads(line)["arguments"] == ARGUMENTS
    finally:
        await state.aclose()


def test_the_digest_is_of_canonical_json() -> None:
    assert arguments_digest({"b": 1, "a": [1, {"y": 2, "x": "é"}]}) == canonical_digest(
        {"a": [1, {"x": "é", "y": 2}], "b": 1}
    )
    assert arguments_digest(None) == canonical_digest({})
    # A lone surrogate a client sent as "\ud800" is digested, not refused.
    assert len(arguments_digest({"lone": "\ud800"})) == 64


async def test_the_file_holds_one_private_object_per_line(tmp_path: Path) -> None:
    audit_file = tmp_path / "audit.jsonl"
    for _ in range(2):  # a second log (a restarted gateway) appends to the same file
        log = AuditLog(AuditSettings(store=False, file=audit_file), None)
        await call(log)

    assert stat.S_IMODE(audit_file.stat().st_mode) == 0o600
    lines = audit_file.read_text().splitlines()
    assert len(lines) == 2
    for line in lines:
        document = json.loads(line)
        assert set(document) == CONTRACT_FIELDS
        assert document["arguments_digest"] == canonical_digest(ARGUMENTS)
        assert datetime.fromisoformat(document["time"]).tzinfo is not None


async def test_concurrent_records_never_interleave_in_the_file(tmp_path: Path) -> None:
    audit_file = tmp_path / "audit.jsonl"
    log = AuditLog(AuditSettings(store=False, file=audit_file, arguments=True), None)

    async def numbered_call(number: int) -> None:
        await call(log, number=number, padding="x" * 20_000)

    async with anyio.create_task_group() as calls:
        for number in range(CONCURRENT_CALLS):
            calls.start_soon(numbered_call, number)

    numbers = sorted(json.loads(line)["arguments"]["number"] for line in audit_file.read_text().splitlines())
    assert numbers == list(range(CONCURRENT_CALLS))


async def test_concurrent_records_share_commits_in_the_sqlite_state(tmp_path: Path) -> None:
    """Each commit of the SQLite state is a disk flush: records of calls made at once are
    written in a few commits, not one each (the write-ahead log holds a frame per page a commit
    wrote, so one commit per record would leave at least as many frames as records)."""
    import sqlite3

    path = tmp_path / "state.sqlite3"
    state = await open_team_state(StateSettings(sqlite_path=path))
    try:
        with sqlite3.connect(path) as reader:
            reader.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        log = AuditLog(AuditSettings(), state)
        async with anyio.create_task_group() as calls:
            for number in range(CONCURRENT_CALLS):
                calls.start_soon(partial(call, log, number=number))
        assert len(await state.audit_records()) == CONCURRENT_CALLS
        with sqlite3.connect(path) as reader:
            _, frames, _ = reader.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
        assert 0 < frames < CONCURRENT_CALLS / 2
    finally:
        await state.aclose()


async def test_a_record_that_cannot_be_written_fails_the_call(state_settings: StateSettings) -> None:
    state = await open_team_state(state_settings)
    await state.aclose()  # a store that no longer answers
    log = AuditLog(AuditSettings(), state)

    with pytest.raises(AuditWriteError) as refused:
        await call(log)

    message = str(refused.value)
    assert "the audit record of github/create_issue by 'alice' could not be written" in message
    assert "the call is refused" in message
    assert "the team state (" in message
    assert "audit: {on_failure: open}" in message


async def test_an_audit_file_that_cannot_be_written_fails_the_call(tmp_path: Path) -> None:
    state = await open_team_state(StateSettings(sqlite_path=tmp_path / "state.sqlite3"))
    try:
        missing = tmp_path / "no-such-folder" / "audit.jsonl"
        log = AuditLog(AuditSettings(file=missing), state)

        with pytest.raises(AuditWriteError, match=rf"the audit file {missing}: No such file or directory"):
            await call(log)
        # The store still got the record: what could be written, was.
        assert len(await state.audit_records()) == 1
    finally:
        await state.aclose()


async def test_failing_open_lets_the_call_through_with_a_warning(
    state_settings: StateSettings, caplog: pytest.LogCaptureFixture
) -> None:
    state = await open_team_state(state_settings)
    await state.aclose()
    log = AuditLog(AuditSettings(fail_closed=False), state)

    await call(log)

    assert "the audit record of github/create_issue by 'alice' could not be written (audit fails open)" in (
        caplog.text
    )


_CHILD = """
import sys, anyio
from pathlib import Path
from typing import Any
from mcpfleet.team.audit import AuditLog
from mcpfleet.team.model import AuditSettings, StateSettings
from mcpfleet.team.stores import open_team_state

async def main():
    settings = StateSettings(sqlite_path=Path(sys.argv[1]), postgres=sys.argv[2] or None)
    state = await open_team_state(settings)
    log = AuditLog(AuditSettings(), state)
    await log.record(user="alice", client=None, server="github", tool="merge", arguments={"pr": 7},
                     outcome="ok", duration_ms=1.0)
    print("answered", flush=True)
    await anyio.sleep_forever()

anyio.run(main)
"""


def kill_writer_once_answered(settings: StateSettings) -> None:
    """A process records one call, says its call answered, and is killed at once (SIGKILL: no
    clean-up of any kind)."""
    child = subprocess.Popen(
        [PYTHON, "-c", _CHILD, str(settings.sqlite_path), settings.postgres or ""],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout is not None
        assert child.stdout.readline() == "answered\n"
        os.kill(child.pid, signal.SIGKILL)
    finally:
        child.kill()
        child.wait()
    assert child.returncode == -signal.SIGKILL


async def test_a_record_is_durable_when_the_call_answers(state_settings: StateSettings) -> None:
    await anyio.to_thread.run_sync(kill_writer_once_answered, state_settings)

    state = await open_team_state(state_settings)
    try:
        [record] = await state.audit_records(user="alice")
        assert (record.server, record.tool, record.outcome) == ("github", "merge", "ok")
        assert record.arguments_digest == canonical_digest({"pr": 7})
    finally:
        await state.aclose()
