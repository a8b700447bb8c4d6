"""How ``mcpfleet daemon status`` reads (issue 23, item 9): which project each backend
serves, every process counted, and tables fitted to the terminal, never wrapped mid-word."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from mcpfleet.cli.render import UNLIMITED_WIDTH, print_daemon_status, report_console


def status_document(home: Path) -> dict[str, Any]:
    """Two projects each with a backend of ``filesystem``, one server shared by every project."""
    frontend, backend = str(home / "src" / "application-frontend"), str(home / "src" / "backend-services")

    def server(name: str, share: str, pid: int, project: str | None, **more: Any) -> dict[str, Any]:
        row = {"name": name, "state": "connected", "share": share, "sessions": 1, "pid": pid}
        row |= {"rss_bytes": 52428800, "idle_s": 0.0, "project": project, "keep_warm": False, "processes": 3}
        return row | more

    return {
        "pid": 4242,
        "version": "0.1.0",
        "since": "2026-12-01T09:30:00Z",
        "socket": "/run/user/1000/mcpfleet/daemon.sock",
        "log": str(home / ".local/state/mcpfleet/daemon.log"),
        "draining": False,
        "rss_bytes": 41943040,
        "sessions": [
            {"id": "s3", "host": "claude", "project": frontend, "since": "2026-12-01T09:31:12Z", "pid": 5150},
            {"id": "s4", "host": "gemini", "project": backend, "since": "2026-12-01T09:32:40Z", "pid": 5151},
        ],
        "controls": 1,
        "servers": [
            server("github", "user", 5160, None, sessions=2, processes=1),
            server("filesystem", "project", 5161, frontend),
            server("filesystem", "project", 5162, backend),
            server("time", "user", 5163, None, sessions=0, idle_s=300.0, processes=1),
        ],
        "totals": {"processes": 9, "rss_bytes": 251658240},
    }


def rendered(document: dict[str, Any], width: int) -> list[str]:
    out = Console(file=io.StringIO(), width=width, highlight=False)
    print_daemon_status(document, out=out)
    text = out.file.getvalue()  # type: ignore[attr-defined]
    assert isinstance(text, str)
    return text.splitlines()


def test_two_backends_of_one_server_say_which_project_each_serves(isolated_home: Path) -> None:
    lines = rendered(status_document(isolated_home), 200)
    [frontend] = [line for line in lines if "5161" in line]
    [backend] = [line for line in lines if "5162" in line]
    assert "~/src/application-frontend" in frontend and "~/src/backend-services" in backend
    [shared] = [line for line in lines if "github" in line]
    assert "every project" in shared
    [idle] = [line for line in lines if line.startswith("time")]
    assert "idle 5 min" in idle


def test_the_processes_a_server_started_are_counted(isolated_home: Path) -> None:
    lines = rendered(status_document(isolated_home), 200)
    header = next(line for line in lines if line.startswith("server"))
    assert header.split() == ["server", "project", "state", "sessions", "pid", "processes", "memory"]
    [frontend] = [line for line in lines if "5161" in line]
    assert frontend.split()[4:6] == ["5161", "3"]
    assert lines[1].startswith("9 processes (the daemon and its servers, with what they started)")


@pytest.mark.parametrize("width", [80, 100, 132])
def test_at_the_terminal_s_width_every_row_is_one_line_and_no_word_is_cut(
    isolated_home: Path, width: int
) -> None:
    document = status_document(isolated_home)
    lines = rendered(document, width)
    assert all(len(line) <= width for line in lines), "\n".join(lines)
    for server in document["servers"]:
        [row] = [line for line in lines if str(server["pid"]) in line]
        # Each cell whole, but for a path cut from its left (its end tells projects apart).
        assert row.split()[0] == server["name"]
        assert "connected" in row or "idle" in row
        assert "50.0 MB" in row
    for project in ("frontend", "services"):
        assert any(line.rstrip().endswith(project) or f"{project}  " in line for line in lines)
    assert "1 session" not in "\n".join(lines) and "2 sessions" in "\n".join(lines)


def test_a_narrow_terminal_cuts_cells_with_an_ellipsis_never_mid_word(isolated_home: Path) -> None:
    lines = rendered(status_document(isolated_home), 50)
    assert all(len(line) <= 50 for line in lines), "\n".join(lines)
    # One line per server: a cell too long is cut ("…"), never folded onto a line of its own.
    assert [line.split()[0] for line in lines if line.startswith(("github", "filesy", "time"))] == [
        "github",
        "filesy…",
        "filesy…",
        "time",
    ], "\n".join(lines)


def test_piped_the_report_is_not_cut_at_80_columns(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("COLUMNS", raising=False)
    assert report_console().width == UNLIMITED_WIDTH  # pytest's stdout is no terminal
    monkeypatch.setenv("COLUMNS", "101")
    assert report_console().width == 101


def test_the_whole_report_piped_holds_every_path_whole(isolated_home: Path) -> None:
    document = status_document(isolated_home)
    document["sessions"][0]["project"] = str(isolated_home / ("deep/" * 30) / "project")
    lines = rendered(document, UNLIMITED_WIDTH)
    assert any("~/" + "deep/" * 30 + "project" in line for line in lines)
