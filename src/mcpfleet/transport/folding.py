"""Notification floods from a stdio server, folded on the raw line before any parsing.

Every message that reaches the SDK costs a JSON-RPC validation, a dispatch through its
tasks and a callback: a server announcing ``list_changed`` every millisecond kept a third
of a core busy. What such floods say is small, so repeats are folded before they cost that:

* a parameterless ``notifications/{tools,resources,prompts}/list_changed`` only says "list
  again", and one call's ``notifications/progress`` (per progress token) only matters by its
  latest value: the first is delivered at once, the repeats within ``FOLD_WINDOW_S`` are
  held as one (the latest), delivered when the window ends. The reader wakes for that even
  when the server goes quiet, so a real last change is never lost, and progress still
  re-arms its call's deadline, at most one window late;
* ``notifications/message`` (a server's logs, which mcpfleet only debug-logs) is bounded:
  ``LOG_MESSAGES_PER_WINDOW`` per ``LOG_WINDOW_S`` are delivered, the rest dropped.

Folding never reorders: before any other message is delivered, the held ones go first, and
a held line is never delivered ahead of one held since earlier.

Recognising a foldable line costs a lookup when the same bytes came recently (a flood
repeats itself), else a substring test, then a regex over the whole line (``list_changed``)
or ``json.loads`` of a small line (progress, logs), never a JSON-RPC validation; a line
that is not exactly one of these shapes is left to the reader untouched.
"""

from __future__ import annotations

import json
import logging
import re
from collections import deque

from mcpfleet.contract import notifications

logger = logging.getLogger(__name__)

FOLD_WINDOW_S = 0.05
"""Repeats of one ``list_changed`` method, or of one call's progress, closer than this are
delivered as one: the first at once, the latest when the window ends."""
LOG_WINDOW_S = 1.0
LOG_MESSAGES_PER_WINDOW = 10
"""Server log messages delivered per ``LOG_WINDOW_S``; the rest of that window's are dropped."""
FLOOD_WARNING_FOLDS = 100
"""Repeats of one ``list_changed`` folded in one uninterrupted run before mcpfleet says, once,
that the server floods."""
FOLDABLE_MAX_BYTES = 16 * 1024
"""Longer lines are never inspected: progress and log notifications are small, and a large
line parsed twice would cost more than folding saves."""
KNOWN_LINES = 32
KNOWN_LINE_MAX_BYTES = 1024
"""Foldable lines remembered with their key, so a repeat byte for byte (a ``list_changed``,
the same log line) is recognised by a lookup instead of a parse."""
MAX_FOLDED_KEYS = 1024
"""Distinct notifications followed at once (progress tokens are the server's to choose);
past this, a new one is delivered unfolded rather than remembered."""

FoldKey = tuple[str, str | int]
"""What a foldable line repeats: its method, and the progress token for progress."""
Line = bytes | bytearray

_WS = rb"[ \t\r]*"
_COMMA = _WS + rb"," + _WS
_LIST_CHANGED_MEMBER = (
    rb'(?:"jsonrpc"' + _WS + rb":" + _WS + rb'"2\.0"'
    rb'|"method"' + _WS + rb":" + _WS + rb'"notifications/(?:tools|resources|prompts)/list_changed"'
    rb'|"params"' + _WS + rb":" + _WS + rb"\{" + _WS + rb"\})"
)
# Two or three members, each one of the three above, in any order: with "jsonrpc" and
# "method" each counted once, the line can only be that notification.
_OPEN = _WS + rb"\{" + _WS
_CLOSE = _WS + rb"\}" + _WS
_MEMBERS = (
    _LIST_CHANGED_MEMBER + _COMMA + _LIST_CHANGED_MEMBER + rb"(?:" + _COMMA + _LIST_CHANGED_MEMBER + rb")?"
)
_PARAMETERLESS_LIST_CHANGED = re.compile(_OPEN + _MEMBERS + _CLOSE)
_LIST_CHANGED_METHOD = re.compile(rb"notifications/(?:tools|resources|prompts)/list_changed")
_NOTIFICATION_MEMBERS = frozenset({"jsonrpc", "method", "params"})
_LOG_MESSAGE = notifications.LOG_MESSAGE
_PROGRESS = notifications.PROGRESS


