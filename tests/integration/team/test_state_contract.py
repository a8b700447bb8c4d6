"""The team state's contract (``TeamState``), the same tests against SQLite and PostgreSQL.

Each test opens a real store: a file in its folder, or a database of its own on the run's
PostgreSQL server. What they hold to: audit records read back exactly, filtered by user and
time, oldest first; credentials kept per (user, server), replaced, deleted and listed; the store
still there after it is closed and opened again; a closed store failing with ``TeamStateError``.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from tests.integration.team.state_helpers import BASE_TIME, a_record

from mcpfleet.team.model import StateSettings
from mcpfleet.team.state import MAX_AUDIT_PAGE, AuditQuery, Outcome, TeamStateError
from mcpfleet.team.stores import open_team_state

pytestmark = pytest.mark.anyio


async def test_audit_records_read_back_exactly_oldest_first(state_settings: StateSettings) -> None:
    state = await open_team_state(state_settings)
    try:
        later = a_record(seconds=2.5, outcome="denied", client=None, tool="delete_repo")
        first = a_record(seconds=0.000001, arguments={"title": "Bug", "labels": ["a", "b"], "n": 1.5})
        middle = a_record(user="bob", seconds=1, outcome="error")
        for record in (later, first, middle):
            await state.append_audit(record)

        assert await state.audit_records() == [first, middle, later]
    finally:
        await state.aclose()


async def test_audit_records_filtered_by_user_and_since(state_settings: StateSettings) -> None:
    state = await open_team_state(state_settings)
    try:
        records = [a_record(user=user, seconds=seconds) for seconds, user in enumerate(["alice", "bob"] * 3)]
        for record in records:
            await state.append_audit(record)

        alice = [record for record in records if record.user == "alice"]
        assert await state.audit_records(user="alice") == alice
        assert await state.audit_records(user="nobody") == []
        # ``since`` is inclusive: a record at exactly that time is in.
        assert await state.audit_records(since=BASE_TIME + timedelta(seconds=3)) == records[3:]
        assert await state.audit_records(user="alice", since=BASE_TIME + timedelta(seconds=1)) == alice[1:]
        assert await state.audit_records(limit=2) == records[:2]
        assert await state.audit_records(user="bob", limit=0) == []
    finally:
        await state.aclose()


async def test_an_audit_page_is_newest_first_filtered_and_bounded(state_settings: StateSettings) -> None:
    state = await open_team_state(state_settings)
    try:
        calls: list[tuple[str, str, str, Outcome]] = [
            ("alice", "github", "create_issue", "ok"),
            ("bob", "github", "create_issue", "denied"),
            ("alice", "jira", "read_ticket", "error"),
            ("alice", "github", "delete_repo", "denied"),
            ("bob", "jira", "read_ticket", "ok"),
        ]
        records = [
            a_record(user=user, seconds=seconds, server=server, tool=tool, outcome=outcome)
            for seconds, (user, server, tool, outcome) in enumerate(calls)
        ]
        for record in records:
            await state.append_audit(record)
        newest_first = records[::-1]

        assert await state.audit_page(AuditQuery()) == newest_first
        assert await state.audit_page(AuditQuery(user="alice")) == [records[3], records[2], records[0]]
        assert await state.audit_page(AuditQuery(server="jira")) == [records[4], records[2]]
        assert await state.audit_page(AuditQuery(tool="create_issue", outcome="denied")) == [records[1]]
        assert await state.audit_page(AuditQuery(outcome="ok", user="bob")) == [records[4]]
        # ``since`` included, ``until`` excluded.
        window = AuditQuery(since=BASE_TIME + timedelta(seconds=1), until=BASE_TIME + timedelta(seconds=3))
        assert await state.audit_page(window) == [records[2], records[1]]
        assert await state.audit_page(AuditQuery(limit=2)) == newest_first[:2]
        assert await state.audit_page(AuditQuery(limit=2, offset=2)) == newest_first[2:4]
        assert await state.audit_page(AuditQuery(limit=2, offset=4)) == newest_first[4:]
        assert await state.audit_page(AuditQuery(user="nobody")) == []
        # A filter is a value, never SQL.
        assert await state.audit_page(AuditQuery(user="alice' OR '1'='1")) == []
    finally:
        await state.aclose()


async def test_an_audit_page_holds_at_most_its_bound(state_settings: StateSettings) -> None:
    state = await open_team_state(state_settings)
    try:
        for seconds in range(MAX_AUDIT_PAGE + 5):
            await state.append_audit(a_record(seconds=seconds))
        page = await state.audit_page(AuditQuery(limit=MAX_AUDIT_PAGE * 10))
        assert len(page) == MAX_AUDIT_PAGE and page[0].time == BASE_TIME + timedelta(
            seconds=MAX_AUDIT_PAGE + 4
        )
    finally:
        await state.aclose()


async def test_since_in_another_time_zone_is_the_same_instant(state_settings: StateSettings) -> None:
    from datetime import timezone

    state = await open_team_state(state_settings)
    try:
        records = [a_record(seconds=0), a_record(seconds=3600)]
        for record in records:
            await state.append_audit(record)
        one_hour_later_in_paris = (BASE_TIME + timedelta(hours=1)).astimezone(timezone(timedelta(hours=1)))

        assert await state.audit_records(since=one_hour_later_in_paris) == records[1:]
    finally:
        await state.aclose()


async def test_text_a_database_refuses_is_kept_visibly(state_settings: StateSettings) -> None:
    """A client names the tool: a NUL or a lone surrogate in it must not fail the write (and, the
    audit log failing closed, the call); arguments keep every value, ``\\u0000`` included."""
    state = await open_team_state(state_settings)
    try:
        await state.append_audit(
            a_record(
                tool="evil\x00tool\udc80",
                client="clïent ✓",
                arguments={"text": "nul \x00 here", "lone": "\ud800", "ünïcode": "✓"},
            )
        )

        [stored] = await state.audit_records()
        assert stored.tool == "evil\\x00tool\\udc80"
        assert stored.client == "clïent ✓"
        assert stored.arguments == {"text": "nul \x00 here", "lone": "\ud800", "ünïcode": "✓"}
    finally:
        await state.aclose()


async def test_credentials_put_get_replace_delete_list(state_settings: StateSettings) -> None:
    state = await open_team_state(state_settings)
    try:
        assert await state.get_credential("alice", "github") is None
        assert await state.credential_servers("alice") == []

        await state.put_credential("alice", "github", b"sealed-1\x00\xff")
        await state.put_credential("alice", "atlassian", b"sealed-2")
        await state.put_credential("bob", "github", b"bob's")
        assert await state.get_credential("alice", "github") == b"sealed-1\x00\xff"
        assert await state.credential_servers("alice") == ["atlassian", "github"]

        await state.put_credential("alice", "github", b"replaced")
        assert await state.get_credential("alice", "github") == b"replaced"
        assert await state.get_credential("bob", "github") == b"bob's"

        assert await state.delete_credential("alice", "github") is True
        assert await state.delete_credential("alice", "github") is False
        assert await state.get_credential("alice", "github") is None
        assert await state.credential_servers("alice") == ["atlassian"]
        assert await state.credential_servers("bob") == ["github"]
    finally:
        await state.aclose()


async def test_state_survives_closing_and_opening_again(state_settings: StateSettings) -> None:
    state = await open_team_state(state_settings)
    record = a_record(arguments={"k": "v"})
    await state.append_audit(record)
    await state.put_credential("alice", "github", b"sealed")
    await state.aclose()

    reopened = await open_team_state(state_settings)
    try:
        await reopened.check()
        assert await reopened.audit_records() == [record]
        assert await reopened.get_credential("alice", "github") == b"sealed"
    finally:
        await reopened.aclose()


async def test_a_closed_store_fails_with_a_team_state_error(state_settings: StateSettings) -> None:
    state = await open_team_state(state_settings)
    await state.check()
    await state.aclose()

    with pytest.raises(TeamStateError, match="team state"):
        await state.append_audit(a_record())
    with pytest.raises(TeamStateError, match="team state"):
        await state.check()


async def test_a_store_syncing_in_the_background_commits_without_waiting_for_the_disk(
    state_settings: StateSettings,
) -> None:
    """``audit.sync: background``: records are written and read back as ever; the store's own
    setting is the one that skips the disk flush per commit (SQLite NORMAL, PostgreSQL's
    synchronous_commit off), and ``each`` keeps it (FULL, on)."""
    from mcpfleet.team.postgres_state import PostgresTeamState
    from mcpfleet.team.sqlite_state import SQLiteTeamState

    async def setting(state: object) -> str:
        if isinstance(state, SQLiteTeamState):
            assert state._connection is not None
            level = state._connection.execute("PRAGMA synchronous").fetchone()[0]
            return {1: "NORMAL", 2: "FULL"}[level]
        assert isinstance(state, PostgresTeamState)
        async with state._pool.connection() as connection:
            row = await (await connection.execute("SHOW synchronous_commit")).fetchone()
        assert row is not None
        return str(row[0])

    expected = {True: ("FULL", "on"), False: ("NORMAL", "off")}
    for each in (True, False):
        state = await open_team_state(state_settings, sync_each_write=each)
        try:
            record = a_record(seconds=1 if each else 2)
            await state.append_audit(record)
            assert record in await state.audit_records()
            assert await setting(state) in expected[each]
        finally:
            await state.aclose()
