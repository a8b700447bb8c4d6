"""What a fleet's processes are and cost in memory, for ``daemon status`` and the dashboards
(Linux ``/proc``).

The daemon counts itself alone (``resident_bytes``: its servers have rows of their own) and
each server with the processes it started (``process_tree``: an ``npx`` wrapper is ``npm
exec``, a shell and node: three processes). The totals are the daemon's own tree: itself, its
watchdog, and every server with its descendants.
"""

from __future__ import annotations

import os
from dataclasses import dataclass


@dataclass(frozen=True)
class ProcessTree:
    """A process and its descendants: how many they are, and their resident memory."""

    processes: int
    rss_bytes: int


def resident_bytes(pid: int) -> int | None:
    """Resident memory of one process (``/proc/<pid>/statm``); None once it is gone."""
    try:
        with open(f"/proc/{pid}/statm", encoding="ascii") as statm:
            return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return None


def process_tree_rss(pid: int) -> int | None:
    """Resident memory of ``pid`` and its descendants, in bytes (``None`` once it is gone)."""
    tree = process_tree(pid)
    return None if tree is None else tree.rss_bytes


def process_tree(pid: int) -> ProcessTree | None:
    """``pid`` and its descendants (``None`` once it is gone); one that ends meanwhile is left out."""
    total = 0
    counted = 0
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
        counted += 1
        pending.extend(_children(current))
    return ProcessTree(processes=counted, rss_bytes=total)


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
