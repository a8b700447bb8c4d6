"""Each viewer's view of the catalog, and the guard's hooks around each request (``gateway.guard``).

``Views`` stands between the gateway and its ``RequestGuard``:

- ``asker(scope, client)``: who sent a request; a handshake-era session is bound to the viewer
  of its first request, and a request of another viewer on it is refused (a session id that
  leaked does not lend its owner's view to someone else);
- ``catalog_for(catalog, viewer)``: the catalog without what the guard refuses that viewer,
  kept per viewer until the catalog or the guard changes. Every list is served from it, and
  the tool budget (``find_tools``, the client's budget) counts from it;
- ``permitted(forward, asker)`` and ``send(forward, …)``: the guard's ``before`` once a request
  is resolved, its ``after`` once the backend answered, with the time it took;
- ``announce(…)``: after each rebuild of the catalog (or change of the guard's mind), the
  ``list_changed`` notices: to every client for the lists that changed when the guard is
  passive, else to each session whose own view changed.

With ``OPEN_GUARD`` (the local gateway) every view is the catalog itself and no hook runs.

No SDK here.
"""

from __future__ import annotations

import logging
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Hashable, Iterable
from dataclasses import replace
from typing import TYPE_CHECKING, Any, get_args

from mcpfleet.contract import notifications
from mcpfleet.gateway.guard import (
    OPEN_GUARD,
    Asker,
    CallOutcome,
    GuardedRequest,
    GuardedSend,
    GuardRefusal,
    RequestGuard,
)
from mcpfleet.gateway.naming import ServedNames, split_served_uri
from mcpfleet.gateway.served_catalog import ListKind, ServedCatalog

if TYPE_CHECKING:
    from mcpfleet.gateway.forward import Forward
    from mcpfleet.gateway.sessions import ClientSession, ClientSessions

logger = logging.getLogger(__name__)

MAX_CACHED_VIEWS = 256
"""Views kept at once (one per viewer seen lately); past it the least recently used is rebuilt
when asked for again."""
EVERY_LIST: tuple[ListKind, ...] = get_args(ListKind)

Refuses = Callable[[ListKind, str, str], bool]
ListChanged = Callable[[ListKind], Awaitable[None]]


def visible_catalog(catalog: ServedCatalog, refused: Refuses) -> ServedCatalog:
    """``catalog`` without the tools, prompts, resources and templates ``refused(kind, server,
    name)`` says no to (``name``: the backend's name, or its URI or URI template)."""
    tool_names = _kept_names(catalog.tool_names, lambda pair: not refused("tools", *pair))
    prompt_names = _kept_names(catalog.prompt_names, lambda pair: not refused("prompts", *pair))

    def resource_kept(resource: dict[str, Any]) -> bool:
        target = catalog.resource_target(str(resource.get("uri")))
        return target is not None and not refused("resources", *target)

    def template_kept(template: dict[str, Any]) -> bool:
        target = _template_target(catalog, str(template.get("uriTemplate")))
        return target is not None and not refused("resources", *target)

    return replace(
        catalog,
        tools=tuple(tool for tool in catalog.tools if tool.get("name") in tool_names.by_served),
        prompts=tuple(prompt for prompt in catalog.prompts if prompt.get("name") in prompt_names.by_served),
        resources=tuple(filter(resource_kept, catalog.resources)),
        resource_templates=tuple(filter(template_kept, catalog.resource_templates)),
        tool_names=tool_names,
        prompt_names=prompt_names,
        resource_owners={
            uri: kept
            for uri, owners in catalog.resource_owners.items()
            if (kept := tuple(server for server in owners if not refused("resources", server, uri)))
        },
        backend_templates=tuple(
            (server, pattern)
            for server, pattern in catalog.backend_templates
            if not refused("resources", server, pattern)
        ),
    )


def _kept_names(names: ServedNames, keep: Callable[[tuple[str, str]], bool]) -> ServedNames:
    by_pair = {pair: served for pair, served in names.by_pair.items() if keep(pair)}
    by_served = {served: pair for pair, served in by_pair.items()}
    return ServedNames(by_pair=by_pair, by_served=by_served, collisions=names.collisions)


def _template_target(catalog: ServedCatalog, served_pattern: str) -> tuple[str, str] | None:
    """``(server, backend URI template)`` behind a served template."""
    if catalog.policy.prefix == "always":
        return split_served_uri(served_pattern)
    owners = (pair for pair in catalog.backend_templates if pair[1] == served_pattern)
    return next(owners, None)


def _never(result: Any) -> bool:
    return False


