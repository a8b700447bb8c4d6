"""Shared output rules of every command: JSON on stdout only, one clear line per error on
stderr, the exit codes of the CLI contract, and text from outside shown as text.

Every string that came from a server, a config file or a path reaches the terminal
through one of these functions (or through ``rich_text`` inside a rich table), so it is
never read as rich markup and its control characters are made visible
(``mcpfleet.contract.text.safe_text``).
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, ClassVar, TextIO

# The commands take the contract's exit codes from here, beside the rest of the output rules.
from mcpfleet.contract.exit_codes import EXIT_FAILED as EXIT_FAILED
from mcpfleet.contract.exit_codes import EXIT_INTERRUPTED as EXIT_INTERRUPTED
from mcpfleet.contract.exit_codes import EXIT_OK as EXIT_OK
from mcpfleet.contract.exit_codes import EXIT_USAGE as EXIT_USAGE
from mcpfleet.contract.text import json_for_terminal, safe_text

if TYPE_CHECKING:
    from rich.text import Text

logger = logging.getLogger(__name__)


class _JsonOutput:
    """What ``--json`` has put on stdout so far, and the errors said on stderr meanwhile: a
    command that ends without its document still leaves one, ``{"error": …}``."""

    requested = False
    emitted = False
    errors: ClassVar[list[str]] = []


def start_output(*, json_requested: bool) -> None:
    """A new run of the command line: nothing printed yet, no error said."""
    _JsonOutput.emitted = False
    _JsonOutput.errors = []
    request_json_output(json_requested)


def request_json_output(requested: bool) -> None:
    """Whether this run answers in JSON (``--json``, anywhere on the command line)."""
    _JsonOutput.requested = requested


def json_output_requested() -> bool:
    return _JsonOutput.requested


def finish_json_output(exit_code: int, reason: str | None = None) -> int:
    """The command's exit code, unchanged; under ``--json``, a failed command that printed no
    document leaves ``{"error": …}`` on stdout: the first error it said (with every one in
    ``errors`` when there were several), else ``reason``."""
    if _JsonOutput.requested and not _JsonOutput.emitted and exit_code != EXIT_OK:
        errors = _JsonOutput.errors or [reason or f"the command failed (exit {exit_code})"]
        document: dict[str, Any] = {"error": errors[0]}
        if len(errors) > 1:
            document["errors"] = list(errors)
        emit_json(document)
    return exit_code


def emit_json(payload: Any, *, one_line: bool = False) -> None:
    """Write one JSON document to stdout (the only thing ``--json`` puts there); ``one_line``
    for a stream of them (JSON Lines: ``daemon logs -f``, ``shell``)."""
    sys.stdout.write(json_for_terminal(payload, indent=None if one_line else 2))
    sys.stdout.write("\n")
    sys.stdout.flush()
    _JsonOutput.emitted = True


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
    if _JsonOutput.requested:
        _JsonOutput.errors.append(text)
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
