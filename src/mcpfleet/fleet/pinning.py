"""Tool pinning in the fleet (B15): a changed or added tool is withheld until it is reviewed.

Every tool list the manager hands out (to a session, the gateway, the daemon's sessions and
every integration alike, live or deferred from the tool cache) passes through
``ToolPinning.screen`` first. Against each server's pins (``config.pins``) a tool is served
when its definition is the approved one; a changed or added one is withheld (``"pinning":
"strict"``, the default) or served with a log line (``"warn"``); ``"off"`` serves everything
and pins nothing. Each withheld change is logged once, and its current definition is kept in
the pin store for ``mcpfleet tools review``.

An approval (``mcpfleet tools approve``, in another process) is a write to the server's pin
file. While a fleet withholds anything, ``watch`` looks at those files' stamps and, when one
changes, has the manager rebuild its tools and announce the change: the session, the gateway's
clients and the daemon's sessions then get ``list_changed`` and the tool, whoever approved it.
A fleet that withholds nothing watches nothing.
"""

from __future__ import annotations

import concurrent.futures
import logging
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

import anyio
import anyio.to_thread

from mcpfleet.client.definitions import ToolDefinition
from mcpfleet.config.model import ServerConfig, SourceInfo
from mcpfleet.config.pins import (
    CatalogKind,
    Definition,
    FileStamp,
    PinKey,
    PinsTooLargeError,
    PinStore,
    definition_fingerprint,
    pin_key,
)
from mcpfleet.errors import ConfigWriteError
from mcpfleet.fleet.events import EventKind
from mcpfleet.fleet.poisoning import PoisoningWarning, poisoning_warnings
from mcpfleet.fleet.tool_list import ToolSlice
from mcpfleet.fleet.tools import mcp_tool_name

if TYPE_CHECKING:
    from mcpfleet.fleet.registry import ServerRegistry

logger = logging.getLogger(__name__)

PIN_WATCH_INTERVAL_S = 0.25
"""How often a fleet that withholds a tool looks whether it was approved (one ``stat`` per
withholding server)."""

WithheldReason = Literal["changed", "added"]


def definition_json(definition: ToolDefinition) -> Definition:
    """What is pinned of a tool: the model-facing part of its definition, in ``tools/list``'s keys."""
    return {
        "name": definition.name,
        "title": definition.title,
        "description": definition.description,
        "inputSchema": definition.input_schema,
        "outputSchema": definition.output_schema,
        "annotations": definition.annotations,
    }


@dataclass(frozen=True)
class WithheldTool:
    server: str
    tool: str
    reason: WithheldReason
    approved: Definition | None
    """The approved definition; ``None`` for an added tool (or one too large to have been kept)."""
    current: Definition


def fleet_warnings(
    definitions: Mapping[str, Sequence[Definition]],
) -> dict[tuple[str, str], list[PoisoningWarning]]:
    """The poisoning warnings of every tool of a fleet (``definitions``: each server's tool
    definitions), read against its server's other tools and the other servers' tool names;
    tools without a warning are left out."""
    names = {server: [str(tool.get("name")) for tool in tools] for server, tools in definitions.items()}
    found: dict[tuple[str, str], list[PoisoningWarning]] = {}
    for server, tools in definitions.items():
        others = {other: tool_names for other, tool_names in names.items() if other != server}
        for tool in tools:
            warnings = poisoning_warnings(tool, server=server, peers=tools, other_servers_tools=others)
            if warnings:
                found[(server, str(tool.get("name")))] = warnings
    return found


_CATALOG_FIELDS: dict[CatalogKind, tuple[str, tuple[str, ...]]] = {
    "prompts": ("name", ("name", "title", "description", "arguments")),
    "resources": ("uri", ("uri", "name", "title", "description", "mimeType")),
    "resourceTemplates": ("uriTemplate", ("uriTemplate", "name", "title", "description", "mimeType")),
}
"""Each list's identifying field, and what of an item is pinned: what the model reads of it."""
CATALOG_EVENTS: dict[CatalogKind, EventKind] = {
    "prompts": "prompts_changed",
    "resources": "resources_changed",
    "resourceTemplates": "resources_changed",
}
_CATALOG_NOUNS: dict[CatalogKind, str] = {
    "prompts": "prompt",
    "resources": "resource",
    "resourceTemplates": "resource template",
}


def withheld_prompt_message(server: str, prompt: str) -> str:
    return (
        f'prompt "{prompt}" of MCP server "{server}" changed since it was approved and is withheld; '
        f"review the change with `mcpfleet tools review {server}`, then accept it with "
        f"`mcpfleet tools approve {server}`"
    )


