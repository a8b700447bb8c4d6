"""Following a 2026-07-28 server's list changes over its ``subscriptions/listen`` stream.

That era has no unsolicited notifications: a server tells only the listen streams a client
opened. The SDK passes each event of the stream to the ``message_handler`` as the matching
``list_changed`` notification, so the host sees them as it sees a handshake-era server's.

This module imports ``mcp``; ``connection.py`` runs it in the owner task of a modern connection.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import anyio
from mcp import Client

from mcpfleet.contract import notifications

logger = logging.getLogger(__name__)

LISTEN_REOPENS = 3
"""How many times a connection re-opens a 2026-07-28 server's ``subscriptions/listen`` stream
that was lost while the connection lives; then the server's list changes are no longer
followed until it reconnects."""
LISTEN_REOPEN_DELAY_S = 1.0
LIST_CHANGED_NOTIFICATIONS = notifications.LIST_CHANGED
"""Capability → the notification that announces a change of its list."""

Deliver = Callable[[str, Any], Awaitable[None]]
"""Hands one notification (method, params) to the host, as if the server had sent it."""


async def follow_list_changes(
    client: Client, *, server: str, capabilities: Mapping[str, Any], deliver: Deliver
) -> None:
    """Keep one ``subscriptions/listen`` stream open on ``client``, for the list changes its
    ``capabilities`` say it announces.

    A stream lost while the connection lives is re-opened (``LISTEN_REOPENS`` times), each time
    followed by one ``list_changed`` per list, since what changed in between was not seen.
    Runs until cancelled (the owner task cancels it with the connection), the server closes
    the stream gracefully, or refuses it.
    """
    from mcp.client.subscriptions import SubscriptionLost
    from mcp.shared.exceptions import MCPError

    announced = [
        capability
        for capability in LIST_CHANGED_NOTIFICATIONS
        if isinstance(capabilities.get(capability), dict) and capabilities[capability].get("listChanged")
    ]
    if not announced:
        return
    for reopen in range(LISTEN_REOPENS + 1):
        try:
            async with client.listen(
                tools_list_changed="tools" in announced,
                prompts_list_changed="prompts" in announced,
                resources_list_changed="resources" in announced,
            ) as subscription:
                if reopen:
                    for capability in announced:
                        await deliver(LIST_CHANGED_NOTIFICATIONS[capability], None)
                async for _event in subscription:
                    pass  # already delivered through the message handler
            return  # the server closed the stream gracefully: it announces nothing more
        except SubscriptionLost as error:
            logger.info("%s: the subscriptions/listen stream was lost (%s)", server, error)
        except (MCPError, TimeoutError) as error:
            logger.info(
                "%s: subscriptions/listen was refused (%s); its list changes are not followed",
                server,
                error,
            )
            return
        await anyio.sleep(LISTEN_REOPEN_DELAY_S)
    logger.warning(
        "%s: the subscriptions/listen stream was lost %d times; its list changes are no longer "
        "followed until it reconnects",
        server,
        LISTEN_REOPENS + 1,
    )


__all__ = ["LISTEN_REOPENS", "LIST_CHANGED_NOTIFICATIONS", "follow_list_changes"]
