"""Reading and writing the daemon's non-blocking connection sockets on the event loop.

The service reads a connection's hello with ``receive`` and the control connections read
their requests with it; both answer with ``send_all``. A peer that goes away is the end of
its connection, never an error of the daemon.
"""

from __future__ import annotations

import errno
import logging
import socket

import anyio

logger = logging.getLogger(__name__)

READ_BYTES = 256 * 1024
"""The most one ``receive`` returns."""
_PEER_GONE = (errno.ECONNRESET, errno.EPIPE, errno.EBADF)


async def receive(connection: socket.socket) -> bytes:
    """The next bytes of a non-blocking socket; empty at its end (or when it broke)."""
    while True:
        try:
            return connection.recv(READ_BYTES)
        except BlockingIOError:
            await anyio.wait_readable(connection)
        except OSError as error:
            if error.errno not in _PEER_GONE:
                logger.warning("reading a connection failed: %s", error)
            return b""


async def send_all(connection: socket.socket, data: bytes) -> None:
    """Write all of ``data`` on a non-blocking socket; a peer that went away is not an error."""
    view = memoryview(data)
    while view:
        try:
            sent = connection.send(view)
        except BlockingIOError:
            await anyio.wait_writable(connection)
            continue
        except OSError as error:
            logger.debug("the peer went away before its answer: %s", error)
            return
        view = view[sent:]
