"""Sections of BENCHMARKS.md that one command measures and another must keep: find one by its
heading, replace it, or insert it before an anchor line."""

from __future__ import annotations

from collections.abc import Sequence


def _bounds(lines: list[str], heading: str) -> tuple[int, int] | None:
    """Where the section under ``heading`` starts and ends (the next heading or plot ends it)."""
    if heading not in lines:
        return None
    start = lines.index(heading)
    end = next((i for i in range(start + 1, len(lines)) if lines[i].startswith(("## ", "!["))), len(lines))
    return start, end


def section_of(report: str, heading: str) -> str | None:
    """The section under ``heading`` in ``report``, or ``None``."""
    lines = report.split("\n")
    found = _bounds(lines, heading)
    return None if found is None else "\n".join(lines[found[0] : found[1]])


def splice(report: str, heading: str, section: str, *, before: Sequence[str]) -> str:
    """``report`` with the section under ``heading`` replaced by ``section``, or, when it has none,
    ``section`` inserted before the first line that starts with one of ``before`` (else at the end)."""
    lines = report.rstrip("\n").split("\n")
    body = [*section.rstrip("\n").split("\n"), ""]
    found = _bounds(lines, heading)
    if found is not None:
        return "\n".join(lines[: found[0]] + body + lines[found[1] :]) + "\n"
    anchor = next((i for i, line in enumerate(lines) if line.startswith(tuple(before))), len(lines))
    return "\n".join(lines[:anchor] + body + lines[anchor:]) + "\n"
