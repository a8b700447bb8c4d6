"""Acting as another Unix user: the suite runs as root, so a forked child drops to ``nobody``.

What the child does is a function that fills a JSON-able dict; the parent gets that dict
back through a pipe, with ``"error"`` added when the function raised (what it found before
stays).
Whatever the child needs from modules ``nobody`` cannot read must be imported before.
"""

from __future__ import annotations

import json
import os
import pwd
from collections.abc import Callable
from typing import Any


def as_nobody(action: Callable[[dict[str, Any]], None]) -> dict[str, Any]:
    """``action(outcome)`` run as ``nobody`` in a forked child; the ``outcome`` it filled."""
    nobody = pwd.getpwnam("nobody")
    read_end, write_end = os.pipe()
    child = os.fork()
    if child == 0:  # pragma: no cover - the child process
        outcome: dict[str, Any] = {}
        try:
            os.close(read_end)
            os.setgroups([])
            os.setgid(nobody.pw_gid)
            os.setuid(nobody.pw_uid)
            action(outcome)
        except BaseException as error:
            outcome["error"] = repr(error)
        os.write(write_end, json.dumps(outcome).encode())
        os._exit(0)
    os.close(write_end)
    with os.fdopen(read_end, "rb") as reader:
        report = reader.read()
    os.waitpid(child, 0)
    result: dict[str, Any] = json.loads(report)
    return result
