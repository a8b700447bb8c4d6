"""The sandbox benchmark: what confining a stdio server costs, per back-end, in one run.

    python -m bench.sandbox --write     # the "Sandbox" section of BENCHMARKS.md (~1 min on 2 cores)
    python -m bench.sandbox --smoke     # a few seconds: fewer runs, prints the figures only

The server is ``bench/servers/synthetic_server.py`` (stdlib only), started through mcpfleet's own
spawn path (``connect_to_server``) in a private home, once unconfined and once per usable
back-end (``MCPFLEET_SANDBOX_BACKEND``), interleaved start by start. **Start** is the time from
the call to ``connect_to_server`` to a finished handshake (spawn, the sandbox's set-up, the
server's own start); the median of ``STARTS`` starts. **Call** is the median latency of
``CALLS`` ``echo`` calls on one connection of each kind, taken in one run, interleaved call by
call (each kind first in turn); the ratio is the sandboxed median over the unconfined one.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import AsyncExitStack, contextmanager
from pathlib import Path

import anyio

from bench.harness import sections

REPO_ROOT = Path(__file__).resolve().parents[1]
SERVER = REPO_ROOT / "bench" / "servers" / "synthetic_server.py"
HEADING = "## 12. Sandbox"
STARTS = 20
CALLS = 400
GOAL_START_MS = 15.0
GOAL_CALL_RATIO = 1.02
KINDS = ("off", "bwrap", "landlock")


@contextmanager
def private_home() -> Iterator[Path]:
    with tempfile.TemporaryDirectory(prefix="mcpfleet-bench-sandbox-") as folder:
        home = Path(folder).resolve()
        saved = {key: os.environ.get(key) for key in ("HOME", "MCPFLEET_HOME")}
        os.environ.update(HOME=str(home), MCPFLEET_HOME=str(home / "mcpfleet"))
        try:
            (home / "project").mkdir()
            yield home / "project"
        finally:
            for key, value in saved.items():
                if value is None:
                    os.environ.pop(key, None)
                else:
                    os.environ[key] = value


def config_of(kind: str, project: Path):  # type: ignore[no-untyped-def]
    from mcpfleet.config.model import SANDBOX_OFF, Sandbox, ServerConfig

    sandbox = SANDBOX_OFF if kind == "off" else Sandbox(read_only_paths=(str(SERVER.parent),))
    return ServerConfig(
        name="synthetic",
        transport="stdio",
        command=sys.executable,
        args=(str(SERVER),),
        cwd=str(project),
        sandbox=sandbox,
    )


def usable_kinds() -> list[str]:
    from mcpfleet.transport import sandbox

    kinds = ["off"]
    for backend in ("bwrap", "landlock"):
        os.environ[sandbox.BACKEND_VARIABLE] = backend
        if sandbox.available_backend("bench") == backend:
            kinds.append(backend)
    os.environ.pop(sandbox.BACKEND_VARIABLE, None)
    return kinds


def select(kind: str) -> None:
    from mcpfleet.transport import sandbox

    if kind == "off":
        os.environ.pop(sandbox.BACKEND_VARIABLE, None)
    else:
        os.environ[sandbox.BACKEND_VARIABLE] = kind


def rotated(kinds: list[str], round_number: int) -> list[str]:
    """``kinds`` starting at a different one each round: the first of a round runs after the
    others' work, the last right before a pause, and each kind takes each place in turn."""
    shift = round_number % len(kinds)
    return kinds[shift:] + kinds[:shift]


async def start_ms(kind: str, project: Path) -> float:
    from mcpfleet.client import connect_to_server

    select(kind)
    started = time.perf_counter()
    async with connect_to_server("synthetic", config_of(kind, project), cwd=project):
        elapsed = (time.perf_counter() - started) * 1000
    return elapsed


async def measure(starts: int, calls: int) -> tuple[dict[str, float], dict[str, float]]:
    from mcpfleet.client import connect_to_server

    with private_home() as project:
        kinds = usable_kinds()
        # One start of each first: imports and the back-ends' probes are paid outside the clock.
        for kind in kinds:
            await start_ms(kind, project)
        start_samples: dict[str, list[float]] = {kind: [] for kind in kinds}
        for round_number in range(starts):
            for kind in rotated(kinds, round_number):
                start_samples[kind].append(await start_ms(kind, project))
        call_samples: dict[str, list[float]] = {kind: [] for kind in kinds}
        async with AsyncExitStack() as stack:
            connections = {}
            for kind in kinds:
                select(kind)
                connections[kind] = await stack.enter_async_context(
                    connect_to_server("synthetic", config_of(kind, project), cwd=project)
                )
            tool = "tool_0"
            for round_number in range(calls):
                for kind in rotated(kinds, round_number):
                    started = time.perf_counter()
                    await connections[kind].call_tool(tool, {"message": "hi"})
                    call_samples[kind].append((time.perf_counter() - started) * 1000)
        select("off")
    return (
        {kind: statistics.median(values) for kind, values in start_samples.items()},
        {kind: statistics.median(values) for kind, values in call_samples.items()},
    )


def section(starts: dict[str, float], calls: dict[str, float]) -> str:
    lines = [
        HEADING,
        "",
        "`python -m bench.sandbox --write`. One stdlib stdio server started through mcpfleet's spawn "
        f"path, unconfined and in each usable sandbox back-end, interleaved: median of {STARTS} starts "
        f"(call to finished handshake), and the median of {CALLS} `tool_0` (echo) calls on one connection of "
        f"each kind in one run. Goals: at most {GOAL_START_MS:.0f} ms added per start, call ratio at "
        f"most {GOAL_CALL_RATIO}. Load average when it ran: {os.getloadavg()[0]:.1f} on "
        f"{os.cpu_count()} cores (each launcher is a process more to schedule: on a loaded machine "
        "the added start-up grows with the load).",
        "",
        "| sandbox | start (ms) | added (ms) | call (ms) | call ratio | goal |",
        "|---|---:|---:|---:|---:|---|",
    ]
    for kind, start in starts.items():
        added = start - starts["off"]
        ratio = calls[kind] / calls["off"]
        verdict = "–"
        if kind != "off":
            met = added <= GOAL_START_MS and ratio <= GOAL_CALL_RATIO
            verdict = "met" if met else "missed"
        lines.append(f"| {kind} | {start:.1f} | {added:+.1f} | {calls[kind]:.3f} | {ratio:.3f} | {verdict} |")
    missing = [kind for kind in KINDS if kind not in starts]
    if missing:
        lines += ["", f"Not usable on this machine, so not measured: {', '.join(missing)}."]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--write", action="store_true", help="write the section into BENCHMARKS.md")
    parser.add_argument("--smoke", action="store_true", help="fewer runs; print only")
    options = parser.parse_args()
    starts, calls = anyio.run(measure, 3 if options.smoke else STARTS, 20 if options.smoke else CALLS)
    text = section(starts, calls)
    print(text)
    if options.write and not options.smoke:
        sections.write_section(REPO_ROOT / "BENCHMARKS.md", HEADING, text)


if __name__ == "__main__":
    main()
