"""``mcpfleet serve --http``'s fast path (``gateway.http_fast``): a call whose client takes JSON is
answered as one JSON body, saying what the SDK's stream says; a client that prefers a stream gets
the SDK's, which it can resume; both eras; cancellation; every check of the gate still in front."""

from __future__ import annotations

import json
import sys
import threading
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import httpx2
import pytest
from mcp_types import HEADER_MISMATCH
from tests.integration.gateway.http_gateway import HttpGateway, running_http_gateway, wait_until_listed
from tests.integration.gateway.raw_http import TAKES_JSON, Session, answer_of, sse_events
from tests.servers.fixtures import FAKE_SERVER

MODERN = "2026-07-28"
PREFERS_STREAM = "text/event-stream, application/json;q=0.5"


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HttpGateway]:
    home = tmp_path_factory.mktemp("fast-gateway")
    cancel_log = home / "cancelled.log"
    backend = {
        "command": sys.executable,
        "args": [str(FAKE_SERVER), "--name", "alpha", "--cancel-log", str(cancel_log)],
    }
    logging = {"command": sys.executable, "args": [str(FAKE_SERVER), "--name", "beta", "--tool", "log"]}
    with running_http_gateway(home, {"alpha": backend, "beta": logging}) as running:
        wait_until_listed(running, "alpha_echo")
        wait_until_listed(running, "beta_log")
        yield running


@contextmanager
def session(gateway: HttpGateway, **options: Any) -> Iterator[Session]:
    standalone = options.pop("standalone", True)
    with ExitStack() as stack:
        yield Session(gateway, stack, **options).open(standalone=standalone)


ECHO = {"name": "alpha_echo", "arguments": {"message": "hello"}}


def test_a_client_that_takes_json_gets_one_json_body_saying_what_the_stream_says(
    gateway: HttpGateway,
) -> None:
    with session(gateway) as fast, session(gateway, accept=PREFERS_STREAM) as streamed:
        as_json = fast.request("tools/call", ECHO)
        as_stream = streamed.request("tools/call", ECHO)
    assert as_json.status_code == 200 and as_json.headers["content-type"] == "application/json"
    assert as_json.headers["mcp-session-id"] == fast.headers["Mcp-Session-Id"]
    assert as_stream.headers["content-type"].startswith("text/event-stream")
    assert answer_of(as_json)["result"] == answer_of(as_stream)["result"]
    assert answer_of(as_json)["result"]["structuredContent"] == {"message": "hello"}


def test_a_call_whose_backend_logs_gets_its_logs_then_its_answer_on_its_own_response(
    gateway: HttpGateway,
) -> None:
    """Logs sent on the session's standalone stream could reach the client after the answer,
    which it reads on another connection: the response turns into a stream that carries them
    first, as the SDK's does."""
    with session(gateway) as fast:
        answer = fast.request("tools/call", {"name": "beta_log", "arguments": {"message": "halfway"}})
    assert answer.headers["content-type"].startswith("text/event-stream")
    messages = [json.loads(event["data"]) for event in sse_events(answer.text) if event.get("data")]
    assert [message.get("method") for message in messages] == ["notifications/message", None]
    assert messages[0]["params"]["logger"] == "beta" and "halfway" in json.dumps(messages[0]["params"])
    assert messages[1]["id"] == fast.next_id and "result" in messages[1]


def test_a_client_that_names_the_stream_first_gets_the_stream(gateway: HttpGateway) -> None:
    """Equal weights, the stream listed first (the conformance suite's resumption scenario asks so):
    the SDK's stream, with its priming event, not a JSON body."""
    with session(gateway, accept="text/event-stream, application/json") as streamed:
        answer = streamed.request("tools/call", ECHO)
    assert answer.headers["content-type"].startswith("text/event-stream")
    assert answer_of(answer)["result"]["structuredContent"] == {"message": "hello"}


def test_an_unknown_tool_is_the_same_error_either_way(gateway: HttpGateway) -> None:
    unknown = {"name": "alpha_nothing", "arguments": {}}
    with session(gateway) as fast, session(gateway, accept=PREFERS_STREAM) as streamed:
        as_json = answer_of(fast.request("tools/call", unknown))
        as_stream = answer_of(streamed.request("tools/call", unknown))
    assert as_json["error"] == as_stream["error"]
    assert as_json["error"]["code"] == -32602


def test_a_ping_of_a_session_is_answered_as_json(gateway: HttpGateway) -> None:
    with session(gateway) as fast:
        pong = fast.request("ping", {})
    assert pong.headers["content-type"] == "application/json"
    assert pong.json() == {"jsonrpc": "2.0", "id": fast.next_id, "result": {}}


def test_a_session_without_its_standalone_stream_gets_the_stream(gateway: HttpGateway) -> None:
    """Its backend's logs of the call could reach it nowhere else."""
    with session(gateway, standalone=False) as bare:
        answer = bare.request("tools/call", ECHO)
    assert answer.headers["content-type"].startswith("text/event-stream")
    assert answer_of(answer)["result"]["structuredContent"] == {"message": "hello"}


