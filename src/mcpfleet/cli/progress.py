"""What people see on a terminal: live per-server progress and the report tables.

Everything here writes to stderr or a rich console; ``--json`` output never passes
through this module.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rich.console import Console
    from rich.table import Table

    from mcpfleet.manager import ManagerEvent, MCPManager

STDERR_LINES_SHOWN = 3
"""Lines of a down server's stderr shown under its error in the status table."""

_STATUS_STYLE = {
    "connected": "green",
    "connecting": "yellow",
    "reconnecting": "yellow",
    "suspended": "red",
    "failed": "red",
    "disconnected": "dim",
    "pending-approval": "magenta",
    "disabled": "dim",
}


def console(stderr: bool = False) -> Console:
    from rich.console import Console

    return Console(stderr=stderr, highlight=False)


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
        from rich.table import Table

        table = Table(box=None, show_header=False, pad_edge=False)
        for name, (state, at, error) in sorted(states.items()):
            style = _STATUS_STYLE.get(state, "")
            detail = f"{(at - started) * 1000:6.0f} ms" if state != "connecting" else "…"
            table.add_row(f"[{style}]●[/]", name, f"[{style}]{state}[/]", detail, error or "")
        return table

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


def print_status_table(rows: list[dict[str, Any]], errors: list[dict[str, str]]) -> None:
    from rich.markup import escape
    from rich.table import Table

    out = console()
    if not rows:
        out.print("No MCP servers found. `mcpfleet add NAME --command CMD` adds one.")
    else:
        table = Table(title="MCP servers")
        for column in ("server", "status", "tools", "ms", "source", "error"):
            table.add_column(column, overflow="fold")
        for row in rows:
            state = row.get("state", row["status"])
            style = _STATUS_STYLE.get(state, "")
            total = row["timings_ms"].get("total")
            deferred = " (cached at start)" if row.get("at_gate") == "deferred" else ""
            error = row["error"] or ""
            tail = row.get("stderr_tail") or []
            if tail:
                # Server output may hold square brackets, which rich would read as markup.
                error += "\n[dim]stderr: " + escape(" | ".join(tail[-STDERR_LINES_SHOWN:])) + "[/]"
            table.add_row(
                row["name"],
                f"[{style}]{state}[/]",
                f"{row['tools']}{deferred}",
                f"{total:.0f}" if total is not None else "",
                f"{row['source']['provider_name']} ({row['source']['level']})",
                error,
            )
        out.print(table)
    print_errors(errors)


def print_tools_table(tools: list[dict[str, Any]], errors: list[dict[str, str]]) -> None:
    from rich.table import Table

    out = console()
    table = Table(title=f"{len(tools)} MCP tools")
    for column in ("name", "server", "description"):
        table.add_column(column, overflow="fold")
    for tool in tools:
        mark = " [yellow](deferred)[/]" if tool["deferred"] else ""
        description = (tool["description"] or "").strip().splitlines()
        table.add_row(tool["name"] + mark, tool["server"], description[0] if description else "")
    out.print(table)
    print_errors(errors)


def print_errors(errors: list[dict[str, str]]) -> None:
    if not errors:
        return
    err = console(stderr=True)
    for error in errors:
        err.print(f"[red]error[/] {error['path']}: {error['error']}")
