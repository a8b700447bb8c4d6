"""The HTTP fast path of a team gateway: a call answered as one JSON body, without the SDK's
session machinery, goes through the team's guard all the same — the policies, the session's
binding to who opened it, and the audit log (``gateway.http_fast``, ``gateway.handlers.fast_call``).

A real ``mcpfleet serve --http --team`` process, two service accounts, raw HTTP so the test can
see which answers came as JSON (the fast path) and which as a stream.
"""

from __future__ import annotations

from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from tests.integration.gateway.gateway_harness import wait_until
from tests.integration.gateway.raw_http import Session, answer_of
from tests.integration.team.team_gateway import (
    add_key,
    fake,
    running_team_gateway,
    team_document,
    write_team_file,
)

from mcpfleet.team.model import StateSettings
from mcpfleet.team.stores import open_team_state

pytestmark = pytest.mark.anyio

SERVERS = {"alpha": fake("alpha", "echo"), "beta": fake("beta", "echo")}
POLICIES = [
    {"users": ["ann"], "allow": ["*"], "name": "ann-everything"},
    {"users": ["bob"], "allow": ["alpha/*"], "name": "bob-alpha"},
]
LISTED_S = 30


@dataclass(frozen=True)
class SignedIn:
    """The gateway as one service account reaches it."""

    url: str
    key: str

    @property
    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.key}"}


def call(session: Session, tool: str, message: str) -> Any:
    return session.request("tools/call", {"name": tool, "arguments": {"message": message}})


def listed(session: Session) -> set[str]:
    return {tool["name"] for tool in answer_of(session.request("tools/list", {}))["result"]["tools"]}


async def test_a_fast_call_is_judged_by_the_policies_bound_to_its_session_and_on_record(
    tmp_path: Path,
) -> None:
    state = StateSettings(sqlite_path=tmp_path / "state.sqlite3")
    team_file = write_team_file(
        tmp_path / "team.json",
        team_document(SERVERS, POLICIES, state={"sqlite": state.sqlite_path.name}),
    )
    ann_key, bob_key = add_key(team_file, "ann"), add_key(team_file, "bob")
    with running_team_gateway(team_file, "--no-cache") as gateway, ExitStack() as stack:
        ann = Session(SignedIn(gateway.url, ann_key), stack).open()
        bob = Session(SignedIn(gateway.url, bob_key), stack).open()

        async def both_listed() -> bool:
            return listed(ann) == {"alpha_echo", "beta_echo"}

        await wait_until(both_listed, timeout_s=LISTED_S)

        allowed = call(ann, "beta_echo", "hi")
        assert allowed.headers["content-type"] == "application/json"  # the fast path answered
        assert answer_of(allowed)["result"]["structuredContent"] == {"message": "hi"}

        denied = call(bob, "beta_echo", "secret")
        assert denied.headers["content-type"] == "application/json"
        result = answer_of(denied)["result"]
        assert result["isError"] is True
        assert "denied by policy 1 (bob-alpha)" in result["content"][0]["text"]

        # Ann's session id, presented with Bob's key: the session is Ann's, not a way into her view.
        borrowed = ann.post(
            {"jsonrpc": "2.0", "id": 99, "method": "tools/call", "params": {"name": "beta_echo"}},
            Authorization=f"Bearer {bob_key}",
        )
        assert "opened with another identity" in answer_of(borrowed)["error"]["message"]

    opened = await open_team_state(state)
    try:
        records = [(r.user, r.client, r.server, r.tool, r.outcome) for r in await opened.audit_records()]
    finally:
        await opened.aclose()
    assert records == [
        ("service:ann", "t", "beta", "echo", "ok"),
        ("service:bob", "t", "beta", "echo", "denied"),
    ]
