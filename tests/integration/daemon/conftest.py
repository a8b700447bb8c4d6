"""Fixtures of every daemon test: a private runtime folder, the daemon allowed, nothing left.

``daemon_runtime`` (autouse) points ``MCPFLEET_RUNTIME_DIR`` at a short folder of the test's
own under /tmp (a Unix socket path holds 107 bytes: pytest's folders are too deep) and unsets
``MCPFLEET_NO_DAEMON``. At teardown it stops the daemon answering there (SIGTERM, SIGKILL
after 10 s) and fails the test if any process started under the test's home is still alive
(a daemon that drained away from its socket, a server, a daemon's watchdog; not this test
process's own watchdog, which in-process fleets share for the whole run), after killing them.

``start_daemon`` starts ``mcpfleet daemon run`` with the given options and waits until it
accepts. ``browser`` (started once, for the one file of browser tests) and ``page`` (in a new
context, so with no cookie of another test) are Debian's Chromium under Playwright, for the
dashboard's tests.
"""

from __future__ import annotations

import shutil
import signal
import subprocess
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from tests.integration.daemon.daemon_harness import (
    DaemonProcess,
    describe,
    processes_of_home,
    signal_quietly,
    stop_daemon_of_runtime_dir,
    wait_until_gone,
)

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Page

StartDaemon = Callable[..., DaemonProcess]


@pytest.fixture(autouse=True)
def daemon_runtime(monkeypatch: pytest.MonkeyPatch, isolated_home: Path) -> Iterator[Path]:
    folder = Path(tempfile.mkdtemp(prefix="mf-", dir="/tmp"))
    monkeypatch.setenv("MCPFLEET_RUNTIME_DIR", str(folder))
    monkeypatch.delenv("MCPFLEET_NO_DAEMON", raising=False)
    try:
        yield folder
    finally:
        stop_daemon_of_runtime_dir()
        left = wait_until_gone(processes_of_home(isolated_home))
        if left:
            description = describe(left)
            signal_quietly(left, signal.SIGKILL)
        shutil.rmtree(folder, ignore_errors=True)
        assert not left, f"processes left after the test: {description}"


@pytest.fixture
def start_daemon(isolated_home: Path) -> Iterator[StartDaemon]:
    """``start_daemon(*options, wait=True)``: a ``mcpfleet daemon run`` of this test's runtime folder."""
    started: list[DaemonProcess] = []

    def start(*options: str, wait: bool = True) -> DaemonProcess:
        daemon = DaemonProcess.start(*options, log_dir=isolated_home, wait=wait)
        started.append(daemon)
        return daemon

    yield start
    for daemon in started:
        if daemon.process.poll() is None:
            daemon.signal(signal.SIGTERM)
            try:
                daemon.wait_exit()
            except subprocess.TimeoutExpired:
                daemon.signal(signal.SIGKILL)
                daemon.process.wait()


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    """Debian's Chromium (Playwright gives it a new, empty profile), started once for the file
    of browser tests, the only one that uses it: so once per test run. Not session-scoped:
    while Playwright's sync API runs, its event loop is the running loop of the thread, and
    every later test of the same xdist worker that runs an event loop of its own would fail."""
    from playwright.sync_api import sync_playwright
    from tests.integration.daemon.dashboard_browser import CHROMIUM, CHROMIUM_ARGS

    if not CHROMIUM.exists():
        pytest.fail(f"{CHROMIUM} is missing: run `make chromium` as root (it installs Debian's chromium)")
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            yield launched
        finally:
            launched.close()


@pytest.fixture
def page(browser: Browser) -> Iterator[Page]:
    """A page in a browser context of the test's own: no cookie of another test."""
    from playwright.sync_api import expect
    from tests.integration.daemon.dashboard_browser import WAIT_MS

    expect.set_options(timeout=WAIT_MS)
    context = browser.new_context(viewport={"width": 1100, "height": 720})
    context.set_default_timeout(WAIT_MS)
    try:
        yield context.new_page()
    finally:
        context.close()
