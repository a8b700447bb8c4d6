"""The read end of a stdio server's stdout, watched by the event loop only while it pays.

A tool call is one message each way, so whatever reading one message costs beyond the read
itself is paid by every call. Waiting with ``anyio.wait_readable`` registers the descriptor
with the event loop's selector for that one wait and removes it after (two ``epoll_ctl``
system calls and their Python bookkeeping), and the loop around it tried a ``read`` that
found the pipe empty before each wait (a third call, and an exception). Counted under
callgrind, that made a call over this transport cost about 100,000 instructions more than
over the SDK's own stdio transport, half of mcpfleet's overhead per call; read this way, it
costs about as many.

``PipeReader`` keeps the descriptor registered while a reader waits and reads in the
selector's callback, as asyncio's own pipe transport does, so a reply to a waiting reader
costs its one ``read``. Unlike that transport it stops watching as soon as it has read
something that nobody is waiting for, and starts again only when a reader waits: a server
that writes while its messages are being handled fills the pipe instead of waking the loop
for every line, and the caller can stop watching (``pause``) while it lets the pipe fill on
purpose (the flood pause of ``stdio.py``). A reader that finds nothing buffered and the pipe
unwatched reads it at once instead of waiting: after a pause, or between the chunks of a
large message, the pipe usually holds plenty.

mcpfleet runs on asyncio (``docs/architecture.md``); the selector callbacks used here are
the asyncio event loop's (uvloop has them too).
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections import deque

import anyio
import anyio.lowlevel

logger = logging.getLogger(__name__)


class PipeReader:
    """Chunks of what a non-blocking pipe delivers, in order, until its end.

    Create it in the task that reads it, and ``close()`` it before the descriptor is closed.
    Each chunk is at most ``read_bytes``; ``owner`` names the writer (the server) in log lines.
    """

    def __init__(self, fd: int, *, read_bytes: int, owner: str) -> None:
        self._fd = fd
        self._read_bytes = read_bytes
        self._owner = owner
        self._loop = asyncio.get_running_loop()
        self._chunks: deque[bytes] = deque()
        self._ended = False
        self._waiter: asyncio.Future[None] | None = None
        self._watching = False

    async def read(self) -> bytes:
        """The next chunk; ``anyio.EndOfStream`` once every writer has closed the pipe."""
        while not self._chunks:
            if self._ended:
                raise anyio.EndOfStream
            if not self._watching:
                chunk = self._read_now()
                if chunk is not None:
                    # The pipe refills as fast as the server writes: other tasks still run
                    # between two chunks of a large message. The chunk waits in the buffer
                    # meanwhile, so a reader cancelled here (its deadline passed) loses nothing.
                    self._chunks.append(chunk)
                    await anyio.lowlevel.checkpoint()
                    break
                if self._ended:
                    raise anyio.EndOfStream
                self._watch()
            waiter = self._waiter = self._loop.create_future()
            try:
                await waiter
            finally:
                self._waiter = None
        return self._chunks.popleft()

    def pause(self) -> None:
        """Stop watching until the next ``read``: what the server writes meanwhile waits in the pipe."""
        self._unwatch()

    def close(self) -> None:
        """Stop watching for good (the descriptor may be closed after this)."""
        self._ended = True
        self._unwatch()

    def _read_now(self) -> bytes | None:
        """What the pipe holds now, ``None`` if nothing; at its end, ``None`` with ``_ended`` set."""
        try:
            chunk = os.read(self._fd, self._read_bytes)
        except BlockingIOError:
            return None
        except OSError as error:
            logger.debug("%s: reading the pipe failed: %r", self._owner, error)
            chunk = b""
        if not chunk:
            self._ended = True
            self._unwatch()
            return None
        return chunk

    def _on_readable(self) -> None:
        chunk = self._read_now()
        if chunk is None and not self._ended:
            return  # a wake-up with nothing to read yet: keep waiting
        if chunk is not None:
            self._chunks.append(chunk)
        waiter = self._waiter
        if waiter is None or waiter.done():
            # Nobody waits for more: let the pipe hold it until someone does.
            self._unwatch()
        else:
            waiter.set_result(None)

    def _watch(self) -> None:
        if not self._watching:
            self._loop.add_reader(self._fd, self._on_readable)
            self._watching = True

    def _unwatch(self) -> None:
        if self._watching:
            self._loop.remove_reader(self._fd)
            self._watching = False


__all__ = ["PipeReader"]
