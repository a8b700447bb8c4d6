"""What one replica of a team gateway tells the others, and does with what they tell it.

Each replica runs its own backends, so a change one of them announces reaches that replica
alone; and each reads its own copy of the team file. ``ReplicaLink`` carries both across, over
``TeamShared``'s messages:

- a backend's ``tools``/``resources``/``prompts`` ``list_changed`` seen here is published; a
  replica that hears it reads that server's lists again from its own connection and announces
  them to its own clients as if its backend had spoken (``MCPManager.heard_list_changed_elsewhere``);
  what it re-lists because of another replica is not published again;
- a team file this replica loaded is published as ``reload``; a replica that hears it reads its
  own file at once instead of at its next poll (``LiveTeamFile.check``), so a change converges
  on every replica as soon as their files hold it.
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING

from mcpfleet.contract import notifications

if TYPE_CHECKING:
    from mcpfleet.fleet.events import ManagerEvent
    from mcpfleet.team.fleet import LiveTeamFile, TeamFleet
    from mcpfleet.team.model import TeamFile
    from mcpfleet.team.shared import SharedMessage, TeamShared

logger = logging.getLogger(__name__)

ECHO_WINDOW_S = 60.0
"""How long the re-list another replica's word caused may take to announce itself (it is paced,
``list_changed_min_interval_s``): past it, an announcement is this replica's own again."""
_HEARD_ELSEWHERE = frozenset({"session_ended", "credentials_changed", "connect_callback", "connect_result"})
"""Messages others listen to: the shared sessions' (``gateway.shared_sessions``), the per-user
credentials' (``team.per_user``) and the connect hand-off's (``team.connect_handoff``)."""
_METHOD_OF_EVENT = {
    "tools_changed": notifications.TOOLS_LIST_CHANGED,
    "resources_changed": notifications.RESOURCES_LIST_CHANGED,
    "prompts_changed": notifications.PROMPTS_LIST_CHANGED,
}


class ReplicaLink:
    """This replica's side of the messages between replicas (see the module)."""

    def __init__(self, shared: TeamShared, fleet: TeamFleet, live: LiveTeamFile) -> None:
        self.shared = shared
        self.fleet = fleet
        self.live = live
        self._echoes: dict[tuple[str, str], float] = {}
        """Re-lists this replica runs because another one announced them (until when the answer
        is expected): their announcement is not published back. One per (server, list): a
        re-list folds the announcements that arrive while it runs into one."""
        self.heard = 0
        """Messages from other replicas acted on (tests and logs)."""

    def start(self) -> None:
        self.fleet.subscribe(self._on_event)
        self.shared.listen(self._on_message)
        self.live.follow(self._reloaded)

    async def _on_event(self, event: ManagerEvent) -> None:
        method = _METHOD_OF_EVENT.get(event.kind)
        if method is None or not event.announced:
            return
        expected = self._echoes.pop((event.server, method), None)
        if expected is not None and time.monotonic() < expected:
            return
        await self.shared.publish({"kind": "list_changed", "server": event.server, "method": method})

    async def _reloaded(self, new: TeamFile, old: TeamFile) -> None:
        await self.shared.publish({"kind": "reload"})

    async def _on_message(self, message: SharedMessage) -> None:
        kind = message.get("kind")
        if kind == "reload":
            self.heard += 1
            await self.live.check()
        elif kind == "list_changed":
            server, method = message.get("server"), message.get("method")
            if not (isinstance(server, str) and isinstance(method, str)):
                return
            self._echoes[(server, method)] = time.monotonic() + ECHO_WINDOW_S
            if self.fleet.heard_list_changed_elsewhere(server, method):
                self.heard += 1
            else:
                self._echoes.pop((server, method), None)
        elif kind not in _HEARD_ELSEWHERE:
            logger.debug("mcpfleet serve --team: another replica's message %r ignored", kind)
