"""How the reports look: tables drawn from their documents, one table of state styles.

The rows are frozen records (``reports.rows``: ``ServerRow``, ``ToolRow``, ``ErrorRow``), each
with ``to_json()``, its ``--json`` shape. The ``status`` and ``tools`` reports are drawn from
that JSON document, not from the rows, because the document may come from the daemon
(``mcpfleet.daemon_client.control``): ``server_cells`` and ``tool_cells`` make a table line of
one JSON row, and ``print_status`` / ``print_tools`` draw a whole document (``daemon
status``'s too: ``daemon_session_cells``, ``daemon_server_cells``, ``print_daemon_status``). A
``config`` row (``EntryRow``, here) draws itself (``cells()``). ``render_table`` turns lines
into a table.

Text from servers, config files and paths enters a cell only as ``rich_text`` (never as
markup, control characters made visible), so a ``[/bogus]`` or an escape sequence in it is
shown, not obeyed. rich is imported only when something is drawn, so ``mcpfleet --help``
never loads it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from mcpfleet.cli.output import rich_text
from mcpfleet.reports.messages import counted
from mcpfleet.reports.rows import ServerRow, ToolRow

if TYPE_CHECKING:
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    from mcpfleet.config.model import DiscoveredEntry, Sandbox, SourceInfo


@dataclass(frozen=True)
class StateLook:
    """How one state is shown: its rich style, and its mark in plain text (``/mcp list``)."""

    style: str
    mark: str


STATE_LOOKS: Mapping[str, StateLook] = {
    # What discovery decided about an entry (``config``).
    "active": StateLook("green", "●"),
    "shadowed": StateLook("yellow", "○"),
    "invalid": StateLook("red", "✗"),
    "filtered": StateLook("cyan", "○"),
    # Both an entry's state and a server's.
    "disabled": StateLook("dim", "○"),
    "pending-approval": StateLook("magenta", "○"),
    # Where a server is (``status``, the live progress, ``/mcp list``).
    "connected": StateLook("green", "●"),
    "connecting": StateLook("yellow", "◌"),
    "reconnecting": StateLook("yellow", "◌"),
    "disconnected": StateLook("dim", "○"),
    "suspended": StateLook("red", "⏸"),
    "failed": StateLook("red", "✗"),
}
_UNKNOWN_STATE = StateLook("", "✗")

STDERR_LINES_SHOWN = 3
"""Lines of a down server's stderr shown under its error in the status table."""


def look_of(state: str) -> StateLook:
    return STATE_LOOKS.get(state, _UNKNOWN_STATE)


def styled_state(state: str) -> Text:
    return rich_text(state, look_of(state).style)


Cells = tuple["Text | str", ...]
"""One line of a table."""


@dataclass(frozen=True)
class PendingReview:
    """What a project entry awaiting approval would run, for the user to read first.

    Its config is still the text of the file (nothing was substituted); of its env and
    headers only the names are kept, never the values. A ``"sandbox"`` the entry declares is
    shown (``false``, or what it opens up); without one the level's default applies.
    """

    command: str | None = None
    args: tuple[str, ...] = ()
    cwd: str | None = None
    env: tuple[str, ...] = ()
    url: str | None = None
    headers: tuple[str, ...] = ()
    sandbox: Sandbox | None = None

    @classmethod
    def of(cls, entry: DiscoveredEntry) -> PendingReview | None:
        from mcpfleet.redaction import redact_args, redact_url

        config = entry.config
        if entry.state != "pending-approval" or config is None:
            return None
        if config.transport == "stdio":
            return cls(
                command=config.command,
                args=tuple(redact_args(config.args)),
                cwd=config.cwd,
                env=tuple(sorted(config.env)),
                sandbox=config.sandbox,
            )
        return cls(url=redact_url(config.url) if config.url else None, headers=tuple(sorted(config.headers)))

    def to_json(self) -> dict[str, Any]:
        if self.command is not None:
            data: dict[str, Any] = {
                "command": self.command,
                "args": list(self.args),
                "cwd": self.cwd,
                "env": list(self.env),
            }
            if self.sandbox is not None:
                data["sandbox"] = self.sandbox.to_dict()
            return data
        return {"url": self.url, "headers": list(self.headers)}

    def summary(self) -> str:
        from mcpfleet.redaction import redact_command_line

        if self.command is not None:
            parts = [f"runs: {redact_command_line(self.command, self.args)}"]
            if self.cwd:
                parts.append(f"in: {self.cwd}")
            if self.env:
                parts.append(f"env: {', '.join(self.env)}")
            if self.sandbox is not None:
                parts.append(f"sandbox: {sandbox_summary(self.sandbox)}")
        else:
            parts = [f"url: {self.url}"]
            if self.headers:
                parts.append(f"headers: {', '.join(self.headers)}")
        return "  ".join(parts)


