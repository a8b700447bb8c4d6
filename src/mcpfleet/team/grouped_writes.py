"""Writes that arrive together commit together: one transaction, one disk flush, for all of them.

A store that syncs each commit to disk (the SQLite state with ``synchronous=FULL``) pays one
flush per commit, milliseconds on many disks; with one writer at a time, concurrent calls' audit
records would queue for a flush each. ``GroupedWrites`` lets the first writer of a quiet moment
write at once, alone, and every writer that arrives while a write runs join the next one: one
commit for the whole group, each writer returning once the commit that holds its item is done
(or raising its error). So a lone call pays one flush, as before, and many calls at once pay
about two between them, not one each.

The group's write runs shielded from cancellation: a writer whose caller gives up still leaves
the items it carries written, and the writers waiting on it answered, never stranded.
"""

from __future__ import annotations

import copy
from collections.abc import Awaitable, Callable, Sequence
from typing import Generic, TypeVar

import anyio

_Item = TypeVar("_Item")


class _Waiting(Generic[_Item]):
    __slots__ = ("done", "error", "item")

    def __init__(self, item: _Item) -> None:
        self.item = item
        self.done = anyio.Event()
        self.error: BaseException | None = None


class GroupedWrites(Generic[_Item]):
    """``await writes.write(item)``: returns once ``commit`` has written a group holding ``item``."""

    def __init__(self, commit: Callable[[Sequence[_Item]], Awaitable[None]]) -> None:
        self._commit = commit
        self._waiting: list[_Waiting[_Item]] = []
        self._writing = False

    async def write(self, item: _Item) -> None:
        waiting = _Waiting(item)
        self._waiting.append(waiting)
        if not self._writing:
            with anyio.CancelScope(shield=True):
                await self._write_groups()
        await waiting.done.wait()
        if waiting.error is not None:
            raise waiting.error

    async def _write_groups(self) -> None:
        """Commit what waits, group after group, until nothing does."""
        self._writing = True
        try:
            while self._waiting:
                group, self._waiting = self._waiting, []
                error: BaseException | None = None
                try:
                    await self._commit([waiting.item for waiting in group])
                except Exception as failure:
                    error = failure
                for waiting in group:
                    # Each writer raises an error of its own: one instance raised in many tasks
                    # would grow one traceback with all of them.
                    waiting.error = _own_copy(error) if error is not None else None
                    waiting.done.set()
        finally:
            self._writing = False


def _own_copy(error: BaseException) -> BaseException:
    copied = copy.copy(error)
    copied.__cause__ = error.__cause__
    return copied


__all__ = ["GroupedWrites"]
