"""The gateway section of BENCHMARKS.md: ``python -m bench.gateway --write`` replaces it in place, and
``make bench`` keeps it when it renders a report from results that hold no gateway figures."""

from __future__ import annotations

from pathlib import Path

from bench.harness import sections
from bench.harness.gateway_report import HEADING, carry_over

REPORT = Path(__file__).resolve().parent.parent / "BENCHMARKS.md"


def without_section(text: str) -> str:
    section = sections.section_of(text, HEADING)
    assert section is not None
    return text.replace(section + "\n", "", 1)


def test_a_report_rendered_without_gateway_figures_keeps_the_gateway_section_in_its_place() -> None:
    current = REPORT.read_text(encoding="utf-8")
    regenerated = without_section(current)
    assert HEADING not in regenerated
    assert carry_over(current, regenerated) == current


def test_a_report_with_new_gateway_figures_keeps_them() -> None:
    current = REPORT.read_text(encoding="utf-8")
    regenerated = sections.splice(current, HEADING, f"{HEADING}\n\nnew figures\n")
    assert carry_over(current, regenerated) == regenerated


def test_writing_the_gateway_section_replaces_it_and_nothing_else() -> None:
    current = REPORT.read_text(encoding="utf-8")
    updated = sections.splice(current, HEADING, f"{HEADING}\n\nnew figures\n")
    assert "new figures" in updated
    assert updated.count(HEADING) == 1
    assert without_section(updated) == without_section(current)


def test_the_gateway_section_goes_before_the_findings_of_a_report_that_has_none() -> None:
    current = REPORT.read_text(encoding="utf-8")
    bare = without_section(current)
    inserted = sections.splice(bare, HEADING, f"{HEADING}\n\nfigures\n")
    lines = inserted.split("\n")
    assert lines.index(HEADING) < lines.index("## Findings")
    assert lines.index("## 7. Protocol eras") < lines.index(HEADING)
