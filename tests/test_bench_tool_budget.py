"""The tool-budget section of BENCHMARKS.md survives ``make bench``, which rewrites the rest."""

from __future__ import annotations

from pathlib import Path

from bench.harness.sections import carry_over
from bench.protocol_eras import HEADING as ERAS_HEADING
from bench.tool_budget import HEADING

REPORT = Path(__file__).resolve().parent.parent / "BENCHMARKS.md"


def test_a_regenerated_report_keeps_both_carried_sections_in_their_places() -> None:
    current = REPORT.read_text(encoding="utf-8")
    lines = current.split("\n")
    assert HEADING in lines and lines.index(HEADING) > lines.index(ERAS_HEADING)
    start = lines.index(HEADING)
    end = next((i for i in range(start + 1, len(lines)) if lines[i].startswith(("## ", "!["))), len(lines))
    regenerated = "\n".join(lines[:start] + lines[end:]).rstrip("\n") + "\n"
    assert carry_over(current, regenerated, HEADING) == current
