"""The telemetry section of BENCHMARKS.md: rendered from its figures, and kept by ``make bench``."""

from __future__ import annotations

from pathlib import Path

from bench.run import _write_report
from bench.telemetry import HEADING, render

REPORT = Path(__file__).resolve().parent.parent / "BENCHMARKS.md"


def test_the_section_gives_each_figure_off_and_on_and_the_ratio() -> None:
    costs = {"import mcpfleet": (10.0, 10.5), "import + telemetry.start()": (30.0, 360.0)}
    latencies = {"off": [1.0, 1.5, 2.0, 2.5, 3.0], "on": [1.5, 2.0, 2.5, 3.0, 3.5]}
    text = render(costs, latencies, runs=21, load=1.5)
    assert text.startswith(HEADING + "\n")
    assert "| import + telemetry.start() | 30.0 ms | 360.0 ms | 12.00× |" in text
    assert "| telemetry off | 2.000 ms |" in text and "| telemetry on | 2.500 ms |" in text
    assert "Tracing on adds 500 µs to a call's p50 (on/off 1.25×)" in text
    assert "21 runs" in text and "5 calls each" in text


def test_a_regenerated_report_keeps_the_telemetry_section_in_its_place(tmp_path: Path) -> None:
    current = REPORT.read_text(encoding="utf-8")
    lines = current.split("\n")
    assert HEADING in lines
    start = lines.index(HEADING)
    end = next((i for i in range(start + 1, len(lines)) if lines[i].startswith(("## ", "!["))), len(lines))
    target = tmp_path / "BENCHMARKS.md"
    target.write_text(current, encoding="utf-8")
    _write_report(target, "\n".join(lines[:start] + lines[end:]))
    assert target.read_text(encoding="utf-8") == current
