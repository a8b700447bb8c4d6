"""What the shim remembers of a session (``SessionMemory``): which host requests still wait for
an answer, told apart by their ids exactly as the host wrote them."""

from __future__ import annotations

import json
from typing import Any

from mcpfleet.daemon_client.shim import SessionMemory, read_message


def _line(document: dict[str, Any]) -> bytearray:
    return bytearray(json.dumps(document).encode())


def _request(request_id: Any) -> bytearray:
    return _line({"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": {"name": "t"}})


def _answer(request_id: Any) -> bytearray:
    return _line({"jsonrpc": "2.0", "id": request_id, "result": {"content": []}})


def test_ids_of_other_json_types_are_other_requests() -> None:
    memory = SessionMemory()
    ids: list[Any] = [1, "1", True, 1.0, 10**30]
    for request_id in ids:
        line = _request(request_id)
        assert memory.from_host(read_message(line), line)
    assert sorted(memory.host_requests.values(), key=repr) == sorted(ids, key=repr)
    memory.from_daemon(read_message(_answer(1)))
    memory.from_daemon(read_message(_answer(10**30)))
    # Only the integer 1 and the big integer were answered: the string, the boolean and the float wait.
    assert sorted(memory.host_requests.values(), key=repr) == sorted(["1", True, 1.0], key=repr)
    lost = memory.connection_lost()
    assert sorted(lost, key=repr) == sorted(["1", True, 1.0], key=repr)
    assert memory.host_requests == {}
