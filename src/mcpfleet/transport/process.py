"""A stdio server's process, from spawn to reaping.

* It runs ``[command, *args]`` with the environment it is given (the caller has resolved
  every secret), in its own session and process group, so closing can signal the whole
  group (grandchildren too).
* It carries a mark of its own in its environment, which every descendant inherits even
  when it leaves the group (``setsid()``, a double fork): closing ends the marked
  processes after the group (``descendants.py``).
* Its process group and mark are announced to the host's watchdog (``watchdog.py``), which
  ends both if the host dies; so a crashed host leaves no server behind. Only if that
  helper cannot run does a Linux child get the kernel's parent-death signal
  (``PR_SET_PDEATHSIG``) instead: it covers the direct child alone and needs a
  ``preexec_fn``, which turns the spawn into a full fork of the host (measured: 30 servers
  spawn in 0.43 s without it, 0.76 s with it). The hook only calls an already-resolved
  ``prctl`` and ``getppid``, which take no Python-level locks (CPython documents
  ``preexec_fn`` as unsafe when other threads hold locks at fork time).
* Its stdout is a pipe mcpfleet owns (``os.pipe()``): the child gets the write end, the
  parent keeps only the read end (``stdout_fd``, non-blocking) for ``stdio.py`` to read
  directly rather than through the event loop's pipe reader, which wakes for every line
  the server writes. The read end is closed (``close_stdout``) only once no task waits on
  it, so that its number is never reused under a waiter: by the transport after its
  reading task has ended, by ``discard`` for a process no transport ever read.
* It runs in the sandbox its config asks for (``sandbox.py``): behind bubblewrap or the
  Landlock launcher, which take its place as the process spawned here, so everything above
  and below applies to them unchanged.
* The last lines of its stderr are kept in a bounded ring for error messages.
* It ends in bounded steps (the kill ladder): close stdin, wait, SIGTERM the group, wait,
  SIGKILL the group, then the same for the marked descendants that left it.

Nothing here knows MCP: ``stdio.py`` frames the messages on the process's pipes.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import sys
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import anyio
import anyio.abc

from mcpfleet.config.model import SANDBOX_OFF, Sandbox
from mcpfleet.errors import CommandNotFoundError, ConnectError, MCPFleetError
from mcpfleet.redaction import redact_command_line, remember_credentials
from mcpfleet.transport.descendants import end_marked_processes, marked_environment, new_mark
from mcpfleet.transport.sandbox import SandboxKind, launch
from mcpfleet.transport.watchdog import host_watchdog

STDIN_CLOSE_GRACE_S = 1.0
"""How long a server may take to exit on its own once its stdin is closed."""
SIGTERM_GRACE_S = 1.0
"""How long the process group gets between SIGTERM and SIGKILL."""
SIGKILL_REAP_S = 1.0
"""How long to wait for the kernel to report the SIGKILLed leader gone."""
EXIT_NOTICE_S = 5.0
"""How long the event loop may take to report the exit of a leader the kernel already says
ended on its own (a loaded machine delays the loop's child watcher)."""
STDERR_MAX_LINES = 200
STDERR_MAX_BYTES = 64 * 1024
STDERR_MAX_LINE_CHARS = 2000
_POLL_S = 0.02
_PR_SET_PDEATHSIG = 1


class PrivateApiMovedError(MCPFleetError, RuntimeError):
    """A private part of a dependency that mcpfleet relies on is gone or changed shape."""


def backend_open_process() -> Callable[..., Any]:
    """anyio's backend ``open_process``, which forwards extra options (``preexec_fn``) to the
    platform call; the public ``anyio.open_process`` has no ``preexec_fn`` argument. Only the
    parent-death fallback needs it, and this is the one place that reaches into anyio."""
    try:
        from anyio._core._eventloop import get_async_backend

        opener: Callable[..., Any] = get_async_backend().open_process
    except (ImportError, AttributeError) as error:
        raise PrivateApiMovedError(
            "anyio._core._eventloop.get_async_backend().open_process is gone; "
            "the stdio spawn's parent-death fallback needs another way to pass preexec_fn"
        ) from error
    return opener


def _parent_death_hook() -> Callable[[], None] | None:
    """A ``preexec_fn`` that makes the child die with its parent (Linux only), or ``None``."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    parent_pid = os.getpid()

    def set_parent_death_signal() -> None:
        prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        # The parent may have died between fork and prctl: then nobody would signal us.
        if os.getppid() != parent_pid:
            os._exit(1)

    return set_parent_death_signal


class StderrRing:
    """The last lines a server wrote on stderr, bounded in lines and bytes."""

    def __init__(self, max_lines: int = STDERR_MAX_LINES, max_bytes: int = STDERR_MAX_BYTES) -> None:
        self._lines: deque[str] = deque()
        self._max_lines = max_lines
        self._max_bytes = max_bytes
        self._bytes = 0

    def append(self, line: str) -> None:
        line = line[:STDERR_MAX_LINE_CHARS]
        self._lines.append(line)
        self._bytes += len(line)
        while self._lines and (len(self._lines) > self._max_lines or self._bytes > self._max_bytes):
            self._bytes -= len(self._lines.popleft())

    def tail(self, lines: int = 20) -> list[str]:
        if lines <= 0:
            return []
        return list(self._lines)[-lines:]


class ServerProcess:
    """One stdio server process: spawned once, its stderr kept, ended with its whole family."""

    def __init__(
        self,
        server_name: str,
        command: str,
        args: Sequence[str],
        *,
        env: Mapping[str, str],
        cwd: str,
        sandbox: Sandbox = SANDBOX_OFF,
    ) -> None:
        self.server_name = server_name
        self.command = command
        self.args = list(args)
        # Before anything can print them: the server may echo its arguments on stderr.
        remember_credentials(args=self.args)
        self.env = dict(env)
        self.cwd = cwd
        self.sandbox = sandbox
        self.sandbox_kind: SandboxKind = "off"
        """The sandbox it was spawned in."""
        self.mark = new_mark()
        """Carried in the environment of the server and of everything it starts."""
        self.stderr = StderrRing()
        self.pid: int | None = None
        self.returncode: int | None = None
        self.spawn_ms: float | None = None
        self.exited = anyio.Event()
        self.signalled = False
        """Whether stopping had to signal the leader (its exit status is then ours, not its own)."""
        self.stdout_fd: int | None = None
        """The read end of the server's stdout (non-blocking), from spawn to ``close_stdout``."""
        self._process: anyio.abc.Process | None = None

    def describe_command(self) -> str:
        text = redact_command_line(self.command, self.args)
        return text if len(text) <= 200 else text[:197] + "..."

    async def spawn(self) -> anyio.abc.Process:
        """Start the process, once: later calls return the same process."""
        if self._process is not None:
            return self._process
        if not await anyio.Path(self.cwd).is_dir():
            raise ConnectError(
                f'MCP server "{self.server_name}": working directory {self.cwd} does not exist; '
                'fix the "cwd" field of its config',
                server=self.server_name,
            )
        confined = launch(self.server_name, self.sandbox, self.command, self.args, self.env, self.cwd)
        env = marked_environment(confined.env, self.mark)
        hook = None if host_watchdog().ensure_running() else _parent_death_hook()
        started = time.perf_counter()
        stdout_fd, child_stdout_fd = os.pipe()
        try:
            process = await self._open_process(confined.argv, env, confined.cwd, child_stdout_fd, hook)
        except BaseException:
            os.close(stdout_fd)
            raise
        finally:
            # The child has its own copy; ours would keep the pipe from ever reporting its end.
            os.close(child_stdout_fd)
        os.set_blocking(stdout_fd, False)
        self.stdout_fd = stdout_fd
        self.sandbox_kind = confined.sandbox
        self.spawn_ms = (time.perf_counter() - started) * 1000
        self._process = process
        self.pid = process.pid
        host_watchdog().watch(process.pid, self.mark)
        return process

    async def _open_process(
        self,
        command: list[str],
        env: dict[str, str],
        cwd: str,
        stdout_fd: int,
        hook: Callable[[], None] | None,
    ) -> anyio.abc.Process:
        import subprocess

        pipes: dict[str, Any] = {"stdin": subprocess.PIPE, "stdout": stdout_fd, "stderr": subprocess.PIPE}
        try:
            if hook is None:
                return await anyio.open_process(command, cwd=cwd, env=env, start_new_session=True, **pipes)
            opened: anyio.abc.Process = await backend_open_process()(
                command, cwd=cwd, env=env, start_new_session=True, preexec_fn=hook, **pipes
            )
            return opened
        except FileNotFoundError as error:
            raise command_not_found(self.server_name, self.command) from error
        except PermissionError as error:
            raise CommandNotFoundError(
                f'MCP server "{self.server_name}": permission denied running {self.command} '
                "(make it executable or point the config at an interpreter)",
                server=self.server_name,
            ) from error
        except OSError as error:
            raise CommandNotFoundError(
                f'MCP server "{self.server_name}": cannot run {self.command}: {error.strerror or error}',
                server=self.server_name,
            ) from error

    def close_stdout(self) -> None:
        """Close the read end of stdout (idempotent). Only once no task waits on it: a closed
        number can be reused at once, and a waiter would then watch someone else's file."""
        if self.stdout_fd is not None:
            fd, self.stdout_fd = self.stdout_fd, None
            os.close(fd)

    async def read_stderr(self) -> None:
        """Keep what the server writes on stderr in the ring, until the pipe closes."""
        process = self._process
        assert process is not None and process.stderr is not None
        buffer = b""
        try:
            async for chunk in process.stderr:
                buffer += chunk
                *lines, buffer = buffer.split(b"\n")
                for raw in lines:
                    self.stderr.append(raw.decode(errors="replace").rstrip())
                if len(buffer) > STDERR_MAX_LINE_CHARS:
                    self.stderr.append(buffer.decode(errors="replace"))
                    buffer = b""
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, anyio.EndOfStream):
            pass
        if buffer.strip():
            self.stderr.append(buffer.decode(errors="replace").rstrip())

    async def wait(self) -> int:
        """Wait for the process to exit; its exit status."""
        process = self._process
        assert process is not None
        self._record_exit(await process.wait())
        assert self.returncode is not None
        return self.returncode

    async def discard(self) -> None:
        """End a process that was spawned but never handed to a session (bounded, shielded)."""
        with anyio.CancelScope(shield=True):
            await self.stop(answered=False)
        # No transport ever read it, so nothing waits on it.
        self.close_stdout()

    async def stop(self, *, answered: bool) -> None:
        """The kill ladder, bounded: close stdin, wait, SIGTERM the group, wait, SIGKILL it, then
        the marked descendants that left the group. A server that never ``answered`` is still
        starting and not reading its stdin yet: waiting for it to notice the close would only
        delay the SIGTERM."""
        process = self._process
        if process is None:
            return
        if process.stdin is not None:
            with contextlib.suppress(OSError, anyio.BrokenResourceError, anyio.ClosedResourceError):
                await process.stdin.aclose()
        exited = await self._wait_exit(STDIN_CLOSE_GRACE_S if answered else 0)
        if not exited and self._ended_unnoticed():
            # It ended on its own: its status is its own, and signalling a pid the loop may
            # reap any moment could reach another process. Bounded all the same.
            exited = await self._wait_exit(EXIT_NOTICE_S)
        if not exited:
            self.signalled = True
            self._signal_group(signal.SIGTERM)
            if not await self._wait_exit(SIGTERM_GRACE_S):
                self._signal_group(signal.SIGKILL)
                await self._wait_exit(SIGKILL_REAP_S)
        # The leader is gone; helpers it left in the group get the same two-step treatment.
        if self._group_alive():
            self._signal_group(signal.SIGTERM)
            for _ in range(round(SIGTERM_GRACE_S / _POLL_S)):
                if not self._group_alive():
                    break
                await anyio.sleep(_POLL_S)
            self._signal_group(signal.SIGKILL)
        # Descendants that left the group (setsid, a double fork) still carry the mark.
        await end_marked_processes(self.mark, SIGTERM_GRACE_S)
        if self.pid is not None:
            host_watchdog().release(self.pid)

    async def _wait_exit(self, seconds: float) -> bool:
        # Polls the exit status rather than waiting on ``wait``: during a cancelled teardown
        # the task in ``wait`` is already cancelled, and the status is still updated.
        process = self._process
        assert process is not None
        for _ in range(max(1, round(seconds / _POLL_S))):
            if process.returncode is not None:
                self._record_exit(process.returncode)
                return True
            await anyio.sleep(_POLL_S)
        if process.returncode is None:
            return False
        self._record_exit(process.returncode)
        return True

    def _ended_unnoticed(self) -> bool:
        """Whether the leader has exited though the event loop has not reported it yet: asked
        of the kernel without reaping it (``WNOWAIT``), so the loop's own wait still gets its
        status. Where ``waitid`` is missing (macOS), the loop's word is all there is."""
        waitid = getattr(os, "waitid", None)
        if waitid is None or self.pid is None:
            return False
        try:
            return waitid(os.P_PID, self.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None
        except ChildProcessError:
            return True  # reaped already by the loop's watcher, which has yet to report it

    def _record_exit(self, returncode: int) -> None:
        if self.returncode is None:
            self.returncode = returncode
        self.exited.set()

    def _group_alive(self) -> bool:
        if self.pid is None:
            return False
        try:
            os.killpg(self.pid, 0)
        except (ProcessLookupError, PermissionError):
            return False
        return True

    def _signal_group(self, signum: int) -> None:
        if self.pid is None:
            return
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.pid, signum)


def command_not_found(server_name: str, command: str) -> CommandNotFoundError:
    return CommandNotFoundError(
        f'MCP server "{server_name}": command not found: {command} '
        '(install it or fix the "command" field; PATH is searched)',
        server=server_name,
    )


def exit_description(returncode: int) -> str:
    """``exited with code 3`` or ``was killed by SIGKILL``."""
    if returncode < 0:
        try:
            return f"was killed by {signal.Signals(-returncode).name}"
        except ValueError:
            return f"was killed by signal {-returncode}"
    return f"exited with code {returncode}"


__all__ = [
    "PrivateApiMovedError",
    "ServerProcess",
    "StderrRing",
    "backend_open_process",
    "command_not_found",
    "exit_description",
]
