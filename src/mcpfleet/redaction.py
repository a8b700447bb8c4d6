"""Secrets kept out of every printed, logged or served command line, URL and header.

Two kinds of secret are masked, both by ``***``:

- **Values known to be secret.** A secret enters a server's config by substitution
  (``${TOKEN}`` in a URL or an argument) or at connect time (a ``!command`` result, a
  variable named by an env value); both hand the value to ``remember_secret``. A literal
  credential written in the config itself (``--token X``, ``key=X``, an ``Authorization``
  header, a high-entropy argument) is remembered the same way when its server's process or
  HTTP transport is made (``remember_credentials``), so that the server echoing it on stderr,
  the SDK or the HTTP client logging it, or an error quoting it, shows ``***`` too.
- **Credential shapes**, decided here and nowhere else: ``redact_args``,
  ``redact_command_line`` and ``redact_url`` mask a launch spec whose structure is known
  (a header's value is remembered whole, never printed); ``redact_text`` masks remembered
  values and the shapes that are safe to recognise in free text (URLs' query values and
  passwords, ``Bearer``/``Basic`` values, ``name=value`` pairs and header lines whose name
  is a credential's, known key prefixes).

What stays readable: paths, package names and versions, URLs' scheme, host and path,
option names, ordinary words and numbers, UUIDs. ``RedactingLogFilter`` applies
``redact_text`` to log records, including those of the HTTP client and the SDK, which log
URLs as they are.

The set of remembered values is per process: error messages and log records do not say
which server they are about, and a secret is one whoever uses it.
"""

from __future__ import annotations

import logging
import re
import shlex
import threading
from collections.abc import Mapping, Sequence
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
    forms = {form for form in encoded if len(form) >= MIN_SECRET_LENGTH and form != REDACTED}
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


# -- what a credential looks like -------------------------------------------------------------------

_CREDENTIAL_WORDS = frozenset(
    {
        "token",
        "secret",
        "password",
        "passwd",
        "passphrase",
        "pass",
        "pwd",
        "key",
        "apikey",
        "credential",
        "credentials",
        "auth",
        "authorization",
        "cookie",
        "bearer",
        "sig",
        "signature",
        "pat",
    }
)
"""A name whose last word is one of these names a credential: ``--token``, ``api_key``,
``X-API-Key``, ``GITHUB_PERSONAL_ACCESS_TOKEN``, ``apiKey``. ``--token-file``, ``--key-id``
and ``--max-tokens`` end in another word and name no secret."""

_CREDENTIAL_SUFFIXES = ("token", "secret", "password", "passwd", "apikey", "accesskey", "secretkey")
"""Words run together end in these: ``PGPASSWORD``, ``accesstoken``, ``APIKEY``."""

_NAME_WORDS = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|[0-9]+")


def is_credential_name(name: str) -> bool:
    """Whether an option, pair, header or query key names a credential (``--api-key``,
    ``token``, ``Authorization``, ``x-goog-api-key``); ``--no-password`` is a switch."""
    words = [word.lower() for word in _NAME_WORDS.findall(name)]
    if not words or words[0] == "no":
        return False
    last = words[-1]
    return last in _CREDENTIAL_WORDS or last.endswith(_CREDENTIAL_SUFFIXES)


_KNOWN_PREFIXES = re.compile(
    r"(?<![A-Za-z0-9])(?:"
    r"sk-[A-Za-z0-9_-]{16,}"  # OpenAI, Anthropic (sk-ant-…)
    r"|[sr]k_(?:live|test)_[A-Za-z0-9]{10,}"  # Stripe
    r"|gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,}"  # GitHub
    r"|glpat-[A-Za-z0-9_-]{20,}"  # GitLab
    r"|xox[abposr]-[A-Za-z0-9-]{10,}|xapp-[A-Za-z0-9-]{10,}"  # Slack
    r"|(?:AKIA|ASIA)[A-Z0-9]{16}"  # AWS access key ids
    r"|AIza[A-Za-z0-9_-]{30,}"  # Google API keys
    r"|hf_[A-Za-z0-9]{20,}|npm_[A-Za-z0-9]{30,}|pypi-[A-Za-z0-9_-]{20,}"
    r"|eyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]*"  # a JWT
    r")"
)
"""Keys whose vendor prefix says what they are, at any length."""

