"""``mcpfleet daemon start`` when the daemon it started is gone before it answers: an error
line and exit 1, not a traceback."""

from __future__ import annotations

import argparse

import pytest

from mcpfleet.cli import daemon_commands
from mcpfleet.cli.output import EXIT_FAILED
from mcpfleet.daemon_client import launch, paths


def test_start_says_so_when_the_daemon_it_started_no_longer_answers(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # A daemon that accepted the start's connection and exited at once: nothing answers the ping.
    monkeypatch.setattr(launch, "start_daemon", lambda: True)
    code = daemon_commands.start_command(argparse.Namespace(json=False))
    captured = capsys.readouterr()
    assert code == EXIT_FAILED
    assert captured.out == ""
    assert f"the daemon did not start: nothing answers on {paths.socket_path()}" in captured.err