def withheld_named(query: str, withheld: Sequence[WithheldTool]) -> WithheldTool | None:
    """The withheld tool ``query`` names, in the spellings ``call`` accepts (``mcp_<server>_<tool>``,
    ``<server>/<tool>``, ``mcp__<server>__<tool>``)."""
    for tool in withheld:
        spellings = {
            mcp_tool_name(tool.server, tool.tool),
            f"{tool.server}/{tool.tool}",
            f"mcp__{tool.server}__{tool.tool}",
        }
        if query in spellings:
            return tool
    return None


def withheld_message(withheld: WithheldTool) -> str:
    """What a call to a withheld tool answers (the caller prefixes ``MCP error:``)."""
    server, tool = withheld.server, withheld.tool
    what = (
        "changed since it was approved"
        if withheld.reason == "changed"
        else "was added since its tools were pinned"
    )
    return (
        f'tool "{tool}" of MCP server "{server}" {what} and is withheld; '
        f"review the change with `mcpfleet tools review {server}`, then accept it with "
        f"`mcpfleet tools approve {server} {tool}`"
    )


@dataclass
class _Screened:
    """One server's last screening, reused until its slice, its pin file or its mode changes."""

    given: ToolSlice
    stamp: FileStamp | None
    mode: str
    key: PinKey
    served: ToolSlice
    withheld: dict[str, WithheldTool] = field(default_factory=dict)


ServerLookup = Callable[[str], tuple[ServerConfig, SourceInfo | None] | None]


class BaselineWriter:
    """Writes first-sight baselines in a worker thread, one after another.

    Each pin file is written atomically and synced (``config.writer``), which on a first start
    of many servers is a file lock, a temporary file and an ``fsync`` per server: done on the
    event loop, every other server's handshake waited behind them. The screening does not
    wait: it uses the same baseline built in memory (``PinStore.baseline``). ``wait_written``
    returns once every baseline handed over so far is on disk (the manager calls it before it
    closes); the worker thread is not a daemon, so the interpreter also waits for it at exit.
    A baseline another process wrote first is kept (``pin_baseline`` writes none then), and
    read at the next screening, when its file's stamp has changed.
    """

    def __init__(self, store: Callable[[], PinStore]) -> None:
        self._store = store
        self._executor: concurrent.futures.ThreadPoolExecutor | None = None
        self._unwritten: set[PinKey] = set()
        self._lock = threading.Lock()
        """Guards ``_unwritten`` (the worker thread empties it) and the executor's hand-over
        (``wait_written`` runs in a worker thread of its own)."""

    def write(self, server: str, key: PinKey, definitions: list[Definition]) -> None:
        with self._lock:
            if self._executor is None:
                self._executor = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="mcpfleet pins")
            self._unwritten.add(key)
            self._executor.submit(self._write, server, key, definitions)

    def unwritten(self, key: PinKey) -> bool:
        """Whether a baseline of ``key`` was handed over and is not on disk yet."""
        with self._lock:
            return key in self._unwritten

    def _write(self, server: str, key: PinKey, definitions: list[Definition]) -> None:
        try:
            self._store().pin_baseline(key, definitions)
        except (ConfigWriteError, PinsTooLargeError) as error:
            logger.warning("MCP server %s: its tools could not be pinned: %s", server, error)
        finally:
            with self._lock:
                self._unwritten.discard(key)

    def wait_written(self) -> None:
        """Block until every baseline handed over so far is written (or failed, logged); the
        worker thread ends with them (the next baseline starts another)."""
        with self._lock:
            executor, self._executor = self._executor, None
        if executor is not None:
            executor.shutdown(wait=True)


