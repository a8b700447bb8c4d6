"""A host session's ``tools/call`` takes the daemon's fast path (``gateway.fast_path``).

The shim's line goes straight into the session's request path in the daemon: parsed once, it
is written to the backend's pipe under an id of the fast path's own (``client.raw``), and the
answer goes back to the host under the host's id. A call the fast path leaves to the SDK (one
with a progress token) reaches the backend under the SDK's integer id. The backend here says
which id it was called under (``fake_server.py``'s ``request_id`` tool), so what is asserted
is the path each call took, not how long it took.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from tests.integration.daemon.daemon_harness import fake, user_config
from tests.integration.daemon.shim_harness import ShimHost

from mcpfleet.client.raw import RAW_ID_PREFIX

LIST_TIMEOUT_S = 60.0
INITIALIZE = {
    "protocolVersion": "2025-06-18",
    "capabilities": {},
    "clientInfo": {"name": "fast-path-host", "version": "1"},
}


def ask(host: ShimHost, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
    """The answer to one request (the notifications before it are passed over)."""
    request_id = host.request(method, params)
    while True:
        document = host.receive()
        if document.get("id") == request_id and "method" not in document:
            return document


def open_session(host: ShimHost, tool: str) -> None:
    """Initialize ``host``'s session and wait until ``tool`` is served (a fresh home's backend
    joins late)."""
    ask(host, "initialize", INITIALIZE)
    host.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
    deadline = time.monotonic() + LIST_TIMEOUT_S
    while tool not in [each["name"] for each in ask(host, "tools/list")["result"]["tools"]]:
        assert time.monotonic() < deadline, f"{tool} never listed; stderr: {host.stderr}"
        time.sleep(0.1)


def backend_id(answer: dict[str, Any]) -> Any:
    """The id the backend's ``request_id`` tool was called under."""
    return json.loads(answer["result"]["content"][0]["text"])


def test_a_plain_call_takes_the_fast_path_and_one_with_progress_the_sdk(isolated_home: Path) -> None:
    user_config({"alpha": fake("alpha", "--tool", "echo", "--tool", "request_id")})
    with ShimHost("serve", cwd=isolated_home) as host:
        open_session(host, "alpha_request_id")
        plain = ask(host, "tools/call", {"name": "alpha_request_id", "arguments": {}})
        assert plain["result"].get("isError") is not True, plain
        fast_id = backend_id(plain)
        assert isinstance(fast_id, str) and fast_id.startswith(RAW_ID_PREFIX), plain
        with_progress = ask(
            host,
            "tools/call",
            {"name": "alpha_request_id", "arguments": {}, "_meta": {"progressToken": "watch"}},
        )
        assert isinstance(backend_id(with_progress), int), with_progress


def test_two_sessions_calling_one_shared_backend_each_get_their_own_answers(isolated_home: Path) -> None:
    user_config({"alpha": fake("alpha", "--tool", "echo", "--tool", "request_id")})
    calls = 25
    with ShimHost("serve", cwd=isolated_home) as first, ShimHost("serve", cwd=isolated_home) as second:
        for host in (first, second):
            open_session(host, "alpha_echo")
        # Both sessions' calls are in flight on the one backend at once, under the same host ids.
        sent: dict[int, dict[int, str]] = {0: {}, 1: {}}
        for index in range(calls):
            for number, host in enumerate((first, second)):
                message = f"session {number} call {index}"
                request_id = host.request(
                    "tools/call", {"name": "alpha_echo", "arguments": {"message": message}}
                )
                sent[number][request_id] = message
        for number, host in enumerate((first, second)):
            answered: dict[int, str] = {}
            while len(answered) < calls:
                document = host.receive()
                if "method" in document:
                    continue
                answered[document["id"]] = document["result"]["structuredContent"]["message"]
            assert answered == sent[number]
        # One backend served both: the fast path's ids are its connection's, never a session's.
        assert isinstance(backend_id(ask(first, "tools/call", {"name": "alpha_request_id"})), str)
