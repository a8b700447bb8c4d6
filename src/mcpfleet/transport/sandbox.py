"""The sandbox a stdio server runs in (``"sandbox"`` in its entry; docs/sandbox.md).

Inside, the server sees the system read-only (``/usr``, ``/bin``, ``/lib*``, ``/etc``, ``/opt``),
the interpreter or program it runs read-only, its working folder and its declared ``paths``
writable, its ``readOnlyPaths`` read-only, a temp folder of its own and a home of its own
(``<state dir>/sandbox/<server>-<hash of its folder>/home``, where ``npx``, ``uvx`` and
``pip`` keep their caches); nothing else of the user's home: no ``~/.ssh``, ``~/.aws``,
cloud CLIs' folders, mcpfleet's tokens and approvals, other projects.

Two back-ends, the first usable one wins:

* **bubblewrap** (``bwrap``): a mount namespace holding only those folders (the private home
  bound at ``$HOME``, a fresh ``/tmp``), a PID namespace of its own (so ``/proc`` shows only
  the sandbox's processes, and ``/proc/<pid>/root`` leads nowhere), and a network namespace
  of its own when ``"network": false``. It is started in the server's place: the process
  group, the descendants' mark, the host watchdog and the kill ladder of ``process.py``
  apply to it unchanged (it does not start a session of its own, so the sandboxed server
  stays in the group mcpfleet signals, and ``--die-with-parent`` ends it with bwrap).
* **Landlock** (``landlock.py``): the kernel's own access control, applied by a small
  launcher before it runs the server; ``HOME`` and ``TMPDIR`` point at the private folders.
  It cannot cut the network: ``"network": false`` is refused there, with the fix.

With neither, a sandboxed server does not start; the error says how to fix it (install
bubblewrap, or set ``"sandbox": false``). ``MCPFLEET_SANDBOX_BACKEND`` (``bwrap``,
``landlock`` or ``none``) restricts the choice to one back-end, for tests and benchmarks.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Literal

from mcpfleet import paths
from mcpfleet.config.model import Sandbox, ServerConfig
from mcpfleet.errors import SandboxError

Backend = Literal["bwrap", "landlock"]
SandboxKind = Literal["bwrap", "landlock", "off"]
"""What ``status --json`` reports of a server's sandbox."""

BACKEND_VARIABLE = paths.SANDBOX_BACKEND_ENV
"""Restricts the back-end to one: ``bwrap``, ``landlock``, or ``none`` (as on a machine with
neither). Unset: bubblewrap when usable, else Landlock."""
BACKEND_CHOICES = ("bwrap", "landlock", "none")

SYSTEM_FOLDERS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/opt", "/nix")
"""Read-only inside: where programs, their libraries and the system's settings live."""
DROPPED_VARIABLES = (
    "SSH_AUTH_SOCK",
    "GPG_AGENT_INFO",
    "DBUS_SESSION_BUS_ADDRESS",
    "XDG_RUNTIME_DIR",
    "XDG_CONFIG_HOME",
    "XDG_CACHE_HOME",
    "XDG_DATA_HOME",
    "XDG_STATE_HOME",
)
"""Variables that point at the user's agents and folders: inside they would lead to what the
sandbox hides (or, on Landlock alone, to a socket it cannot hide), so they are left out and
programs fall back to their defaults under the private home."""
PROBE_TIMEOUT_S = 10.0
INSTALL_HINT = "install bubblewrap (`apt-get install bubblewrap`)"


@dataclass(frozen=True)
class Launch:
    """What to run for one server: its command line (behind the sandbox's launcher), its
    environment and the folder it starts in."""

    argv: list[str]
    env: dict[str, str]
    cwd: str
    sandbox: SandboxKind


def available_backend(server_name: str) -> Backend | None:
    """The back-end sandboxed servers run under here, or ``None`` when neither is usable.
    Raises ``SandboxError`` (for ``server_name``) when ``MCPFLEET_SANDBOX_BACKEND`` is not one
    of its values."""
    forced = os.environ.get(BACKEND_VARIABLE, "").strip() or None
    if forced is not None and forced not in BACKEND_CHOICES:
        choices = ", ".join(BACKEND_CHOICES)
        raise SandboxError(
            f'MCP server "{server_name}" cannot be confined: {BACKEND_VARIABLE}={forced!r} is not one of '
            f"{choices}; fix or unset it",
            server=server_name,
        )
    return _available(forced)


@cache
def _available(forced: str | None) -> Backend | None:
    if forced in (None, "bwrap") and bwrap_usable():
        return "bwrap"
    if forced in (None, "landlock") and landlock_usable():
        return "landlock"
    return None


