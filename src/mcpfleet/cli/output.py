"""Shared output rules of every command: JSON on stdout only, one clear line per error on
stderr, the exit codes of the CLI contract, and text from outside shown as text.

Every string that came from a server, a config file or a path reaches the terminal
through one of these functions (or through ``rich_text`` inside a rich table), so it is
never read as rich markup and its control characters are made visible
(``mcpfleet.cli.display.safe_text``).
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, TextIO

from mcpfleet.cli.display import json_for_terminal, safe_text

if TYPE_CHECKING:
    from rich.text import Text

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130
"""Ctrl-C: 128 + SIGINT, as a shell reports a program the signal ended."""

logger = logging.getLogger(__name__)


def emit_json(payload: Any) -> None:
    """Write one JSON document to stdout (the only thing ``--json`` puts there)."""
    sys.stdout.write(json_for_terminal(payload))
    sys.stdout.write("\n")
    sys.stdout.flush()


def output_line(text: str, *, multiline: bool = False, stream: TextIO | None = None) -> None:
    """Human output on stdout (or ``stream``); ``multiline`` keeps the text's own newlines."""
    out = sys.stdout if stream is None else stream
    out.write(safe_text(text, multiline=multiline) + "\n")
    out.flush()


def error_line(message: str) -> None:
    """One clear line on stderr: what failed, which server or file, what to do.

    Secrets from substitution are masked: many errors quote a server's URL or command line.
    """
    from mcpfleet.redaction import redact_text

    text = redact_text(" ".join(str(message).split()))
    sys.stderr.write(f"mcpfleet: {safe_text(text)}\n")
    sys.stderr.flush()


def report_error(error: BaseException) -> None:
    """``error`` as one line on stderr; under ``-v``, one more line per error that caused it.

    The causes are logged at INFO, which ``-v`` shows: without it the user reads one line
    that says what to do; with it, what went wrong underneath (a parser's own message, an
    ``OSError``), through the same redaction and terminal rules as every log line.
    """
    error_line(str(error))
    log_causes(error)


def log_causes(error: BaseException) -> None:
    """Each error behind ``error`` at INFO: shown under ``-v``, not otherwise."""
    for cause in chained_causes(error):
        logger.info("caused by %s: %s", type(cause).__name__, cause)


def chained_causes(error: BaseException) -> Iterator[BaseException]:
    """The errors behind ``error``, nearest first: ``raise … from`` causes, or the error being
    handled when it was raised (unless ``from None`` hid it)."""
    seen = {id(error)}
    current: BaseException | None = error
    while current is not None:
        current = current.__cause__ or (None if current.__suppress_context__ else current.__context__)
        if current is None or id(current) in seen:
            return
        seen.add(id(current))
        yield current


def info_line(message: str) -> None:
    """Human progress text; stderr so that stdout stays machine-clean."""
    sys.stderr.write(safe_text(message, multiline=True) + "\n")
    sys.stderr.flush()


def rich_text(value: object, style: str = "", *, multiline: bool = False) -> Text:
    """``value`` as a rich ``Text`` for a table cell or a title: never parsed as markup."""
    from rich.text import Text

    return Text(safe_text(value, multiline=multiline), style=style)
