"""What people see on a terminal: live per-server progress and the report tables.

Everything here writes to stderr or a rich console; ``--json`` output never passes
through this module. Text from servers and files enters a table only as ``rich_text``
(never as markup), so a ``[/bogus]`` or an escape sequence in it is shown, not obeyed.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from mcpfleet.cli.output import rich_text

if TYPE_CHECKING:
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    from mcpfleet.fleet.manager import ManagerEvent, MCPManager

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
        style = _STATUS_STYLE.get(state, "")
        detail = f"{(at - started) * 1000:6.0f} ms" if state != "connecting" else "…"
        table.add_row(
            f"[{style}]●[/]", rich_text(name), f"[{style}]{state}[/]", detail, rich_text(error or "")
        )
    return table


def status_table(rows: list[dict[str, Any]]) -> Table:
    """The ``status`` report: one row per server, with the last lines of a down server's stderr."""
    from rich.table import Table

    table = Table(title="MCP servers")
    for column in ("server", "status", "tools", "ms", "source", "error"):
        table.add_column(column, overflow="fold")
    for row in rows:
        state = row.get("state", row["status"])
        style = _STATUS_STYLE.get(state, "")
        total = row["timings_ms"].get("total")
        deferred = " (cached at start)" if row.get("at_gate") == "deferred" else ""
        error = rich_text(row["error"] or "", multiline=True)
        tail = row.get("stderr_tail") or []
        if tail:
            error.append("\n")
            error.append_text(rich_text("stderr: " + " | ".join(tail[-STDERR_LINES_SHOWN:]), "dim"))
        table.add_row(
            rich_text(row["name"]),
            f"[{style}]{state}[/]",
            f"{row['tools']}{deferred}",
            f"{total:.0f}" if total is not None else "",
            rich_text(f"{row['source']['provider_name']} ({row['source']['level']})"),
            error,
        )
    return table


def tools_table(tools: list[dict[str, Any]]) -> Table:
    """The ``tools`` report: name (and whether deferred), server, first line of the description."""
    from rich.table import Table

    table = Table(title=f"{len(tools)} MCP tools")
    for column in ("name", "server", "description"):
        table.add_column(column, overflow="fold")
    for tool in tools:
        name = rich_text(tool["name"])
        if tool["deferred"]:
            name.append(" (deferred)", "yellow")
        description = (tool["description"] or "").strip().splitlines()
        table.add_row(name, rich_text(tool["server"]), rich_text(description[0] if description else ""))
    return table


def error_lines(errors: list[dict[str, str]]) -> list[Text]:
    """One ``error <path>: <error>`` line per discovery or connection error."""
    from rich.text import Text

    return [Text.assemble(("error", "red"), " ", rich_text(f"{e['path']}: {e['error']}")) for e in errors]


def print_status_table(rows: list[dict[str, Any]], errors: list[dict[str, str]]) -> None:
    out = console()
    if rows:
        out.print(status_table(rows))
    else:
        out.print("No MCP servers found. `mcpfleet add NAME --command CMD` adds one.")
    print_errors(errors)


def print_tools_table(tools: list[dict[str, Any]], errors: list[dict[str, str]]) -> None:
    console().print(tools_table(tools))
    print_errors(errors)


def print_errors(errors: list[dict[str, str]]) -> None:
    err = console(stderr=True)
    for line in error_lines(errors):
        err.print(line)