def fold_key(line: Line) -> FoldKey | None:
    """What ``line`` repeats if it is a notification that may be folded, else ``None``.

    ``(method, "")`` for a parameterless ``list_changed`` or a log message, ``(method,
    token)`` for progress. Only a notification (no ``id``, nothing but ``jsonrpc``,
    ``method`` and ``params``) qualifies: a request or a response is never folded.
    """
    if len(line) > FOLDABLE_MAX_BYTES or b"notifications/" not in line:
        return None
    if (
        b"/list_changed" in line
        and _PARAMETERLESS_LIST_CHANGED.fullmatch(line)
        and line.count(b'"jsonrpc"') == 1
        and line.count(b'"method"') == 1
    ):
        method = _LIST_CHANGED_METHOD.search(line)
        assert method is not None  # the full match holds one
        return method.group(0).decode(), ""
    if b'"notifications/progress"' not in line and b'"notifications/message"' not in line:
        return None
    try:
        message = json.loads(line.decode())
    except (ValueError, RecursionError):
        return None
    if (
        not isinstance(message, dict)
        or message.keys() - _NOTIFICATION_MEMBERS
        or message.get("jsonrpc") != "2.0"
        or not isinstance(params := message.get("params"), dict)
    ):
        return None
    method = message.get("method")
    if method == _LOG_MESSAGE:
        return _LOG_MESSAGE, ""
    token = params.get("progressToken")
    if method == _PROGRESS and isinstance(token, str | int) and not isinstance(token, bool):
        return _PROGRESS, token
    return None


class _Window:
    __slots__ = ("ends_at", "folded_in_run")

    def __init__(self, ends_at: float) -> None:
        self.ends_at = ends_at
        self.folded_in_run = 0
        """Repeats folded since the run of back-to-back windows began (for the flood warning)."""


