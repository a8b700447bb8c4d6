"""Telemetry in the daemon: a host session's call, relayed by the shim, is traced in the daemon (the
gateway of that session runs there) from the host's ``_meta.traceparent`` to the backend; the
daemon reads its ``OTEL_*`` variables from the session that started it and no backend inherits
them (an exporter's headers may hold a key)."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest
from tests.integration.daemon.daemon_harness import fake, user_config
from tests.integration.daemon.shim_harness import ShimHost
from tests.integration.daemon.test_daemon_fast_path import ask, open_session
from tests.integration.telemetry.otlp_receiver import Receiver, running_receiver
from tests.servers.fixtures import SERVERS_DIR

CLIENT_TRACE_ID = "0af7651916cd43dd8448eb211c80319c"
CLIENT_SPAN_ID = "b7ad6b7169203331"


def test_a_session_s_call_is_traced_in_the_daemon_and_no_backend_sees_the_variables(
    isolated_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    trace_server = {
        "command": sys.executable,
        "args": [str(SERVERS_DIR / "trace_server.py"), "--name", "pipe"],
    }
    user_config({"pipe": trace_server, "env": fake("env", "--tool", "env")})
    with running_receiver() as receiver:
        for name in [name for name in os.environ if name.startswith("OTEL_")]:
            monkeypatch.delenv(name)
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", receiver.endpoint)
        monkeypatch.setenv("OTEL_BSP_SCHEDULE_DELAY", "50")
        with ShimHost("serve", cwd=isolated_home) as host:
            open_session(host, "pipe_trace")
            open_session(host, "env_env")
            meta = {"traceparent": f"00-{CLIENT_TRACE_ID}-{CLIENT_SPAN_ID}-01"}
            answer = ask(host, "tools/call", {"name": "pipe_trace", "arguments": {}, "_meta": meta})
            received = json.loads(answer["result"]["content"][0]["text"])
            assert received["meta"]["traceparent"].split("-")[1] == CLIENT_TRACE_ID, received
            backend_parent = received["meta"]["traceparent"].split("-")[2]

            def gateway_span_in(got: Receiver) -> bool:
                return any(span.parent_span_id == CLIENT_SPAN_ID for span in got.spans)

            receiver.wait_for(gateway_span_in)
            spans = receiver.by_id()
            connection = spans[backend_parent]
            gateway = spans[connection.parent_span_id]
            assert (connection.name, gateway.name) == ("connection tools/call", "gateway tools/call")
            assert gateway.parent_span_id == CLIENT_SPAN_ID
            assert gateway.service == connection.service == "mcpfleet-daemon"

            seen = ask(
                host, "tools/call", {"name": "env_env", "arguments": {"name": "OTEL_EXPORTER_OTLP_ENDPOINT"}}
            )
            assert seen["result"]["structuredContent"]["value"] is None, seen
