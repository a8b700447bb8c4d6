"""When the team state cannot be used: a ``TeamStateError`` that names the store and the fix, and
never shows the DSN's password, whatever went wrong (nothing listening, a wrong password, a DSN
libpq cannot read, a database gone while the gateway runs, a file that is not a database)."""

from __future__ import annotations

import socket
import stat
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

import psycopg
import pytest
from psycopg import sql
from tests.postgres import PostgresServer

from mcpfleet.redaction import redact_text
from mcpfleet.team.model import StateSettings
from mcpfleet.team.postgres_state import PostgresTeamState
from mcpfleet.team.sqlite_state import SQLiteTeamState
from mcpfleet.team.state import TeamStateError
from mcpfleet.team.stores import open_team_state

pytestmark = pytest.mark.anyio

PASSWORD = "Pa55-w0rd/with@odd=chars:"
URL_PASSWORD = quote(PASSWORD, safe="")


@pytest.fixture
def refusing_port() -> Iterator[int]:
    """A loopback port bound by this test and never listened on: connections are refused."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as bound:
        bound.bind(("127.0.0.1", 0))
        yield int(bound.getsockname()[1])


def assert_names_the_store_without_secret(error: TeamStateError, *, where: str, secret: str) -> None:
    message = str(error)
    assert "the team state (PostgreSQL" in message
    assert where in message
    assert "state.postgres" in message
    assert secret not in message
    assert secret not in repr(error.args)
    assert error.__cause__ is None and error.__suppress_context__


async def test_nothing_listening(refusing_port: int, tmp_path: Path) -> None:
    dsn = f"postgresql://mcpfleet:{URL_PASSWORD}@127.0.0.1:{refusing_port}/team"
    with pytest.raises(TeamStateError) as refused:
        await open_team_state(StateSettings(sqlite_path=tmp_path / "unused", postgres=dsn))

    assert_names_the_store_without_secret(
        refused.value, where=f"mcpfleet@127.0.0.1:{refusing_port}/team", secret=PASSWORD
    )
    assert URL_PASSWORD not in str(refused.value)
    assert "connecting failed" in str(refused.value)
    assert "Connection refused" in str(refused.value)


async def test_a_url_whose_password_is_not_percent_encoded(refusing_port: int) -> None:
    """libpq reads the raw "/" and "@" as the end of the host: the password lands in the host's or
    the database's name, which the message masks too."""
    dsn = f"postgresql://mcpfleet:{PASSWORD}@127.0.0.1:{refusing_port}/team"
    with pytest.raises(TeamStateError) as refused:
        await PostgresTeamState.open(dsn)

    message = str(refused.value)
    assert "the team state (PostgreSQL" in message
    for fragment in (PASSWORD, "Pa55-w0rd", "odd=chars"):
        assert fragment not in message


async def test_key_value_dsn_with_a_wrong_password(postgres_server: PostgresServer) -> None:
    wrong = "not-the-password-" + PASSWORD
    dsn = f"host=127.0.0.1 port={postgres_server.port} dbname=postgres user=postgres password='{wrong}'"
    with pytest.raises(TeamStateError) as refused:
        await PostgresTeamState.open(dsn)

    assert_names_the_store_without_secret(
        refused.value, where=f"postgres@127.0.0.1:{postgres_server.port}/postgres", secret=wrong
    )
    assert "password authentication failed" in str(refused.value)


async def test_a_dsn_libpq_cannot_read_is_not_quoted() -> None:
    dsn = f"host=127.0.0.1 password={PASSWORD} this-is-not-a-pair"
    with pytest.raises(TeamStateError) as refused:
        await PostgresTeamState.open(dsn)

    message = str(refused.value)
    assert "state.postgres is not a connection string" in message
    assert "postgresql://USER:PASSWORD@HOST:PORT/DATABASE" in message
    assert PASSWORD not in message


async def test_the_password_is_masked_in_later_text_too(refusing_port: int) -> None:
    """Whatever else quotes the DSN (a log record of the driver, a traceback) is redacted."""
    dsn = f"postgresql://mcpfleet:{URL_PASSWORD}@127.0.0.1:{refusing_port}/team"
    with pytest.raises(TeamStateError):
        await PostgresTeamState.open(dsn)

    shown = redact_text(f"connecting with {dsn}: the password {PASSWORD} was refused")
    assert PASSWORD not in shown
    assert URL_PASSWORD not in shown


async def test_a_database_gone_while_serving_fails_within_the_bound(postgres_dsn: str) -> None:
    """The pool checks each connection it hands out; with the database dropped it cannot make a
    new one, and the call fails once ``pool_wait_s`` has passed, instead of waiting forever."""
    state = await PostgresTeamState.open(postgres_dsn, pool_wait_s=1.0)
    try:
        await state.check()
        name = psycopg.conninfo.conninfo_to_dict(postgres_dsn)["dbname"]
        admin_dsn = postgres_dsn.rsplit("/", 1)[0] + "/postgres"
        with psycopg.connect(admin_dsn, autocommit=True) as admin:
            admin.execute(sql.SQL("DROP DATABASE {} WITH (FORCE)").format(sql.Identifier(str(name))))

        with pytest.raises(TeamStateError) as failed:
            await state.get_credential("alice", "github")
        password = psycopg.conninfo.conninfo_to_dict(postgres_dsn)["password"]
        assert_names_the_store_without_secret(failed.value, where=f"/{name}", secret=str(password))
        assert "reading the credentials of 'alice' for server 'github' failed" in str(failed.value)
    finally:
        await state.aclose()


async def test_sqlite_in_a_folder_that_does_not_exist(tmp_path: Path) -> None:
    path = tmp_path / "missing" / "state.sqlite3"
    with pytest.raises(TeamStateError) as refused:
        await open_team_state(StateSettings(sqlite_path=path))

    message = str(refused.value)
    assert f"the team state (SQLite, {path}) cannot be opened" in message
    assert "state.sqlite" in message


async def test_sqlite_file_that_is_not_a_database(tmp_path: Path) -> None:
    path = tmp_path / "state.sqlite3"
    path.write_text("this is a team file, not a database\n" * 100)
    with pytest.raises(TeamStateError) as refused:
        await SQLiteTeamState.open(path)

    message = str(refused.value)
    assert f"the team state (SQLite, {path}) cannot be used" in message
    assert "file is not a database" in message
    assert "move it away" in message


async def test_sqlite_files_are_private(tmp_path: Path) -> None:
    path = tmp_path / "state.sqlite3"
    state = await SQLiteTeamState.open(path)
    await state.put_credential("alice", "github", b"sealed")
    try:
        for file in (path, Path(f"{path}-wal"), Path(f"{path}-shm")):
            assert stat.S_IMODE(file.stat().st_mode) == 0o600, file
    finally:
        await state.aclose()


async def test_an_existing_world_readable_sqlite_file_is_made_private(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "state.sqlite3"
    state = await SQLiteTeamState.open(path)
    await state.aclose()
    path.chmod(0o644)

    reopened = await SQLiteTeamState.open(path)
    await reopened.aclose()

    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert "was readable by others (mode 644); made it private" in caplog.text