class NotificationFolder:
    """Decides, line by line, which notifications of one server are delivered, held or dropped.

    Time is the caller's (monotonic seconds), so the logic runs without a clock or a process.
    Call ``release_due`` when time passes (before ``admit``ting a line that arrived later),
    and ``release_all`` before delivering any message that ``admit`` let through.
    """

    def __init__(self, server_name: str) -> None:
        self.server_name = server_name
        self.folded = 0
        """Notifications folded into a later one."""
        self.dropped_log_messages = 0
        self._windows: dict[FoldKey, _Window] = {}
        # Window ends in the order they were set; all windows are as long, so in time order.
        self._window_ends: deque[tuple[float, FoldKey]] = deque()
        # The latest folded line of each key, in the order those lines arrived.
        self._held: dict[FoldKey, Line] = {}
        self._log_window_ends_at = float("-inf")
        self._logs_in_window = 0
        self._reported: set[str] = set()
        self._known_lines: dict[bytes, FoldKey] = {}

    @property
    def withheld(self) -> int:
        """Notifications not delivered as they came (folded or dropped): a count that grows
        while the server floods."""
        return self.folded + self.dropped_log_messages

    @property
    def holds(self) -> bool:
        """Whether a notification is held for later (none is, unless the server floods)."""
        return bool(self._held)

    @property
    def next_release_at(self) -> float | None:
        """When a held line may be due (``None`` when none is held)."""
        if not self._held:
            return None
        return self._window_ends[0][0]

    def admit(self, line: Line, now: float) -> bool:
        """Whether ``line``, arriving at ``now``, is to be delivered now; when not, it is held
        for its window's end (it replaces an earlier held repeat) or, for a log message over
        the budget, dropped."""
        if b"notifications/" not in line:
            return True  # not a notification that folds: a response, a request, anything else
        key = self._key_of(line)
        if key is None:
            return True
        if key[0] == _LOG_MESSAGE:
            return self._admit_log_message(now)
        window = self._windows.get(key)
        if window is None or (key not in self._held and now >= window.ends_at):
            if window is None and len(self._windows) >= MAX_FOLDED_KEYS:
                return True
            self._open_window(key, now)
            return True
        self._held.pop(key, None)
        self._held[key] = line
        self.folded += 1
        window.folded_in_run += 1
        if window.folded_in_run == FLOOD_WARNING_FOLDS:
            self._report_flood(key[0])
        return False

    def release_due(self, now: float) -> list[Line]:
        """The held lines whose window has ended by ``now``, and those that arrived before
        them (so nothing is reordered), in their order of arrival."""
        due: set[FoldKey] = set()
        while self._window_ends and self._window_ends[0][0] <= now:
            ends_at, key = self._window_ends.popleft()
            window = self._windows.get(key)
            if window is None or window.ends_at != ends_at:
                continue  # a window set later replaced this one
            if key in self._held:
                due.add(key)
            else:
                del self._windows[key]  # the run is over: the next one is delivered at once
        if not due:
            return []
        held = list(self._held)
        last_due = max(position for position, key in enumerate(held) if key in due)
        return self._release(held[: last_due + 1], now)

    def release_all(self, now: float) -> list[Line]:
        """Every held line, in order of arrival: they go before the next message delivered."""
        return self._release(list(self._held), now) if self._held else []

    def _release(self, keys: list[FoldKey], now: float) -> list[Line]:
        released = [self._held.pop(key) for key in keys]
        for key in keys:
            # Delivering the held line opens a new window: the run of repeats goes on folding.
            window = self._windows[key]
            window.ends_at = now + FOLD_WINDOW_S
            self._window_ends.append((window.ends_at, key))
        return released

    def _key_of(self, line: Line) -> FoldKey | None:
        if len(line) > KNOWN_LINE_MAX_BYTES:
            return fold_key(line)
        raw = bytes(line)
        key = self._known_lines.get(raw)
        if key is None:
            key = fold_key(raw)
            if key is not None:
                if len(self._known_lines) >= KNOWN_LINES:
                    self._known_lines.clear()
                self._known_lines[raw] = key
        return key

    def _open_window(self, key: FoldKey, now: float) -> None:
        window = self._windows[key] = _Window(now + FOLD_WINDOW_S)
        self._window_ends.append((window.ends_at, key))

    def _admit_log_message(self, now: float) -> bool:
        if now >= self._log_window_ends_at:
            self._log_window_ends_at = now + LOG_WINDOW_S
            self._logs_in_window = 0
        if self._logs_in_window < LOG_MESSAGES_PER_WINDOW:
            self._logs_in_window += 1
            return True
        self.dropped_log_messages += 1
        if _LOG_MESSAGE not in self._reported:
            self._reported.add(_LOG_MESSAGE)
            logger.debug(
                "MCP server %s logs more than %d messages in %g s; the rest of each such burst is dropped",
                self.server_name,
                LOG_MESSAGES_PER_WINDOW,
                LOG_WINDOW_S,
            )
        return False

    def _report_flood(self, method: str) -> None:
        if method in self._reported:
            return
        self._reported.add(method)
        if method == _PROGRESS:
            logger.debug(
                "MCP server %s sends progress faster than one every %g s; only the latest is delivered",
                self.server_name,
                FOLD_WINDOW_S,
            )
            return
        logger.warning(
            "MCP server %s sent %d %s notifications less than %g s apart; "
            "each run of them is delivered as one every %g s, the last one always",
            self.server_name,
            FLOOD_WARNING_FOLDS,
            method.removeprefix("notifications/"),
            FOLD_WINDOW_S,
            FOLD_WINDOW_S,
        )


__all__ = [
    "FOLD_WINDOW_S",
    "LOG_MESSAGES_PER_WINDOW",
    "LOG_WINDOW_S",
    "NotificationFolder",
    "fold_key",
]
