"""Notification floods folded by the stdio reader, on a clock the test gives (no process).

Repeats of a parameterless ``list_changed`` (per method) and of one call's progress (per
token) come out as the first at once and the latest when the window ends; server logs are
bounded per second; everything else passes untouched, and the order the server wrote is
kept. The transport's timer (a held notification delivered while the server is quiet) is
shown against a real process in ``tests/integration/client/test_client_stdio.py``.
"""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from mcpfleet.transport.folding import (
    FOLD_WINDOW_S,
    FOLDABLE_MAX_BYTES,
    LOG_MESSAGES_PER_WINDOW,
    LOG_WINDOW_S,
    fold_key,
)
from mcpfleet.transport.stdio import MessageReader

LIMIT = 1 << 20
TOOLS = "notifications/tools/list_changed"
PROMPTS = "notifications/prompts/list_changed"
RESOURCES = "notifications/resources/list_changed"


def line(message: dict[str, Any]) -> bytes:
    return json.dumps(message).encode() + b"\n"


def changed(method: str) -> bytes:
    return line({"jsonrpc": "2.0", "method": method, "params": {}})


def progress(token: int | str, value: int) -> bytes:
    params = {"progressToken": token, "progress": value, "message": f"step {value}"}
    return line({"jsonrpc": "2.0", "method": "notifications/progress", "params": params})


def log(text: str) -> bytes:
    params = {"level": "info", "logger": "server", "data": text}
    return line({"jsonrpc": "2.0", "method": "notifications/message", "params": params})


def response(request_id: int) -> bytes:
    return line({"jsonrpc": "2.0", "id": request_id, "result": {"n": request_id}})


def fed(reader: MessageReader, data: bytes, now: float) -> list[dict[str, Any]]:
    return [dumped(message) for message in reader.feed(data, now)]


def released(reader: MessageReader, now: float) -> list[dict[str, Any]]:
    return [dumped(message) for message in reader.release_due(now)]


def dumped(message: Any) -> dict[str, Any]:
    result: dict[str, Any] = message.message.model_dump(by_alias=True, mode="json", exclude_none=True)
    return result


def methods(messages: list[dict[str, Any]]) -> list[str]:
    return [message.get("method", f"id {message.get('id')}") for message in messages]


def test_repeats_come_out_as_the_first_at_once_and_the_last_when_the_window_ends() -> None:
    reader = MessageReader("flood", LIMIT)
    assert methods(fed(reader, changed(TOOLS), 10.0)) == [TOOLS]
    assert fed(reader, changed(TOOLS) * 50, 10.01) == []
    assert reader.next_release_at == 10.0 + FOLD_WINDOW_S
    assert released(reader, 10.0 + FOLD_WINDOW_S / 2) == []
    # The server has gone quiet: the last change still comes out, once.
    assert methods(released(reader, 10.0 + FOLD_WINDOW_S)) == [TOOLS]
    assert reader.next_release_at is None
    # A repeat right after the trailing one belongs to the same run: held again.
    later = 10.0 + FOLD_WINDOW_S + 0.001
    assert fed(reader, changed(TOOLS), later) == []
    assert methods(released(reader, later + FOLD_WINDOW_S)) == [TOOLS]
    # Once a window passes with nothing held, the run is over: the next one goes at once.
    quiet = later + 3 * FOLD_WINDOW_S
    assert released(reader, quiet) == []
    assert methods(fed(reader, changed(TOOLS), quiet + 0.001)) == [TOOLS]
    assert reader.folder.folded == 51


def test_distinct_methods_and_tokens_are_never_folded_into_each_other() -> None:
    reader = MessageReader("flood", LIMIT)
    burst = changed(TOOLS) + changed(PROMPTS) + progress(1, 1) + progress("b", 1) + changed(RESOURCES)
    first = fed(reader, burst, 0.0)
    assert methods(first) == [TOOLS, PROMPTS, "notifications/progress", "notifications/progress", RESOURCES]
    repeats = (
        progress(1, 2)
        + changed(PROMPTS)
        + progress("b", 2)
        + changed(TOOLS)
        + progress(1, 3)
        + changed(PROMPTS)
    )
    assert fed(reader, repeats, 0.01) == []
    due = released(reader, FOLD_WINDOW_S)
    # One of each, the latest, in the order those latest ones arrived.
    assert methods(due) == [
        "notifications/progress",
        TOOLS,
        "notifications/progress",
        PROMPTS,
    ]
    assert [m["params"] for m in due if m["method"] == "notifications/progress"] == [
        {"progressToken": "b", "progress": 2, "message": "step 2"},
        {"progressToken": 1, "progress": 3, "message": "step 3"},
    ]


