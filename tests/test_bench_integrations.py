"""The framework-integration section of BENCHMARKS.md survives ``make bench``, which does not
measure it, beside the protocol-era section."""

from __future__ import annotations

from pathlib import Path

from bench import integrations, protocol_eras
from bench.run import _write_report

REPORT = Path(__file__).resolve().parent.parent / "BENCHMARKS.md"


def without(text: str, heading: str) -> str:
    lines = text.split("\n")
    start = lines.index(heading)
    end = next(i for i in range(start + 1, len(lines)) if lines[i].startswith(("## ", "![")))
    return "\n".join(lines[:start] + lines[end:])


def test_a_regenerated_report_keeps_both_measured_sections_in_place(tmp_path: Path) -> None:
    current = REPORT.read_text(encoding="utf-8")
    assert integrations.HEADING in current and protocol_eras.HEADING in current
    target = tmp_path / "BENCHMARKS.md"
    target.write_text(current, encoding="utf-8")
    _write_report(target, without(without(current, integrations.HEADING), protocol_eras.HEADING))
    assert target.read_text(encoding="utf-8") == current
