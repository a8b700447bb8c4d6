"""Requests sent on behalf of another MCP client: what a relaying program (the gateway) sets
so a 2026-07-28 server deals with that client, not with mcpfleet.

A 2026-07-28 server reads the client's capabilities from each request's ``_meta``
(``clientCapabilities``) and answers a request whose answer needs the client's input with an
``input_required`` result. When mcpfleet relays a request of a 2026-07-28 client, the server
must see that client's capabilities (it refuses with ``-32021`` what the client did not
declare), and its ``input_required`` rounds belong to that client: they go back to it as they
are (the server's own keys and ``requestState``) and its retry comes back with the answers.

``on_behalf_of(caller)`` sets this for the requests sent within the block (and the tasks it
starts): the connection then sends ``tools/call``, ``resources/read`` and ``prompts/get`` with
the caller's ``inputResponses``/``requestState`` and returns an ``input_required`` result
instead of answering it, and the wrapped transport (``watched.py``) writes the caller's
capabilities into the request. The SDK stamps mcpfleet's own capabilities on every
2026-07-28 request and offers no per-request override, so the transport is where the
caller's replace them. This module imports no SDK (the gateway's relay imports it). On a
handshake-era connection nothing changes: that era declares
capabilities once, at ``initialize``.
"""

from __future__ import annotations

import contextvars
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Caller:
    """The client a request is relayed for, and its round of an ``input_required`` exchange."""

    capabilities: Mapping[str, Any]
    """The client's declared capabilities, as the server is told them."""
    input_responses: Mapping[str, Any] | None = None
    """The client's answers to the server's previous ``input_required`` round."""
    request_state: str | None = None
    """The ``requestState`` of that round, handed back to the server unchanged."""


_caller: contextvars.ContextVar[Caller | None] = contextvars.ContextVar("mcpfleet_caller", default=None)


@contextmanager
def on_behalf_of(caller: Caller) -> Iterator[None]:
    """Send the requests of this block (and of the tasks it starts) for ``caller``."""
    token = _caller.set(caller)
    try:
        yield
    finally:
        _caller.reset(token)


def current_caller() -> Caller | None:
    """The client the requests of this task are sent for, if any."""
    return _caller.get()


__all__ = ["Caller", "current_caller", "on_behalf_of"]
