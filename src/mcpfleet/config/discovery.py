"""``load_all_mcp_configs``: every config source, one precedence, one result.

Order of decision for each entry, walking them in precedence order (extra ``--config``
files, then level local > project > user, then provider order, then order in the file):

1. project entries are ``filtered`` when project config is disabled; broken entries are
   ``invalid``; entries mcpfleet cannot run, and the gateway's own entry (``mcpfleet serve``,
   see ``gateway_entry.py``), are ``filtered`` (none of these claim a name);
2. a name already claimed makes the entry ``shadowed`` (resolved as in 5, unless it is a
   project entry, so it can be compared with the winner);
3. ``disabledServers`` or ``enabled: false`` (unless force-enabled) make it ``disabled``;
   it still claims its name, unless it is an unapproved project entry;
4. an unapproved project entry is ``pending-approval``; it claims no name, disabled or
   not, so a repository cannot switch off a user server of the same name by declaring
   one: the user server stays active until the project one is approved;
5. the entry's substitutions run and a stdio entry without ``cwd`` gets its working folder
   (the project for a project entry, the user's home for any other), and one without
   ``sandbox`` its level's default (``sandbox_defaults.py``); an entry the host's
   ``entry_filter`` leaves out, or that its substitutions reveal as the gateway's own, is
   ``filtered`` with the reason; an entry with the same
   connection as an earlier one (as declared, or once the working folder is applied) is
   ``shadowed`` as an alias; the rest is ``active``.

Discovery never raises for a discovered file: a broken file or entry becomes an error
entry and every other source still loads. Files named explicitly (``--config``) are the
exception: a missing or malformed one raises ``ConfigError``.

A running fleet passes the same ``LastGoodFiles`` to each of its discoveries: a file that
stops parsing (a typo saved by an editor) is then read as it last parsed, so its servers
keep running, and the error says so.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from mcpfleet import paths
from mcpfleet.config.approval import ApprovalKey, ApprovalStore, real_path
from mcpfleet.config.gateway_entry import GatewayEndpoint, own_gateway_reason, running_gateway_endpoints
from mcpfleet.config.model import (
    DiscoveredEntry,
    DiscoveryResult,
    EntryState,
    Level,
    ServerConfig,
    SourceInfo,
)
from mcpfleet.config.normalise import EntryError, SkippedEntry, build_server, root_path, tool_cap
from mcpfleet.config.providers import (
    EXTRA_CONFIG_PROVIDER,
    PROJECT_KEY,
    PROVIDERS,
    FileSpec,
    Locations,
    Provider,
)
from mcpfleet.config.readers import MAX_CONFIG_BYTES, MAX_USER_CONFIG_BYTES, read_document
from mcpfleet.config.sandbox_defaults import SANDBOX_DEFAULTS_KEY, SandboxDefaults, read_sandbox_defaults
from mcpfleet.config.substitution import SubstitutionContext, substitute_config
from mcpfleet.errors import ConfigError, Failure

_LEVEL_RANK = {"local": 0, "project": 1, "user": 2}

EntryFilter = Callable[[ServerConfig], "str | None"]
"""The host's say over an entry about to become active, its substitutions done: the reason
to leave it out (the entry becomes ``filtered`` with that reason), or None to keep it.