def sandbox_summary(sandbox: Sandbox) -> str:
    """What a declared sandbox lets the server do beyond the defaults, in a few words."""
    if not sandbox.enabled:
        return "off (runs with every right of yours)"
    parts = []
    if sandbox.paths:
        parts.append(f"writes {', '.join(sandbox.paths)}")
    if sandbox.read_only_paths:
        parts.append(f"reads {', '.join(sandbox.read_only_paths)}")
    parts.append("network" if sandbox.network else "no network")
    return "; ".join(parts)


@dataclass(frozen=True)
class EntryRow:
    """One entry of ``config``: where it was found and what discovery decided."""

    COLUMNS: ClassVar[tuple[str, ...]] = ("Name", "State", "Transport", "Level", "Source", "Reason")

    name: str
    transport: str | None
    state: str
    reason: str
    source: SourceInfo
    review: PendingReview | None = None

    @classmethod
    def of(cls, entry: DiscoveredEntry) -> EntryRow:
        from mcpfleet.redaction import redact_text

        reason = redact_text(entry.reason)
        return cls(entry.name, entry.transport, entry.state, reason, entry.source, PendingReview.of(entry))

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "name": self.name,
            "transport": self.transport,
            "state": self.state,
            "reason": self.reason,
            "source": self.source.to_dict(),
        }
        if self.review is not None:
            data["review"] = self.review.to_json()
        return data

    def cells(self) -> tuple[Text | str, ...]:
        return (
            rich_text(self.name),
            styled_state(self.state),
            rich_text(self.transport or "-"),
            rich_text(self.source.level),
            rich_text(f"{self.source.provider_name}: {self.source.path}"),
            rich_text(self.reason, multiline=True),
        )

    def review_line(self) -> str:
        """The pending entry and what it runs, on one line (escape sequences written out)."""
        assert self.review is not None, "only a pending entry has a review"
        line = f"  {self.name} ({self.source.path})  {self.review.summary()}"
        # The repository wrote these words: an escape sequence in them must not reach the terminal.
        return "".join(
            char if char.isprintable() else char.encode("unicode_escape").decode() for char in line
        )


def server_cells(server: Mapping[str, Any]) -> Cells:
    """The status table's line of one ``servers`` row of the ``status --json`` document."""
    timings = server.get("timings_ms") or {}
    total = timings.get("total")
    cached = " (cached at start)" if server.get("at_gate") == "deferred" else ""
    error = rich_text(server.get("error") or "", multiline=True)
    stderr_tail = server.get("stderr_tail") or []
    if stderr_tail:
        error.append("\n")
        error.append_text(rich_text("stderr: " + " | ".join(stderr_tail[-STDERR_LINES_SHOWN:]), "dim"))
    source = server.get("source") or {}
    return (
        rich_text(server.get("name", "")),
        styled_state(str(server.get("state") or server.get("status", ""))),
        f"{server.get('tools', 0)}{cached}",
        f"{total:.0f}" if isinstance(total, int | float) else "",
        rich_text(f"{source.get('provider_name', '')} ({source.get('level', '')})"),
        error,
    )


