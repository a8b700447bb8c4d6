"""The crash breaker and the retry rhythm, on a clock the test moves by hand."""

from __future__ import annotations

import itertools

from mcpfleet.fleet.supervision import Breaker, ReconnectPolicy, Supervisor


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_more_crashes_than_the_limit_within_the_window_trip_the_breaker() -> None:
    clock = FakeClock()
    breaker = Supervisor(ReconnectPolicy(crash_limit=2, crash_window_s=30.0), clock).breaker()
    assert [breaker.record_crash() for _ in range(2)] == [False, False]
    clock.now += 29.0
    assert breaker.record_crash() is True
    assert breaker.recent_crashes() == 3


def test_crashes_older_than_the_window_are_forgotten() -> None:
    clock = FakeClock()
    breaker = Supervisor(ReconnectPolicy(crash_limit=2, crash_window_s=30.0), clock).breaker()
    breaker.record_crash()
    breaker.record_crash()
    clock.now += 31.0
    assert breaker.recent_crashes() == 0
    assert breaker.record_crash() is False


def test_reset_lifts_the_suspension_and_clears_the_history() -> None:
    supervisor = Supervisor(ReconnectPolicy(crash_limit=0), FakeClock())
    breaker = supervisor.breaker()
    assert breaker.record_crash() is True
    breaker.suspension = supervisor.suspension_message("loop")
    assert "crashed more than 0 times within 30 s" in breaker.suspension
    assert "/mcp reconnect loop" in breaker.suspension
    breaker.reset()
    assert suspension_of(breaker) is None
    assert breaker.recent_crashes() == 0


def test_each_server_has_its_own_breaker() -> None:
    supervisor = Supervisor(ReconnectPolicy(crash_limit=1), FakeClock())
    first, second = supervisor.breaker(), supervisor.breaker()
    first.record_crash()
    assert first.record_crash() is True
    assert second.recent_crashes() == 0


def test_a_stdio_server_gets_the_ladder_and_nothing_more() -> None:
    supervisor = Supervisor(ReconnectPolicy(ladder_s=(0.5, 1.0, 2.0, 4.0)))
    assert list(supervisor.retry_delays("stdio")) == [0.5, 1.0, 2.0, 4.0]
    assert list(supervisor.retry_delays("stdio", quiet=True)) == []


def test_a_remote_server_is_retried_forever_on_a_capped_doubling_backoff() -> None:
    supervisor = Supervisor(ReconnectPolicy(ladder_s=(0.5, 1.0), remote_retry_max_s=5.0))
    assert list(itertools.islice(supervisor.retry_delays("http"), 7)) == [0.5, 1.0, 2.0, 4.0, 5.0, 5.0, 5.0]
    assert list(itertools.islice(supervisor.retry_delays("sse", quiet=True), 3)) == [2.0, 4.0, 5.0]


def test_an_empty_ladder_still_waits_before_retrying() -> None:
    assert list(Supervisor(ReconnectPolicy(ladder_s=())).retry_delays("stdio")) == [0.5]


def suspension_of(breaker: Breaker) -> str | None:
    """Read afresh: the test changes it between two reads."""
    return breaker.suspension
