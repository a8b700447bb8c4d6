"""Every process a server started, even one that left the server's process group (Linux).

Closing a server signals its process group, which ends the helpers it started, but not a
descendant that called ``setsid()`` or was double-forked the way daemons detach: it is in
a group and a session of its own, and it is no longer our child's child (orphans are
reparented to init). Such a descendant outlived ``status``, ``call`` and the host itself.

What every descendant keeps, however it detaches, is its environment. So each server is
spawned with a mark of its own, a random token in ``MCPFLEET_SERVER_MARKS``, and closing
the server ends every process of this user whose environment carries that token (read
from ``/proc/<pid>/environ``), after the group. The host's watchdog (``watchdog.py``) does
the same with the marks it was told about when the host dies, even by SIGKILL. Marks
accumulate: a server spawned by a fleet that itself runs under a fleet carries both
tokens, so the outer fleet still finds it.

Why not ``PR_SET_CHILD_SUBREAPER``: the flag is process-wide, and the library lives inside
agent hosts, where making every orphan of the host's other code a child of the host
changes what the host sees (and it must then reap them). In the CLI, where mcpfleet owns
the process, it would still do nothing once the CLI is killed, and nothing the mark does
not already do while it lives. The mark works the same in both places.

Its limits: a descendant that replaces its whole environment (``env -i``), or makes
itself unreadable (set-uid programs, ``PR_SET_DUMPABLE`` 0), is not found; on systems
without ``/proc`` only the process group is ended.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import signal
from collections.abc import Mapping

import anyio
import anyio.to_thread

MARKS_VARIABLE = "MCPFLEET_SERVER_MARKS"
"""Space-separated marks of the servers a process descends from."""
_PROC = "/proc"
_POLL_S = 0.02


def new_mark() -> str:
    """A token that no process carries yet."""
    return f"mcpfleet-{secrets.token_hex(12)}"


def marked_environment(environment: Mapping[str, str], mark: str) -> dict[str, str]:
    """``environment`` with ``mark`` added to the marks it already carries."""
    inherited = environment.get(MARKS_VARIABLE, "").split()
    return {**environment, MARKS_VARIABLE: " ".join([*inherited, mark])}


def _carries(pid: int, token: bytes) -> bool:
    # A zombie's environment reads as empty: it is already gone as far as anyone can tell.
    try:
        with open(f"{_PROC}/{pid}/environ", "rb") as environ:
            return token in environ.read()
    except OSError:
        return False


def find_marked_processes(mark: str) -> list[int]:
    """Processes whose environment carries ``mark`` (blocking: one read per process)."""
    try:
        names = os.listdir(_PROC)
    except OSError:
        return []
    token = mark.encode()
    own = os.getpid()
    return [int(name) for name in names if name.isdigit() and int(name) != own and _carries(int(name), token)]


def _signal_all(pids: list[int], signum: int) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signum)


async def end_marked_processes(mark: str, grace_s: float) -> None:
    """SIGTERM every process carrying ``mark``, SIGKILL what is left after ``grace_s``.

    Liveness is checked through the mark, never the pid alone, so a pid reused by an
    unrelated process meanwhile is left alone.
    """
    pids = await anyio.to_thread.run_sync(find_marked_processes, mark)
    if not pids:
        return
    token = mark.encode()
    _signal_all(pids, signal.SIGTERM)
    for _ in range(max(1, round(grace_s / _POLL_S))):
        pids = [pid for pid in pids if _carries(pid, token)]
        if not pids:
            break
        await anyio.sleep(_POLL_S)
    # One more sweep: a descendant may have forked while it was being asked to stop.
    survivors = await anyio.to_thread.run_sync(find_marked_processes, mark)
    _signal_all(survivors, signal.SIGKILL)


__all__ = [
    "MARKS_VARIABLE",
    "end_marked_processes",
    "find_marked_processes",
    "marked_environment",
    "new_mark",
]