def tool_cells(tool: Mapping[str, Any]) -> Cells:
    """The tools table's line of one ``tools`` row of the ``tools --json`` document."""
    name = rich_text(tool.get("name", ""))
    if tool.get("deferred"):
        name.append(" (deferred)", "yellow")
    if tool.get("withheld"):
        name.append(" (withheld: mcpfleet tools review)", "red")
    rules = sorted(
        {str(warning.get("rule")) for warning in tool.get("warnings") or [] if isinstance(warning, dict)}
    )
    if rules:
        name.append(f" (warning: {', '.join(rules)})", "red")
    lines = str(tool.get("description") or "").strip().splitlines()
    return name, rich_text(tool.get("server", "")), rich_text(lines[0] if lines else "")


DAEMON_SESSION_COLUMNS = ("host", "project", "since", "pid")
DAEMON_SERVER_COLUMNS = ("server", "project", "state", "sessions", "pid", "processes", "memory")
"""The ``daemon status`` tables. A server's share is said in its project cell ("every
project" for a user-level server, "…, one session" for a session's own), and how long it has
been idle in its state cell ("idle 4 min"): the ``--json`` rows keep both as fields."""
MIN_PATH_CELL = 14
"""The narrowest a path cell is cut to when a table is wider than the terminal: from its
left, since the end of a path is what tells two projects apart."""


def daemon_session_cells(session: Mapping[str, Any], *, home: str | None = None) -> Cells:
    """The daemon status table's line of one ``sessions`` row of ``daemon status --json``."""
    return (
        rich_text(session.get("host") or "?"),
        rich_text(short_path(session.get("project"), home)),
        rich_text(session.get("since") or ""),
        rich_text(session.get("pid") or ""),
    )


def daemon_server_cells(server: Mapping[str, Any], *, home: str | None = None) -> Cells:
    """The daemon status table's line of one ``servers`` row of ``daemon status --json``."""
    processes = server.get("processes")
    return (
        rich_text(server.get("name")),
        rich_text(served_for(server, home)),
        daemon_server_state(server),
        rich_text(server.get("sessions", 0)),
        rich_text(server.get("pid") or ""),
        rich_text(processes if isinstance(processes, int) and processes > 0 else "-"),
        megabytes(server.get("rss_bytes")),
    )


def served_for(server: Mapping[str, Any], home: str | None = None) -> str:
    """Whose sessions a backend serves: every project's (share ``user``), one project's, or
    one session's; two backends of one server differ here."""
    share = server.get("share")
    if share == "user":
        return "every project"
    project = short_path(server.get("project"), home) or "?"
    if share == "session":
        return f"{project}, one session"
    return project if share == "project" else f"{project} ({share})"


def daemon_server_state(server: Mapping[str, Any]) -> Text:
    """A server's state; a connected one no session uses says how long it has been idle."""
    state = str(server.get("state"))
    idle = server.get("idle_s")
    if state == "connected" and not server.get("sessions") and isinstance(idle, int | float) and idle > 0:
        return rich_text(f"idle {duration(idle)}", "dim")
    return styled_state(state)


def duration(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 2 * 3600:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.0f} h"


def short_path(value: Any, home: str | None = None) -> str:
    """A folder as a user writes it: ``~/src/app`` under the home."""
    if not isinstance(value, str):
        return ""
    if home and home != "/" and (value == home or value.startswith(home.rstrip("/") + "/")):
        return "~" + value[len(home.rstrip("/")) :]
    return value


def megabytes(value: Any) -> str:
    return f"{value / 1024 / 1024:.1f} MB" if isinstance(value, int | float) else "-"


def error_text(error: Mapping[str, Any]) -> Text:
    """One ``errors`` row of a document, as the line printed under a report."""
    from rich.text import Text

    return Text.assemble(
        ("error", "red"), " ", rich_text(f"{error.get('path', '')}: {error.get('error', '')}")
    )


