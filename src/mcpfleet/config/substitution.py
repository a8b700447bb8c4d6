"""Discovery-time variable substitution, one dialect per tool.

Each tool documents its own placeholder syntax; reading a file with the wrong one would
either leak a literal ``${env:X}`` into a server's environment or expand text that the
tool itself leaves alone. Substitution runs only on entries that may start (never on a
project entry awaiting approval), and never touches connect-time secret forms: a value
starting with ``!`` is a shell command and a bare variable name is looked up by the
client when it connects.

Only a value written in the file can be such a form. An env or header value that
substitution changed is final text (the config lists its key in ``literal_env_keys`` /
``literal_header_keys``): a project folder named ``!touch x`` expanded from
``${workspaceFolderBasename}``, or a variable whose value starts with ``!``, is passed on
as text and never run. Every variable value inserted is remembered as a secret, so that
it is masked wherever a command line, URL or header is printed or logged.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Literal

from mcpfleet.config.model import ServerConfig
from mcpfleet.redaction import remember_secret

Dialect = Literal["none", "posix", "gemini", "editor", "opencode", "codex"]
"""``posix``: ``${VAR}``/``${VAR:-default}`` (Claude Code, mcpfleet, generic ``mcp.json``);
``gemini``: those plus ``$VAR``; ``editor``: ``${env:VAR}``, ``${userHome}``,
``${workspaceFolder}``, ``${workspaceFolderBasename}``, ``${pathSeparator}``, ``${/}`` (Cursor,
VS Code, Windsurf, Roo); ``opencode``: ``{env:VAR}``, empty when unset; ``codex``: only the
``Authorization`` header built from ``bearer_token_env_var``; ``none``: literal values."""

_NAME = r"[A-Za-z_][A-Za-z0-9_]*"
_POSIX = re.compile(r"\$\{(" + _NAME + r")(?::-([^}]*))?\}")
_GEMINI = re.compile(r"\$\{(" + _NAME + r")(?::-([^}]*))?\}|\$(" + _NAME + ")")
_EDITOR = re.compile(
    r"\$\{(env:" + _NAME + r"|userHome|workspaceFolder|workspaceFolderBasename|pathSeparator|/)\}"
)
_OPENCODE = re.compile(r"\{env:(" + _NAME + r")\}")
CODEX_BEARER_HEADER = "Authorization"
_CODEX_BEARER = re.compile(r"Bearer \$\{(" + _NAME + r")\}")


NOT_SECRET_VARIABLES = frozenset(
    {"HOME", "USER", "USERNAME", "LOGNAME", "PWD", "PATH", "SHELL", "TMPDIR", "TEMP", "TMP", "USERPROFILE"}
)
"""Variables that hold paths and names, not secrets: masking them would hide every path
in an error message (like ``${workspaceFolder}``, which is not a variable at all)."""


@dataclass(frozen=True)
class SubstitutionContext:
    """What placeholders may resolve to: the environment, the home and the project."""

    environ: Mapping[str, str]
    home: str
    workspace: str
    referenced: set[str] = field(default_factory=set)
    """Every variable a placeholder asked for, set or not: what the daemon asks a session for."""

    @classmethod
    def current(
        cls, workspace: Path, home: Path, environ: Mapping[str, str] | None = None
    ) -> SubstitutionContext:
        """Substitution from ``environ`` (this process's environment by default)."""
        values = dict(os.environ if environ is None else environ)
        return cls(environ=values, home=str(home), workspace=str(workspace))

    def variable(self, name: str) -> str | None:
        """The value of environment variable ``name``, remembered as a secret when it is one."""
        self.referenced.add(name)
        value = self.environ.get(name)
        if value and name not in NOT_SECRET_VARIABLES and not name.startswith("XDG_"):
            remember_secret(value)
        return value


def _posix_value(match: re.Match[str], context: SubstitutionContext) -> str:
    name, default = match.group(1), match.group(2)
    value = context.variable(name)
    if value:
        return value
    if default is not None:
        return default
    # Unset and no default: keep the placeholder visible rather than inventing a value.
    return match.group(0) if value is None else ""


def _gemini_value(match: re.Match[str], context: SubstitutionContext) -> str:
    if match.group(3) is not None:
        value = context.variable(match.group(3))
        return match.group(0) if value is None else value
    return _posix_value(match, context)


def _editor_value(match: re.Match[str], context: SubstitutionContext) -> str:
    token = match.group(1)
    if token.startswith("env:"):
        value = context.variable(token[4:])
        return match.group(0) if value is None else value
    fixed = {
        "userHome": context.home,
        "workspaceFolder": context.workspace,
        "workspaceFolderBasename": Path(context.workspace).name,
        "pathSeparator": os.sep,
        "/": os.sep,
    }
    return fixed[token]


def _opencode_value(match: re.Match[str], context: SubstitutionContext) -> str:
    return context.variable(match.group(1)) or ""


_DIALECTS: dict[Dialect, tuple[re.Pattern[str], Callable[[re.Match[str], SubstitutionContext], str]]] = {
    "posix": (_POSIX, _posix_value),
    "gemini": (_GEMINI, _gemini_value),
    "editor": (_EDITOR, _editor_value),
    "opencode": (_OPENCODE, _opencode_value),
}


def substitute_text(text: str, dialect: Dialect, context: SubstitutionContext) -> str:
    """Expand one string in ``dialect``."""
    rule = _DIALECTS.get(dialect)
    if rule is None:
        return text
    pattern, resolve = rule
    return pattern.sub(lambda match: resolve(match, context), text)


def substitute_config(config: ServerConfig, dialect: Dialect, context: SubstitutionContext) -> ServerConfig:
    """``config`` with its command, args, env, cwd, url and headers expanded.

    The fingerprint is kept: it names the unresolved entry, so it must not change with
    the environment.
    """
    if dialect == "codex":
        return _codex_bearer(config, context)
    if dialect not in _DIALECTS:
        return config

    def expand(value: str | None) -> str | None:
        return None if value is None else substitute_text(value, dialect, context)

    def expand_values(values: Mapping[str, str]) -> dict[str, str]:
        # ``!command`` values are run by the client at connect time, never expanded here.
        return {
            key: value if value.startswith("!") else substitute_text(value, dialect, context)
            for key, value in values.items()
        }

    env = expand_values(config.env)
    headers = expand_values(config.headers)
    return replace(
        config,
        command=expand(config.command),
        args=tuple(substitute_text(arg, dialect, context) for arg in config.args),
        env=env,
        cwd=expand(config.cwd),
        url=expand(config.url),
        headers=headers,
        literal_env_keys=_changed_keys(config.env, env),
        literal_header_keys=_changed_keys(config.headers, headers),
    )


def _changed_keys(before: Mapping[str, str], after: Mapping[str, str]) -> frozenset[str]:
    return frozenset(key for key, value in after.items() if before.get(key) != value)


def _codex_bearer(config: ServerConfig, context: SubstitutionContext) -> ServerConfig:
    template = config.headers.get(CODEX_BEARER_HEADER)
    match = _CODEX_BEARER.fullmatch(template) if template is not None else None
    if match is None:
        return config
    headers = dict(config.headers)
    token = context.variable(match.group(1))
    if token:
        headers[CODEX_BEARER_HEADER] = f"Bearer {token}"
    else:
        # Codex sends no Authorization header when the variable is unset.
        del headers[CODEX_BEARER_HEADER]
    return replace(config, headers=headers, literal_header_keys=frozenset({CODEX_BEARER_HEADER}))
