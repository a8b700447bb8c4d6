"""The Landlock back-end of the sandbox: a server confined by the kernel itself, with nothing
to install.

Landlock (Linux 5.13 and later, when the kernel enables it) lets an unprivileged process
take away its own access to the file system, for itself and everything it runs; no root, no
namespaces, no helper binary. ``landlock_command`` wraps a server's argv in a small launcher
(``landlock_launcher.py``, run by this same Python with ``-I -S``) that confines itself to the
given paths and then ``exec``s the server, so the server starts already confined and the
process that spawns it (which has threads) runs no code between ``fork`` and ``exec``.

What a path may do:

* ``read_only``: read files, list directories, execute programs;
* ``read_write``: everything the running kernel's ABI can govern — also write, create,
  remove and rename (``refer`` from ABI 2, so files may move between allowed folders),
  truncate (ABI 3) and ``ioctl`` on devices (ABI 5).

Every other path is refused, reads included. Rights a kernel's ABI does not know are not
governed on it (an ABI 1 kernel cannot govern truncation, and refuses every rename across
folders). Landlock does not cut the network here: the sandbox refuses ``"network": false``
when Landlock is its only back-end. See docs/integrity.md ("The Landlock back-end").
"""

from __future__ import annotations

import functools
import importlib.util
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Final

__all__ = [
    "LAUNCHER",
    "LandlockUnavailableError",
    "access_rights",
    "landlock_abi",
    "landlock_command",
    "launcher_file",
]

LAUNCHER: Final = Path(__file__).with_name("landlock_launcher.py")
"""The launcher's source: a script that imports nothing of mcpfleet (see ``launcher_file``)."""

_SYS_LANDLOCK_CREATE_RULESET: Final = 444
_LANDLOCK_CREATE_RULESET_VERSION: Final = 1 << 0

ACCESS_FS_EXECUTE: Final = 1 << 0
ACCESS_FS_WRITE_FILE: Final = 1 << 1
ACCESS_FS_READ_FILE: Final = 1 << 2
ACCESS_FS_READ_DIR: Final = 1 << 3
ACCESS_FS_REMOVE_DIR: Final = 1 << 4
ACCESS_FS_REMOVE_FILE: Final = 1 << 5
ACCESS_FS_MAKE_CHAR: Final = 1 << 6
ACCESS_FS_MAKE_DIR: Final = 1 << 7
ACCESS_FS_MAKE_REG: Final = 1 << 8
ACCESS_FS_MAKE_SOCK: Final = 1 << 9
ACCESS_FS_MAKE_FIFO: Final = 1 << 10
ACCESS_FS_MAKE_BLOCK: Final = 1 << 11
ACCESS_FS_MAKE_SYM: Final = 1 << 12
ACCESS_FS_REFER: Final = 1 << 13
"""ABI 2: link or rename a file into another folder."""
ACCESS_FS_TRUNCATE: Final = 1 << 14
"""ABI 3."""
ACCESS_FS_IOCTL_DEV: Final = 1 << 15
"""ABI 5: ``ioctl`` on a character or block device."""

_ABI_1_RIGHTS: Final = (1 << 13) - 1  # EXECUTE … MAKE_SYM
_RIGHTS_ADDED_BY_ABI: Final = {2: ACCESS_FS_REFER, 3: ACCESS_FS_TRUNCATE, 5: ACCESS_FS_IOCTL_DEV}
_READ_ONLY: Final = ACCESS_FS_EXECUTE | ACCESS_FS_READ_FILE | ACCESS_FS_READ_DIR

UNAVAILABLE_FIX: Final = (
    "install bubblewrap (Debian: apt-get install bubblewrap), use a kernel with Landlock "
    '(Linux 5.13+, "landlock" in the lsm= boot parameter), or set "sandbox": false on the server'
)


class LandlockUnavailableError(RuntimeError):
    """Landlock was asked for where the kernel or platform has none."""