_RANDOM_RUN = re.compile(r"(?<![A-Za-z0-9_+=-])[A-Za-z0-9_+=-]{20,}(?![A-Za-z0-9_+=-])")
_HEX_RUN = re.compile(r"(?<![A-Za-z0-9])[0-9A-Fa-f]{32,}(?![A-Za-z0-9])")
_RUN_PIECES = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|[0-9]+")
MAX_RANDOM_PIECE_LENGTH = 3.0
"""A random key changes between capitals, small letters and digits every one or two
characters (``Zq8vK3mP9x…``); an identifier (``MyVeryLongClassName2023``,
``Test_Case_1_Run_2``) in whole words."""


def _looks_random(run: str) -> bool:
    if not (re.search(r"[a-z]", run) and re.search(r"[A-Z]", run) and re.search(r"[0-9]", run)):
        return False
    pieces = _RUN_PIECES.findall(run)
    return sum(map(len, pieces)) / len(pieces) < MAX_RANDOM_PIECE_LENGTH


def _is_hex_key(run: str) -> bool:
    return bool(re.search(r"[0-9]", run) and re.search(r"[A-Fa-f]", run))


def looks_like_key(value: str) -> bool:
    """Whether ``value`` as a whole is API-key-like: a known vendor prefix, 32+ hex digits, or
    20+ characters mixing capitals, small letters and digits at random."""
    return (
        _KNOWN_PREFIXES.fullmatch(value) is not None
        or (_HEX_RUN.fullmatch(value) is not None and _is_hex_key(value))
        or (_RANDOM_RUN.fullmatch(value) is not None and _looks_random(value))
    )


# -- masking, one shape at a time ------------------------------------------------------------------
#
# Each ``_mask_*`` takes the values it masks into ``found`` (a list), so ``remember_credentials``
# remembers exactly what the display functions mask for a credential reason.

Found = list[str]


def _redacted(found: Found, value: str) -> str:
    """``***`` in place of ``value``, which is noted in ``found``."""
    if value and value != REDACTED:
        found.append(value)
    return REDACTED


def _mask_keys(text: str, found: Found) -> str:
    """Key-like runs inside a value written in a config (not in free text: a digest in a log
    line is no secret)."""
    text = _KNOWN_PREFIXES.sub(lambda match: _redacted(found, match.group()), text)
    text = _HEX_RUN.sub(lambda m: _redacted(found, m.group()) if _is_hex_key(m.group()) else m.group(), text)
    return _RANDOM_RUN.sub(
        lambda m: _redacted(found, m.group()) if _looks_random(m.group()) else m.group(), text
    )


# Every pattern that free text meets starts only where a word starts and bounds its name, so
# hostile text (a 16 MiB log line of ``a.a.a.…``) costs linear time, never quadratic.
_URL = re.compile(r"(?<![A-Za-z0-9+.-])[A-Za-z][A-Za-z0-9+.-]{0,31}://[^\s\"'<>`\\]+")
_URL_TRAILER = ".,;:!?)]}"
_AUTHORITY = re.compile(r"^(?P<scheme>[^:/]+://)(?P<authority>[^/?#]*)(?P<rest>.*)$", re.DOTALL)


def _mask_url(url: str, found: Found) -> str:
    """``url`` with its userinfo's password (or a key-like user), every query value and every
    ``name=value`` of its fragment masked; scheme, host, port and path exact."""
    parts = _AUTHORITY.match(url)
    if parts is None:
        return url
    authority = parts["authority"]
    userinfo, at, host = authority.rpartition("@")
    if at:
        user, colon, password = userinfo.partition(":")
        if colon:
            userinfo = f"{user}:{_redacted(found, password)}" if password else userinfo
        elif looks_like_key(user):
            userinfo = _redacted(found, user)
        authority = f"{userinfo}@{host}"
    rest = parts["rest"]
    path, hash_mark, fragment = rest.partition("#")
    path, question, query = path.partition("?")
    if question:
        query = _mask_query(query, found)
    if hash_mark and "=" in fragment:
        fragment = _mask_query(fragment, found)
    return f"{parts['scheme']}{authority}{path}{question}{query}{hash_mark}{fragment}"


