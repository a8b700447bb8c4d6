"""The gateway's own entry, recognised wherever it is written, so mcpfleet never serves itself.

Once a host is pointed at ``mcpfleet serve``, that host's config file (which discovery
reads) holds the gateway's own entry. Served back to the host, it would start a second
gateway that serves the first, which starts a third… Three defences, all here so that
every room can use them:

* **Recognition** (``own_gateway_reason``): discovery marks an entry ``filtered`` when it
  launches ``mcpfleet serve`` — however it is launched: a bare or absolute ``mcpfleet``,
  ``mcpfleet.exe``, the venv's ``bin/mcpfleet``, ``python -m mcpfleet.cli.main``,
  ``uvx mcpfleet@1.2``, ``pipx run``, ``env``, a shell's ``-c "…"`` string — with any
  global options before ``serve`` — or when its URL is the endpoint of a gateway that
  mcpfleet is running on this machine (``announce_gateway_endpoint``).
* **The environment mark** (``mark_gateway_environment``): a serving gateway records its
  pid (and URL) in its own environment, which every stdio backend inherits; a
  ``mcpfleet serve`` started under that mark refuses to start (``nested_gateway_refusal``),
  so even a wrapper script that recognition cannot see through ends at once.
* **The replaced-entries key** (``REPLACED_KEY``): where ``mcpfleet hosts install
  --replace`` moves a host's entries that the gateway serves. The host ignores the key;
  discovery reads it as that host's servers, so the gateway keeps serving them. A host that
  warns about a key it does not know (Codex, at every start) gets its entries moved into
  mcpfleet's own state instead (``moved_entries_file``), read by discovery the same way.

Nothing here imports anything heavy: discovery runs it for every entry.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shlex
from collections.abc import Iterator, Mapping, MutableMapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import SplitResult, urlsplit

from mcpfleet import paths
from mcpfleet.config.model import ServerConfig
from mcpfleet.contract.environment import GATEWAY_PID_VARIABLE as GATEWAY_PID_VARIABLE
from mcpfleet.contract.options import GLOBAL_OPTIONS, HELP_FLAGS, VERSION_FLAG, long_flags

GATEWAY_URL_VARIABLE = "MCPFLEET_GATEWAY_URL"
"""Set by a gateway serving HTTP: its endpoint, so that its own discovery skips it before
the endpoint is announced to other processes."""

REPLACED_KEY = "replaced_by_mcpfleet"
"""Top-level key (JSON) or table (TOML) of a host's user file holding the entries that
``hosts install --replace`` took out of the host's own server map."""

MOVED_SERVERS_KEY = "moved_servers"
"""The server map of a ``moved_entries_file``: the entries as the host's file held them."""


def moved_entries_file(host_id: str, host_file: Path) -> Path:
    """mcpfleet's record of the entries ``hosts install --replace`` took out of ``host_file``
    (a host that warns about unknown keys), in its state dir: the entries under
    ``MOVED_SERVERS_KEY``, and the text cut out of the file, to put it back byte for byte."""
    digest = hashlib.sha256(str(host_file).encode("utf-8", "surrogatepass")).hexdigest()[:16]
    return paths.user_state_dir() / "hosts" / f"{host_id}-moved-{digest}.json"


PROGRAM_NAME = "mcpfleet"
_MODULE_NAMES = frozenset({"mcpfleet", "mcpfleet.cli.main", "mcpfleet.__main__"})
"""What ``python -m`` may run mcpfleet's command line as."""
_PROGRAM_SUFFIXES = (".exe", ".cmd", ".bat", ".ps1", ".pyz")
_SERVE_COMMAND = "serve"

GLOBAL_OPTIONS_WITH_VALUE = long_flags(GLOBAL_OPTIONS, taking_a_value=True)
"""Global options of the ``mcpfleet`` command that take a value."""
GLOBAL_FLAGS = long_flags(GLOBAL_OPTIONS, taking_a_value=False) | {
    flag for flag in (*HELP_FLAGS, VERSION_FLAG) if flag.startswith("--")
}
"""Global options of the ``mcpfleet`` command that take no value, ``--help`` and ``--version``
included."""

_SPLIT_DEPTH = 3
"""How many times a word holding a whole command line (``sh -c "…"``) is split and read
again; deeper quoting is not a launcher anyone writes."""
_LOOPBACK_HOSTS = frozenset({"localhost", "127.0.0.1", "::1", "0.0.0.0", "::", ""})
"""Host names that reach a gateway bound to loopback or to every interface."""


