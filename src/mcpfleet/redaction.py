"""Secrets kept out of every printed or logged command line, URL and header.

A secret enters a server's config by substitution (``${TOKEN}`` in a URL or an argument)
or at connect time (a ``!command`` result, a variable named by an env value). Both places
hand the value to ``remember_secret``; ``redact_text`` then masks it in any text, and
``RedactingLogFilter`` does the same for log records, including those of the HTTP client
and the SDK, which log URLs as they are.

The set of remembered values is per process: error messages and log records do not say
which server they are about, and a secret is one whoever uses it.
"""

from __future__ import annotations

import logging
import re
import threading
from urllib.parse import quote, quote_plus

REDACTED = "***"
MIN_SECRET_LENGTH = 4
"""Shorter values (``1``, ``on``, ``dev``) are flags, not secrets, and masking every
occurrence of them would make messages unreadable."""

_secrets: set[str] = set()
_pattern: re.Pattern[str] | None = None
_lock = threading.Lock()


def remember_secret(value: str) -> None:
    """Mask ``value`` (and its URL-encoded forms) in every later ``redact_text``."""
    global _pattern
    encoded = (value, quote(value), quote(value, safe=""), quote_plus(value))
    forms = {form for form in encoded if len(form) >= MIN_SECRET_LENGTH}
    with _lock:
        if forms <= _secrets:
            return
        _secrets.update(forms)
        # Longest first, so a secret that contains another one is masked whole.
        ordered = sorted(_secrets, key=len, reverse=True)
        _pattern = re.compile("|".join(re.escape(secret) for secret in ordered))


def forget_secrets() -> None:
    """Forget every remembered secret (each test starts from none, as from a fresh process)."""
    global _pattern
    with _lock:
        _secrets.clear()
        _pattern = None


def redact_text(text: str) -> str:
    """``text`` with every remembered secret replaced by ``***``."""
    pattern = _pattern
    return text if pattern is None else pattern.sub(REDACTED, text)


class RedactingLogFilter(logging.Filter):
    """Masks remembered secrets in a record's message and traceback; never drops a record.

    Attach it to a handler (the CLI does, for stderr): a handler's filters see the
    records of every logger, a logger's own filters only its own records.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        if _pattern is None:
            return True
        try:
            message = record.getMessage()
        except Exception:
            # A malformed record is the handler's to report (it does, in emit); a filter
            # that raised would turn it into an exception in the code that logged.
            return True
        redacted = redact_text(message)
        if redacted != message:
            record.msg, record.args = redacted, None
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = redact_text(record.exc_text)
        return True
