"""Sections of BENCHMARKS.md that one command measures and another must keep: find one by its
heading, replace it, or insert it in its place.

``make bench`` rewrites the report from its own results; the protocol-era, gateway,
integrations and tool-budget sections are measured by their own commands, so each is carried
over from the report being replaced, and a section written anew lands in its numbered place
(``## N. Title``): before the first heading with a higher number, else before the first line
that starts with one of the ``before`` anchors (the plots, the findings), else at the end.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

AFTER_THE_PLOTS = ("## Findings",)
"""Anchors for a section that follows the plots of the core sections."""


def _bounds(lines: list[str], heading: str) -> tuple[int, int] | None:
    """Where the section under ``heading`` starts and ends (the next heading or plot ends it)."""
    if heading not in lines:
        return None
    start = lines.index(heading)
    end = next((i for i in range(start + 1, len(lines)) if lines[i].startswith(("## ", "!["))), len(lines))
    return start, end


def _number(line: str) -> int:
    """The number of a ``## N. Title`` heading (0 for any other line)."""
    number, dot, _ = line.removeprefix("## ").partition(".")
    return int(number) if line.startswith("## ") and dot and number.isdigit() else 0


def section_of(report: str, heading: str) -> str | None:
    """The section under ``heading`` in ``report``, or ``None``."""
    lines = report.split("\n")
    found = _bounds(lines, heading)
    return None if found is None else "\n".join(lines[found[0] : found[1]])


def splice(report: str, heading: str, section: str, *, before: Sequence[str] = AFTER_THE_PLOTS) -> str:
    """``report`` with the section under ``heading`` replaced by ``section``, or, when it has
    none, ``section`` inserted in its numbered place (see the module's docstring)."""
    lines = report.rstrip("\n").split("\n")
    body = [*section.rstrip("\n").split("\n"), ""]
    found = _bounds(lines, heading)
    if found is not None:
        return "\n".join(lines[: found[0]] + body + lines[found[1] :]).rstrip("\n") + "\n"
    number = _number(heading)
    anchor = next(
        (
            i
            for i, line in enumerate(lines)
            if (number and _number(line) > number) or line.startswith(tuple(before))
        ),
        len(lines),
    )
    return "\n".join(lines[:anchor] + body + lines[anchor:]).rstrip("\n") + "\n"


def carry_over(
    previous: str | None, regenerated: str, heading: str, *, before: Sequence[str] = AFTER_THE_PLOTS
) -> str:
    """``regenerated`` with the section under ``heading`` of the report it replaces, unless it
    measured that section itself (then its own figures win)."""
    kept = None if previous is None else section_of(previous, heading)
    if kept is None or heading in regenerated.split("\n"):
        return regenerated
    return splice(regenerated, heading, kept, before=before)


def write_section(target: Path, heading: str, section: str) -> None:
    """Put ``section`` into the report at ``target`` (see ``splice``), as a command that measures
    only that section does; a report not written yet is begun with it."""
    report = target.read_text(encoding="utf-8") if target.exists() else ""
    target.write_text(splice(report, heading, section), encoding="utf-8")
