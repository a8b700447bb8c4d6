"""The report rows: their ``--json`` shapes (the CLI contract, key order included) and how
the rich tables draw them, into ``Console(file=io.StringIO(), width=…)``."""

from __future__ import annotations

import io
import json

from rich.console import Console

from mcpfleet.cli.render import (
    EntryRow,
    PendingReview,
    error_text,
    look_of,
    print_config,
    status_table,
    styled_state,
    tools_table,
)
from mcpfleet.config.model import DiscoveredEntry, ServerConfig, SourceInfo
from mcpfleet.contract.text import json_for_terminal
from mcpfleet.errors import Failure
from mcpfleet.reports.rows import ErrorRow, ServerRow, ToolRow

USER_SOURCE = SourceInfo(
    "mcpfleet", "mcpfleet", "/home/u/.config/mcpfleet/mcp.json", "user", "/mcpServers/files"
)
PROJECT_SOURCE = SourceInfo("claude-code", "Claude Code", "/work/p/.mcp.json", "project", "/mcpServers/proj")


def drawn(renderable: object, width: int = 140) -> str:
    console = Console(file=io.StringIO(), width=width, color_system=None)
    console.print(renderable)
    output = console.file
    assert isinstance(output, io.StringIO)
    return output.getvalue()


def broken_row(**changes: object) -> ServerRow:
    fields: dict[str, object] = {
        "name": "broken",
        "status": "failed",
        "state": "failed",
        "tools": 0,
        "deferred": False,
        "at_gate": "live",
        "error": "exited with code 3",
        "stderr_tail": ("line 1", "line 2", "line 3", "line 4"),
        "source": USER_SOURCE,
        "timings_ms": {"spawn": 3.2, "total": 41.6},
    }
    fields.update(changes)
    return ServerRow(**fields)  # type: ignore[arg-type]


def test_a_status_row_has_the_contracts_json_shape_in_order() -> None:
    row = broken_row(era="legacy", protocol_version="2025-11-25")
    assert json.dumps(row.to_json()) == json.dumps(
        {
            "name": "broken",
            "status": "failed",
            "state": "failed",
            "tools": 0,
            "deferred": False,
            "at_gate": "live",
            "error": "exited with code 3",
            "stderr_tail": ["line 1", "line 2", "line 3", "line 4"],
            "source": {
                "provider": "mcpfleet",
                "provider_name": "mcpfleet",
                "path": "/home/u/.config/mcpfleet/mcp.json",
                "level": "user",
                "location": "/mcpServers/files",
            },
            "timings_ms": {"spawn": 3.2, "total": 41.6},
            "era": "legacy",
            "protocol_version": "2025-11-25",
            "sandbox": "off",
        }
    )


def test_the_status_table_shows_state_tools_time_source_and_the_last_stderr_lines() -> None:
    connected = broken_row(
        name="files",
        status="connected",
        state="connected",
        tools=2,
        at_gate="deferred",
        error=None,
        stderr_tail=(),
    )
    text = drawn(status_table([connected.to_json(), broken_row().to_json()]))
    assert "MCP servers" in text
    assert [column in text for column in ("server", "status", "tools", "ms", "source", "error")] == [True] * 6
    files_line = next(line for line in text.splitlines() if "files" in line)
    assert (
        "connected" in files_line and "2 (cached at start)" in files_line and "mcpfleet (user)" in files_line
    )
    assert "42" in text  # the total, rounded
    assert "stderr: line 2 | line 3 | line 4" in text
    assert "line 1" not in text


def test_server_text_is_drawn_as_text_never_as_markup() -> None:
    row = broken_row(name="[bold]x[/bold]", error="\x1b]0;title\x07 [/bogus]")
    text = drawn(status_table([row.to_json()]))
    assert "[bold]x[/bold]" in text
    assert "\\x1b]0;title\\x07 [/bogus]" in text
    assert "\x1b" not in text