def test_a_message_that_is_delivered_first_releases_the_held_ones_so_order_is_kept() -> None:
    reader = MessageReader("flood", LIMIT)
    fed(reader, changed(TOOLS) + progress(7, 1), 0.0)
    out = fed(reader, changed(TOOLS) + progress(7, 2) + b"banner\n\n" + progress(7, 3) + response(7), 0.01)
    # The banner and the blank line are not messages: they do not release anything.
    assert methods(out) == [TOOLS, "notifications/progress", "id 7"]
    assert out[1]["params"]["progress"] == 3
    assert reader.next_release_at is None


def test_a_held_line_never_overtakes_one_held_earlier() -> None:
    reader = MessageReader("flood", LIMIT)
    quarter = FOLD_WINDOW_S / 4
    fed(reader, progress(1, 0), 0.0)  # its window ends first
    fed(reader, progress(2, 1), quarter)
    assert fed(reader, progress(2, 2), 2 * quarter) == []
    assert fed(reader, progress(1, 3), 3 * quarter) == []
    # Only token 1's window has ended, but token 2's held value came before it.
    due = released(reader, FOLD_WINDOW_S)
    assert [m["params"]["progress"] for m in due] == [2, 3]


def test_server_logs_are_bounded_per_second() -> None:
    reader = MessageReader("chatty", LIMIT)
    first = fed(reader, b"".join(log(f"line {n}") for n in range(30)) + response(1), 0.0)
    assert [m.get("params", {}).get("data") for m in first[:-1]] == [
        f"line {n}" for n in range(LOG_MESSAGES_PER_WINDOW)
    ]
    assert first[-1]["id"] == 1
    assert reader.folder.dropped_log_messages == 30 - LOG_MESSAGES_PER_WINDOW
    assert reader.next_release_at is None  # dropped, not held
    assert len(fed(reader, log("next second"), LOG_WINDOW_S)) == 1


def test_look_alikes_are_never_folded() -> None:
    look_alikes: list[dict[str, Any]] = [
        # A request, not a notification: it waits for an answer.
        {"jsonrpc": "2.0", "id": 4, "method": TOOLS},
        {
            "jsonrpc": "2.0",
            "method": "notifications/progress",
            "id": 5,
            "params": {"progressToken": 1, "progress": 1},
        },
        {
            "jsonrpc": "2.0",
            "method": "notifications/message",
            "id": 6,
            "params": {"level": "info", "data": "x"},
        },
        # Parameters that say more than "list again".
        {"jsonrpc": "2.0", "method": TOOLS, "params": {"_meta": {"reason": "x"}}},
        # A response that only mentions those methods.
        {"jsonrpc": "2.0", "id": 8, "result": {"method": TOOLS, "text": '"notifications/progress"'}},
        # Progress without a usable token.
        {
            "jsonrpc": "2.0",
            "method": "notifications/progress",
            "params": {"progressToken": True, "progress": 1},
        },
        {"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progress": 1}},
        # Too large to be worth inspecting.
        {
            "jsonrpc": "2.0",
            "method": "notifications/progress",
            "params": {"progressToken": 1, "progress": 1, "message": "m" * FOLDABLE_MAX_BYTES},
        },
    ]
    for message in look_alikes:
        assert fold_key(line(message).rstrip(b"\n")) is None, message
    reader = MessageReader("careful", LIMIT)
    stream = b"".join(line(message) for message in look_alikes)
    for now in (0.0, 0.001, 0.002):
        assert fed(reader, stream, now) == look_alikes
    assert reader.folder.withheld == 0


