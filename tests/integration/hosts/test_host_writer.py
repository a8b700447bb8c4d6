"""The host writer (``mcpfleet hosts install`` and ``uninstall``) under a kill and an editor.

A real ``mcpfleet hosts install`` in a subprocess (``paused_cli.py``: the real command line,
paused at one moment of its write so the test acts there, never after a sleep):

* killed with SIGKILL while its temporary file is written, it leaves no file another user can
  read, and the next run removes what it left;
* another program rewriting the host's file just before the rename, or just after it, never
  yields "added" with the gateway entry missing: the edit is made again on what the other
  program wrote, so both changes are in the file; one that rewrites it at every attempt gets
  a refusal naming the file, exit 1.
"""

from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from mcpfleet.hosts import find_host
from mcpfleet.hosts.wiring import EDIT_ATTEMPTS

PAUSED_CLI = Path(__file__).with_name("paused_cli.py")
MCPFLEET = Path(sys.executable).parent / "mcpfleet"
TIMEOUT_S = 60
SECRET = "sk-live-0123456789abcdef"
CLAUDE_FILE = {
    "numStartups": 3,
    "mcpServers": {"notes": {"type": "stdio", "command": "notes-mcp", "env": {"NOTES_API_KEY": SECRET}}},
}


@dataclass
class Paused:
    process: subprocess.Popen[str]
    go: Any
    ready: Any

    def resume(self) -> tuple[int, str, str]:
        self.go.write("go\n")
        self.go.flush()
        stdout, stderr = self.process.communicate(timeout=TIMEOUT_S)
        return self.process.returncode, stdout, stderr


@contextmanager
def paused_install(moment: str, path: Path, *arguments: str) -> Iterator[Paused]:
    """``mcpfleet hosts install …`` paused at ``moment`` of its write of ``path``."""
    ready_read, ready_write = os.pipe()
    go_read, go_write = os.pipe()
    process = subprocess.Popen(
        [sys.executable, str(PAUSED_CLI), moment, path.name, str(ready_write), str(go_read), *arguments],
        pass_fds=(ready_write, go_read),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    os.close(ready_write)
    os.close(go_read)
    go, ready = os.fdopen(go_write, "w"), os.fdopen(ready_read)
    try:
        if not ready.readline():  # EOF: the process ended without reaching the moment
            stdout, stderr = process.communicate(timeout=TIMEOUT_S)
            pytest.fail(f"the install never reached the moment {moment}:\n{stdout}\n{stderr}")
        yield Paused(process, go, ready)
    finally:
        if process.poll() is None:
            process.kill()
        process.communicate(timeout=TIMEOUT_S)
        go.close()
        ready.close()


def run(*arguments: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(MCPFLEET), *arguments], capture_output=True, text=True, timeout=TIMEOUT_S)


def leftovers(folder: Path, name: str) -> list[Path]:
    return [
        path for path in folder.iterdir() if path.name.startswith(f".{name}.") and path.name.endswith(".tmp")
    ]


def test_a_kill_mid_write_leaves_no_temporary_file_others_can_read(isolated_home: Path) -> None:
    host = find_host("claude-code")
    host.path.write_text(json.dumps(CLAUDE_FILE, indent=2), encoding="utf-8")
    host.path.chmod(0o644)  # as Claude Code leaves it under the usual umask
    with paused_install("synced", host.path, "hosts", "install", "claude-code") as paused:
        written = leftovers(host.path.parent, host.path.name)
        assert written, "the paused install has no temporary file"
        assert SECRET in written[0].read_text(encoding="utf-8")
        paused.process.send_signal(signal.SIGKILL)
        paused.process.wait(timeout=TIMEOUT_S)
    left = leftovers(host.path.parent, host.path.name)
    assert left == written
    for path in left:
        mode = stat.S_IMODE(path.stat().st_mode)
        assert mode & 0o077 == 0, f"{path.name} is left with mode {mode:o}, readable by others"
    assert json.loads(host.path.read_text(encoding="utf-8")) == CLAUDE_FILE

    again = run("hosts", "install", "claude-code")
    assert again.returncode == 0, again.stderr
    assert leftovers(host.path.parent, host.path.name) == []
    assert "mcpfleet" in json.loads(host.path.read_text(encoding="utf-8"))["mcpServers"]
    assert stat.S_IMODE(host.path.stat().st_mode) == 0o644  # the file's own mode is kept


def _editor_rewrites(path: Path, data: dict[str, Any]) -> None:
    """Another process (an editor, the host itself) writes ``data`` into ``path``."""
    subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys; open(sys.argv[1], 'w').write(sys.argv[2])",
            str(path),
            json.dumps(data),
        ],
        check=True,
        timeout=TIMEOUT_S,
    )


@pytest.mark.parametrize("moment", ["synced", "renamed"])
def test_an_editor_writing_during_an_install_never_loses_a_change_silently(
    isolated_home: Path, moment: str
) -> None:
    """``synced``: the editor writes between mcpfleet's read and its rename (a plain rename
    would drop the editor's change); ``renamed``: the editor writes its own copy, read before
    the install, right after the rename (the gateway entry would be gone)."""
    host = find_host("gemini")
    host.path.parent.mkdir(parents=True)
    notes = {"command": "notes-mcp"}
    original = {"mcpServers": {"notes": notes}, "theme": "Default"}
    host.path.write_text(json.dumps(original), encoding="utf-8")
    edited = {**original, "theme": "Dracula"}
    with paused_install(moment, host.path, "hosts", "install", "gemini") as paused:
        _editor_rewrites(host.path, edited)
        code, stdout, stderr = paused.resume()
    final = json.loads(host.path.read_text(encoding="utf-8"))
    if code == 0:
        assert "added the gateway entry" in stdout
        assert final["theme"] == "Dracula", "the editor's change was lost"
        assert "mcpfleet" in final["mcpServers"], "said added, but the gateway entry is not in the file"
        assert final["mcpServers"]["notes"] == notes
    else:
        assert str(host.path) in stderr and "mcpfleet" not in final["mcpServers"]
    assert leftovers(host.path.parent, host.path.name) == []


def test_an_editor_writing_at_every_attempt_gets_a_refusal_naming_the_file(isolated_home: Path) -> None:
    host = find_host("gemini")
    host.path.parent.mkdir(parents=True)
    host.path.write_text(json.dumps({"mcpServers": {}, "theme": "Default"}), encoding="utf-8")
    with paused_install("synced+", host.path, "hosts", "install", "gemini") as paused:
        for attempt in range(EDIT_ATTEMPTS):
            _editor_rewrites(host.path, {"theme": f"edit {attempt}"})
            if attempt + 1 < EDIT_ATTEMPTS:
                paused.go.write("go\n")
                paused.go.flush()
                assert paused.ready.readline(), "the install did not try again"
        code, stdout, stderr = paused.resume()
    assert code == 1 and "added" not in stdout
    lines = stderr.strip().splitlines()
    assert len(lines) == 1 and str(host.path) in lines[0] and "another program rewrote it" in lines[0]
    assert json.loads(host.path.read_text(encoding="utf-8")) == {"theme": f"edit {EDIT_ATTEMPTS - 1}"}
    assert leftovers(host.path.parent, host.path.name) == []