def test_a_tool_row_has_the_contracts_json_shape_and_a_line_in_the_table() -> None:
    schema = {"type": "object", "properties": {"message": {"type": "string"}}}
    echo = ToolRow("mcp_files_echo", "files", "echo", "Echo a message back\nmore text", False, schema)
    late = ToolRow("mcp_slow_now", "slow", "now", "", True, {})
    held = ToolRow(
        "mcp_rug_read",
        "rug",
        "read",
        "changed",
        False,
        {},
        withheld=True,
        warnings=({"rule": "hidden-markup", "text": "in description: “<IMPORTANT>”"},),
    )
    assert list(echo.to_json()) == [
        "name",
        "server",
        "mcp_name",
        "description",
        "deferred",
        "input_schema",
        "withheld",
        "warnings",
    ]
    assert echo.to_json()["input_schema"] is schema
    assert echo.to_json()["withheld"] is False and held.to_json()["withheld"] is True
    assert echo.to_json()["warnings"] == []
    assert held.to_json()["warnings"] == [{"rule": "hidden-markup", "text": "in description: “<IMPORTANT>”"}]
    text = drawn(tools_table([echo.to_json(), late.to_json(), held.to_json()]))
    assert "3 MCP tools" in text
    assert "Echo a message back" in text and "more text" not in text
    assert "mcp_slow_now (deferred)" in text
    assert "mcp_rug_read (withheld: mcpfleet tools review) (warning: hidden-markup)" in text


def test_a_config_row_carries_what_a_pending_entry_would_run() -> None:
    config = ServerConfig(name="proj", transport="stdio", command="node", args=("x.js",), env={"TOKEN": "s"})
    pending = EntryRow.of(
        DiscoveredEntry("proj", "pending-approval", "not approved yet", PROJECT_SOURCE, config, "stdio")
    )
    assert pending.to_json() == {
        "name": "proj",
        "transport": "stdio",
        "state": "pending-approval",
        "reason": "not approved yet",
        "source": PROJECT_SOURCE.to_dict(),
        "review": {"command": "node", "args": ["x.js"], "cwd": None, "env": ["TOKEN"]},
    }
    active = EntryRow("files", "stdio", "active", "", USER_SOURCE)
    assert "review" not in active.to_json()
    out = Console(file=io.StringIO(), width=200, color_system=None)
    print_config("/work/p", [pending, active], out)
    text = out.file.getvalue()  # type: ignore[attr-defined]
    assert "MCP servers for /work/p" in text
    assert "Claude Code: /work/p/.mcp.json" in text
    # The env's names only: the value of TOKEN is never shown.
    assert "  proj (/work/p/.mcp.json)  runs: node x.js  env: TOKEN\n" in text


def test_a_review_line_writes_escape_sequences_out() -> None:
    review = PendingReview(url="https://evil/\x1b[2J", headers=("X-Key",))
    row = EntryRow("evil", "http", "pending-approval", "", PROJECT_SOURCE, review)
    assert row.review_line() == "  evil (/work/p/.mcp.json)  url: https://evil/\\x1b[2J  headers: X-Key"


def test_one_state_table_styles_entries_servers_and_progress_alike() -> None:
    assert look_of("connected").style == look_of("active").style == "green"
    assert look_of("failed").style == look_of("invalid").style == "red"
    assert look_of("pending-approval").style == "magenta"
    assert [look_of(state).mark for state in ("connected", "connecting", "disconnected", "suspended")] == [
        "●",
        "◌",
        "○",
        "⏸",
    ]
    assert look_of("something new").mark == "✗"
    coloured = Console(file=io.StringIO(), width=40, force_terminal=True, color_system="standard")
    coloured.print(styled_state("connected"))
    assert "\x1b[32mconnected" in coloured.file.getvalue()  # type: ignore[attr-defined]


def test_errors_are_rows_too() -> None:
    error = ErrorRow.of(Failure("broken", "connect", "exited with code 3"))
    assert (
        json_for_terminal(error.to_json()) == '{\n  "path": "mcp:broken",\n  "error": "exited with code 3"\n}'
    )
    assert drawn(error_text(error.to_json())).strip() == "error mcp:broken: exited with code 3"