class Views:
    """The guard's views and hooks for one gateway (see the module)."""

    def __init__(self, guard: RequestGuard | None = None, *, current: Callable[[], ServedCatalog]) -> None:
        """``current`` gives the gateway's catalog as it is now (a session's first view)."""
        self.guard = guard if guard is not None else OPEN_GUARD
        self._current = current
        self._cache: OrderedDict[Hashable, tuple[ServedCatalog, ServedCatalog]] = OrderedDict()
        self._guard_changed = False

    @property
    def passive(self) -> bool:
        """Whether the guard has no opinion on any request: the one question a shortcut around
        the request path (a ``tools/call`` fast path) must ask before it skips the hooks."""
        return self.guard.passive

    def follow(self, on_change: Callable[[], None]) -> Callable[[], None]:
        """Call ``on_change`` (the gateway's "rebuild and announce") when the guard changes its
        mind; returns the stopper."""

        def changed() -> None:
            self._cache.clear()
            self._guard_changed = True
            on_change()

        return self.guard.on_views_changed(changed)

    # -- who asks, and what they see ------------------------------------------------------------------

    def asker(self, scope: Any, client: ClientSession) -> Asker:
        """Who sent a request with this ASGI ``scope`` (``None`` over stdio) on ``client``'s
        session. ``GuardRefusal`` for a request on a session another viewer opened."""
        if self.passive:
            return Asker(None, scope)
        viewer = self.guard.viewer(scope)
        if client.registered:
            if not client.bound:
                client.bound, client.viewer = True, viewer
                client.view = self.catalog_for(self._current(), viewer)
            elif client.viewer != viewer:
                raise GuardRefusal(
                    "this MCP session was opened with another identity; open a new session "
                    "(initialize again) with your own credentials"
                )
        return Asker(viewer, scope)

    def catalog_for(self, catalog: ServedCatalog, viewer: Hashable) -> ServedCatalog:
        """What ``viewer`` is served of ``catalog``."""
        if self.passive:
            return catalog
        cached = self._cache.get(viewer)
        if cached is not None and cached[0] is catalog:
            self._cache.move_to_end(viewer)
            return cached[1]
        guard = self.guard
        view = visible_catalog(
            catalog, lambda kind, server, name: guard.refusal(viewer, kind, server, name) is not None
        )
        self._cache[viewer] = (catalog, view)
        self._cache.move_to_end(viewer)
        while len(self._cache) > MAX_CACHED_VIEWS:
            self._cache.popitem(last=False)
        return view

    def refuse_unless_allowed(self, asker: Asker | None, kind: ListKind, server: str, name: str) -> None:
        """``GuardRefusal`` unless the asker may use ``server``'s ``name`` (a subscription, a
        completion: requests that reach a backend but are not a call)."""
        if asker is None or self.passive:
            return
        refusal = self.guard.refusal(asker.viewer, kind, server, name)
        if refusal is not None:
            raise GuardRefusal(refusal)

    # -- the hooks around a request -----------------------------------------------------------------

    async def permitted(self, forward: Forward, asker: Asker | None) -> Forward:
        """``forward`` as the guard's ``before`` lets it go (to the fleet, or to the permit's
        backend); ``GuardRefusal`` with the guard's text when it refuses."""
        if self.passive or asker is None or forward.server is None:
            return forward
        request = GuardedRequest(
            asker=asker,
            client_name=forward.client.client_name,
            kind=forward.kind,
            server=forward.server,
            name=forward.backend_name,
            served_name=forward.served_name,
            arguments=forward.arguments,
            client_capabilities=forward.client.capabilities,
        )
        permit = await self.guard.before(request)
        if permit.refusal is not None:
            raise GuardRefusal(permit.refusal)
        return replace(forward, guarded=request, backend=permit.backend)

    async def send(
        self, forward: Forward, send: GuardedSend, *, failed: Callable[[Any], bool] = _never
    ) -> Any:
        """``send`` the request to its backend (the permit's, else the fleet's), then tell the
        guard how it ended and how long it took (``failed(result)``: whether an answer is an
        error result; a read or a prompt fails by raising). What the guard's ``after`` raises
        replaces the answer."""
        request = forward.guarded
        if request is None:
            return await send(forward.fleet)
        started = time.perf_counter()
        try:
            result = await send(forward.backend if forward.backend is not None else forward.fleet)
        except Exception as error:
            await self._after(request, "error", started, cause=error)
            raise
        await self._after(request, "error" if failed(result) else "ok", started)
        return result

    async def _after(
        self, request: GuardedRequest, outcome: CallOutcome, started: float, cause: Exception | None = None
    ) -> None:
        duration_ms = (time.perf_counter() - started) * 1000
        try:
            await self.guard.after(request, outcome, duration_ms)
        except GuardRefusal as refusal:
            raise refusal from cause

    # -- list_changed -----------------------------------------------------------------------------------

    async def announce(
        self,
        current: ServedCatalog,
        changed: Iterable[ListKind],
        announced: Iterable[ListKind],
        sessions: ClientSessions,
        listen_streams: ListChanged,
    ) -> None:
        """Tell the clients which of their lists changed with the catalog ``current``.

        ``changed``: the lists of the whole catalog that differ from the last one; ``announced``:
        those a backend announced a change of (told even when they came out the same).
        ``listen_streams`` feeds 2026-07-28 listen streams, which belong to no session: they hear
        of every list that changed for anyone (and of every list when the guard changed its
        mind), which may be a list that did not change for them, never a change they miss."""
        changed, announced = list(changed), [kind for kind in announced if kind not in changed]
        if self.passive:
            for kind in [*changed, *announced]:
                logger.info("served %s changed; telling %d client(s)", kind, len(sessions))
                await sessions.notify_all(notifications.LIST_CHANGED[kind])
                await listen_streams(kind)
            return
        told: set[ListKind] = set(changed) | set(announced)
        if self._guard_changed:
            self._guard_changed = False
            told.update(EVERY_LIST)
        for session in sessions:
            if not session.bound:
                continue  # no request yet: its first one is served from the catalog as it is then
            view = self.catalog_for(current, session.viewer)
            previous, session.view = session.view, view
            kinds = previous.changed_lists(view) if previous is not None else list(changed)
            for kind in [*kinds, *(kind for kind in announced if kind not in kinds)]:
                await session.notify(notifications.LIST_CHANGED[kind])
        for kind in EVERY_LIST:
            if kind in told:
                await listen_streams(kind)
