"""The sandbox benchmark (``bench/sandbox.py``): a short real run measures every usable back-end
against the unconfined server, and the section says met or missed against the goals."""

from __future__ import annotations

import anyio
from bench import sandbox


def test_a_short_run_measures_each_usable_back_end_against_the_unconfined_server() -> None:
    starts, calls = anyio.run(sandbox.measure, 1, 3)
    assert starts.keys() == calls.keys()
    assert "off" in starts and set(starts) <= set(sandbox.KINDS)
    assert all(value > 0 for value in [*starts.values(), *calls.values()])


def test_the_section_says_met_or_missed_with_the_figures() -> None:
    starts = {"off": 30.0, "bwrap": 40.0, "landlock": 50.0}
    calls = {"off": 0.5, "bwrap": 0.505, "landlock": 0.5}
    text = sandbox.section(starts, calls)
    assert text.startswith(sandbox.HEADING + "\n")
    assert "| bwrap | 40.0 | +10.0 | 0.505 | 1.010 | met |" in text
    assert "| landlock | 50.0 | +20.0 | 0.500 | 1.000 | missed |" in text
    assert "not measured" not in text
    assert "Not usable on this machine, so not measured: landlock." in sandbox.section(
        {"off": 30.0, "bwrap": 40.0}, {"off": 0.5, "bwrap": 0.5}
    )