@functools.cache
def landlock_abi() -> int:
    """The Landlock ABI version of the running kernel: 0 when there is none (not Linux, a kernel
    before 5.13, or Landlock left out of the boot's ``lsm=`` list). Asked of the kernel once."""
    if not sys.platform.startswith("linux"):
        return 0
    import ctypes  # here, not at the top: only a sandboxed start pays for it

    try:
        libc = ctypes.CDLL(None, use_errno=True)
    except OSError:
        return 0
    libc.syscall.restype = ctypes.c_long
    version = libc.syscall(
        ctypes.c_long(_SYS_LANDLOCK_CREATE_RULESET),
        ctypes.c_void_p(None),
        ctypes.c_size_t(0),
        ctypes.c_uint32(_LANDLOCK_CREATE_RULESET_VERSION),
    )
    return int(version) if version > 0 else 0


def access_rights(abi: int) -> tuple[int, int, int]:
    """``(handled, read_only, read_write)``: the file-system rights a ruleset governs on a
    kernel of ABI ``abi``, and those granted to a read-only and to a read-write path."""
    if abi < 1:
        raise LandlockUnavailableError(f"Landlock is not available on this system: {UNAVAILABLE_FIX}")
    handled = _ABI_1_RIGHTS
    for since, right in _RIGHTS_ADDED_BY_ABI.items():
        if abi >= since:
            handled |= right
    return handled, _READ_ONLY, handled


def _encoded_paths(paths: Sequence[Path]) -> str:
    encoded: list[str] = []
    for path in paths:
        if not path.is_absolute():
            raise ValueError(f"a Landlock path must be absolute, not {str(path)!r}")
        encoded.append(os.fsencode(path).hex())
    return ",".join(encoded)


def _is_fresh(compiled: Path, source: Path) -> bool:
    """Whether ``compiled`` is ``source`` compiled by this Python, by the check the import system
    makes on a timestamp-based ``.pyc``: magic number, flags 0, the source's mtime and size."""
    try:
        with compiled.open("rb") as file:
            header = file.read(16)
        status = source.stat()
    except OSError:
        return False
    return (
        len(header) == 16
        and header[:4] == importlib.util.MAGIC_NUMBER
        and header[4:8] == bytes(4)
        and int.from_bytes(header[8:12], "little") == int(status.st_mtime) & 0xFFFFFFFF
        and int.from_bytes(header[12:16], "little") == status.st_size & 0xFFFFFFFF
    )


@functools.cache
def launcher_file(source: Path = LAUNCHER) -> Path:
    """The file the interpreter runs as the launcher: its compiled form while that is fresh,
    else ``source`` itself. Decided once per process.

    Python compiles a script named on its command line at every run and never caches it, which
    is about half the launcher's own start-up; so its bytecode is kept where Python keeps a
    module's (``__pycache__``), written here once unless writing bytecode is off
    (``PYTHONDONTWRITEBYTECODE``, ``-B``) or the folder is read-only. A copy that no longer
    matches the source is never run: it would confine by rules that are not the code's.
    """
    compiled = Path(importlib.util.cache_from_source(os.fspath(source)))
    if _is_fresh(compiled, source):
        return compiled
    if sys.dont_write_bytecode:
        return source
    import py_compile  # here: only the first sandboxed start of a process compiles

    try:
        py_compile.compile(
            os.fspath(source),
            cfile=os.fspath(compiled),
            doraise=True,
            invalidation_mode=py_compile.PycInvalidationMode.TIMESTAMP,
        )
    except (OSError, py_compile.PyCompileError):
        return source
    return compiled if _is_fresh(compiled, source) else source


def landlock_command(
    argv: Sequence[str], *, read_only: Sequence[Path], read_write: Sequence[Path]
) -> list[str]:
    """``argv`` behind the launcher: a command that confines itself with Landlock to reading
    (and executing) ``read_only`` and reading and writing ``read_write``, then ``exec``s
    ``argv`` with the same arguments and environment.

    Paths must be absolute; one that does not exist when the server starts is skipped. Raises
    ``LandlockUnavailableError`` (saying how to get a sandbox) when the kernel has no Landlock.
    """
    if not argv:
        raise ValueError("a sandboxed command needs a program to run")
    handled, read_only_rights, read_write_rights = access_rights(landlock_abi())
    rules = ":".join(
        [
            f"{handled:x}",
            f"{read_only_rights:x}",
            f"{read_write_rights:x}",
            _encoded_paths(read_only),
            _encoded_paths(read_write),
        ]
    )
    return [sys.executable, "-I", "-S", str(launcher_file()), rules, "--", *argv]
