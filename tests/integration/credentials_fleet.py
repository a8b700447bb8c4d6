"""A fleet whose config carries literal credentials, for the tests that they are masked in
every text mcpfleet prints, logs or serves, yet reach the servers as they are.

``write_credentials_fleet(http_port, record_file)`` writes mcpfleet's user config:

- ``argv``: ``argv_recording_server.py`` started with ``--token``, ``key=`` and a key-like
  argument (and two package names), recording what it received; it serves ``echo``.
- ``cli``: ``fake_server.py`` with the same arguments, which it rejects: its error quotes the
  command line, and argparse echoes the arguments on its stderr.
- ``web``: the HTTP test server at ``/mcp?api_key=…&x=1`` with ``Authorization: Bearer …``;
  the server demands both values (``--require-bearer``, ``--require-query``), so ``web``
  connected proves they were sent unmasked.
- ``down``: the same server at ``/nope?…``: HTTP 404, an error that names the URL.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from tests.servers.fixtures import FAKE_SERVER, SERVERS_DIR

from mcpfleet.paths import user_config_file

ARGV_SERVER = SERVERS_DIR / "argv_recording_server.py"

TOKEN_LITERAL = "tokLiteral-5150"
PAIR_LITERAL = "pairLiteral-6061"
BARE_LITERAL = "Qx7Lm2Vb9Tz4Rk8Wn3Hp6Jd"
QUERY_LITERAL = "queryLiteral-7172"
BEARER_LITERAL = "bearerLiteral-8283"
LITERALS = (TOKEN_LITERAL, PAIR_LITERAL, BARE_LITERAL, QUERY_LITERAL, BEARER_LITERAL)

PACKAGES = ("@modelcontextprotocol/server-filesystem", "mcp-server-git==1.2.3")
CREDENTIAL_ARGS = ("--token", TOKEN_LITERAL, f"key={PAIR_LITERAL}", BARE_LITERAL)
MASKED_ARGS = "--token *** key=*** ***"
"""How ``CREDENTIAL_ARGS`` read in a command line mcpfleet prints."""
HTTP_FLAGS = ("--require-bearer", BEARER_LITERAL, "--require-query", f"api_key={QUERY_LITERAL}")
"""The HTTP test server's flags: it answers only requests that carry both literals."""


def http_entry(port: int, path: str) -> dict[str, Any]:
    return {
        "type": "http",
        "url": f"http://127.0.0.1:{port}/{path}?api_key={QUERY_LITERAL}&x=1",
        "headers": {"Authorization": f"Bearer {BEARER_LITERAL}"},
    }


def write_credentials_fleet(http_port: int, record_file: Path) -> Path:
    servers = {
        "argv": {
            "command": sys.executable,
            "args": [str(ARGV_SERVER), str(record_file), "argv", *CREDENTIAL_ARGS, *PACKAGES],
        },
        "cli": {"command": sys.executable, "args": [str(FAKE_SERVER), "--name", "cli", *CREDENTIAL_ARGS]},
        "web": http_entry(http_port, "mcp"),
        "down": http_entry(http_port, "nope"),
    }
    path = user_config_file()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"mcpServers": servers}))
    return path


def assert_no_literal(text: str) -> None:
    for literal in LITERALS:
        assert literal not in text, f"{literal!r} shown in:\n{text}"


def assert_servers_got_the_real_values(record_file: Path) -> None:
    assert json.loads(record_file.read_text()) == [*CREDENTIAL_ARGS, *PACKAGES]
