"""Live per-server progress on a terminal, while a command connects the fleet.

It writes to stderr only; ``--json`` output never passes through this module. Text from
servers enters the table only as ``rich_text`` (never as markup).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from mcpfleet.cli.output import rich_text
from mcpfleet.cli.render import console, look_of, styled_state

if TYPE_CHECKING:
    from rich.table import Table

    from mcpfleet.fleet.manager import ManagerEvent, MCPManager


@contextmanager
def live_progress(manager: MCPManager, *, enabled: bool) -> Iterator[None]:
    """Show each server's state as it changes, until the block ends."""
    if not enabled:
        yield
        return
    from rich.live import Live

    started = time.perf_counter()
    states: dict[str, tuple[str, float, str | None]] = {}

    def render() -> Table:
        return progress_table(states, started)

    with Live(render(), console=console(stderr=True), refresh_per_second=12, transient=True) as live:

        def on_event(event: ManagerEvent) -> None:
            if event.kind in ("connecting", "connected", "failed", "reconnecting"):
                states[event.server] = (event.kind, time.perf_counter(), event.error)
                live.update(render())

        unsubscribe = manager.subscribe(on_event)
        try:
            yield
        finally:
            unsubscribe()


def progress_table(states: dict[str, tuple[str, float, str | None]], started: float) -> Table:
    """One line per server: state, time since ``started`` when it got there, error."""
    from rich.table import Table

    table = Table(box=None, show_header=False, pad_edge=False)
    for name, (state, at, error) in sorted(states.items()):
        detail = f"{(at - started) * 1000:6.0f} ms" if state != "connecting" else "…"
        table.add_row(
            rich_text("●", look_of(state).style),
            rich_text(name),
            styled_state(state),
            detail,
            rich_text(error or ""),
        )
    return table