Discovery itself knows no product; a host with a native integration of some service (the
agent layer's Exa filter, say) drops that service's servers through this hook."""


_OVERRIDE_KEYS = ("disabledServers", "enabledServers")
"""mcpfleet's user-file lists of names switched off and on (`mcpfleet disable|enable`)."""


class LastGoodFiles:
    """What discovery last read from each file that parsed, kept for when it stops parsing.

    Only what discovery reads of a document is kept (every provider's server map, the
    replaced entries, mcpfleet's override lists; every project of ``~/.claude.json``), not
    the rest of it (Claude Code's history), so a long-running fleet holds little. A file
    that is deleted is forgotten: removing a file removes its servers.
    """

    def __init__(self) -> None:
        self._documents: dict[str, Any] = {}

    def remember(self, path: Path, document: Any, read_at: Collection[tuple[str, ...]]) -> None:
        self._documents[str(path)] = _pruned(document, read_at)

    def forget(self, path: Path) -> None:
        self._documents.pop(str(path), None)

    def recall(self, path: Path) -> Any:
        """The document as it last parsed, or ``None``."""
        return self._documents.get(str(path))


def _pruned(node: Any, read_at: Collection[tuple[str, ...]]) -> Any:
    """``node`` with only the keys along the paths ``read_at`` (``PROJECT_KEY`` is any key)."""
    if not isinstance(node, dict) or any(not path for path in read_at):
        return node
    kept: dict[str, Any] = {}
    for key, value in node.items():
        below = {path[1:] for path in read_at if path[0] in (key, PROJECT_KEY)}
        if below:
            kept[key] = _pruned(value, below)
    return kept


@dataclass
class _Candidate:
    name: str
    source: SourceInfo
    spec: FileSpec
    config: ServerConfig | None
    problem: tuple[EntryState, str] | None
    order: tuple[int, ...]


def load_all_mcp_configs(
    cwd: str | os.PathLike[str],
    *,
    enable_project_config: bool = True,
    entry_filter: EntryFilter | None = None,
    extra_config_paths: Sequence[str | os.PathLike[str]] = (),
    trust_project: bool = False,
    approvals: ApprovalStore | None = None,
    last_good: LastGoodFiles | None = None,
    environ: Mapping[str, str] | None = None,
) -> DiscoveryResult:
    """Discover every MCP server configured for the project at ``cwd``.

    ``trust_project`` approves project servers for this call only; ``approvals`` defaults
    to the store in the user state dir; ``entry_filter`` is the host's hook (see
    ``EntryFilter``); ``last_good`` is updated with every file read, and a file that cannot
    be read is taken from it as it last parsed (see ``LastGoodFiles``); ``environ`` is what
    ``${VAR}`` placeholders are substituted from (this process's environment by default; the
    daemon passes each session's own). Raises
    ``ConfigError`` only for an ``extra_config_paths`` file that is missing or malformed.
    ``mcpfleet.load_all_mcp_configs`` is this with the agent's own filter (Exa) applied by
    default.
    """
    root = Path(cwd).expanduser().resolve()
    locations = Locations.current(root)
    result = DiscoveryResult()
    candidates = list(_extra_candidates(extra_config_paths, root))
    files = [
        (provider_rank, provider, file_rank, spec)
        for provider_rank, provider in enumerate(PROVIDERS)
        for file_rank, spec in enumerate(provider.files(locations))
    ]
    # Run from the home folder (or a project whose file is a link to the user's own), a
    # project-level path can be a user-level file: it is read once, as the user's.
    user_files = {os.path.realpath(spec.path) for *_, spec in files if spec.level != "project"}
    user_keys = (*_OVERRIDE_KEYS, SANDBOX_DEFAULTS_KEY)
    read_at = {spec.servers_at for *_, spec in files} | {(key,) for key in user_keys}
    documents = _Documents(root, result, last_good, read_at)
    for provider_rank, provider, file_rank, spec in files:
        if spec.level == "project" and os.path.realpath(spec.path) in user_files:
            continue
        result.config_paths.append(str(spec.path))
        document = documents.read(spec.path, spec.level)
        candidates.extend(
            _candidates_in(
                document, spec, provider, root, result, (1, _LEVEL_RANK[spec.level], provider_rank, file_rank)
            )
        )
    candidates.sort(key=lambda candidate: candidate.order)
    deny, force = _override_lists(documents, result)
    store = approvals if approvals is not None else ApprovalStore()
    if enable_project_config and not trust_project:
        # `mcpfleet approve` and `revoke` change what runs: a watcher reloads for them too.
        result.config_paths.append(str(store.path))
    context = SubstitutionContext.current(root, locations.home, environ)
    user_file = paths.user_config_file()
    sandbox_defaults = read_sandbox_defaults(documents.read(user_file, "user"), user_file, result.errors)
    _Resolver(
        result,
        enable_project_config=enable_project_config,
        entry_filter=entry_filter,
        trust_project=trust_project,
        approved=store.approved_keys(),
        deny=deny,
        force=force,
        context=context,
        gateway_endpoints=running_gateway_endpoints(),
        sandbox_defaults=sandbox_defaults,
    ).resolve(candidates)
    result.referenced_variables = context.referenced
    _apply_tool_cap(documents, result)
    return result


class _Documents:
    """Each file parsed once per discovery (``~/.claude.json`` feeds two levels)."""

    def __init__(
        self,
        root: Path,
        result: DiscoveryResult,
        last_good: LastGoodFiles | None = None,
        read_at: Collection[tuple[str, ...]] = (),
    ) -> None:
        self.root = root
        self.result = result
        self.last_good = last_good
        self.read_at = read_at
        self.cache: dict[Path, Any] = {}

    def read(self, path: Path, level: Level) -> Any:
        if path not in self.cache:
            self.cache[path] = self._read(path, level)
        return self.cache[path]

    def _read(self, path: Path, level: Level) -> Any:
        # A repository's files get the tight limit; the user's own may be large.
        max_bytes = MAX_CONFIG_BYTES if level == "project" else MAX_USER_CONFIG_BYTES
        try:
            document = read_document(path, project_root=self.root, max_bytes=max_bytes)
        except ConfigError as error:
            kept = self.last_good.recall(path) if self.last_good is not None else None
            message = str(error)
            if kept is not None:
                message += "; fix the file: until then its servers run as it last parsed"
            self.result.errors.append(Failure(str(path), "config", message))
            return kept
        if self.last_good is not None:
            if document is None:
                self.last_good.forget(path)
            else:
                self.last_good.remember(path, document, self.read_at)
        return document


def _extra_candidates(extra_paths: Sequence[str | os.PathLike[str]], root: Path) -> Iterator[_Candidate]:
    """Explicit ``--config`` files: later files win, and every problem is a hard error."""
    for index, given in enumerate(extra_paths):
        path = Path(given).expanduser().absolute()
        if not path.is_file():
            raise ConfigError(f"--config {path}: {_not_a_config_file(path)}", path=str(path))
        if path.stat().st_size == 0:
            raise ConfigError(
                f'--config {path}: the file is empty; write an "mcpServers" object in it, or drop --config',
                path=str(path),
            )
        spec = FileSpec(path, "user", dialect="posix")
        document = read_document(path)
        problems = DiscoveryResult()
        yield from _candidates_in(document, spec, EXTRA_CONFIG_PROVIDER, root, problems, (0, -index))
        if problems.errors:
            problem = problems.errors[0].error.removeprefix(f"{path}: ")
            raise ConfigError(f"--config {path}: {problem}", path=str(path))


def _not_a_config_file(path: Path) -> str:
    """What is wrong with a ``--config`` path that is not a regular file, and the fix."""
    if not path.exists():
        return "file not found; check the path"
    if path.is_dir():
        return "is a folder, not a file; pass the config file inside it"
    return "not a regular file (a device or a pipe, say); pass a JSON, YAML or TOML config file"


def _candidates_in(
    document: Any,
    spec: FileSpec,
    provider: Provider,
    root: Path,
    result: DiscoveryResult,
    order: tuple[int, ...],
) -> Iterator[_Candidate]:
    if document is None:
        return
    entries = _server_entries(document, spec, root)
    if isinstance(entries, str):
        result.errors.append(Failure(str(spec.path), "config", f"{spec.path}: {entries}"))
        return
    for entry_rank, (name, raw, location) in enumerate(entries):
        source = SourceInfo(provider.id, provider.name, str(spec.path), spec.level, location)
        config, problem = _normalise(name, raw, spec)
        if problem is not None and problem[0] == "invalid":
            result.errors.append(Failure(str(spec.path), "config", f"{spec.path}: {problem[1]}"))
        yield _Candidate(name, source, spec, config, problem, (*order, entry_rank))


def _server_entries(document: Any, spec: FileSpec, root: Path) -> list[tuple[str, Any, str]] | str:
    """The (name, raw entry, location) triples of a document, or what is wrong with its shape."""
    if not isinstance(document, dict):
        return "expected an object at the top level"
    node: Any = document
    pointer = ""
    for key in spec.servers_at:
        key = str(root) if key == PROJECT_KEY else key
        if not isinstance(node, dict) or node.get(key) is None:
            return []
        node = node[key]
        pointer += "/" + _escape_pointer(key)
    if spec.listed:
        if not isinstance(node, list):
            return f'"{spec.servers_at[-1]}" must be a list'
        return [
            (str(item.get("name", "")) if isinstance(item, dict) else "", item, f"{pointer}/{index}")
            for index, item in enumerate(node)
        ]
    if not isinstance(node, dict):
        return f'"{spec.servers_at[-1]}" must be an object'
    return [(str(name), raw, f"{pointer}/{_escape_pointer(str(name))}") for name, raw in node.items()]


def _escape_pointer(key: str) -> str:
    return key.replace("~", "~0").replace("/", "~1")


def _normalise(
    name: str, raw: Any, spec: FileSpec
) -> tuple[ServerConfig | None, tuple[EntryState, str] | None]:
    if not isinstance(raw, dict):
        return None, ("invalid", f'server "{name}" must be an object')
    try:
        config = build_server(name, spec.adapt(raw), base_dir=spec.path.parent)
        if config.share == "user" and spec.level != "user":
            # A repository (or a per-project entry) must never put a backend in front of the
            # sessions of every other project.
            raise EntryError(
                f'"share": "user" is for user-level entries only; a {spec.level} server is shared at '
                'most by the sessions of its project ("project", the default, or "session")'
            )
        return config, None
    except EntryError as error:
        return None, ("invalid", f'server "{name}": {error}')
    except SkippedEntry as error:
        return None, ("filtered", str(error))


def _override_lists(documents: _Documents, result: DiscoveryResult) -> tuple[frozenset[str], frozenset[str]]:
    """``disabledServers`` / ``enabledServers`` of mcpfleet's user file."""
    user_file = paths.user_config_file()
    document = documents.read(user_file, "user")
    lists: list[frozenset[str]] = []
    for key in _OVERRIDE_KEYS:
        value = document.get(key, []) if isinstance(document, dict) else []
        if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
            result.errors.append(
                Failure(str(user_file), "config", f'{user_file}: "{key}" must be a list of names')
            )
            value = []
        lists.append(frozenset(value))
    return lists[0], lists[1]


def _apply_tool_cap(documents: _Documents, result: DiscoveryResult) -> None:
    """``maxToolsPerServer`` of mcpfleet's user file: the cap of every server whose entry sets
    no ``maxTools`` of its own."""
    user_file = paths.user_config_file()
    document = documents.read(user_file, "user")
    value = document.get("maxToolsPerServer") if isinstance(document, dict) else None
    try:
        cap = tool_cap(value, '"maxToolsPerServer"')
    except EntryError as error:
        result.errors.append(Failure(str(user_file), "config", f"{user_file}: {error}"))
        return
    if cap is None:
        return
    for name, config in result.configs.items():
        if config.max_tools is None:
            result.configs[name] = replace(config, max_tools=cap)


def _describe(entry: DiscoveredEntry) -> str:
    return f'"{entry.name}" from {entry.source.provider_name} ({entry.source.level}, {entry.source.path})'


class _Resolver:
    """Walks the candidates in precedence order and decides each one's state."""

    def __init__(
        self,
        result: DiscoveryResult,
        *,
        enable_project_config: bool,
        entry_filter: EntryFilter | None,
        trust_project: bool,
        approved: frozenset[ApprovalKey],
        deny: frozenset[str],
        force: frozenset[str],
        context: SubstitutionContext,
        gateway_endpoints: Sequence[GatewayEndpoint] = (),
        sandbox_defaults: SandboxDefaults | None = None,
    ) -> None:
        self.result = result
        self.sandbox_defaults = sandbox_defaults if sandbox_defaults is not None else SandboxDefaults()
        self.enable_project_config = enable_project_config
        self.entry_filter = entry_filter
        self.trust_project = trust_project
        self.approved = approved
        self.deny = deny
        self.force = force
        self.context = context
        self.gateway_endpoints = gateway_endpoints
        self.claimed: dict[str, DiscoveredEntry] = {}
        self.identities: dict[str, DiscoveredEntry] = {}

    def resolve(self, candidates: Iterable[_Candidate]) -> None:
        for candidate in candidates:
            entry = self._decide(candidate)
            self.result.entries.append(entry)
            if entry.state == "active" and entry.config is not None:
                self.result.configs[entry.name] = entry.config
                self.result.sources[entry.name] = entry.source

    def _entry(
        self, candidate: _Candidate, state: EntryState, reason: str, config: ServerConfig | None = None
    ) -> DiscoveredEntry:
        config = config if config is not None else candidate.config
        transport = config.transport if config is not None else None
        return DiscoveredEntry(candidate.name, state, reason, candidate.source, config, transport)

    def _claim(self, entry: DiscoveredEntry) -> DiscoveredEntry:
        self.claimed[entry.name] = entry
        return entry

    def _decide(self, candidate: _Candidate) -> DiscoveredEntry:
        name = candidate.name
        if candidate.source.level == "project" and not self.enable_project_config:
            return self._entry(candidate, "filtered", "project config is disabled (--no-project-config)")
        if candidate.problem is not None or candidate.config is None:
            state, reason = candidate.problem or ("invalid", "entry could not be read")
            return self._entry(candidate, state, reason)
        own_gateway = own_gateway_reason(candidate.config, self.gateway_endpoints)
        if own_gateway is not None:
            return self._entry(candidate, "filtered", own_gateway)
        winner = self.claimed.get(name)
        if winner is not None:
            # Resolved like an active entry, so that whether it is the winner's very server
            # (`hosts install --replace` asks) compares what each would run; an unapproved
            # project entry is never resolved (its references must not be read).
            resolved = (
                None if candidate.source.level == "project" else self._resolved(candidate, candidate.config)
            )
            return self._entry(candidate, "shadowed", f"shadowed by {_describe(winner)}", resolved)
        pending = candidate.source.level == "project" and not self._is_approved(candidate)

        def disabled(reason: str) -> DiscoveredEntry:
            entry = self._entry(candidate, "disabled", reason)
            # An unapproved entry claims nothing: a repository must not switch off a user server.
            return entry if pending else self._claim(entry)

        if name in self.deny:
            return disabled(
                f"listed in disabledServers of {paths.user_config_file()}; run `mcpfleet enable {name}`"
            )
        config = candidate.config
        if not config.enabled:
            if name not in self.force:
                return disabled(f"enabled: false in {candidate.source.path}; run `mcpfleet enable {name}`")
            config = replace(config, enabled=True)
        if pending:
            reason = (
                f"project server not approved yet: review it, then `mcpfleet approve {name}` "
                "(or --trust-project)"
            )
            return self._entry(candidate, "pending-approval", reason)
        return self._claim(self._activate(candidate, config))

    def _is_approved(self, candidate: _Candidate) -> bool:
        if self.trust_project or candidate.config is None:
            return self.trust_project
        key = (real_path(candidate.source.path), candidate.name, candidate.config.fingerprint)
        return key in self.approved

    def _working_dir(self, candidate: _Candidate) -> str:
        """Where a stdio entry without ``cwd`` runs, decided here because only discovery knows
        the entry's level: an (approved) project entry in the project, since that is the code
        it came with; any other entry in the user's home, since a cloned project must never be
        the working directory of a server it did not declare (``python -m pkg`` would import
        the project's ``pkg/``)."""
        if candidate.source.level == "project":
            return self.context.workspace
        return str(paths.neutral_working_dir())

    def _substituted(self, candidate: _Candidate, config: ServerConfig) -> ServerConfig:
        resolved = substitute_config(config, candidate.spec.dialect, self.context)
        if resolved.cwd is not None:
            resolved = replace(resolved, cwd=root_path(resolved.cwd, candidate.spec.path.parent))
        return resolved

    def _with_working_dir(self, candidate: _Candidate, resolved: ServerConfig) -> ServerConfig:
        if resolved.transport != "stdio":
            return resolved
        if resolved.cwd is None:
            resolved = replace(resolved, cwd=self._working_dir(candidate))
        assert resolved.cwd is not None
        sandbox = self.sandbox_defaults.applied(resolved.sandbox, candidate.source.level, Path(resolved.cwd))
        return replace(resolved, sandbox=sandbox)

    def _resolved(self, candidate: _Candidate, config: ServerConfig) -> ServerConfig:
        """``config`` as it would run: substitutions done, its defaults (the working folder) applied."""
        return self._with_working_dir(candidate, self._substituted(candidate, config))

    def _activate(self, candidate: _Candidate, config: ServerConfig) -> DiscoveredEntry:
        declared = self._substituted(candidate, config)
        resolved = self._with_working_dir(candidate, declared)
        # Two entries that declare the same connection stay aliases whatever their levels
        # (the folder chosen for an entry that declared none does not make it another
        # server), and so do two that run the same way once defaults apply (one names the
        # folder the other would get).
        identities = {declared.connection_identity(), resolved.connection_identity()}
        left_out_because = own_gateway_reason(resolved, self.gateway_endpoints)
        if left_out_because is None and self.entry_filter is not None:
            left_out_because = self.entry_filter(resolved)
        if left_out_because is not None:
            return self._entry(candidate, "filtered", left_out_because, resolved)
        twin = next((self.identities[key] for key in sorted(identities) if key in self.identities), None)
        if twin is not None:
            return self._entry(candidate, "shadowed", f"same connection as {_describe(twin)}", resolved)
        entry = self._entry(candidate, "active", "", resolved)
        for key in identities:
            self.identities[key] = entry
        return entry
