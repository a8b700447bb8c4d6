"""What the daemon's processes cost in memory, for ``daemon status`` (Linux ``/proc``).

The daemon counts itself alone (``resident_bytes``: its servers have rows of their own) and
each server with the processes it started (``process_tree_rss``: an ``npx`` wrapper's node,
a shell's child).
"""

from __future__ import annotations

import os


def resident_bytes(pid: int) -> int | None:
    """Resident memory of one process (``/proc/<pid>/statm``); None once it is gone."""
    try:
        with open(f"/proc/{pid}/statm", encoding="ascii") as statm:
            return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return None


def process_tree_rss(pid: int) -> int | None:
    """Resident memory of ``pid`` and its descendants, in bytes (``None`` once it is gone)."""
    total = 0
    pending = [pid]
    seen: set[int] = set()
    while pending:
        current = pending.pop()
        if current in seen:
            continue
        seen.add(current)
        resident = resident_bytes(current)
        if resident is None:
            if current == pid:
                return None
            continue
        total += resident
        pending.extend(_children(current))
    return total


def _children(pid: int) -> list[int]:
    children: list[int] = []
    try:
        threads = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return children
    for thread in threads:
        try:
            with open(f"/proc/{pid}/task/{thread}/children", encoding="ascii") as listed:
                children.extend(int(child) for child in listed.read().split())
        except (OSError, ValueError):
            continue
    return children