def launches_gateway(command: str, args: Sequence[str]) -> bool:
    """Whether ``[command, *args]`` ends up running ``mcpfleet serve``.

    A word naming the mcpfleet program (``mcpfleet``, a path to it, ``mcpfleet.exe``, a
    package spec such as ``mcpfleet@1.2`` or ``mcpfleet==1.2`` as ``uvx`` and ``pipx run``
    take it), or ``-m`` followed by one of its modules, counts when the first word after it
    that is not a global option (or an option's value) is ``serve``. Launchers in front
    (``uvx``, ``pipx run``, ``env``, an interpreter and its options) are words like any other,
    so they need no table; a word holding a whole command line is split and read again.
    """
    return _launches_gateway([command, *args], _SPLIT_DEPTH)


def _launches_gateway(words: Sequence[str], depth: int) -> bool:
    for index, word in enumerate(words):
        after: Sequence[str] | None = None
        if _names_program(word):
            after = words[index + 1 :]
        elif word == "-m" and index + 1 < len(words) and words[index + 1] in _MODULE_NAMES:
            after = words[index + 2 :]
        elif word.startswith("-m") and word[2:] in _MODULE_NAMES:
            after = words[index + 1 :]
        if after is not None and _subcommand(after) == _SERVE_COMMAND:
            return True
        if depth > 0 and len(word.split()) > 1 and _launches_gateway(_split_command_line(word), depth - 1):
            return True
    return False


def _names_program(word: str) -> bool:
    name = word.replace("\\", "/").rsplit("/", 1)[-1].lower()
    for suffix in _PROGRAM_SUFFIXES:
        name = name.removesuffix(suffix)
    for separator in ("@", "==", "[", ">", "<", "~", "!"):
        name = name.split(separator, 1)[0]
    return name == PROGRAM_NAME


def _subcommand(words: Sequence[str]) -> str | None:
    """The sub-command of an ``mcpfleet`` command line (its words after the program)."""
    index = 0
    while index < len(words):
        word = words[index]
        if word == "--":
            return words[index + 1] if index + 1 < len(words) else None
        if word.startswith("--"):
            option, has_value, _ = word.partition("=")
            index += 1 if has_value or not _takes_value(option) else 2
        elif word.startswith("-") and len(word) > 1:
            index += 1  # -v, -vv, -h: the short global options are all flags
        else:
            return word
    return None


def _takes_value(option: str) -> bool:
    """Whether a long global option (possibly abbreviated, as argparse allows) takes a value."""
    if option in GLOBAL_OPTIONS_WITH_VALUE or option in GLOBAL_FLAGS:
        return option in GLOBAL_OPTIONS_WITH_VALUE
    matches = [name for name in GLOBAL_OPTIONS_WITH_VALUE | GLOBAL_FLAGS if name.startswith(option)]
    return bool(matches) and all(name in GLOBAL_OPTIONS_WITH_VALUE for name in matches)


def _split_command_line(text: str) -> list[str]:
    """Shell-like words of ``text``; backslashes stay (Windows paths), quotes group."""
    lexer = shlex.shlex(text, posix=True)
    lexer.whitespace_split = True
    lexer.escape = ""
    try:
        return list(lexer)
    except ValueError:  # an unclosed quote: read it as plain words
        return text.split()


# --- HTTP endpoints of running gateways ----------------------------------------------------


@dataclass(frozen=True)
class GatewayEndpoint:
    """The URL a running gateway serves, and the process serving it."""

    url: str
    pid: int


def _endpoints_dir() -> Path:
    return paths.user_state_dir() / "gateways"


@contextlib.contextmanager
def announce_gateway_endpoint(url: str) -> Iterator[Path]:
    """Record, for as long as the block runs, that this process serves the gateway at ``url``.

    Every discovery on this machine (the same user) then recognises an HTTP entry with that
    URL as the gateway's own. The record is one small file per gateway under mcpfleet's
    state dir, removed when the block ends; a record left by a process that died is ignored
    (its pid is gone).
    """
    folder = paths.make_private_folder(_endpoints_dir())
    record = folder / f"{os.getpid()}.json"
    temporary = record.with_name(f".{record.name}.tmp")
    descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
    with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
        json.dump({"url": url, "pid": os.getpid()}, handle)
    os.replace(temporary, record)
    try:
        yield record
    finally:
        with contextlib.suppress(FileNotFoundError):
            record.unlink()


