"""Ctrl-C, as a terminal delivers it: SIGINT to mcpfleet's process group, on a pty.

Wherever it lands (the shell's prompt, a running call, a ``status`` waiting for a slow
server) mcpfleet must close every server and exit 130 without a traceback.
"""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.conftest import PYTHON
from tests.servers.fixtures import FAKE_SERVER

from mcpfleet.paths import user_config_file

CLI = [sys.executable, "-m", "mcpfleet.cli.main"]
EXIT_BOUND_S = 60.0
"""Generous: a loaded machine may still be importing the SDK in a worker thread."""


class Terminal:
    """``mcpfleet`` running on a pseudo-terminal, as an interactive user runs it."""

    def __init__(self, project: Path, *arguments: str) -> None:
        self.primary, secondary = os.openpty()
        self.process = subprocess.Popen(
            [*CLI, "--cwd", str(project), "--no-cache", *arguments],
            stdin=secondary,
            stdout=secondary,
            stderr=secondary,
            start_new_session=True,  # its own process group, like a foreground job
            env=os.environ.copy(),
        )
        os.close(secondary)
        self.output = b""

    def read_for(self, seconds: float) -> None:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            ready, _, _ = select.select([self.primary], [], [], 0.1)
            if ready:
                try:
                    self.output += os.read(self.primary, 65536)
                except OSError:  # the other side is closed: the process is gone
                    return

    def read_until(self, marker: bytes, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while marker not in self.output:
            assert time.monotonic() < deadline, f"{marker!r} never came; output so far:\n{self.text}"
            self.read_for(0.2)

    def ctrl_c(self) -> None:
        os.killpg(self.process.pid, signal.SIGINT)

    def wait_for_exit(self, timeout_s: float) -> int | None:
        deadline = time.monotonic() + timeout_s
        while self.process.poll() is None and time.monotonic() < deadline:
            self.read_for(0.2)
        self.read_for(0.3)
        return self.process.poll()

    @property
    def text(self) -> str:
        return self.output.decode("utf-8", errors="replace")

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()
        os.close(self.primary)


@pytest.fixture
def terminals() -> Iterator[list[Terminal]]:
    started: list[Terminal] = []
    yield started
    for terminal in started:
        terminal.close()


def server_pids(pid_file: Path, timeout_s: float = 60) -> list[int]:
    deadline = time.monotonic() + timeout_s
    while not pid_file.exists() or not pid_file.read_text().endswith("\n"):
        assert time.monotonic() < deadline, "the server never started"
        time.sleep(0.1)
    return [int(line) for line in pid_file.read_text().split()]


def assert_gone(pids: list[int], timeout_s: float = 20) -> None:
    deadline = time.monotonic() + timeout_s
    alive = pids
    while alive and time.monotonic() < deadline:
        alive = [pid for pid in alive if _alive(pid)]
        time.sleep(0.1)
    assert not alive, f"server processes left running: {alive}"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def assert_clean_interrupt(terminal: Terminal) -> None:
    code = terminal.wait_for_exit(EXIT_BOUND_S)
    assert code == 130, f"exit code {code}; output:\n{terminal.text}"
    assert "Traceback" not in terminal.text, terminal.text
    assert "Event loop is closed" not in terminal.text, terminal.text


def write_config(pid_file: Path, *flags: str) -> None:
    path = user_config_file()
    path.parent.mkdir(parents=True, exist_ok=True)
    entry = {
        "command": PYTHON,
        "args": [str(FAKE_SERVER), "--name", "box", "--pid-file", str(pid_file), *flags],
    }
    path.write_text(json.dumps({"mcpServers": {"box": entry}}))


def test_ctrl_c_at_the_shell_prompt_exits_130(tmp_path: Path, terminals: list[Terminal]) -> None:
    pid_file = tmp_path / "box.pid"
    write_config(pid_file)
    # --startup-timeout 0: the prompt appears once the server is connected.
    terminal = Terminal(tmp_path, "--startup-timeout", "0", "shell")
    terminals.append(terminal)
    terminal.read_until(b"mcpfleet> ", timeout_s=90)
    pids = server_pids(pid_file)
    terminal.ctrl_c()
    assert_clean_interrupt(terminal)
    assert_gone(pids)


def test_ctrl_c_during_a_call_in_the_shell_exits_130(tmp_path: Path, terminals: list[Terminal]) -> None:
    pid_file = tmp_path / "box.pid"
    write_config(pid_file)
    terminal = Terminal(tmp_path, "--startup-timeout", "0", "shell")
    terminals.append(terminal)
    terminal.read_until(b"mcpfleet> ", timeout_s=90)
    pids = server_pids(pid_file)
    os.write(terminal.primary, b'/call mcp_box_sleep {"seconds": 120}\n')
    terminal.read_for(1.0)
    terminal.ctrl_c()
    assert_clean_interrupt(terminal)
    assert_gone(pids)


def test_ctrl_c_during_call_exits_130(tmp_path: Path, terminals: list[Terminal]) -> None:
    pid_file = tmp_path / "box.pid"
    write_config(pid_file)
    terminal = Terminal(tmp_path, "--startup-timeout", "0", "call", "mcp_box_sleep", '{"seconds": 120}')
    terminals.append(terminal)
    pids = server_pids(pid_file)
    terminal.read_for(2.0)
    terminal.ctrl_c()
    assert_clean_interrupt(terminal)
    assert_gone(pids)


def test_ctrl_c_during_status_exits_130(tmp_path: Path, terminals: list[Terminal]) -> None:
    pid_file = tmp_path / "box.pid"
    write_config(pid_file, "--delay-start", "120")  # status waits for a server that never answers
    terminal = Terminal(tmp_path, "--startup-timeout", "0", "status")
    terminals.append(terminal)
    pids = server_pids(pid_file)
    terminal.read_for(1.0)
    terminal.ctrl_c()
    assert_clean_interrupt(terminal)
    assert_gone(pids)
