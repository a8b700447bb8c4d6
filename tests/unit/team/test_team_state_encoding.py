"""How audit values become rows: exact times, arguments as JSON text, text a database takes."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

from hypothesis import given
from hypothesis import strategies as st

from mcpfleet.team.state_encoding import (
    arguments_from_text,
    arguments_text,
    from_epoch_us,
    storable_text,
    to_epoch_us,
)

JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda children: st.lists(children, max_size=3) | st.dictionaries(st.text(), children, max_size=3),
    max_leaves=10,
)


@given(st.datetimes(timezones=st.just(UTC)))
def test_times_round_trip_to_the_microsecond(moment: datetime) -> None:
    assert from_epoch_us(to_epoch_us(moment)) == moment


def test_a_time_in_another_zone_is_the_same_instant() -> None:
    moment = datetime(2026, 12, 2, 9, 0, tzinfo=timezone(timedelta(hours=1)))

    assert from_epoch_us(to_epoch_us(moment)) == datetime(2026, 12, 2, 8, 0, tzinfo=UTC)


@given(st.dictionaries(st.text(), JSON_VALUES, max_size=5))
def test_arguments_read_back_equal_and_as_ascii(arguments: dict[str, object]) -> None:
    text = arguments_text(arguments)

    assert text is not None and text.isascii()
    assert arguments_from_text(text) == arguments


@given(st.text())
def test_any_text_becomes_text_a_database_takes(text: str) -> None:
    stored = storable_text(text)

    assert "\x00" not in stored
    stored.encode("utf-8")
    if "\x00" not in text and not any(0xD800 <= ord(char) <= 0xDFFF for char in text):
        assert stored == text
