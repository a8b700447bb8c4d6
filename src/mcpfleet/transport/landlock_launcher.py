"""Confine this process with Landlock, then become the server: the launcher that
``landlock.landlock_command`` puts in front of a sandboxed server's argv.

Run as ``python -I -S landlock_launcher.py RULES -- COMMAND [ARG...]``. It is its own process
(no ``preexec_fn``: the process that spawns servers has threads, and a forked child of a
threaded process may only call async-signal-safe code) and it does four system calls before
``exec``: ``landlock_create_ruleset``, one ``landlock_add_rule`` per path,
``prctl(PR_SET_NO_NEW_PRIVS)`` and ``landlock_restrict_self``. The domain then holds for the
server and everything it runs. The server gets the argv after ``--`` and the environment the
launcher was started with, exactly (``original_environment``).

It runs at every start of a sandboxed server, so it loads as little as it can: no site
packages (``-S``), nothing of mcpfleet, and ctypes's C core ``_ctypes`` alone, with the two
function types it calls declared here. ``import ctypes`` would declare every C type and build
its caches first, which costs more than everything else the launcher does.

RULES is ``HANDLED:READ_ONLY:READ_WRITE:RO_PATHS:RW_PATHS``: three access masks in hex (the
rights this kernel's ABI knows, the rights of a read-only path and of a read-write one), then
two comma-separated lists of paths, each path its bytes in hex (any file name survives,
commas and all). ``landlock.py`` writes it; this file only applies it. A path that does not
exist is skipped; a path that is a file gets the file rights of its mask only (the kernel
refuses directory rights on a file).

Exit status 126 when the confinement fails (with the reason on stderr), 127 when the
command cannot be run; otherwise the command's own.
"""

from __future__ import annotations

import os
import stat
import sys
from _ctypes import FUNCFLAG_CDECL, FUNCFLAG_USE_ERRNO, CFuncPtr, _SimpleCData, dlopen, get_errno

SYS_LANDLOCK_CREATE_RULESET = 444
SYS_LANDLOCK_ADD_RULE = 445
SYS_LANDLOCK_RESTRICT_SELF = 446
LANDLOCK_RULE_PATH_BENEATH = 1
PR_SET_NO_NEW_PRIVS = 38
# The rights the kernel accepts on a rule for a file rather than a directory: execute,
# write, read, truncate (ABI 3), ioctl on a device (ABI 5).
FILE_RIGHTS = (1 << 0) | (1 << 1) | (1 << 2) | (1 << 14) | (1 << 15)

CONFINEMENT_FAILED = 126
COMMAND_NOT_RUN = 127


class ConfinementError(Exception):
    """A step of the confinement failed; the message says which and why."""


class _Long(_SimpleCData):  # type: ignore[type-arg]  # generic in the stubs only
    _type_ = "l"


class _Int(_SimpleCData):  # type: ignore[type-arg]
    _type_ = "i"


class _Syscall(CFuncPtr):
    """``long syscall(long number, ...)``, keeping ``errno`` for ``get_errno``. Integer arguments
    go in as ``_Long`` (the kernel reads every argument as a full register), buffers as bytes."""

    _flags_ = FUNCFLAG_CDECL | FUNCFLAG_USE_ERRNO
    _restype_ = _Long


class _Prctl(CFuncPtr):
    """``int prctl(int option, unsigned long arg2, ...)``, keeping ``errno``."""

    _flags_ = FUNCFLAG_CDECL | FUNCFLAG_USE_ERRNO
    _restype_ = _Int


class _Library:
    """What a function pointer is looked up in (the part of ``ctypes.CDLL`` that ``_ctypes``
    reads): the handle of the process's own symbols, the C library's among them."""

    def __init__(self) -> None:
        # None is dlopen(NULL), the program itself; the stubs only know file names.
        self._handle = dlopen(None, os.RTLD_NOW)  # type: ignore[arg-type]


def _fail(step: str) -> ConfinementError:
    error = get_errno()
    return ConfinementError(f"{step}: {os.strerror(error)} (errno {error})")


def _paths(field: str) -> list[bytes]:
    return [bytes.fromhex(item) for item in field.split(",") if item]


