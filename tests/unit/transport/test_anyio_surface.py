"""The one private part of anyio that mcpfleet reaches into (``transport/process.py``): the
backend's ``open_process``, which passes ``preexec_fn`` through for the parent-death fallback.

When an anyio release moves it, this fails naming it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from mcpfleet.transport.process import backend_open_process

pytestmark = pytest.mark.anyio


async def test_the_backend_open_process_runs_preexec_fn_in_the_child(tmp_path: Path) -> None:
    mark = tmp_path / "hook-ran"
    process = await backend_open_process()(
        [sys.executable, "-c", "pass"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        preexec_fn=mark.touch,
    )
    assert await process.wait() == 0
    assert mark.exists()