def _mask_query(query: str, found: Found) -> str:
    """Every value of ``query`` masked; only a credential's (by its key or its shape) is
    remembered, since ``x=1`` is no secret anywhere else."""
    pairs = []
    for pair in query.split("&"):
        key, equals, value = pair.partition("=")
        if not equals:
            pairs.append(_redacted(found, key) if looks_like_key(key) else key)
        elif not value:
            pairs.append(pair)
        elif is_credential_name(key) or looks_like_key(value):
            pairs.append(f"{key}={_redacted(found, value)}")
        else:
            pairs.append(f"{key}={REDACTED}")
    return "&".join(pairs)


def _mask_urls(text: str, found: Found) -> str:
    def mask(match: re.Match[str]) -> str:
        url = match.group()
        bare = url.rstrip(_URL_TRAILER)
        return _mask_url(bare, found) + url[len(bare) :]

    return _URL.sub(mask, text)


_SCHEME_VALUE = re.compile(
    r"\b(?P<scheme>Bearer|Basic|Digest)(?P<space>\s+)(?P<value>[A-Za-z0-9._~+/=-]{6,})"
)
_PAIR = re.compile(
    r"(?P<name>(?<![A-Za-z0-9_.-])-{0,2}[A-Za-z_][A-Za-z0-9_.-]{0,63})(?P<quote>[\"']?)"
    r"(?P<sep>[ \t]{0,8}[=:][ \t]{0,8})"
    r"(?:(?P<open>[\"'])(?P<quoted>[^\"'\r\n]*)(?P=open)|(?P<bare>[^\s&;,\"'()<>\[\]{}]+))"
)


def _mask_pairs(text: str, found: Found) -> str:
    """``name=value``, ``name: "value"`` and ``Header-Name: value`` where the name is a
    credential's. A bare ``name: value`` counts only for a header-like name (``X-API-Key``,
    ``Authorization``): ``invalid key: foo`` in a message is not a key."""

    def mask(match: re.Match[str]) -> str:
        name, value = match["name"], match["quoted"] if match["open"] else match["bare"]
        if not is_credential_name(name) or value is None:
            return match.group()
        colon = ":" in match["sep"]
        header_like = "-" in name or name.lower() in ("authorization", "cookie")
        if colon and not match["open"] and not header_like:
            return match.group()
        if not value or value == REDACTED or (colon and value in ("Bearer", "Basic", "Digest")):
            return match.group()
        masked = _redacted(found, value)
        opened = match["open"] or ""
        return f"{name}{match['quote']}{match['sep']}{opened}{masked}{opened}"

    return _PAIR.sub(mask, text)


def _mask_schemes(text: str, found: Found) -> str:
    return _SCHEME_VALUE.sub(
        lambda m: (
            f"{m['scheme']}{m['space']}{_redacted(found, m['value'])}"
            if m["value"] != REDACTED
            else m.group()
        ),
        text,
    )


def _mask_text_shapes(text: str, found: Found) -> str:
    text = _mask_urls(text, found)
    text = _mask_schemes(text, found)
    text = _mask_pairs(text, found)
    return _KNOWN_PREFIXES.sub(lambda match: _redacted(found, match.group()), text)


# -- the public functions --------------------------------------------------------------------------


def _option_takes_secret(arg: str) -> bool:
    """``--token``, ``-api-key``, ``--password``: an option (without ``=``) whose next
    argument is a credential."""
    return arg.startswith("-") and "=" not in arg and is_credential_name(arg)