class ToolPinning:
    """The manager's pinning: screens every slice, remembers what it withheld, watches approvals."""

    def __init__(self, store: PinStore | None = None) -> None:
        self._store = store
        self._screened: dict[str, _Screened] = {}
        self._catalog_withheld: dict[
            tuple[str, CatalogKind], tuple[PinKey, FileStamp | None, frozenset[str]]
        ] = {}
        """The prompts, resources or templates each server's last listing of that kind withheld."""
        self._logged: set[tuple[str, str, str]] = set()
        self._withholding = anyio.Event()
        self._baselines = BaselineWriter(lambda: self.store)

    @property
    def store(self) -> PinStore:
        # Resolved at first use, so a fleet built before a test (or a user) sets HOME uses the new one.
        if self._store is None:
            self._store = PinStore()
        return self._store

    def screen(self, slices: Mapping[str, ToolSlice], lookup: ServerLookup) -> dict[str, ToolSlice]:
        """Each server's slice with its withheld tools taken out."""
        for gone in set(self._screened) - set(slices):
            del self._screened[gone]
        served: dict[str, ToolSlice] = {}
        for server, given in slices.items():
            found = lookup(server)
            if found is None:
                served[server] = given
                continue
            config, source = found
            served[server] = self._screen_one(server, given, config, source).served
        if self.withheld():
            self._withholding.set()
        return served

    async def baselines_written(self) -> None:
        """Return once every first-sight baseline so far is on disk (``BaselineWriter``)."""
        await anyio.to_thread.run_sync(self.wait_baselines_written)

    def wait_baselines_written(self) -> None:
        """``baselines_written``, blocking (for code with no event loop)."""
        self._baselines.wait_written()

    def withheld(self) -> list[WithheldTool]:
        """Every tool withheld now, by server then name."""
        return [
            self._screened[server].withheld[tool]
            for server in sorted(self._screened)
            for tool in sorted(self._screened[server].withheld)
        ]

    def withheld_tool(self, server: str, tool: str) -> WithheldTool | None:
        screened = self._screened.get(server)
        return screened.withheld.get(tool) if screened is not None else None

    def approvals_seen(self) -> list[str]:
        """The servers whose pin file changed since their last screening (an approval, a reset)."""
        return [
            server
            for server, screened in self._screened.items()
            if screened.withheld and self.store.stamp(screened.key) != screened.stamp
        ]

    def catalog_changes_seen(self) -> list[tuple[str, CatalogKind]]:
        """The (server, kind) listings that withheld something and whose pin file changed since:
        taken off the watch list, as the next listing screens them again."""
        seen = [
            where
            for where, (key, stamp, withheld) in self._catalog_withheld.items()
            if withheld and self.store.stamp(key, where[1]) != stamp
        ]
        for where in seen:
            del self._catalog_withheld[where]
        return seen

    def _withholding_anything(self) -> bool:
        return bool(self.withheld()) or any(withheld for _, _, withheld in self._catalog_withheld.values())

    async def follow(self, registry: ServerRegistry) -> None:
        """Run for the fleet's life: while anything is withheld, serve what has been approved
        since, elsewhere (``registry``'s tools rebuilt, then ``tools_changed`` per server),
        and have the lists of prompts and resources whose pins changed read again."""
        while True:
            await self._withholding.wait()
            while self._withholding_anything():
                await anyio.sleep(PIN_WATCH_INTERVAL_S)
                changed = self.approvals_seen()
                if changed:
                    registry.rebuild_tools()
                    for name in sorted(changed):
                        registry.emit("tools_changed", name)
                relists = {(CATALOG_EVENTS[kind], server) for server, kind in self.catalog_changes_seen()}
                for event, server in sorted(relists):
                    registry.emit(event, server)
            self._withholding = anyio.Event()

    # -- prompts, resources and templates --------------------------------------------------------

    def screen_listing(
        self,
        kind: CatalogKind,
        server: str,
        items: list[dict[str, Any]],
        found: tuple[ServerConfig, SourceInfo | None] | None,
    ) -> list[dict[str, Any]]:
        """One ``prompts/list``, ``resources/list`` or ``resources/templates/list`` answer with
        what changed since it was pinned taken out (a prompt added later too: its text reaches
        the model; a resource added later is pinned as first seen, lists of files grow)."""
        if found is None or found[0].effective_pinning == "off":
            return items
        config, source = found
        key = pin_key(config, source)
        identity, fields = _CATALOG_FIELDS[kind]
        listed: dict[str, Definition] = {}
        for item in items:
            name = item.get(identity)
            if isinstance(name, str) and name not in listed:
                listed[name] = {field: item.get(field) for field in fields}
        try:
            differing = self.store.screen_catalog(key, kind, listed, pin_added=kind != "prompts")
        except ConfigWriteError as error:
            self._warn_once(server, f"its {kind} could not be pinned", error)
            return items
        mode = config.effective_pinning
        noun = _CATALOG_NOUNS[kind]
        for name, approved in differing.items():
            reason: WithheldReason = "changed" if approved is not None else "added"
            fingerprint = definition_fingerprint(listed[name])
            self._log_once(server, name, fingerprint, reason, mode, noun=noun)
        if mode == "warn" or not differing:
            self._catalog_withheld.pop((server, kind), None)
            return items
        self._catalog_withheld[(server, kind)] = (key, self.store.stamp(key, kind), frozenset(differing))
        self._withholding.set()
        return [item for item in items if item.get(identity) not in differing]

    def is_prompt_withheld(self, server: str, prompt: str) -> bool:
        entry = self._catalog_withheld.get((server, "prompts"))
        return entry is not None and prompt in entry[2]

    # -- one server ---------------------------------------------------------------------------

    def _screen_one(
        self, server: str, given: ToolSlice, config: ServerConfig, source: SourceInfo | None
    ) -> _Screened:
        mode = config.effective_pinning
        key = pin_key(config, source)
        previous = self._screened.get(server)
        if mode == "off":
            screened = _Screened(given, None, mode, key, given)
            self._screened[server] = screened
            return screened
        stamp = self.store.stamp(key)
        if (
            previous is not None
            and previous.given is given
            and previous.mode == mode
            and previous.key == key
            and previous.stamp == stamp
        ):
            return previous
        screened = self._compare(server, given, mode, key)
        self._screened[server] = screened
        return screened

    def _compare(self, server: str, given: ToolSlice, mode: str, key: PinKey) -> _Screened:
        store = self.store
        current = [definition_json(definition) for definition in given.definitions]
        pins = store.read(key)
        if pins is None and self._baselines.unwritten(key):
            # Listed again before its first baseline reached the disk (a few milliseconds): that
            # baseline is what this listing is screened against, so it is waited for here.
            self._baselines.wait_written()
            pins = store.read(key)
        if pins is None and not given.deferred:
            # The first live listing is the baseline (a deferred slice is the cache's memory of
            # an earlier listing, not something this server said now). It is screened against
            # at once, from memory; its file is written (synced) by the baseline writer, off the
            # event loop that is meanwhile connecting the other servers.
            try:
                pins = store.baseline(key, current)
            except PinsTooLargeError as error:
                # Failing open here would leave a server that lists enough unpinned for ever.
                if mode == "warn":
                    self._warn_once(server, "its tools cannot be pinned; served anyway", error)
                    return _Screened(given, store.stamp(key), mode, key, given)
                self._warn_once(server, "its tools are withheld, as they cannot be pinned", error)
                unpinnable = {
                    definition.name: WithheldTool(server, definition.name, "added", None, shown)
                    for definition, shown in zip(given.definitions, current, strict=True)
                }
                return _Screened(
                    given, store.stamp(key), mode, key, ToolSlice((), given.deferred), unpinnable
                )
            self._baselines.write(server, key, current)
        if pins is None:
            return _Screened(given, store.stamp(key), mode, key, given)
        kept: list[ToolDefinition] = []
        withheld: dict[str, WithheldTool] = {}
        to_note: list[Definition] = []
        for definition, shown in zip(given.definitions, current, strict=True):
            fingerprint = definition_fingerprint(shown)
            pinned = pins.approved.get(definition.name)
            if pinned is not None and pinned.fingerprint == fingerprint:
                kept.append(definition)
                continue
            reason: WithheldReason = "changed" if pinned is not None else "added"
            self._log_once(server, definition.name, fingerprint, reason, mode)
            if mode == "warn":
                kept.append(definition)
                continue
            approved = pinned.definition if pinned is not None else None
            withheld[definition.name] = WithheldTool(server, definition.name, reason, approved, shown)
            noted = pins.pending.get(definition.name)
            if noted is None or noted.fingerprint != fingerprint:
                to_note.append(shown)
        if to_note and not given.deferred:
            try:
                store.note_pending(key, to_note)
            except ConfigWriteError as error:
                self._warn_once(server, "its withheld tools could not be kept for review", error)
        served = given if not withheld else ToolSlice(tuple(kept), given.deferred)
        return _Screened(given, store.stamp(key), mode, key, served, withheld)

    def _warn_once(self, server: str, what: str, error: ConfigWriteError) -> None:
        """A store that cannot be written is said once per server and problem, not at each re-list."""
        if (server, what, str(error)) not in self._logged:
            self._logged.add((server, what, str(error)))
            logger.warning("MCP server %s: %s: %s", server, what, error)

    def _log_once(
        self,
        server: str,
        name: str,
        fingerprint: str,
        reason: WithheldReason,
        mode: str,
        *,
        noun: str = "tool",
    ) -> None:
        if (server, f"{noun}:{name}", fingerprint) in self._logged:
            return
        self._logged.add((server, f"{noun}:{name}", fingerprint))
        what = (
            "changed since it was approved"
            if reason == "changed"
            else "was added after its server's list was pinned"
        )
        if mode == "warn":
            logger.warning(
                'MCP server %s: %s "%s" %s; served anyway ("pinning": "warn")', server, noun, name, what
            )
        else:
            logger.warning(
                'MCP server %s: %s "%s" %s; withheld until reviewed (`mcpfleet tools review %s`)',
                server,
                noun,
                name,
                what,
                server,
            )