def test_the_shapes_servers_write_are_recognised() -> None:
    compact = b'{"method":"notifications/tools/list_changed","jsonrpc":"2.0"}'
    spaced = b' { "params" : { } , "jsonrpc" : "2.0" , "method" : "notifications/prompts/list_changed" } '
    assert fold_key(compact) == (TOOLS, "")
    assert fold_key(spaced) == (PROMPTS, "")
    assert fold_key(progress("t", 3).rstrip()) == ("notifications/progress", "t")
    assert fold_key(log("x").rstrip()) == ("notifications/message", "")
    # Two methods: which one counts is the parser's choice, never guessed here.
    twice = b'{"jsonrpc":"2.0","method":"%s","method":"%s"}' % (TOOLS.encode(), PROMPTS.encode())
    assert fold_key(twice) is None


# -- any interleaving -------------------------------------------------------------------------

KINDS = ["tools", "prompts", "progress 1", "progress 2", "response", "log", "banner"]
IDENTIFIED = {"progress 1", "progress 2", "response", "log"}
# Pauses that land arrivals and timer ticks inside, at and past the ends of windows.
PAUSES_S = [0.0, FOLD_WINDOW_S / 4, FOLD_WINDOW_S / 2, FOLD_WINDOW_S, 2 * FOLD_WINDOW_S]


@given(
    steps=st.lists(st.tuples(st.sampled_from(KINDS), st.sampled_from(PAUSES_S), st.booleans()), max_size=60)
)
def test_folding_keeps_every_message_and_the_last_of_every_run_in_order(
    steps: list[tuple[str, float, bool]],
) -> None:
    """Whatever the interleaving and timing: responses all arrive, in order; a change or a
    progress value is never lost after the last message before it; nothing is reordered."""
    reader = MessageReader("fuzzed", LIMIT)
    now = 0.0
    written: list[tuple[str, int]] = []  # (what, the number that identifies it)
    delivered: list[dict[str, Any]] = []
    for number, (kind, pause, tick) in enumerate(steps):
        now += pause
        if tick:  # the transport's timer, when it fires before the next chunk
            delivered += released(reader, now)
        data = {
            "tools": changed(TOOLS),
            "prompts": changed(PROMPTS),
            "progress 1": progress(1, number),
            "progress 2": progress(2, number),
            "response": response(number),
            "log": log(str(number)),
            "banner": b"server ready\n",
        }[kind]
        written.append((kind, number))
        delivered += fed(reader, data, now)
    delivered += [dumped(message) for message in reader.release_all(now)]

    def identity(message: dict[str, Any]) -> tuple[str, int | None]:
        method = message.get("method")
        if method is None:
            return "response", message["id"]
        if method == "notifications/progress":
            return f"progress {message['params']['progressToken']}", message["params"]["progress"]
        if method == "notifications/message":
            return "log", int(message["params"]["data"])
        return ("tools" if method == TOOLS else "prompts"), None

    seen = [identity(message) for message in delivered]
    # Responses: all of them, in order.
    assert [n for kind, n in seen if kind == "response"] == [n for kind, n in written if kind == "response"]
    # Numbered messages come out in the order they were written (never reordered, never twice).
    numbered = [n for kind, n in seen if n is not None]
    assert numbered == sorted(set(numbered))
    # The last progress of each token is always delivered.
    for token in ("progress 1", "progress 2"):
        sent = [n for kind, n in written if kind == token]
        got = [n for kind, n in seen if kind == token]
        assert got[-1:] == sent[-1:]
    # After the last change of a kind, a notification of that kind follows every numbered
    # message written before that change.
    for kind in ("tools", "prompts"):
        positions = [index for index, (what, _) in enumerate(written) if what == kind]
        if not positions:
            assert (kind, None) not in seen
            continue
        before_last = {n for what, n in written[: positions[-1]] if what in IDENTIFIED}
        last_delivered = max(index for index, (what, _) in enumerate(seen) if what == kind)
        assert all(n not in before_last for _, n in seen[last_delivered + 1 :])
    # Logs are bounded, never reordered, never invented.
    assert {n for kind, n in seen if kind == "log"} <= {n for kind, n in written if kind == "log"}
    assert "banner" not in [kind for kind, _ in seen]
