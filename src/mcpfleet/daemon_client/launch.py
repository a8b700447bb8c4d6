"""Reaching the user's daemon: connect to its socket, or start it and wait until it accepts.

``connect_or_start`` is what every shim does first. A socket that accepts is used at once (the
warm path: one ``connect``). Otherwise the shim takes the lock beside the socket, so that of
ten shims started at the same instant exactly one starts the daemon and the nine others find
it: under the lock it connects again (the holder before it may have started one), else removes
a socket file nobody listens on (a daemon that was killed leaves it) and spawns
``python -m mcpfleet daemon run``, detached in a session of its own, then waits until the socket
accepts. A daemon that exits first, or does not accept within ``START_TIMEOUT_S``, is an error
naming the daemon's log file.

The runtime folder is checked before anything is connected to in it (``ensure_runtime_dir``),
and the process answering on the socket must run as this user (``SO_PEERCRED``): a session is
only ever handed to the user's own daemon.

Standard library only, like the shim that imports it, except on the cold path: the log's
folder (``mcpfleet.paths``) is found through platformdirs once a daemon is to be spawned.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import socket
import sys
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

from mcpfleet import paths as user_paths
from mcpfleet.contract import wire
from mcpfleet.daemon_client import paths
from mcpfleet.daemon_client.peer import require_same_user
from mcpfleet.errors import DaemonError

NO_DAEMON_ENV = "MCPFLEET_NO_DAEMON"
"""Set to ``1`` (``true``, ``yes``): nothing uses or starts the daemon; ``serve`` serves in
its own process, as with ``--no-daemon``."""
OTEL_PREFIX = "OTEL_"
"""The standard OpenTelemetry variables, which the daemon's telemetry is configured by."""
START_TIMEOUT_S = 10.0
"""How long a spawned daemon has to accept its first connection."""
LOCK_TIMEOUT_S = START_TIMEOUT_S + 5.0
"""How long a shim waits for the lock: the holder's start, and a margin."""
POLL_INTERVAL_S = 0.01
"""Between two tries of the lock, or of the socket while a daemon starts."""
LOG_FILE_MODE = 0o600
RECONNECT_LIMIT = 3
RECONNECT_WINDOW_S = 30.0
"""A client that lost the daemon (a shim, an agent session) reconnects at most
``RECONNECT_LIMIT`` times within this window; one more loss and it stops trying: a daemon
that keeps dying is not restarted in a loop by every client."""
RECONNECT_PAUSE_S = 0.5
"""Before a client tries to reach a daemon again."""


class DaemonStartError(DaemonError, OSError):
    """The daemon could not be reached or started; the message says why and where to look."""


_NO_DAEMON_ERRNOS = frozenset({errno.ENOENT, errno.ECONNREFUSED, errno.ENOTSOCK})


def no_daemon_listens(error: BaseException | None) -> bool:
    """Whether a failed ``connect`` to the socket means that no daemon runs: no socket file,
    or one nobody listens on (a daemon killed without its cleanup leaves it)."""
    return isinstance(error, OSError) and error.errno in _NO_DAEMON_ERRNOS


def stopped_while(what: str) -> str:
    """What a client says of a request (``what``) that was running when the daemon went away."""
    return f"the mcpfleet daemon stopped while this {what} ran; retry it"


def daemon_disabled() -> bool:
    """Whether ``NO_DAEMON_ENV`` turns the daemon off for this process."""
    return os.environ.get(NO_DAEMON_ENV, "").lower() in ("1", "true", "yes")


def daemon_command() -> list[str]:
    """How a daemon is started: this interpreter and this mcpfleet, whatever the shim's folder.

    ``-P`` keeps the working folder off ``sys.path``: ``-m`` would otherwise import an
    ``mcpfleet`` folder that happens to sit where the daemon runs.
    """
    return [sys.executable, "-P", "-m", "mcpfleet", "daemon", "run"]


