"""A stand-in for ``mcpfleet daemon run`` in the start lock's tests: it records how it was
started (pid, session, folder, stdin and stdout) as one JSON line, takes a moment (so that
processes started together really race), listens on the daemon's socket and accepts until
SIGTERM.

Usage: ``stand_in_daemon.py RECORD_FILE [DELAY_S]``. Standard library only.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import sys
import time
from pathlib import Path


def main() -> None:
    record, delay_s = Path(sys.argv[1]), float(sys.argv[2]) if len(sys.argv) > 2 else 0.3
    started = {
        "pid": os.getpid(),
        "sid": os.getsid(0),
        "cwd": os.getcwd(),
        "stdin": os.readlink("/proc/self/fd/0"),
        "stdout": os.readlink("/proc/self/fd/1"),
    }
    with record.open("a", encoding="utf-8") as handle:
        handle.write(json.dumps(started) + "\n")
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    time.sleep(delay_s)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(os.path.join(os.environ["MCPFLEET_RUNTIME_DIR"], "daemon.sock"))
    listener.listen(64)
    while True:
        connection, _ = listener.accept()
        connection.close()


if __name__ == "__main__":
    main()