def confine(rules: str) -> None:
    """Apply ``rules`` (the format above) to this process, for good."""
    handled_text, read_only_text, read_write_text, read_only_paths, read_write_paths = rules.split(":")
    handled = int(handled_text, 16)
    libc = _Library()
    # The stubs want a ctypes.CDLL where _ctypes only reads its ``_handle``.
    syscall = _Syscall(("syscall", libc))  # type: ignore[arg-type]
    prctl = _Prctl(("prctl", libc))  # type: ignore[arg-type]
    order = sys.byteorder
    # struct landlock_ruleset_attr: handled_access_fs alone (its later fields, network and
    # scopes, are left out: the kernel takes the shorter struct and handles none of them).
    ruleset_attr = handled.to_bytes(8, order)
    ruleset: int = syscall(
        _Long(SYS_LANDLOCK_CREATE_RULESET), ruleset_attr, _Long(len(ruleset_attr)), _Long(0)
    )
    if ruleset < 0:
        raise _fail("landlock_create_ruleset")
    for rights_text, paths in ((read_only_text, read_only_paths), (read_write_text, read_write_paths)):
        rights = int(rights_text, 16)
        for path in _paths(paths):
            try:
                descriptor = os.open(path, os.O_PATH | os.O_CLOEXEC)
            except (FileNotFoundError, NotADirectoryError):
                continue  # not there (yet): nothing to allow
            try:
                allowed = rights if stat.S_ISDIR(os.fstat(descriptor).st_mode) else rights & FILE_RIGHTS
                # struct landlock_path_beneath_attr, packed: __u64 allowed_access, __s32 parent_fd.
                rule = allowed.to_bytes(8, order) + descriptor.to_bytes(4, order, signed=True)
                arguments = (_Long(ruleset), _Long(LANDLOCK_RULE_PATH_BENEATH), rule, _Long(0))
                if syscall(_Long(SYS_LANDLOCK_ADD_RULE), *arguments) < 0:
                    raise _fail(f"landlock_add_rule for {os.fsdecode(path)!r}")
            finally:
                os.close(descriptor)
    if prctl(_Int(PR_SET_NO_NEW_PRIVS), _Long(1), _Long(0), _Long(0), _Long(0)) != 0:
        raise _fail("prctl(PR_SET_NO_NEW_PRIVS)")
    if syscall(_Long(SYS_LANDLOCK_RESTRICT_SELF), _Long(ruleset), _Long(0)) < 0:
        raise _fail("landlock_restrict_self")
    os.close(ruleset)


def original_environment() -> dict[bytes, bytes] | None:
    """The environment this process was started with, as the kernel keeps it; ``None`` where
    ``/proc`` is not mounted.

    ``os.environ`` is not it: Python itself adds ``LC_CTYPE=C.UTF-8`` when it starts in the C
    locale (PEP 538), and ``-I`` ignores the variable that would stop it, so the server would
    get an environment its config never gave it. Read before the confinement, which may not
    grant ``/proc``."""
    try:
        with open("/proc/self/environ", "rb") as block:
            entries = block.read().split(b"\0")
    except OSError:
        return None
    environment: dict[bytes, bytes] = {}
    for entry in entries:
        name, equals, value = entry.partition(b"=")
        if equals and name:
            environment.setdefault(name, value)  # getenv reads the first of two
    return environment


def main(arguments: list[str]) -> int:
    if len(arguments) < 3 or arguments[1] != "--":
        print("usage: landlock_launcher.py RULES -- COMMAND [ARG...]", file=sys.stderr)
        return CONFINEMENT_FAILED
    rules, command = arguments[0], arguments[2:]
    environment = original_environment()
    try:
        confine(rules)
    except (ConfinementError, ValueError, OSError) as error:
        print(f"mcpfleet: could not confine the server with Landlock: {error}", file=sys.stderr)
        return CONFINEMENT_FAILED
    try:
        if environment is None:
            os.execvp(command[0], command)
        else:
            os.execvpe(command[0], command, environment)
    except OSError as error:
        print(f"mcpfleet: could not run {command[0]!r} inside the sandbox: {error}", file=sys.stderr)
    return COMMAND_NOT_RUN


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