def daemon_environment(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment the daemon runs with, taken from ``environ`` (this process's by
    default): the fixed base (``wire.BASE_ENVIRONMENT``), the variables that locate config
    files (the daemon reads the same files as its sessions) and the runtime folder's
    override and the sandbox's back-end choice (settings of the machine, not of a host), and
    the ``OTEL_*`` variables of its telemetry (``mcpfleet.telemetry``: the daemon reads them
    once at start and takes them out of its environment, so no backend inherits an exporter's
    headers). Nothing else of the host that started it: no API key or token of one host's
    environment ever reaches a server that another host's session uses."""
    source = os.environ if environ is None else environ
    kept = wire.hello_environment(source)
    for machine_setting in (paths.RUNTIME_DIR_ENV, user_paths.SANDBOX_BACKEND_ENV):
        if machine_setting in source:
            kept[machine_setting] = source[machine_setting]
    kept.update((name, value) for name, value in source.items() if name.startswith(OTEL_PREFIX))
    return kept


def connect() -> socket.socket | None:
    """A connection to the running daemon, or None when no daemon listens on the socket.

    The runtime folder is created or checked first (``RuntimeFolderError`` when it cannot be
    trusted); a socket answered by another user's process is refused (``peer.ForeignDaemon``).
    """
    paths.ensure_runtime_dir()
    return _connect(paths.socket_path())


def connect_or_start(
    *, command: Sequence[str] | None = None, timeout_s: float = START_TIMEOUT_S
) -> socket.socket:
    """A connection to the user's daemon, started first when none runs (see the module).

    ``command`` replaces ``daemon_command()`` (a stand-in daemon in the lock's tests).
    """
    connection = connect()
    if connection is not None:
        return connection
    connection, _ = _start_locked(command, timeout_s)
    return connection


def start_daemon(*, command: Sequence[str] | None = None, timeout_s: float = START_TIMEOUT_S) -> bool:
    """Make sure the daemon runs and accepts; True when this call started it.

    Returns once the daemon accepts connections; calling it again (or from ten processes at
    once) starts nothing more.
    """
    connection = connect()
    started = False
    if connection is None:
        connection, started = _start_locked(command, timeout_s)
    connection.close()
    return started


def _start_locked(command: Sequence[str] | None, timeout_s: float) -> tuple[socket.socket, bool]:
    socket_file = paths.socket_path()
    with _locked(paths.lock_path(), LOCK_TIMEOUT_S + timeout_s):
        connection = _connect(socket_file)
        if connection is not None:
            return connection, False  # started by the shim that held the lock before us
        with contextlib.suppress(FileNotFoundError):
            # Nobody listens on it (a daemon killed without its cleanup): it only stands in
            # the way of the new daemon's bind.
            socket_file.unlink()
        return _spawn_and_wait(list(command) if command is not None else daemon_command(), timeout_s), True


def _connect(socket_file: Path) -> socket.socket | None:
    connection = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM | socket.SOCK_CLOEXEC)
    try:
        connection.connect(os.fspath(socket_file))
    except OSError as error:
        connection.close()
        if no_daemon_listens(error):
            return None
        raise DaemonStartError(
            f"{socket_file}: cannot connect to the mcpfleet daemon ({error.strerror})"
        ) from error
    try:
        # The folder should make sure of it; this holds even if the folder's check were wrong.
        require_same_user(connection, socket_file)
    except BaseException:
        connection.close()
        raise
    return connection


@contextlib.contextmanager
def _locked(lock_file: Path, timeout_s: float) -> Iterator[None]:
    """Hold the start lock (``flock``, released by the kernel even if this process dies)."""
    try:
        descriptor = os.open(
            lock_file, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, paths.SOCKET_MODE
        )
    except OSError as error:
        raise DaemonStartError(
            f"{lock_file}: cannot open the daemon's start lock ({error.strerror})"
        ) from error
    try:
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise DaemonStartError(
                        f"{lock_file}: another process held the daemon's start lock for {timeout_s:.0f} s"
                    ) from None
                time.sleep(POLL_INTERVAL_S)
        yield
    finally:
        os.close(descriptor)  # releases the lock


def _spawn_and_wait(command: list[str], timeout_s: float) -> socket.socket:
    import subprocess  # the cold path only

    log_file = _daemon_log_path()
    log = _open_log(log_file)
    try:
        process = subprocess.Popen(
            command,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            # Until the daemon opens its own log, whatever it says (a traceback) goes there.
            stderr=log,
            # Its own session: a host's Ctrl-C or a hang-up of the shim's terminal never reaches it.
            start_new_session=True,
            # Never the host's folder: nothing of a project runs as the user's daemon.
            cwd=_neutral_folder(),
            env=daemon_environment(),
            close_fds=True,
        )
    except OSError as error:
        raise DaemonStartError(
            f"cannot start the mcpfleet daemon ({' '.join(command)}): {error.strerror}"
        ) from error
    finally:
        os.close(log)
    socket_file = paths.socket_path()
    deadline = time.monotonic() + timeout_s
    while True:
        connection = _connect(socket_file)
        if connection is not None:
            # The daemon outlives this process; until then its exit must not leave a zombie.
            threading.Thread(target=process.wait, name="mcpfleet-daemon-reaper", daemon=True).start()
            return connection
        code = process.poll()
        if code is not None:
            raise DaemonStartError(
                f"the mcpfleet daemon exited (code {code}) before it accepted connections; see {log_file}"
            )
        if time.monotonic() > deadline:
            # Stuck before it listens: stopped, so that the next try starts a fresh one.
            process.kill()
            process.wait()
            raise DaemonStartError(
                f"the mcpfleet daemon did not accept connections within {timeout_s:g} s and was "
                f"stopped; see {log_file}"
            )
        time.sleep(POLL_INTERVAL_S)


def _daemon_log_path() -> Path:
    from mcpfleet.paths import make_private_folder

    log_file = paths.log_path()
    try:
        make_private_folder(log_file.parent)
    except OSError as error:
        raise DaemonStartError(
            f"{log_file.parent}: cannot create the daemon's log folder ({error.strerror}); "
            f"{_WRITABLE_STATE_FIX}"
        ) from error
    return log_file


_WRITABLE_STATE_FIX = "make that folder writable, or set MCPFLEET_HOME to a folder you can write"


def _open_log(log_file: Path) -> int:
    try:
        return os.open(
            log_file, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, LOG_FILE_MODE
        )
    except OSError as error:
        raise DaemonStartError(
            f"{log_file}: cannot open the daemon's log ({error.strerror}); {_WRITABLE_STATE_FIX}"
        ) from error


def _neutral_folder() -> Path:
    from mcpfleet.paths import neutral_working_dir

    return neutral_working_dir()
