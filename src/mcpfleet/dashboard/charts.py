"""The plots of the calls the fleet served: drawn as SVG here, by pygal, with no script.

pygal's SVG links its tooltip script from the web by default: ``js=[]`` leaves it out (the
dashboard fetches nothing from anywhere), and the inline script pygal still writes (its
tooltips' settings) is taken out too, which the pages' Content-Security-Policy would refuse.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterable
from typing import Any

from mcpfleet.dashboard.source import CallRecord

BUCKETS = 12
"""Columns of the calls-over-time plot."""
PERCENTILES = (50, 90, 99)
_SCRIPT = re.compile(r"<script\b.*?</script>", re.DOTALL)


def _svg(chart: Any) -> str:
    return _SCRIPT.sub("", str(chart.render(is_unicode=True)))


def _chart_options() -> dict[str, Any]:
    return {
        "js": [],
        "disable_xml_declaration": True,
        "width": 720,
        "height": 300,
        "explicit_size": True,
        "legend_at_bottom": True,
        "print_values": False,
        "x_label_rotation": 0,
    }


def calls_over_time(records: Iterable[CallRecord], *, now: float | None = None) -> str:
    """Calls and errors per server, in ``BUCKETS`` columns up to ``now``, as one SVG."""
    import pygal  # type: ignore[import-untyped]  # pygal ships no type hints

    kept = list(records)
    end = time.time() if now is None else now
    start = min((record.at for record in kept), default=end - 60.0)
    span = max(end - start, 60.0)
    width = span / BUCKETS
    servers = sorted({record.server for record in kept})
    chart = pygal.StackedBar(
        title="Calls per server (errors apart)",
        show_minor_x_labels=False,
        truncate_label=-1,
        **_chart_options(),
    )
    chart.x_labels = [
        time.strftime("%H:%M:%S", time.localtime(end - span + width * (i + 1))) for i in range(BUCKETS)
    ]
    chart.x_labels_major_every = 3
    for server in servers:
        calls = [0] * BUCKETS
        errors = [0] * BUCKETS
        for record in kept:
            if record.server != server:
                continue
            column = min(BUCKETS - 1, max(0, int((record.at - (end - span)) / width)))
            (errors if record.failed else calls)[column] += 1
        chart.add(f"{server} calls", calls)
        chart.add(f"{server} errors", errors)
    return _svg(chart)


def percentile(sorted_values: list[float], percent: int) -> float:
    """The nearest-rank percentile of ``sorted_values`` (not empty)."""
    rank = max(1, -(-len(sorted_values) * percent // 100))
    return sorted_values[min(rank, len(sorted_values)) - 1]


def latency_percentiles(records: Iterable[CallRecord]) -> str:
    """p50, p90 and p99 of each server's call latency, in milliseconds, as one SVG."""
    import pygal

    by_server: dict[str, list[float]] = {}
    for record in records:
        by_server.setdefault(record.server, []).append(record.duration_s * 1000.0)
    chart = pygal.Bar(title="Call latency per server (ms)", **_chart_options())
    servers = sorted(by_server)
    chart.x_labels = servers
    for percent in PERCENTILES:
        chart.add(
            f"p{percent}",
            [round(percentile(sorted(by_server[server]), percent), 2) for server in servers],
        )
    return _svg(chart)
