"""What the dashboard's browser tests share: how Debian's Chromium is launched (the fixtures
``browser``, once for their file, and ``page``, a new context per test, are in conftest.py), the
one-time login link ``mcpfleet ui --no-browser`` prints, and the screenshots they save.

The browser is the system's (``make chromium`` installs it): Playwright never downloads one.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from playwright.sync_api import Page

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
WAIT_MS = 60_000
"""The longest a test waits for text to appear (a hang guard: a loaded machine is slow)."""
MCPFLEET = Path(sys.executable).parent / "mcpfleet"


def login_link() -> str:
    """What ``mcpfleet ui --no-browser`` prints: the link alone, on one line."""
    done = subprocess.run(
        [str(MCPFLEET), "ui", "--no-browser"],
        capture_output=True,
        text=True,
        timeout=120,
        env=os.environ.copy(),
        check=False,
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert len(lines) == 1 and lines[0].startswith("http://127.0.0.1:"), done.stdout
    return lines[0]


def screenshot(page: Page, folder: Path, name: str) -> Path:
    """The page as it is, saved as a test artefact (docs/ui.md shows these)."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.png"
    page.screenshot(path=str(path), full_page=False)
    return path
