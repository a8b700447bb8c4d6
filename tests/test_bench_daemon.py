"""The daemon's section of BENCHMARKS.md: rendered from its figures, and kept by ``make bench``."""

from __future__ import annotations

from pathlib import Path

from bench.daemon import HEADING, Footprint, Results, section
from bench.harness.sections import write_section
from bench.run import _write_report

REPORT = Path(__file__).resolve().parent.parent / "BENCHMARKS.md"
MIB = 2**20


def test_the_section_compares_each_set_up_with_the_direct_one_and_states_the_goals() -> None:
    results = Results(
        footprints={
            "node": [
                Footprint("direct", 40, 40, 2000 * MIB, 2000 * MIB),
                Footprint("mcp-hub (one shared hub)", 8, 9, 600 * MIB, 400 * MIB),
                Footprint("daemon", 8, 15, 500 * MIB, 400 * MIB),
            ]
        },
        first_list={
            "daemon": [0.05, 0.07, 0.06],
            "in-process": [0.9, 1.0, 0.8],
            "mcp-hub": [0.03, 0.02, 0.04],
        },
        tools_command={"daemon": [0.1, 0.08, 0.09], "in-process": [1.1, 1.2, 1.0]},
        tool_total=24,
    )
    text = section(results)
    assert text.startswith(HEADING + "\n")
    assert "| daemon | 8 | 15 | 500 MiB (100 MiB) | 25% |" in text
    assert "| 60 ms | 900 ms (`--no-daemon`) | ≤ 100 ms |" in text
    assert "| 90 ms | 1100 ms | ≤ 200 ms |" in text
    assert "| mcp-hub (one shared hub) | 8 | 9 | 600 MiB (200 MiB) | 30% |" in text
    assert "a new session (SDK imported, SSE client) takes 30 ms (median)" in text
    assert "excludes any process launch" in text


def test_without_node_the_section_has_no_mcp_hub_sentence() -> None:
    results = Results(
        footprints={"python": [Footprint("direct", 40, 40, 400 * MIB, 400 * MIB)]},
        first_list={"daemon": [0.05], "in-process": [0.9]},
        tools_command={"daemon": [0.1], "in-process": [1.1]},
        tool_total=24,
    )
    assert "mcp-hub warm" not in section(results)


def test_a_regenerated_report_keeps_the_daemon_section_in_its_place(tmp_path: Path) -> None:
    current = REPORT.read_text(encoding="utf-8")
    lines = current.split("\n")
    assert HEADING in lines
    start = lines.index(HEADING)
    end = next((i for i in range(start + 1, len(lines)) if lines[i].startswith(("## ", "!["))), len(lines))
    target = tmp_path / "BENCHMARKS.md"
    target.write_text(current, encoding="utf-8")
    # What ``make bench`` writes: a report without the section, which it does not measure.
    _write_report(target, "\n".join(lines[:start] + lines[end:]))
    assert target.read_text(encoding="utf-8") == current


def test_writing_the_section_replaces_it_and_keeps_the_rest(tmp_path: Path) -> None:
    current = REPORT.read_text(encoding="utf-8")
    target = tmp_path / "BENCHMARKS.md"
    target.write_text(current, encoding="utf-8")
    write_section(target, HEADING, f"{HEADING}\n\nnew figures\n")
    written = target.read_text(encoding="utf-8")
    assert f"{HEADING}\n\nnew figures\n" in written
    before, _, after = current.partition(HEADING)
    assert written.startswith(before)
    assert written.endswith(after[after.index("\n## ") :])
