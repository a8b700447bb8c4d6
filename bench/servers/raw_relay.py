"""The floor: a relay that reads a line and writes it on, nothing else (stdlib only).

    python bench/servers/raw_relay.py COMMAND [ARG...]

It starts ``COMMAND`` and copies its own stdin to the child's stdin and the child's stdout to
its own stdout, a line at a time (no parsing, no buffering beyond the line). Two relays chained
(``raw_relay.py raw_relay.py server``) have the shape of the daemon's path: host, shim, daemon,
server. What a call through them costs over a direct one is the physical limit of those hops
on this machine: process wake-ups and pipe copies, no protocol work at all.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading


def copy(source: int, target: int) -> None:
    """Copy ``source`` to ``target`` until its end; a line is written as soon as it is whole."""
    pending = b""
    while chunk := os.read(source, 1 << 16):
        pending += chunk
        end = pending.rfind(b"\n") + 1
        if end:
            os.write(target, pending[:end])
            pending = pending[end:]
    os.close(target)


def main() -> int:
    child = subprocess.Popen(sys.argv[1:], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    assert child.stdin is not None and child.stdout is not None
    back = threading.Thread(target=copy, args=(child.stdout.fileno(), 1), daemon=True)
    back.start()
    copy(0, child.stdin.fileno())
    code = child.wait()
    back.join()
    return code


if __name__ == "__main__":
    sys.exit(main())
