"""No server outlives its host, even a host killed with SIGKILL.

Linux's ``PR_SET_PDEATHSIG`` kills only the direct child when the host dies; the processes
*it* started (``npx`` → ``node``, ``uvx`` → ``python``) are reparented and live on (and
setting it needs a ``preexec_fn``, which makes every spawn a full fork). Every stdio
server runs in a process group of its own, so what is needed is someone who outlives the
host just long enough to end those groups.

That someone is one small helper process per host process, started on the first stdio
spawn (a stdlib-only ``python -I -S`` script: about 20 ms, paid once, never per server). The
host keeps the write end of a pipe to it and announces each server's process group and
environment mark as it is spawned (``+PGID MARK``) and as it is reaped (``-PGID``). When
the host dies, however it dies, the kernel closes the pipe; the helper reads EOF, sends
SIGTERM to every group still announced and to every process carrying one of their marks
(descendants that left the group, see ``descendants.py``), waits a moment, SIGKILLs what is
left, and exits. A host that exits normally has already reaped its servers, so the helper
finds nothing to do and leaves too.

The helper runs in a session of its own (a Ctrl-C at the terminal must not take it down
with the host) and ignores SIGINT and SIGHUP. A forked child drops the inherited pipe end
at once, so it never delays the detection of its parent's death.
"""

from __future__ import annotations

import logging
import os
import sys
import threading

logger = logging.getLogger(__name__)

GROUP_TERM_GRACE_S = 1.0
"""After the host's death, how long announced groups get between SIGTERM and SIGKILL."""

_HELPER_SOURCE = f"""# mcpfleet watchdog: ends the MCP servers (and their descendants) of a host that died
import os, signal, time
signal.signal(signal.SIGINT, signal.SIG_IGN)
signal.signal(signal.SIGHUP, signal.SIG_IGN)
marks = {{}}
pending = b""
while True:
    try:
        chunk = os.read(0, 4096)
    except InterruptedError:
        continue
    if not chunk:
        break
    pending += chunk
    *lines, pending = pending.split(b"\\n")
    for line in lines:
        group, _, mark = line[1:].partition(b" ")
        if line[:1] == b"+":
            marks[int(group)] = mark
        elif line[:1] == b"-":
            marks.pop(int(group), None)

def marked_pids():
    tokens = [mark for mark in marks.values() if mark]
    found = []
    for name in os.listdir("/proc") if tokens and os.path.isdir("/proc") else ():
        if name.isdigit():
            try:
                with open("/proc/" + name + "/environ", "rb") as environ:
                    data = environ.read()
            except OSError:
                continue
            if any(token in data for token in tokens):
                found.append(int(name))
    return found

def signal_all(signum):
    alive = False
    for group in marks:
        try:
            os.killpg(group, signum)
            alive = True
        except OSError:
            pass
    for pid in marked_pids():
        try:
            os.kill(pid, signum)
            alive = True
        except OSError:
            pass
    return alive

alive = signal_all(signal.SIGTERM)
deadline = time.monotonic() + {GROUP_TERM_GRACE_S}
while alive and time.monotonic() < deadline:
    time.sleep(0.05)
    alive = signal_all(0)
signal_all(signal.SIGKILL)
"""


class ProcessGroupWatchdog:
    """The host side: starts the helper lazily and tells it which groups to end."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._write_fd: int | None = None
        self._started_by: int | None = None
        self._failed = False

    def watch(self, process_group: int, mark: str = "") -> None:
        """End ``process_group``, and every process whose environment carries ``mark``, if this
        process dies before calling ``release``."""
        self._send(f"+{process_group} {mark}\n")

    def release(self, process_group: int) -> None:
        """The group is gone (or about to be reaped by the host itself): forget it and its mark."""
        self._send(f"-{process_group}\n")

    def ensure_running(self) -> bool:
        """Start the helper if it is not running yet; whether it now guards this host's servers."""
        if os.name != "posix":
            return False
        with self._lock:
            if self._started_by is None:
                self._start()
            return self._write_fd is not None

    def _send(self, line: str) -> None:
        if os.name != "posix":
            return
        with self._lock:
            if self._started_by is None:
                self._start()
            if self._write_fd is None:
                return
            try:
                os.write(self._write_fd, line.encode())
            except OSError as error:
                self._give_up(f"the watchdog helper stopped listening ({error})")

    def forget_after_fork(self) -> None:
        """In a forked child: drop the parent's pipe, so the parent's death is still seen at once.

        The child starts a helper of its own if it spawns servers.
        """
        self._lock = threading.Lock()
        if self._write_fd is not None:
            os.close(self._write_fd)
        self._write_fd = None
        self._started_by = None

    def _start(self) -> None:
        self._started_by = os.getpid()
        if self._failed:
            return
        read_fd, write_fd = os.pipe()
        try:
            os.posix_spawn(
                sys.executable,
                [sys.executable, "-I", "-S", "-c", _HELPER_SOURCE],
                os.environ,
                file_actions=[
                    (os.POSIX_SPAWN_DUP2, read_fd, 0),
                    (os.POSIX_SPAWN_OPEN, 1, os.devnull, os.O_WRONLY, 0),
                    (os.POSIX_SPAWN_OPEN, 2, os.devnull, os.O_WRONLY, 0),
                ],
                setsid=True,
            )
        except OSError as error:
            os.close(write_fd)
            self._give_up(f"cannot start the watchdog helper ({error})")
            return
        finally:
            os.close(read_fd)
        # The pipe is close-on-exec: servers spawned later never hold it open.
        self._write_fd = write_fd

    def _give_up(self, reason: str) -> None:
        # Servers spawned from now on fall back to PR_SET_PDEATHSIG (see process.py), which covers
        # the direct child only.
        logger.warning("%s: MCP server grandchildren may outlive a crashed host", reason)
        self._failed = True
        if self._write_fd is not None:
            os.close(self._write_fd)
            self._write_fd = None


_watchdog = ProcessGroupWatchdog()
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_watchdog.forget_after_fork)


def host_watchdog() -> ProcessGroupWatchdog:
    """The watchdog of this process (one per process, shared by every connection)."""
    return _watchdog


__all__ = ["ProcessGroupWatchdog", "host_watchdog"]
