"""The plots: SVG drawn on the server, with nothing to fetch and no script."""

from __future__ import annotations

import re

import pytest

from mcpfleet.dashboard.charts import calls_over_time, latency_percentiles, percentile
from mcpfleet.dashboard.source import CallLog, CallRecord

NOW = 1_800_000_000.0
RECORDS = [
    CallRecord("git", "log", NOW - 50, 0.010, False),
    CallRecord("git", "log", NOW - 20, 0.030, True),
    CallRecord("docs", "search", NOW - 5, 0.200, False),
]


@pytest.mark.parametrize(
    "svg", [calls_over_time(RECORDS, now=NOW), latency_percentiles(RECORDS), calls_over_time([])]
)
def test_a_chart_is_svg_that_loads_nothing(svg: str) -> None:
    assert svg.lstrip().startswith("<svg")
    assert "<script" not in svg
    assert not re.findall(r'(?:href|src)="(?!#)', svg)


def test_the_charts_name_each_server() -> None:
    svg = calls_over_time(RECORDS, now=NOW)
    assert "git calls" in svg and "git errors" in svg and "docs calls" in svg
    assert "docs" in latency_percentiles(RECORDS)


def test_percentiles_are_nearest_rank() -> None:
    values = [float(value) for value in range(1, 101)]
    assert [percentile(values, p) for p in (50, 90, 99)] == [50.0, 90.0, 99.0]
    assert percentile([7.0], 99) == 7.0


def test_the_call_log_keeps_the_most_recent() -> None:
    log = CallLog()
    for index in range(log.records.maxlen or 0):
        log.add(CallRecord("s", "t", float(index), 0.0, False))
    log.add(CallRecord("s", "t", -1.0, 0.0, False))
    assert log.records[0].at == 1.0 and log.records[-1].at == -1.0