def _mask_args(args: Sequence[str], found: Found) -> list[str]:
    masked: list[str] = []
    secret_next = False
    for arg in args:
        if secret_next and not arg.startswith("-"):
            masked.append(_redacted(found, arg))
        elif _HEADER_ARG.match(arg):
            masked.append(_mask_header_line(arg, found))
        else:
            masked.append(_mask_keys(_mask_text_shapes(arg, found), found))
        secret_next = _option_takes_secret(arg)
    return masked


_HEADER_ARG = re.compile(r"^(?P<name>[A-Za-z0-9-]+)(?P<sep>:\s*)(?P<value>.+)$", re.DOTALL)


def _mask_header_line(arg: str, found: Found) -> str:
    """``Authorization: Bearer X`` as one argument (``mcp-remote --header``)."""
    match = _HEADER_ARG.match(arg)
    assert match is not None
    value = _mask_header_value(match["name"], match["value"], found)
    return f"{match['name']}{match['sep']}{value}"


_CREDENTIAL_HEADERS = frozenset({"authorization", "proxy-authorization", "cookie", "set-cookie"})


def _mask_header_value(name: str, value: str, found: Found) -> str:
    if name.lower() in _CREDENTIAL_HEADERS or is_credential_name(name):
        scheme, space, credential = value.partition(" ")
        if space and credential and scheme.isalpha():
            # ``Bearer X``: the scheme stays readable; both X and the whole value are secrets.
            found.append(value)
            return f"{scheme} {_redacted(found, credential)}"
        return _redacted(found, value)
    return _mask_keys(_mask_text_shapes(value, found), found)


def redact_args(args: Sequence[str]) -> list[str]:
    """A server's arguments, one for one, with credentials masked: the value after a
    credential option (``--token X``), ``name=value`` pairs and URLs within an argument,
    ``Header: value`` arguments, and key-like strings. Every other argument is left exact."""
    return [redact_text(arg) for arg in _mask_args(args, [])]


def redact_command_line(command: str, args: Sequence[str]) -> str:
    """``command`` and its ``args`` as one shell-quoted line, credentials masked (``***``
    itself is shown unquoted: it stands for a value, it is not one)."""
    words = [command, *_mask_args(args, [])]
    return redact_text(" ".join(_quote_around_masks(word) for word in words))


def _quote_around_masks(word: str) -> str:
    if REDACTED not in word:
        return shlex.quote(word)
    return REDACTED.join(shlex.quote(piece) if piece else "" for piece in word.split(REDACTED))


def redact_url(url: str) -> str:
    """``url`` with its userinfo password and every query value masked (scheme, host, port and
    path exact)."""
    return redact_text(_mask_url(url, []))


def remember_credentials(
    *, args: Sequence[str] = (), url: str | None = None, headers: Mapping[str, str] | None = None
) -> None:
    """Remember, as ``remember_secret`` does, each literal credential of a launch spec: what
    ``redact_args`` and ``redact_url`` mask for a credential reason, and the value of every
    credential header (``Authorization``, ``X-API-Key``, ``Cookie``, …: the value whole and
    the part after its scheme word) or its key-like parts in any other header.

    Called where a server's process or HTTP transport is made, so that its values are masked
    in whatever prints them afterwards: the server's own stderr, the SDK's and the HTTP
    client's logs, errors. Values that are secret only by position (``x=1`` in a query) are
    masked in the URL but not remembered."""
    found: Found = []
    _mask_args(args, found)
    if url is not None:
        _mask_url(url, found)
    for name, value in (headers or {}).items():
        if not value.startswith("!"):  # a connect-time command: its result is remembered instead
            _mask_header_value(name, value, found)
    for value in found:
        remember_secret(value)


def redact_text(text: str) -> str:
    """``text`` with every remembered secret and every credential shape of free text masked."""
    pattern = _pattern
    if pattern is not None:
        text = pattern.sub(REDACTED, text)
    return _mask_text_shapes(text, [])


class RedactingLogFilter(logging.Filter):
    """Masks secrets in a record's message and traceback; never drops a record.

    Attach it to a handler (the CLI does, for stderr): a handler's filters see the
    records of every logger, a logger's own filters only its own records.
    """

    def filter(self, record: logging.LogRecord) -> bool:
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
