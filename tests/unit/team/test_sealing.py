"""Per-user credentials sealed at rest (team/sealing.py): bound to their (user, server) pair,
opened by every listed key, sealed by the first, and a missing or malformed key named with
the way to make one."""

from __future__ import annotations

import base64
import secrets

import pytest

from mcpfleet.team.sealing import TEAM_KEY_VARIABLE, Sealer, TeamKeyError, UnsealError, parse_team_keys


def new_key() -> str:
    return base64.b64encode(secrets.token_bytes(32)).decode()


def test_a_sealed_blob_opens_for_its_own_pair_and_holds_no_clear_text() -> None:
    sealer = Sealer.from_environment({TEAM_KEY_VARIABLE: new_key()})
    blob = sealer.seal("alice-sub", "github", b'{"access_token": "gho_secret"}')
    assert b"gho_secret" not in blob
    opened = sealer.open("alice-sub", "github", blob)
    assert opened.plaintext == b'{"access_token": "gho_secret"}'
    assert not opened.stale


def test_sealing_twice_gives_two_different_blobs() -> None:
    sealer = Sealer.from_environment({TEAM_KEY_VARIABLE: new_key()})
    assert sealer.seal("u", "s", b"same") != sealer.seal("u", "s", b"same")


@pytest.mark.parametrize(
    ("user", "server"),
    [("bob-sub", "github"), ("alice-sub", "jira"), ("alice-sub,", "github"), ("alice", "-sub,github")],
)
def test_a_blob_moved_to_another_pair_does_not_open(user: str, server: str) -> None:
    sealer = Sealer.from_environment({TEAM_KEY_VARIABLE: new_key()})
    blob = sealer.seal("alice-sub", "github", b"token")
    with pytest.raises(UnsealError) as raised:
        sealer.open(user, server, blob)
    assert user in str(raised.value) and server in str(raised.value)
    assert "connects to" in str(raised.value)


def test_an_altered_blob_does_not_open() -> None:
    sealer = Sealer.from_environment({TEAM_KEY_VARIABLE: new_key()})
    blob = bytearray(sealer.seal("u", "s", b"token"))
    blob[-1] ^= 1
    with pytest.raises(UnsealError):
        sealer.open("u", "s", bytes(blob))


@pytest.mark.parametrize("blob", [b"", b"\x01", b"\x02" + b"\x00" * 40, b"not a blob at all, just text"])
def test_what_is_no_sealed_blob_is_refused_by_name(blob: bytes) -> None:
    sealer = Sealer.from_environment({TEAM_KEY_VARIABLE: new_key()})
    with pytest.raises(UnsealError, match='user "u" for "s"'):
        sealer.open("u", "s", blob)


def test_rotation_the_old_key_still_opens_and_says_the_blob_is_stale() -> None:
    old, new = new_key(), new_key()
    blob = Sealer.from_environment({TEAM_KEY_VARIABLE: old}).seal("u", "s", b"token")
    rotated = Sealer.from_environment({TEAM_KEY_VARIABLE: f"{new}, {old}"})
    opened = rotated.open("u", "s", blob)
    assert opened == type(opened)(b"token", stale=True)
    resealed = rotated.seal("u", "s", opened.plaintext)
    assert not rotated.open("u", "s", resealed).stale
    # Once the old key is dropped, what it sealed no longer opens, and the re-sealed blob does.
    new_only = Sealer.from_environment({TEAM_KEY_VARIABLE: new})
    assert new_only.open("u", "s", resealed).plaintext == b"token"
    with pytest.raises(UnsealError):
        new_only.open("u", "s", blob)


def test_url_safe_base64_keys_are_accepted() -> None:
    raw = secrets.token_bytes(32)
    assert parse_team_keys(base64.urlsafe_b64encode(raw).decode()) == [raw]


@pytest.mark.parametrize("value", ["", "  ", ",", None])
def test_a_missing_key_names_the_variable_and_how_to_make_one(value: str | None) -> None:
    environ = {} if value is None else {TEAM_KEY_VARIABLE: value}
    with pytest.raises(TeamKeyError) as raised:
        Sealer.from_environment(environ)
    assert str(raised.value) == f"{TEAM_KEY_VARIABLE} is not set; make one with: openssl rand -base64 32"


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        ("not base64!", "is not base64"),
        (base64.b64encode(b"short").decode(), "holds 5 bytes, not 32"),
        # Fixed keys: a parameter's id must be the same in every xdist worker.
        (
            f"{base64.b64encode(b'k' * 32).decode()},{base64.b64encode(b'x' * 16).decode()}",
            "(key 2 of 2) holds 16 bytes, not 32",
        ),
    ],
)
def test_a_malformed_key_says_what_is_wrong_with_it_and_never_echoes_it(value: str, problem: str) -> None:
    with pytest.raises(TeamKeyError) as raised:
        Sealer.from_environment({TEAM_KEY_VARIABLE: value})
    message = str(raised.value)
    assert message.startswith(TEAM_KEY_VARIABLE) and problem in message
    assert "openssl rand -base64 32" in message
    assert all(part.strip() not in message for part in value.split(","))
