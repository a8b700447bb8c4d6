"""The daemon's log: a file under the state folder, rotated, private, read by ``daemon logs``.

The daemon has no terminal (the shim starts it detached), so everything it logs goes to
``paths.log_path()``: rotated at ``LOG_MAX_BYTES`` with ``LOG_BACKUPS`` older files beside it
(``daemon.log.1`` … ``.3``), so a daemon that runs for weeks keeps at most 4 MiB. The file
is the user's only (0600, in a 0700 folder) whatever the umask: it names projects, servers
and hosts. Substituted secrets are masked in every record (``RedactingLogFilter``).
"""

from __future__ import annotations

import collections
import io
import logging
import logging.handlers
import os
import time
from collections.abc import Iterator
from pathlib import Path

LOG_MAX_BYTES = 1024 * 1024
LOG_BACKUPS = 3
LOG_FORMAT = "%(asctime)s %(process)d %(levelname)s %(name)s: %(message)s"
LOG_FILE_MODE = 0o600
FOLLOW_POLL_S = 0.2


class PrivateRotatingFileHandler(logging.handlers.RotatingFileHandler):
    """A ``RotatingFileHandler`` whose every file (the first one, and each one after a
    rollover) is created 0600, not with the umask's mode."""

    def _open(self) -> io.TextIOWrapper:
        fd = os.open(self.baseFilename, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, LOG_FILE_MODE)
        os.fchmod(fd, LOG_FILE_MODE)
        return open(fd, "a", encoding=self.encoding, errors=self.errors)


def log_to_file(path: Path, *, level: int = logging.INFO, max_bytes: int = LOG_MAX_BYTES) -> logging.Handler:
    """Send every record at ``level`` and above to ``path``, rotated; returns the handler.

    The handlers already there (the command line's, on stderr) keep the level they had. One
    whose stream is this very file (the shim starts the daemon with its stderr on the log,
    for what is written before the log is open) is removed: each line would be there twice.
    """
    from mcpfleet.paths import make_private_folder
    from mcpfleet.redaction import RedactingLogFilter

    make_private_folder(path.parent)
    handler = PrivateRotatingFileHandler(path, maxBytes=max_bytes, backupCount=LOG_BACKUPS, encoding="utf-8")
    handler.setFormatter(logging.Formatter(LOG_FORMAT))
    handler.addFilter(RedactingLogFilter())
    handler.setLevel(level)
    root = logging.getLogger()
    log_file = os.stat(path)
    for existing in list(root.handlers):
        if _writes_to(existing, log_file):
            root.removeHandler(existing)
        else:
            existing.setLevel(max(existing.level, root.getEffectiveLevel()))
    root.addHandler(handler)
    root.setLevel(min(root.getEffectiveLevel(), level))
    return handler


def _writes_to(handler: logging.Handler, file: os.stat_result) -> bool:
    stream = getattr(handler, "stream", None)
    try:
        info = os.fstat(stream.fileno()) if stream is not None else None
    except (OSError, ValueError, AttributeError):
        return False
    return info is not None and (info.st_dev, info.st_ino) == (file.st_dev, file.st_ino)


def log_files(path: Path) -> list[Path]:
    """The log's files that exist, oldest first: ``.3``, ``.2``, ``.1``, then ``path`` itself."""
    rotated = [path.with_name(f"{path.name}.{index}") for index in range(LOG_BACKUPS, 0, -1)]
    return [file for file in [*rotated, path] if file.is_file()]


def last_lines(path: Path, count: int) -> list[str]:
    """The last ``count`` lines of the log, reaching into rotated files when the current one is short."""
    lines: collections.deque[str] = collections.deque(maxlen=count)
    if count <= 0:
        return []
    for file in log_files(path):
        with file.open(encoding="utf-8", errors="replace") as text:
            lines.extend(line.rstrip("\n") for line in text)
    return list(lines)


def follow(path: Path, *, poll_s: float = FOLLOW_POLL_S) -> Iterator[str]:
    """The lines written to the log from this call on, as they come, across rotations (forever).

    A rotation is seen at the next poll: lines the old file got after the last read are not
    shown (at most ``poll_s`` worth of them).
    """
    return _follow(path, _identity(path), _size(path), poll_s)


def _follow(path: Path, identity: tuple[int, int] | None, position: int, poll_s: float) -> Iterator[str]:
    pending = ""
    while True:
        current = _identity(path)
        if current != identity or _size(path) < position:
            # Rotated (a new file under the name) or truncated: the new file is read from its start.
            identity, position, pending = current, 0, ""
        try:
            with path.open("rb") as file:
                file.seek(position)
                chunk = file.read()
        except FileNotFoundError:
            chunk = b""
        if chunk:
            position += len(chunk)
            pending += chunk.decode("utf-8", errors="replace")
            *complete, pending = pending.split("\n")
            yield from complete
        else:
            time.sleep(poll_s)


def _identity(path: Path) -> tuple[int, int] | None:
    try:
        info = os.stat(path)
    except FileNotFoundError:
        return None
    return info.st_dev, info.st_ino


def _size(path: Path) -> int:
    try:
        return os.stat(path).st_size
    except FileNotFoundError:
        return 0
