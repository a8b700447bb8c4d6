"""Connect-time secret substitution for stdio ``env`` values and HTTP header values.

A value ``!command`` is replaced by the trimmed stdout of ``command`` run through the shell
(bounded, cached per process, failures backed off); a value that is exactly the name of a
set environment variable is replaced by that variable's value; anything else stays literal.
An empty result drops the key. Only approved and user-level entries are resolved (the
caller decides): these substitutions read secrets and run commands. Every command runs in
the user's home, never in the project: ``!python -m keyring get …`` run in a cloned
repository would import the repository's own ``keyring.py``, with the user's secrets in
its environment. Keys listed as literal (their value came out of discovery-time
substitution, not from the file) are never resolved: a substituted value is text, never a
command.

Nothing here ever puts a resolved value in a message or a log line, and every resolved
value (and the value of a secret-looking key) is remembered by ``mcpfleet.redaction`` so
that whatever prints the server's errors or stderr masks it.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import subprocess
import threading
import time
from collections.abc import Collection, Mapping
from dataclasses import dataclass

from mcpfleet.errors import SecretResolutionError
from mcpfleet.paths import neutral_working_dir
from mcpfleet.redaction import remember_secret

logger = logging.getLogger(__name__)

COMMAND_TIMEOUT_S = 10.0
"""Bound of one ``!command``."""
FAILURE_BACKOFF_S = 30.0
"""A failed ``!command`` is not run again for this long (its last good value is served meanwhile)."""

_SECRET_KEY = re.compile(
    r"(^authorization$|^proxy-authorization$|^cookie$|token|secret|password|passwd|_key$|^api[-_]?key$|credential)",
    re.IGNORECASE,
)


@dataclass
class _CommandOutcome:
    value: str | None
    """The last good value (kept through later failures)."""
    failed_at: float | None = None
    failure: str | None = None


_command_cache: dict[str, _CommandOutcome] = {}
_cache_lock = threading.Lock()


def is_secret_key(key: str) -> bool:
    """Whether a header or env name is likely to hold a secret."""
    return bool(_SECRET_KEY.search(key))


def resolve_secret_values(
    name: str,
    values: Mapping[str, str],
    *,
    env: Mapping[str, str] | None = None,
    literal_keys: Collection[str] = (),
) -> dict[str, str]:
    """Resolve every value of ``values`` (see the module docstring) for server ``name``;
    the values of ``literal_keys`` are kept as they are.

    Raises ``SecretResolutionError`` naming the server, the key and why, never the value.
    """
    environment = os.environ if env is None else env
    resolved: dict[str, str] = {}
    for key, raw in values.items():
        if key in literal_keys:
            value = raw
        elif raw.startswith("!"):
            value = _run_secret_command(name, key, raw[1:].strip())
            remember_secret(value)
        elif raw and raw in environment:
            value = environment[raw]
            remember_secret(value)
        else:
            value = raw
            if is_secret_key(key):
                remember_secret(value)
        if value:
            resolved[key] = value
    return resolved


def clear_secret_cache() -> None:
    """Forget every cached ``!command`` result and failure (tests, ``/mcp reload``)."""
    with _cache_lock:
        _command_cache.clear()


def _run_secret_command(server: str, key: str, command: str) -> str:
    """Run one ``!command`` (cached, backed off). Blocking: call it off the event loop."""
    if not command:
        raise SecretResolutionError(
            f'MCP server "{server}": the value of {key} is "!" without a command', server=server
        )
    with _cache_lock:
        cached = _command_cache.get(command)
    now = time.monotonic()
    if cached is not None:
        if cached.failed_at is None and cached.value is not None:
            return cached.value
        if cached.failed_at is not None and now - cached.failed_at < FAILURE_BACKOFF_S:
            if cached.value is not None:
                return cached.value
            raise _command_error(server, key, cached.failure or "failed", backing_off=True)
    failure = _execute(command)
    with _cache_lock:
        entry = _command_cache.setdefault(command, _CommandOutcome(value=None))
        if isinstance(failure, _Success):
            entry.value, entry.failed_at, entry.failure = failure.value, None, None
            return failure.value
        entry.failed_at, entry.failure = time.monotonic(), failure
        last_good = entry.value
    # Only the key and the reason are logged: the command line itself may embed a secret.
    logger.warning('MCP server "%s": !command for %s failed: %s', server, key, failure)
    if last_good is not None:
        return last_good
    raise _command_error(server, key, failure, backing_off=False)


@dataclass(frozen=True)
class _Success:
    value: str


def _execute(command: str) -> _Success | str:
    """Run ``command`` through the shell in its own process group, in the user's home; a reason
    string on failure."""
    try:
        process = subprocess.Popen(
            command,
            shell=True,
            cwd=neutral_working_dir(),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
    except OSError as error:
        return f"could not be started ({error.strerror or error})"
    try:
        stdout, _ = process.communicate(timeout=COMMAND_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        _kill_group(process)
        return f"timed out after {COMMAND_TIMEOUT_S:g} s"
    if process.returncode != 0:
        return f"exited with status {process.returncode}"
    value = stdout.decode(errors="replace").strip()
    if not value:
        return "exited with status 0 but printed nothing"
    return _Success(value)


def _kill_group(process: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, 9)
    process.communicate()


def _command_error(server: str, key: str, reason: str, *, backing_off: bool) -> SecretResolutionError:
    retry = f" (not retried for {FAILURE_BACKOFF_S:g} s)" if backing_off else ""
    return SecretResolutionError(
        f'MCP server "{server}": the !command for {key} {reason}{retry}; '
        "fix the command in the server's config",
        server=server,
    )


async def resolve_secrets_off_loop(
    name: str,
    values: Mapping[str, str],
    *,
    enabled: bool = True,
    literal_keys: Collection[str] = (),
) -> dict[str, str]:
    """``resolve_secret_values`` in a worker thread (a ``!command`` may run for seconds),
    or the values as they are when ``enabled`` is false (entries not approved to read secrets)."""
    if not enabled or not values:
        return dict(values)
    import anyio.to_thread

    return await anyio.to_thread.run_sync(
        lambda: resolve_secret_values(name, values, literal_keys=literal_keys)
    )
