"""``mcpfleet ui`` where it cannot have a dashboard: it says why and exits, opening nothing."""

from __future__ import annotations

import webbrowser
from pathlib import Path

import pytest

from mcpfleet.cli.main import main


def test_without_the_daemon_ui_says_so_and_exits_2(
    isolated_home: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    opened: list[str] = []

    def record(url: str, *args: object, **kwargs: object) -> bool:
        opened.append(url)
        return True

    monkeypatch.setattr(webbrowser, "open", record)
    monkeypatch.setenv("MCPFLEET_NO_DAEMON", "1")
    assert main(["ui"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert "unset MCPFLEET_NO_DAEMON" in captured.err
    assert opened == []
