"""The reference filesystem server (``@modelcontextprotocol/server-filesystem``, from npm into
``.tools/filesystem`` by ``make test``) reads the folder its config names through ``mcpfleet
call``: the CLI offers it no roots, which that server would put in place of its folders."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from mcpfleet.paths import user_config_file

ROOT = Path(__file__).resolve().parents[2]
CLI = [sys.executable, "-m", "mcpfleet.cli.main"]
ENTRY = ROOT / ".tools/filesystem/node_modules/@modelcontextprotocol/server-filesystem/dist/index.js"

pytestmark = pytest.mark.skipif(
    not ENTRY.exists() or shutil.which("node") is None,
    reason="server-filesystem is not installed in .tools/filesystem; run: make test",
)


def test_a_call_reads_a_file_of_the_servers_configured_folder_from_another_folder(tmp_path: Path) -> None:
    documents, elsewhere = tmp_path / "documents", tmp_path / "elsewhere"
    documents.mkdir()
    elsewhere.mkdir()
    (documents / "guide.txt").write_text("read me first\n")
    config = user_config_file()
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text(
        json.dumps({"mcpServers": {"docs": {"command": "node", "args": [str(ENTRY), str(documents)]}}})
    )
    guide = json.dumps({"path": str(documents / "guide.txt")})
    completed = subprocess.run(
        [*CLI, "--cwd", str(elsewhere), "call", "docs/read_text_file", guide, "--json"],
        capture_output=True,
        text=True,
        timeout=120,
        env=os.environ.copy(),
        check=False,
    )
    assert completed.returncode == 0, completed.stdout + completed.stderr
    document = json.loads(completed.stdout)
    assert document["is_error"] is False
    assert "read me first" in document["text"]
