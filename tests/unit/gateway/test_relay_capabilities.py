"""Which capability a client must have declared for the relay to send it a backend's request."""

from __future__ import annotations

from typing import Any

import pytest

from mcpfleet.gateway.relay import ELICITATION, ROOTS, SAMPLING, can_be_asked, missing_capability

TOOL = {"name": "lookup", "inputSchema": {"type": "object"}}


@pytest.mark.parametrize(
    ("capabilities", "method", "params", "missing"),
    [
        ({}, SAMPLING, {}, "sampling"),
        ({"sampling": {}}, SAMPLING, {}, None),
        ({"sampling": {}}, SAMPLING, {"tools": [TOOL]}, "sampling.tools"),
        ({"sampling": {}}, SAMPLING, {"toolChoice": {"mode": "auto"}}, "sampling.tools"),
        ({"sampling": {"tools": {}}}, SAMPLING, {"tools": [TOOL]}, None),
        ({"sampling": {}}, SAMPLING, {"includeContext": "thisServer"}, "sampling.context"),
        ({"sampling": {}}, SAMPLING, {"includeContext": "none"}, None),
        ({"sampling": {"context": {}}}, SAMPLING, {"includeContext": "allServers"}, None),
        ({}, ELICITATION, {"message": "?"}, "elicitation"),
        ({"elicitation": {}}, ELICITATION, {"message": "?"}, None),
        ({"elicitation": {"form": {}}}, ELICITATION, {"mode": "form"}, None),
        ({"elicitation": {"url": {}}}, ELICITATION, {"message": "?"}, "elicitation.form"),
        ({"elicitation": {"form": {}}}, ELICITATION, {"mode": "url", "url": "https://x"}, "elicitation.url"),
        ({"elicitation": {"url": {}}}, ELICITATION, {"mode": "url", "url": "https://x"}, None),
        ({}, ROOTS, {}, "roots"),
        ({"roots": {"listChanged": True}}, ROOTS, {}, None),
        ({"sampling": None}, SAMPLING, {}, "sampling"),
    ],
)
def test_the_capability_a_request_needs(
    capabilities: dict[str, Any], method: str, params: dict[str, Any], missing: str | None
) -> None:
    assert missing_capability(capabilities, method, params) == missing


def test_a_modern_client_that_declared_nothing_to_ask_is_never_parked() -> None:
    assert not can_be_asked({})
    assert not can_be_asked({"experimental": {"x": {}}})
    assert can_be_asked({"roots": {}})
    assert can_be_asked({"elicitation": {"form": {}}})