def render_table(title: str | Text, columns: Sequence[str], lines: Iterable[Cells]) -> Table:
    """``lines`` under ``columns``; a ``str`` title is the report's own words (styled as a title)."""
    from rich.table import Table

    table = Table(title=title)
    for column in columns:
        table.add_column(column, overflow="fold")
    for cells in lines:
        table.add_row(*cells)
    return table


def status_table(servers: Sequence[Mapping[str, Any]]) -> Table:
    return render_table("MCP servers", ServerRow.COLUMNS, map(server_cells, servers))


def tools_table(tools: Sequence[Mapping[str, Any]]) -> Table:
    return render_table(counted(len(tools), "MCP tool"), ToolRow.COLUMNS, map(tool_cells, tools))


def config_table(project: str, rows: Sequence[EntryRow]) -> Table:
    return render_table(
        rich_text(f"MCP servers for {project}"), EntryRow.COLUMNS, (row.cells() for row in rows)
    )


def console(stderr: bool = False) -> Console:
    """The console of a report on stdout (or stderr): the terminal's width (``COLUMNS``
    honoured, as rich does); piped without ``COLUMNS``, ``UNLIMITED_WIDTH``, so that each row
    of a table stays one line (a pipe, a log, ``grep``), as wide as it needs."""
    import os

    from rich.console import Console

    terminal = Console(stderr=stderr, highlight=False)
    if terminal.is_terminal or os.environ.get("COLUMNS", "").isdigit():
        return terminal
    return Console(stderr=stderr, highlight=False, width=UNLIMITED_WIDTH)


def print_table(out: Console, table: Table) -> None:
    """Draw ``table`` without ever breaking a word: each column is at least as wide as the
    longest word in it, wrapping only between words. When those widths do not fit ``out``
    (a long path on a narrow terminal), the table is drawn as wide as they need, not cut."""
    from rich.cells import cell_len
    from rich.text import Text

    def words(cell: object) -> list[str]:
        return (cell.plain if isinstance(cell, Text) else str(cell)).split()

    for column in table.columns:
        longest = max(
            (cell_len(word) for cell in [column.header, *column.cells] for word in words(cell)), default=1
        )
        column.min_width = max(column.min_width or 0, longest)
    # Each column has a space of padding on either side, and a rule between and around them.
    needed = sum((column.min_width or 0) + 2 for column in table.columns) + len(table.columns) + 1
    if needed > out.width:
        out.print(table, width=needed, crop=False)
    else:
        out.print(table)


def print_status(document: Mapping[str, Any], *, out: Console | None = None) -> None:
    """The ``status`` report of its ``--json`` document."""
    out = out if out is not None else console()
    servers = document.get("servers") or []
    if servers:
        print_table(out, status_table(servers))
    else:
        out.print("No MCP servers found. `mcpfleet add NAME --command CMD` adds one.")
    print_errors(document.get("errors") or [])


def print_tools(document: Mapping[str, Any], *, out: Console | None = None) -> None:
    """The ``tools`` report of its ``--json`` document."""
    print_table(out if out is not None else console(), tools_table(document.get("tools") or []))
    print_errors(document.get("errors") or [])


