"""The ``mcpfleet`` command line, paused at one moment of its write of a file, for a test to
act at that moment (kill it, or rewrite the file as an editor would).

    python paused_cli.py MOMENT FILE_NAME READY_FD GO_FD [mcpfleet arguments…]

``MOMENT`` is ``synced`` (the temporary file that will replace ``FILE_NAME`` is written and
synced, not yet renamed) or ``renamed`` (``FILE_NAME`` has just been replaced). At that
moment, the first time only (every time with ``MOMENT`` ending in ``+``), one line goes to
the pipe ``READY_FD`` and the process waits for one line on the pipe ``GO_FD``; then it goes
on. Everything else is the real command: only ``os.fsync`` and ``os.replace`` are wrapped, to
see the moment come.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path


def main() -> int:
    moment, file_name, ready_fd, go_fd, *arguments = sys.argv[1:]
    every_time = moment.endswith("+")
    moment = moment.removesuffix("+")
    ready, go = os.fdopen(int(ready_fd), "w"), os.fdopen(int(go_fd), "r")
    paused = False

    def pause() -> None:
        nonlocal paused
        if paused and not every_time:
            return
        paused = True
        ready.write("at the moment\n")
        ready.flush()
        go.readline()

    real_fsync, real_replace = os.fsync, os.replace

    def fsync(descriptor: int) -> None:
        real_fsync(descriptor)
        name = Path(os.readlink(f"/proc/self/fd/{descriptor}")).name
        ours = name.startswith(f".{file_name}.") and not name.startswith(f".{file_name}.mcpfleet-backup.")
        if moment == "synced" and ours and name.endswith(".tmp"):
            pause()

    def replace(source: str, target: str) -> None:
        real_replace(source, target)
        if moment == "renamed" and Path(target).name == file_name:
            pause()

    os.fsync = fsync  # type: ignore[assignment]
    os.replace = replace  # type: ignore[assignment]
    sys.argv = ["mcpfleet", *arguments]
    from mcpfleet.cli.entry import main as mcpfleet

    return mcpfleet()


if __name__ == "__main__":
    sys.exit(main())