def test_a_client_that_prefers_a_stream_can_resume_it_after_its_priming_event(gateway: HttpGateway) -> None:
    with session(gateway, accept=PREFERS_STREAM) as streamed:
        answer = streamed.request("tools/call", ECHO)
        priming, *_ = sse_events(answer.text)
        assert priming.get("id") and priming.get("data", "") == "" and int(priming["retry"]) > 0
        # The stream was "lost" after its priming event: the client reconnects from there.
        headers = {**streamed.headers, "Accept": "text/event-stream", "Last-Event-ID": priming["id"]}
        with streamed.http.stream("GET", gateway.url, headers=headers) as replay:
            assert replay.status_code == 200
            data = next(line for line in replay.iter_lines() if line.startswith("data:") and line[5:].strip())
    replayed = json.loads(data[5:])
    assert replayed["id"] == streamed.next_id and replayed["result"] == answer_of(answer)["result"]


def _modern(gateway: HttpGateway, accept: str, params: dict[str, Any]) -> httpx2.Response:
    meta = {
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "t", "version": "1"},
    }
    headers = {
        **gateway.headers,
        "Accept": accept,
        "MCP-Protocol-Version": MODERN,
        "Mcp-Method": "tools/call",
        "Mcp-Name": params["name"],
    }
    message = {"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {**params, "_meta": meta}}
    return httpx2.post(gateway.url, json=message, headers=headers, timeout=30)


@pytest.mark.parametrize("tool", [ECHO, {"name": "alpha_nothing", "arguments": {}}], ids=["echo", "unknown"])
def test_a_2026_07_28_call_is_answered_as_the_sdk_answers_it(
    gateway: HttpGateway, tool: dict[str, Any]
) -> None:
    fast = _modern(gateway, TAKES_JSON, tool)
    through_the_sdk = _modern(gateway, PREFERS_STREAM, tool)
    assert fast.headers["content-type"] == "application/json"
    assert "mcp-session-id" not in fast.headers
    assert fast.status_code == through_the_sdk.status_code
    assert answer_of(fast) == answer_of(through_the_sdk)


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ([("Mcp-Name", "alpha_add")], "does not match"),  # the header names another tool than the body
        ([("Mcp-Name", "alpha_add"), ("Mcp-Name", "alpha_echo")], "more than once"),  # the last one right
    ],
    ids=["mismatch", "duplicate"],
)
def test_a_2026_07_28_call_whose_headers_are_wrong_is_refused_by_the_sdks_ladder(
    gateway: HttpGateway, extra: list[tuple[str, str]], message: str
) -> None:
    meta = {
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientCapabilities": {},
    }
    call = {"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": {**ECHO, "_meta": meta}}
    headers = [
        *gateway.headers.items(),
        ("Content-Type", "application/json"),
        ("Accept", TAKES_JSON),
        ("MCP-Protocol-Version", MODERN),
        ("Mcp-Method", "tools/call"),
        *extra,
    ]
    answer = httpx2.post(gateway.url, content=json.dumps(call), headers=headers, timeout=30)
    assert answer.status_code == 400, answer.text
    assert answer.json()["error"]["code"] == HEADER_MISMATCH and message in answer.json()["error"]["message"]


def test_a_fast_call_is_cancelled_by_notifications_cancelled(gateway: HttpGateway, tmp_path: Path) -> None:
    outcome: list[httpx2.Response] = []
    with session(gateway) as fast:
        fast.next_id += 1
        call = {
            "jsonrpc": "2.0",
            "id": fast.next_id,
            "method": "tools/call",
            "params": {"name": "alpha_sleep", "arguments": {"seconds": 60}},
        }
        calling = threading.Thread(target=lambda: outcome.append(fast.post(call)))
        calling.start()
        cancel = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": call["id"]}}
        with httpx2.Client(timeout=30) as other:
            # Until the call is in flight, a cancellation names nothing the gateway holds (202 all the same).
            while calling.is_alive():
                refused = other.post(gateway.url, json=cancel, headers=fast.headers)
                assert refused.status_code == 202
                calling.join(timeout=0.2)
    answer = outcome[0]
    assert answer.headers["content-type"] == "application/json"
    assert answer.json()["error"] == {"code": -32800, "message": "Request cancelled"}


@pytest.mark.parametrize(
    ("headers", "status"),
    [
        ({"Authorization": "Bearer wrong"}, 401),
        ({"Origin": "http://evil.example"}, 403),
        ({"Host": "evil.example"}, 421),
    ],
    ids=["token", "origin", "host"],
)
def test_every_check_of_the_gate_stands_in_front_of_the_fast_path(
    gateway: HttpGateway, headers: dict[str, str], status: int
) -> None:
    with session(gateway) as fast:
        fast.next_id += 1
        answer = fast.post(
            {"jsonrpc": "2.0", "id": fast.next_id, "method": "tools/call", "params": ECHO}, **headers
        )
    assert answer.status_code == status, answer.text