def running_gateway_endpoints(environ: Mapping[str, str] | None = None) -> tuple[GatewayEndpoint, ...]:
    """Endpoints of the gateways running now: those announced by live processes, and this
    process's own (``GATEWAY_URL_VARIABLE``). Unreadable records are skipped: a stale or
    broken record must never stop discovery."""
    environment = os.environ if environ is None else environ
    found: list[GatewayEndpoint] = []
    own_url = environment.get(GATEWAY_URL_VARIABLE)
    if own_url:
        found.append(GatewayEndpoint(own_url, os.getpid()))
    try:
        records = sorted(_endpoints_dir().glob("*.json"))
    except OSError:
        return tuple(found)
    for record in records:
        try:
            data = json.loads(record.read_text(encoding="utf-8"))
            endpoint = GatewayEndpoint(str(data["url"]), int(data["pid"]))
        except (OSError, ValueError, KeyError, TypeError):
            continue
        if _process_alive(endpoint.pid):
            found.append(endpoint)
    return tuple(found)


def _process_alive(pid: int) -> bool:
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # it exists, under another user
    return True


def same_endpoint(url: str, served_url: str) -> bool:
    """Whether a client connecting to ``url`` reaches the gateway serving ``served_url``.

    Scheme, port and path (trailing slash ignored) must match; the host must be the same, or
    both must be loopback names (a gateway bound to every interface answers on loopback too).
    Host names are not resolved: discovery does no DNS.
    """
    try:
        wanted, served = urlsplit(url), urlsplit(served_url)
        ports = (_port(wanted), _port(served))
    except ValueError:
        return False
    if wanted.scheme.lower() != served.scheme.lower() or ports[0] != ports[1]:
        return False
    if wanted.path.rstrip("/") != served.path.rstrip("/"):
        return False
    wanted_host, served_host = (wanted.hostname or "").lower(), (served.hostname or "").lower()
    return wanted_host == served_host or (wanted_host in _LOOPBACK_HOSTS and served_host in _LOOPBACK_HOSTS)


def _port(parts: SplitResult) -> int | None:
    if parts.port is not None:
        return parts.port
    return {"http": 80, "https": 443}.get(parts.scheme.lower())


def own_gateway_reason(config: ServerConfig, endpoints: Sequence[GatewayEndpoint] = ()) -> str | None:
    """Why ``config`` is the gateway's own entry (the ``filtered`` reason), or None."""
    if config.transport == "stdio" and config.command is not None:
        if launches_gateway(config.command, config.args):
            return "the gateway's own entry (it runs `mcpfleet serve`): mcpfleet never serves itself"
        return None
    if config.url is not None:
        for endpoint in endpoints:
            if same_endpoint(config.url, endpoint.url):
                return (
                    f"the gateway's own entry ({endpoint.url} is served by mcpfleet, pid {endpoint.pid}): "
                    "mcpfleet never serves itself"
                )
    return None


# --- the environment mark ------------------------------------------------------------------


def mark_gateway_environment(environ: MutableMapping[str, str], *, url: str | None = None) -> None:
    """Mark ``environ`` (the serving process's ``os.environ``) as a gateway's, so that every
    backend it starts inherits the mark; ``url`` is the HTTP endpoint when it serves one."""
    environ[GATEWAY_PID_VARIABLE] = str(os.getpid())
    if url is not None:
        environ[GATEWAY_URL_VARIABLE] = url


def nested_gateway_refusal(environ: Mapping[str, str] | None = None) -> str | None:
    """The one-line error for a ``mcpfleet serve`` started under a gateway's mark, or None.

    Such a serve was started (directly or through any wrapper) by a backend of a gateway:
    it would discover the same servers and serve them back into the gateway that started it.
    """
    environment = os.environ if environ is None else environ
    pid = environment.get(GATEWAY_PID_VARIABLE)
    if not pid:
        return None
    return (
        f"refusing to serve: this `mcpfleet serve` was started by a backend of the gateway "
        f"`mcpfleet serve` (pid {pid}) and would serve that gateway's servers back to it; remove "
        f"the entry that starts it from your MCP config, or unset {GATEWAY_PID_VARIABLE} to run "
        "a separate gateway on purpose"
    )
