"""The protocol-era section of BENCHMARKS.md survives ``make bench``, which does not measure it."""

from __future__ import annotations

from pathlib import Path

from bench.protocol_eras import HEADING, carry_over, splice

REPORT = Path(__file__).resolve().parent.parent / "BENCHMARKS.md"


def without_section(text: str) -> str:
    lines = text.split("\n")
    start = lines.index(HEADING)
    end = next(i for i in range(start + 1, len(lines)) if lines[i].startswith(("## ", "![")))
    return "\n".join(lines[:start] + lines[end:])


def test_a_regenerated_report_keeps_the_protocol_era_section_in_its_place() -> None:
    current = REPORT.read_text(encoding="utf-8")
    assert HEADING in current
    regenerated = without_section(current)
    assert HEADING not in regenerated
    assert carry_over(current, regenerated) == current


def test_a_new_section_replaces_the_old_one_and_nothing_else() -> None:
    current = REPORT.read_text(encoding="utf-8")
    section = f"{HEADING}\n\nnew figures\n"
    updated = splice(current, section)
    assert "new figures" in updated
    assert updated.count(HEADING) == 1
    assert without_section(updated) == without_section(current)
