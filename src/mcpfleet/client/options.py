"""How to connect one server: the one record ``open_connection`` and ``ServerConnection`` take.

Everything a connection is opened with besides the server's name and config lives in
``ConnectionOptions``, written out once here. The fleet builds one per manager and adds what
differs per attempt (``dataclasses.replace``); ``connect_to_server(name, config, cwd=…)``
takes the same fields as keywords, for a one-off connection.

This module imports nothing of the SDK.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mcpfleet.client.definitions import DEFAULT_PROBE_TIMEOUT_MS

if TYPE_CHECKING:
    from mcpfleet.client.definitions import EraVerdict, LogLevel
    from mcpfleet.client.inbound import (
        ElicitationHandler,
        NotificationCallback,
        RootsOffer,
        SamplingHandler,
        ServerRequestHandler,
    )


@dataclass(frozen=True)
class ConnectionOptions:
    """How one connection is opened.

    ``cwd`` is the folder a stdio server runs in (unless its config names one) and the root
    it is offered by default. The handshake is bounded by ``timeout_ms``, else the config's
    timeout (default 30 000 ms; 0 = unbounded). ``era`` is the verdict remembered from an
    earlier contact (the connection's ``era_verdict``): with it nothing is probed
    (``initialize`` for a legacy server, the remembered ``DiscoverResult`` adopted for a
    2026-07-28 one) and a server that refuses it raises ``EraMismatchError``; without it
    ``server/discover`` is probed, bounded by ``probe_timeout_ms`` (default 1000), then
    ``initialize`` if it is not answered. ``auth`` (an ``httpx2.Auth``) is used for HTTP
    servers. ``resolve_secrets=False`` (unapproved entries) skips ``!command`` and
    environment-name substitution. ``elicitation_handler`` and ``sampling_handler`` answer
    ``elicitation/create`` and ``sampling/createMessage``, whether the server sends them as
    requests (legacy) or inside an ``input_required`` result; ``server_requests`` (a
    ``ServerRequestHandler``, instead of those two) answers them and ``roots/list``, told
    which server asks. ``log_level`` asks a 2026-07-28 server for its log messages at that
    level and above on every request (none by default). ``roots`` are the roots the host's
    hooks offer (``mcpfleet.client.inbound.RootsOffer``: the working folder by default;
    ``None``: an empty list). ``on_notification`` hears every notification the server sends.
    """

    cwd: Path
    timeout_ms: int | None = None
    on_notification: NotificationCallback | None = None
    era: EraVerdict | None = None
    auth: object | None = None
    resolve_secrets: bool = True
    elicitation_handler: ElicitationHandler | None = None
    sampling_handler: SamplingHandler | None = None
    server_requests: ServerRequestHandler | None = None
    probe_timeout_ms: int | None = None
    log_level: LogLevel | None = None
    roots: RootsOffer = "working-folder"

    @property
    def probe_bound_ms(self) -> int:
        """How long the ``server/discover`` probe may take."""
        return DEFAULT_PROBE_TIMEOUT_MS if self.probe_timeout_ms is None else self.probe_timeout_ms


def connection_options(options: ConnectionOptions | None, fields: Mapping[str, Any]) -> ConnectionOptions:
    """``options`` with ``fields`` set (the keywords of ``open_connection`` and
    ``connect_to_server``), or a record of ``fields`` alone when no ``options`` is given."""
    if options is None:
        return ConnectionOptions(**fields)
    return replace(options, **fields) if fields else options


__all__ = ["ConnectionOptions", "connection_options"]
