"""Where the daemon's socket, lock and log live, and the checks that keep them private.

The socket and the lock sit in a runtime folder of the user's own: ``$MCPFLEET_RUNTIME_DIR``
when set (tests), else ``mcpfleet-<uid>-<home>`` in ``/run/user/<uid>`` (the tmpfs only the
user can enter, emptied at logout) when that is the user's own folder, else in ``/tmp``;
``<home>`` is a short digest of the real path of the user's home. The folder depends on the
uid and the home only, never on what else a host passes: a host that strips its servers'
environment (Codex, the TypeScript SDK's default, which drop ``XDG_RUNTIME_DIR``) reaches
the same daemon as the user's shell. ``/tmp`` is a folder every user can write, so the
folder is trusted only if it is a real folder (not a symbolic link), owned by the user and
closed to others; anyone else could have created it first. The log goes under the state
folder: it must survive the runtime folder being emptied.

Standard library only: the shim imports this.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from mcpfleet.errors import DaemonError

RUNTIME_DIR_ENV = "MCPFLEET_RUNTIME_DIR"
RUNTIME_FOLDER_MODE = 0o700
SOCKET_MODE = 0o600
SOCKET_NAME = "daemon.sock"
LOCK_NAME = "daemon.lock"
LOG_NAME = "daemon.log"
MAX_SOCKET_PATH_BYTES = 107
"""``sun_path`` holds 108 bytes on Linux, the last one the terminating zero."""


class RuntimeFolderError(DaemonError, OSError):
    """The runtime folder cannot be trusted or created; the message names it and the fix."""


def runtime_dir() -> Path:
    """The folder of the daemon's socket and lock (not created here)."""
    override = os.environ.get(RUNTIME_DIR_ENV)
    if override:
        return Path(override).expanduser()
    uid = os.getuid()
    user_runtime = Path("/run/user") / str(uid)
    parent = user_runtime if _owned_private_folder(user_runtime) else Path("/tmp")
    return parent / f"mcpfleet-{uid}-{_home_digest()}"


def _home_digest() -> str:
    """Eight hex digits naming the user's home (its real path): the same for every host
    session of the user, whichever variables it has, and another for another home (which
    reads other config files, so must not share the daemon). A CRC, not a hash: it only
    tells homes apart (the folder's checks, not its name, keep others out), and ``zlib``
    loads in a fraction of what ``hashlib`` costs every shim."""
    import zlib

    from mcpfleet.contract.wire import config_folders

    home = config_folders(os.environ)["HOME"] or "/"
    return f"{zlib.crc32(os.fsencode(home)):08x}"


def socket_path() -> Path:
    return runtime_dir() / SOCKET_NAME


def lock_path() -> Path:
    return runtime_dir() / LOCK_NAME


def log_path() -> Path:
    """The daemon's log file (rotated beside itself)."""
    from mcpfleet.paths import user_state_dir

    return user_state_dir() / LOG_NAME


def ensure_runtime_dir() -> Path:
    """Create the runtime folder (0700) or check the one there; return it.

    Raises ``RuntimeFolderError`` when the path is a symbolic link or not a folder, belongs to
    another user, or would give a socket path too long for ``AF_UNIX``. A folder of ours that
    others can enter is closed (0700): its socket is about to be created there.
    """
    folder = runtime_dir()
    if len(os.fsencode(folder / SOCKET_NAME)) > MAX_SOCKET_PATH_BYTES:
        raise RuntimeFolderError(
            f"{folder}: too long for a Unix socket path ({MAX_SOCKET_PATH_BYTES} bytes at most); "
            f"set {RUNTIME_DIR_ENV} to a shorter folder"
        )
    try:
        os.mkdir(folder, RUNTIME_FOLDER_MODE)
    except FileExistsError:
        pass
    except OSError as error:
        raise RuntimeFolderError(
            f"{folder}: cannot create the daemon's runtime folder ({error.strerror}); "
            f"set {RUNTIME_DIR_ENV} to a folder you own"
        ) from error
    info = os.lstat(folder)
    if not stat.S_ISDIR(info.st_mode):
        raise RuntimeFolderError(
            f"{folder}: is not a folder (a symbolic link or a file is never trusted); "
            f"remove it, or set {RUNTIME_DIR_ENV} to a folder you own"
        )
    if info.st_uid != os.getuid():
        raise RuntimeFolderError(
            f"{folder}: belongs to user {info.st_uid}, not to you; set {RUNTIME_DIR_ENV} to a folder you own"
        )
    if stat.S_IMODE(info.st_mode) != RUNTIME_FOLDER_MODE:
        os.chmod(folder, RUNTIME_FOLDER_MODE)
    return folder


def _owned_private_folder(path: Path) -> bool:
    try:
        info = os.stat(path)
    except OSError:
        return False
    return stat.S_ISDIR(info.st_mode) and info.st_uid == os.getuid()
