"""A stdio MCP server that records the arguments it was started with (stdlib only).

Usage: ``argv_recording_server.py RECORD_FILE NAME [ARG…]``. It writes every argument it got
after NAME to RECORD_FILE (a JSON list), then becomes ``fake_server.py --name NAME --tool echo``:
the extra arguments, whatever they look like (``--token X``, ``key=X``), are only recorded. A
test reads the file to see what a server really received, whatever mcpfleet printed about it.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

FAKE_SERVER = Path(__file__).with_name("fake_server.py")


def main() -> None:
    record_file, name, *received = sys.argv[1:]
    Path(record_file).write_text(json.dumps(received))
    os.execv(sys.executable, [sys.executable, str(FAKE_SERVER), "--name", name, "--tool", "echo"])


if __name__ == "__main__":
    main()
