"""Who is on the other end of a connection to the daemon's socket: ``SO_PEERCRED``.

The socket file is 0600 in a 0700 folder, so only the user can reach it; the daemon checks
anyway, before reading a byte, that the process which connected runs as the daemon's own
user (the kernel fills the credentials in at ``connect``; the peer cannot choose them). A
check that does not depend on file modes still holds when a folder's mode was loosened by
hand or the socket was passed to another process.

Clients check the daemon the same way (``require_same_user``): a socket answered by another
user's process is never sent a session or a request.

Standard library only: the shim imports this.
"""

from __future__ import annotations

import os
import socket
import struct
from dataclasses import dataclass
from pathlib import Path

from mcpfleet.daemon_client.paths import RUNTIME_DIR_ENV
from mcpfleet.errors import DaemonError

_UCRED = struct.Struct("iII")
"""``struct ucred``: pid_t pid, uid_t uid, gid_t gid."""


@dataclass(frozen=True)
class PeerCredentials:
    pid: int
    uid: int
    gid: int

    @property
    def same_user(self) -> bool:
        """The peer runs as this process's user."""
        return self.uid == os.getuid()


def peer_credentials(connection: socket.socket) -> PeerCredentials:
    """The credentials the kernel recorded for the peer of a connected Unix socket."""
    raw = connection.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _UCRED.size)
    pid, uid, gid = _UCRED.unpack(raw)
    return PeerCredentials(pid=pid, uid=uid, gid=gid)


class ForeignDaemon(DaemonError, PermissionError):
    """The process answering on the daemon's socket runs as another user."""


def require_same_user(connection: socket.socket, socket_file: Path) -> None:
    """``ForeignDaemon`` unless the process behind ``connection`` runs as this user.

    The runtime folder is private, so this only matters when it is not what it should be (a
    folder another user created first, a path given by hand): then the answers, tool results
    included, would come from someone else.
    """
    credentials = peer_credentials(connection)
    if not credentials.same_user:
        raise ForeignDaemon(
            f"{socket_file}: answered by process {credentials.pid} of user {credentials.uid}, not by "
            f"your own daemon; remove the socket, or set {RUNTIME_DIR_ENV} to a folder of yours"
        )
