"""Shared output rules of every command: JSON on stdout only, one clear line per error on
stderr, and the exit codes of the CLI contract."""

from __future__ import annotations

import json
import sys
from typing import Any

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2


def emit_json(payload: Any) -> None:
    """Write one JSON document to stdout (the only thing ``--json`` puts there)."""
    sys.stdout.write(json.dumps(payload, indent=2, ensure_ascii=False, default=str))
    sys.stdout.write("\n")
    sys.stdout.flush()


def error_line(message: str) -> None:
    """One clear line on stderr: what failed, which server or file, what to do.

    Secrets from substitution are masked: many errors quote a server's URL or command line.
    """
    from mcpfleet.redaction import redact_text

    text = redact_text(" ".join(str(message).split()))
    sys.stderr.write(f"mcpfleet: {text}\n")
    sys.stderr.flush()


def info_line(message: str) -> None:
    """Human progress text; stderr so that stdout stays machine-clean."""
    sys.stderr.write(message + "\n")
    sys.stderr.flush()