@cache
def bwrap_usable() -> bool:
    """Whether ``bwrap`` is installed and can make the namespaces it needs here (a container
    without user namespaces, or a distribution that restricts them, refuses)."""
    program = shutil.which("bwrap")
    true = shutil.which("true")
    if program is None or true is None:
        return False
    mounts = ["--ro-bind", "/", "/", "--proc", "/proc", "--dev", "/dev"]
    probe = [program, *_NAMESPACES, "--unshare-net", *mounts]
    try:
        done = subprocess.run([*probe, "--", true], capture_output=True, timeout=PROBE_TIMEOUT_S, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0


@cache
def landlock_usable() -> bool:
    from mcpfleet.transport.landlock import landlock_abi

    abi: int = landlock_abi()
    return abi >= 1


def sandbox_kind(config: ServerConfig) -> SandboxKind:
    """The sandbox ``config`` runs in here (``off`` when it would not start for want of one)."""
    if not config.effective_sandbox.enabled:
        return "off"
    try:
        backend = available_backend(config.name)
    except SandboxError:
        return "off"
    return backend if backend is not None else "off"


def private_folder(server_name: str, working_dir: str) -> Path:
    """The folder of one server's private home and temp folder, per server and working folder:
    two projects' servers of the same name never share a cache one of them could poison."""
    digest = hashlib.sha256(os.path.realpath(working_dir).encode()).hexdigest()[:16]
    return paths.user_state_dir() / "sandbox" / f"{server_name}-{digest}"


def launch(
    server_name: str, sandbox: Sandbox, command: str, args: Sequence[str], env: Mapping[str, str], cwd: str
) -> Launch:
    """How to run ``[command, *args]`` in ``sandbox`` (``env`` and ``cwd`` as the server would
    get them unconfined). Raises ``SandboxError`` when it cannot be confined as asked, and
    ``CommandNotFoundError`` when the command does not exist (inside, the launcher could only
    report it as an exit status)."""
    if not sandbox.enabled:
        return Launch([command, *args], dict(env), cwd, "off")
    backend = available_backend(server_name)
    if backend is None:
        raise SandboxError(
            f'MCP server "{server_name}" runs in a sandbox, and neither bubblewrap nor Landlock is usable '
            f'here: {INSTALL_HINT}, or set "sandbox": false in its entry to run it unconfined',
            server=server_name,
        )
    if backend == "landlock" and not sandbox.network:
        raise SandboxError(
            f'MCP server "{server_name}" asks for "network": false, which only bubblewrap can enforce '
            f'(Landlock alone cannot cut the network): {INSTALL_HINT}, or set "network": true in its '
            '"sandbox"',
            server=server_name,
        )
    executable = _resolved_command(server_name, command, env, cwd)
    home = Path(env.get("HOME") or paths.home_dir())
    folder = paths.make_private_folder(private_folder(server_name, cwd))
    private_home = paths.make_private_folder(folder / "home")
    if home.parent == home:
        # A service account's home may be the root folder, which cannot be swapped for another:
        # the private home is then mounted where it is, and HOME names it.
        home = private_home
    plan = _Plan.of(sandbox, executable, home, Path(cwd))
    inside_env = {key: value for key, value in env.items() if key not in DROPPED_VARIABLES}
    if backend == "bwrap":
        inside_env.update(HOME=str(home), TMPDIR="/tmp")
        argv = [*plan.bwrap_arguments(home, private_home, sandbox.network), "--", executable, *args]
        return Launch(argv, inside_env, cwd, "bwrap")
    from mcpfleet.transport.landlock import landlock_command

    private_tmp = paths.make_private_folder(folder / "tmp")
    inside_env.update(HOME=str(private_home), TMPDIR=str(private_tmp))
    # The real home is out of reach: a server meant to start there starts in its own.
    start_in = cwd if plan.working_dir is not None else str(private_home)
    argv = landlock_command(
        [executable, *args],
        read_only=[*plan.read_only, Path("/proc")],
        read_write=[*plan.read_write, private_home, private_tmp, Path("/dev")],
    )
    return Launch(argv, inside_env, start_in, "landlock")


_NAMESPACES = ("--die-with-parent", "--unshare-pid", "--unshare-ipc")


@dataclass(frozen=True)
class _Plan:
    """The folders one server sees: read-only and writable, each an existing path."""

    read_only: tuple[Path, ...]
    read_write: tuple[Path, ...]
    working_dir: Path | None
    """Its working folder, writable; ``None`` when that is the user's home or a folder above
    it, which is never opened up (the server then starts in its private home)."""

    @classmethod
    def of(cls, sandbox: Sandbox, executable: str, home: Path, cwd: Path) -> _Plan:
        working_dir = None if _contains(cwd, home) else cwd
        read_write = [path for path in map(Path, sandbox.paths) if path.exists()]
        if working_dir is not None:
            read_write.insert(0, working_dir)
        read_only = [Path(folder) for folder in SYSTEM_FOLDERS if os.path.lexists(folder)]
        # A program inside a writable folder (the project's own .venv) stays writable: only
        # what the entry declares read-only is made so there.
        read_only += [
            folder
            for folder in _program_folders(Path(executable), home)
            if not any(_contains(writable, folder) for writable in read_write)
        ]
        read_only += [path for path in map(Path, sandbox.read_only_paths) if path.exists()]
        resolv = Path("/etc/resolv.conf")
        if resolv.is_symlink():
            # Often a link into /run (systemd-resolved): without its target, no name resolves.
            read_only.append(resolv.resolve().parent)
        return cls(tuple(dict.fromkeys(read_only)), tuple(dict.fromkeys(read_write)), working_dir)

    def bwrap_arguments(self, home: Path, private_home: Path, network: bool) -> list[str]:
        program = shutil.which("bwrap") or "bwrap"
        arguments = [program, *_NAMESPACES]
        if not network:
            arguments.append("--unshare-net")
        mounts: list[tuple[Path, list[str]]] = [
            (Path("/proc"), ["--proc", "/proc"]),
            (Path("/dev"), ["--dev", "/dev"]),
            (Path("/tmp"), ["--tmpfs", "/tmp"]),
            (home, ["--bind", str(private_home), str(home)]),
        ]
        for path in self.read_only:
            if path.is_symlink() and str(path) in SYSTEM_FOLDERS:
                # Merged /usr: /bin is a link to usr/bin, and stays one inside.
                mounts.append((path, ["--symlink", os.readlink(path), str(path)]))
            else:
                mounts.append((path, ["--ro-bind", str(path), str(path)]))
        mounts += [(path, ["--bind", str(path), str(path)]) for path in self.read_write]
        # A folder is mounted before anything inside it, else it would hide what is inside;
        # at equal depth, later entries (writable, declared) win over earlier ones.
        for _, mount in sorted(mounts, key=lambda item: len(item[0].parts)):
            arguments += mount
        chdir = self.working_dir if self.working_dir is not None else home
        return [*arguments, "--chdir", str(chdir)]


def _program_folders(executable: Path, home: Path) -> list[Path]:
    """What running ``executable`` needs to read: for a program in a ``bin`` folder, the
    installation above it (an interpreter's standard library, a virtual environment and the
    interpreter it was made from), for any other the file itself; through links too. Never
    the home, a folder above it, or ``~/.local`` (which holds the user's data as well)."""
    found: list[Path] = []
    for path in dict.fromkeys([executable, executable.resolve()]):
        prefix = path.parent.parent if path.parent.name == "bin" else None
        if prefix is None or _contains(prefix, home) or prefix == home / ".local":
            found.append(path)
            continue
        found.append(prefix)
        base = _venv_base(prefix)
        if base is not None and not _contains(base, home) and base != home / ".local":
            found.append(base)
    return list(dict.fromkeys(found))


def _venv_base(prefix: Path) -> Path | None:
    """The installation a virtual environment was made from (``home`` in its ``pyvenv.cfg``)."""
    try:
        text = (prefix / "pyvenv.cfg").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    for line in text.splitlines():
        key, _, value = line.partition("=")
        if key.strip() == "home" and value.strip():
            bin_folder = Path(value.strip())
            return bin_folder.parent if bin_folder.name == "bin" else bin_folder
    return None


def _contains(folder: Path, path: Path) -> bool:
    """Whether ``path`` is ``folder`` or inside it."""
    return path == folder or folder in path.parents


def _resolved_command(server_name: str, command: str, env: Mapping[str, str], cwd: str) -> str:
    from mcpfleet.transport.process import command_not_found

    if os.sep in command:
        candidate = Path(cwd, command)
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return str(candidate)
        raise command_not_found(server_name, command)
    found = shutil.which(command, path=env.get("PATH", os.defpath))
    if found is None:
        raise command_not_found(server_name, command)
    return str(Path(found).absolute())


__all__ = [
    "BACKEND_VARIABLE",
    "Launch",
    "SandboxKind",
    "available_backend",
    "launch",
    "private_folder",
    "sandbox_kind",
]
