"""``mcpfleet serve --http`` as a client of the backend directly would see it: resumable streams
(SEP-1699) and a call's logs on the call's own stream."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import httpx2
from tests.integration.gateway.http_gateway import HttpGateway, running_http_gateway, wait_until_listed
from tests.integration.gateway.raw_http import sse_events
from tests.servers.fixtures import FAKE_SERVER

MCP_HEADERS = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
PROTOCOL_VERSION = "2025-11-25"
INITIALIZE_PARAMS = {
    "protocolVersion": PROTOCOL_VERSION,
    "capabilities": {},
    "clientInfo": {"name": "t", "version": "1"},
}


class RawSession:
    """A handshake-era client over raw HTTP that, like the conformance suite's, opens no
    standalone GET stream: only what rides a request's own response reaches it."""

    def __init__(self, gateway: HttpGateway) -> None:
        self.url = gateway.url
        self.headers = {**MCP_HEADERS, **gateway.headers}
        self.next_id = 1

    def post(self, method: str, params: dict[str, Any] | None = None) -> list[dict[str, str]]:
        message: dict[str, Any] = {"jsonrpc": "2.0", "method": method, "params": params or {}}
        if not method.startswith("notifications/"):
            message["id"] = self.next_id
            self.next_id += 1
        answer = httpx2.post(self.url, json=message, headers=self.headers, timeout=20)
        assert answer.status_code in (200, 202), answer.text
        if "mcp-session-id" in answer.headers:
            self.headers["Mcp-Session-Id"] = answer.headers["mcp-session-id"]
        return sse_events(answer.text) if answer.text else []

    def open(self) -> list[dict[str, str]]:
        events = self.post("initialize", INITIALIZE_PARAMS)
        self.headers["MCP-Protocol-Version"] = PROTOCOL_VERSION
        self.post("notifications/initialized")
        return events


def _messages(events: list[dict[str, str]]) -> list[dict[str, Any]]:
    return [json.loads(event["data"]) for event in events if event.get("data")]


def test_every_http_stream_starts_with_a_priming_event_and_a_retry(tmp_path: Path) -> None:
    backend = {"command": sys.executable, "args": [str(FAKE_SERVER), "--name", "alpha", "--tool", "echo"]}
    with running_http_gateway(tmp_path, {"alpha": backend}) as gateway:
        session = RawSession(gateway)
        session.open()
        events = session.post("tools/list")
    priming = events[0]
    # An id to resume from, nothing to read, and when to come back (SEP-1699).
    assert priming.get("id") and priming.get("data", "") == "" and int(priming["retry"]) > 0
    assert "tools" in _messages(events)[0]["result"]
    assert all(event.get("id") for event in events), "every event carries an id to resume after"


def test_a_backend_log_written_during_a_call_reaches_the_client_on_the_call_stream(tmp_path: Path) -> None:
    backend = {"command": sys.executable, "args": [str(FAKE_SERVER), "--name", "alpha", "--tool", "log"]}
    with running_http_gateway(tmp_path, {"alpha": backend}) as gateway:
        wait_until_listed(gateway, "alpha_log")
        session = RawSession(gateway)
        session.open()
        calls = [
            session.post("tools/call", {"name": "alpha_log", "arguments": {"message": f"step {index}"}})
            for index in range(3)
        ]
    for index, events in enumerate(calls):
        messages = _messages(events)
        logs = [
            message["params"]["data"]
            for message in messages
            if message.get("method") == "notifications/message"
        ]
        # The log first, then the answer that closes the stream.
        assert logs == [f"step {index}"], messages
        assert "result" in messages[-1]
