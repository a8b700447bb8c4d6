"""The Landlock back-end's side in the spawning process: which rights each ABI governs, the
command it builds, and the refusal where the kernel has no Landlock (the confinement itself is
tested with real processes in tests/integration/transport/test_landlock.py)."""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

import pytest

from mcpfleet.transport import landlock
from mcpfleet.transport.landlock import (
    ACCESS_FS_EXECUTE,
    ACCESS_FS_IOCTL_DEV,
    ACCESS_FS_MAKE_SYM,
    ACCESS_FS_READ_DIR,
    ACCESS_FS_READ_FILE,
    ACCESS_FS_REFER,
    ACCESS_FS_TRUNCATE,
    ACCESS_FS_WRITE_FILE,
    LAUNCHER,
    LandlockUnavailableError,
    access_rights,
    landlock_command,
    launcher_file,
)

READ_ONLY = ACCESS_FS_EXECUTE | ACCESS_FS_READ_FILE | ACCESS_FS_READ_DIR


@pytest.mark.parametrize(
    ("abi", "added"),
    [
        (1, 0),
        (2, ACCESS_FS_REFER),
        (3, ACCESS_FS_REFER | ACCESS_FS_TRUNCATE),
        (4, ACCESS_FS_REFER | ACCESS_FS_TRUNCATE),
        (5, ACCESS_FS_REFER | ACCESS_FS_TRUNCATE | ACCESS_FS_IOCTL_DEV),
        (7, ACCESS_FS_REFER | ACCESS_FS_TRUNCATE | ACCESS_FS_IOCTL_DEV),
    ],
)
def test_each_abi_governs_the_rights_it_knows_and_no_other(abi: int, added: int) -> None:
    abi_1 = (ACCESS_FS_MAKE_SYM << 1) - 1

    handled, read_only, read_write = access_rights(abi)

    assert handled == abi_1 | added
    assert read_only == READ_ONLY
    assert read_write == handled
    assert read_write & ACCESS_FS_WRITE_FILE


def test_no_landlock_is_refused_with_the_ways_to_get_a_sandbox(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(landlock, "landlock_abi", lambda: 0)

    with pytest.raises(LandlockUnavailableError) as raised:
        landlock_command(["server"], read_only=[Path("/usr")], read_write=[])

    message = str(raised.value)
    assert "Landlock is not available" in message
    assert "bubblewrap" in message and '"sandbox": false' in message


def test_the_command_runs_the_launcher_in_an_isolated_python_before_the_servers_argv(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(landlock, "landlock_abi", lambda: 3)
    odd = Path("/srv/a,b:c/ünï")

    command = landlock_command(["node", "server.js", "--"], read_only=[Path("/usr"), odd], read_write=[])

    assert command[:3] == [sys.executable, "-I", "-S"]
    assert command[3] == str(launcher_file())
    assert launcher_file() in (LAUNCHER, Path(importlib.util.cache_from_source(str(LAUNCHER))))
    assert command[5:] == ["--", "node", "server.js", "--"]
    handled, read_only, read_write, read_only_paths, read_write_paths = command[4].split(":")
    assert (int(handled, 16), int(read_only, 16), int(read_write, 16)) == access_rights(3)
    assert [bytes.fromhex(path) for path in read_only_paths.split(",")] == [b"/usr", os.fsencode(odd)]
    assert read_write_paths == ""
    assert LAUNCHER.is_file()


def test_relative_paths_and_an_empty_command_are_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(landlock, "landlock_abi", lambda: 3)

    with pytest.raises(ValueError, match="must be absolute, not 'project'"):
        landlock_command(["server"], read_only=[], read_write=[Path("project")])
    with pytest.raises(ValueError, match="needs a program"):
        landlock_command([], read_only=[], read_write=[])