def print_daemon_status(document: Mapping[str, Any], *, out: Console | None = None) -> None:
    """The ``daemon status`` report of its ``--json`` document: the daemon, its sessions, its
    servers. Fitted to ``out``'s width (``report_console``: the terminal's, ``COLUMNS``, or no
    limit when piped): a table wider than that has its path cells cut from the left, then its
    cells cut with "…"; a cell is never wrapped, so never in the middle of a word."""
    from mcpfleet.paths import home_dir

    out = out if out is not None else report_console()
    home = str(home_dir())
    totals = document.get("totals") or {}
    draining = " (draining: it stops once its sessions end)" if document.get("draining") else ""
    out.print(
        rich_text(
            f"mcpfleet daemon {document.get('version')}, pid {document.get('pid')}, running since "
            f"{document.get('since')}{draining}"
        ),
        overflow="ellipsis",
    )
    out.print(
        rich_text(
            f"{counted(totals.get('processes'), 'process', 'processes')} (the daemon and its servers, "
            f"with what they started), {megabytes(totals.get('rss_bytes'))} resident"
        ),
        overflow="ellipsis",
    )
    sessions = list(document.get("sessions") or [])
    session_lines = [daemon_session_cells(session, home=home) for session in sessions]
    out.print(fitted_table(counted(len(sessions), "session"), DAEMON_SESSION_COLUMNS, session_lines, out, 1))
    servers = list(document.get("servers") or [])
    server_lines = [daemon_server_cells(server, home=home) for server in servers]
    out.print(fitted_table(counted(len(servers), "server"), DAEMON_SERVER_COLUMNS, server_lines, out, 1))
    out.print(rich_text(f"log: {document.get('log')}"), overflow="ellipsis")
    print_errors(document.get("errors") or [])


UNLIMITED_WIDTH = 100_000
"""The width of a report that is piped: more than any line of it."""


def report_console() -> Console:
    """stdout for a report fitted to its width: ``console()``'s."""
    return console()


def fitted_table(
    title: str, columns: Sequence[str], lines: Sequence[Cells], out: Console, path_column: int
) -> Table:
    """``lines`` as a table no wider than ``out``, never wrapped (see ``print_daemon_status``)."""
    from rich.cells import cell_len
    from rich.measure import Measurement

    table = _unwrapped_table(title, columns, lines)
    natural = Measurement.get(out, out.options.update_width(UNLIMITED_WIDTH), table).maximum
    excess = natural - out.width
    widest = max((cell_len(str(cells[path_column])) for cells in lines), default=0)
    if excess <= 0 or widest <= MIN_PATH_CELL:
        return table
    width = max(MIN_PATH_CELL, widest - excess)
    cut = [
        (*cells[:path_column], cut_left(cells[path_column], width), *cells[path_column + 1 :])
        for cells in lines
    ]
    return _unwrapped_table(title, columns, cut)


def cut_left(cell: Text | str, width: int) -> Text:
    """``cell`` in at most ``width`` cells, its start replaced by "…" when it is longer."""
    from rich.cells import cell_len
    from rich.text import Text

    text = cell if isinstance(cell, Text) else Text(cell)
    plain = text.plain
    if cell_len(plain) <= width:
        return text
    kept = ""
    for character in reversed(plain):
        if cell_len(character + kept) > width - 1:
            break
        kept = character + kept
    return Text("…" + kept, style=text.style)


def _unwrapped_table(title: str, columns: Sequence[str], lines: Iterable[Cells]) -> Table:
    from rich import box
    from rich.table import Table

    # Ruled under the header only, two spaces between columns: 80 columns hold seven of them.
    table = Table(
        title=rich_text(title), box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, collapse_padding=True
    )
    for column in columns:
        table.add_column(column, no_wrap=True, overflow="ellipsis")
    for cells in lines:
        table.add_row(*cells)
    return table


def print_config(project: str, rows: Sequence[EntryRow], out: Console) -> None:
    """The ``config`` report, then the review of every pending project entry."""
    if rows:
        print_table(out, config_table(project, rows))
    else:
        out.print("No MCP servers found. Add one with `mcpfleet add NAME --command CMD`.")
    pending = [row for row in rows if row.review is not None]
    if pending:
        from rich.text import Text

        out.print("Pending project servers: review what they run, then `mcpfleet approve NAME`:")
        for row in pending:
            # Text, not markup: these lines are the repository's own words.
            out.print(Text(row.review_line()), soft_wrap=True)


def print_errors(errors: Sequence[Mapping[str, Any]], *, err: Console | None = None) -> None:
    err = err if err is not None else console(stderr=True)
    for error in errors:
        err.print(error_text(error))
