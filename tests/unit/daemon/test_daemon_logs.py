"""The daemon's log file: rotated at its size with three older files kept, private whatever the
umask, secrets masked; ``last_lines`` reaches into the rotated files and ``follow`` goes on
across a rotation."""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from mcpfleet.daemon.logs import LOG_BACKUPS, follow, last_lines, log_files, log_to_file
from mcpfleet.redaction import remember_secret


@pytest.fixture
def daemon_log(tmp_path: Path) -> Iterator[tuple[Path, logging.Logger]]:
    """A log at ``tmp_path/state/daemon.log`` of 2 KiB per file, and a logger writing to it."""
    path = tmp_path / "state" / "daemon.log"
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    handler_levels = [(handler, handler.level) for handler in handlers]
    old_umask = os.umask(0)
    try:
        handler = log_to_file(path, max_bytes=2048)
    finally:
        os.umask(old_umask)
    try:
        yield path, logging.getLogger("mcpfleet.test")
    finally:
        root.removeHandler(handler)
        handler.close()
        root.handlers[:] = handlers
        root.setLevel(level)
        for existing, existing_level in handler_levels:
            existing.setLevel(existing_level)


def test_the_log_rotates_keeps_three_older_files_and_stays_private(
    daemon_log: tuple[Path, logging.Logger],
) -> None:
    path, logger = daemon_log
    for index in range(400):
        logger.info("line %04d %s", index, "x" * 40)
    files = log_files(path)
    assert [file.name for file in files] == ["daemon.log.3", "daemon.log.2", "daemon.log.1", "daemon.log"]
    assert len(files) == LOG_BACKUPS + 1
    for file in files:
        assert file.stat().st_size <= 2048
        assert file.stat().st_mode & 0o777 == 0o600, file
    assert path.parent.stat().st_mode & 0o777 == 0o700
    # The newest lines are kept, the oldest rotated away.
    everything = last_lines(path, 10_000)
    assert everything[-1].endswith("line 0399 " + "x" * 40)
    assert not any("line 0000 " in line for line in everything)


def test_last_lines_reaches_into_the_rotated_files(daemon_log: tuple[Path, logging.Logger]) -> None:
    path, logger = daemon_log
    for index in range(60):
        logger.info("line %04d %s", index, "x" * 40)
    current = path.read_text().splitlines()
    wanted = len(current) + 5
    lines = last_lines(path, wanted)
    assert len(lines) == wanted
    assert lines[-len(current) :] == current
    assert [line.split()[-2] for line in lines] == [f"{index:04d}" for index in range(60 - wanted, 60)]
    assert last_lines(path, 0) == []


def test_secrets_are_masked_in_the_log(daemon_log: tuple[Path, logging.Logger]) -> None:
    path, logger = daemon_log
    remember_secret("hunter2-secret-token")
    logger.warning("starting with --token hunter2-secret-token")
    text = path.read_text()
    assert "hunter2-secret-token" not in text
    assert "starting with --token" in text


def test_follow_goes_on_across_a_rotation(daemon_log: tuple[Path, logging.Logger]) -> None:
    path, logger = daemon_log
    logger.info("before following")
    seen: list[str] = []
    done = threading.Event()
    lines = follow(path, poll_s=0.01)

    def reader() -> None:
        for line in lines:
            seen.append(line)
            if "the last line" in line:
                done.set()
                return

    thread = threading.Thread(target=reader, daemon=True)
    thread.start()
    for index in range(100):  # several rotations of 2 KiB
        logger.info("followed %04d %s", index, "y" * 40)
    logger.info("the last line")
    assert done.wait(timeout=30), seen[-3:]
    assert not any("before following" in line for line in seen)
    followed = [line.split()[-2] for line in seen if "followed" in line]
    # Lines in order, none twice; a rotation may hide the few written between two polls.
    assert followed == sorted(set(followed))
    assert "0099" in followed
