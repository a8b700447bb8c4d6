"""What every server of a fleet is told it may ask of its client, whoever hosts the fleet.

Servers list tools by the client's capabilities (the reference server-everything lists its
sampling, elicitation and roots tools only to a client that declares them). The daemon's fleet
and the gateway relay every question to a host, so they declare sampling (with ``tools`` and
``context``), elicitation and roots; a manager built without handlers (``mcpfleet tools`` and
``call`` in-process, a library fleet) declared only roots, and so had fewer tools: 56 against
59 for the same servers, and a tool listed through the daemon was "not found" in-process.

So a fleet declares one set, always, and the tools of a fleet are what its servers list for
that set: ``FleetQuestions`` declares what the relay declares and answers with the host's
hooks when it gave them; a question no hook can answer is refused, with a JSON-RPC error that
tells the server why and the user how (the same refusal a gateway client that did not declare
the capability causes).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mcpfleet.client.inbound import ElicitationHandler, SamplingHandler

FLEET_SAMPLING_CAPABILITY: dict[str, Any] = {"tools": {}, "context": {}}
"""The ``sampling`` capability every fleet declares: the one the gateway's relay declares
(``gateway.relay.relayed_sampling_capability``; a test pins that they agree)."""
INVALID_REQUEST = -32600
"""The JSON-RPC code the SDK's own client answers an unsupported question with."""


class FleetQuestions:
    """The fleet's ``ServerRequestHandler`` when its host gave none: every capability declared,
    each question answered by the host's hook for it, or refused when there is none."""

    def __init__(
        self, elicitation_handler: ElicitationHandler | None, sampling_handler: SamplingHandler | None
    ) -> None:
        self._elicitation_handler = elicitation_handler
        self._sampling_handler = sampling_handler

    @property
    def sampling_capability(self) -> dict[str, Any] | None:
        return dict(FLEET_SAMPLING_CAPABILITY)

    @property
    def offers_elicitation(self) -> bool:
        return True

    async def create_message(self, server: str, params: dict[str, Any]) -> dict[str, Any]:
        if self._sampling_handler is None:
            raise _refusal("Sampling", server, "sampling_handler")
        return await self._sampling_handler(params)

    async def elicit(self, server: str, params: dict[str, Any]) -> dict[str, Any]:
        if self._elicitation_handler is None:
            raise _refusal("Elicitation", server, "elicitation_handler")
        return await self._elicitation_handler(params)

    async def list_roots(self, server: str) -> list[dict[str, Any]] | None:
        return None  # the working folder


def _refusal(what: str, server: str, hook: str) -> Exception:
    from mcp.shared.exceptions import MCPError

    return MCPError(
        code=INVALID_REQUEST,
        message=(
            f'{what} not supported: nobody can answer it here (asked by MCP server "{server}" through '
            f"mcpfleet, which has no {hook}); call the tool from an MCP host through `mcpfleet serve`"
        ),
    )


__all__ = ["FLEET_SAMPLING_CAPABILITY", "FleetQuestions"]
