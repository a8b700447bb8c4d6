"""A server's ``tools/list`` answers, screened before the SDK reads them.

The SDK validates a listing whole: one tool it cannot read (an ``inputSchema`` that is not an
object schema, a name that is not a string) fails the whole ``tools/list``, hence the whole
server. And a tool whose text holds a lone surrogate (``"\\ud800"``, valid JSON escapes that no
UTF-8 can carry) cannot be cached, served or printed. So each tool of an answer is checked on
its own, against the very schema the SDK applies for the protocol revision the connection
speaks: a tool that fails is left out, with one warning per answer naming the server and the
tools, and the rest of the server's tools load.

A listing is also bounded: an answer holding more tools than the server's cap
(``maxTools``, ``DEFAULT_MAX_TOOLS``) keeps the first ones only, before the SDK builds a model
of each; ``ServerConnection.list_tools`` stops asking for pages once the cap is reached.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

from mcp_types import JSONRPCRequest, JSONRPCResponse, RequestId
from mcp_types import methods as sdk_methods
from pydantic import ValidationError

from mcpfleet.config.model import DEFAULT_MAX_TOOLS

logger = logging.getLogger(__name__)

FALLBACK_PROTOCOL_VERSION = "2025-11-25"
"""The revision a listing is checked against before the handshake settled one (the SDK's own
fallback)."""
NAMED_IN_WARNING = 5
"""How many left-out tools one warning names; the others are counted."""
PENDING_LISTINGS = 64
"""How many ``tools/list`` requests are remembered while unanswered (a server that never
answers must not grow the set)."""


class ToolScreen:
    """Screens the answers to one connection's ``tools/list`` requests (see the module)."""

    def __init__(self, server: str, max_tools: int = DEFAULT_MAX_TOOLS) -> None:
        self.server = server
        self.max_tools = max_tools
        self.protocol_version: str | None = None
        """The revision the connection speaks, once its handshake settled it."""
        self.cut_answers = 0
        """How many answers held more tools than the cap (read by ``list_tools``)."""
        self._pending: dict[RequestId, None] = {}

    def note_request(self, message: object) -> None:
        """Remember the id of an outgoing ``tools/list`` request."""
        if isinstance(message, JSONRPCRequest) and message.method == "tools/list":
            if len(self._pending) >= PENDING_LISTINGS:
                self._pending.pop(next(iter(self._pending)))
            self._pending[message.id] = None

    def screen(self, message: object) -> None:
        """Screen, in place, an answer to a remembered ``tools/list`` request."""
        if not isinstance(message, JSONRPCResponse) or message.id not in self._pending:
            return
        del self._pending[message.id]
        tools = message.result.get("tools")
        if not isinstance(tools, list):
            return  # not a listing the SDK can read at all: its own error says so
        kept: list[Any] = []
        left_out: list[str] = []
        version = self.protocol_version or FALLBACK_PROTOCOL_VERSION
        # Each tool is checked inside the answer's other fields, which the schema requires too.
        answer = {key: value for key, value in message.result.items() if key != "tools"}
        for index, tool in enumerate(tools):
            if len(kept) >= self.max_tools:
                self.cut_answers += 1
                # No further page either: the cap is reached.
                message.result.pop("nextCursor", None)
                break
            reason = unusable_reason(tool, version, answer)
            if reason is None:
                kept.append(tool)
            else:
                left_out.append(f"{describe_tool(tool, index)} ({reason})")
        if left_out:
            named = ", ".join(left_out[:NAMED_IN_WARNING])
            more = len(left_out) - NAMED_IN_WARNING
            logger.warning(
                'MCP server "%s" listed %d tool%s that cannot be used, left out: %s%s; the server '
                "must fix them (its other tools are used)",
                self.server,
                len(left_out),
                "" if len(left_out) == 1 else "s",
                named,
                f" and {more} more" if more > 0 else "",
            )
        message.result["tools"] = kept


def unusable_reason(tool: Any, protocol_version: str, answer: dict[str, Any] | None = None) -> str | None:
    """Why one listed tool cannot be used, or ``None`` when it can; ``answer`` holds the other
    fields of the ``tools/list`` result it came in."""
    if not isinstance(tool, dict):
        return "not a JSON object"
    surrogate_in = _lone_surrogate_field(tool)
    if surrogate_in is not None:
        return f"a lone surrogate in its {surrogate_in}"
    try:
        sdk_methods.validate_server_result(
            "tools/list", protocol_version, {**(answer or {}), "tools": [tool]}
        )
    except ValidationError as error:
        for problem in error.errors():
            location = problem["loc"]
            # ("tools", 0, ...) is the tool's own fault; the rest of the answer's is the SDK's to report.
            if tuple(location[:2]) == ("tools", 0):
                where = ".".join(str(part) for part in location[2:]) or "the tool"
                return f"{where}: {problem['msg']}"
        return None
    except (KeyError, ValueError):
        return None  # a revision the SDK has no schema for: the SDK's own validation decides
    return None


def describe_tool(tool: Any, index: int) -> str:
    """The tool's name as a warning can print it (escaped), or its place in the answer."""
    name = tool.get("name") if isinstance(tool, dict) else None
    if isinstance(name, str):
        return ascii(name)
    return f"the tool at index {index}"


def _lone_surrogate_field(tool: dict[str, Any]) -> str | None:
    """``name`` or ``text`` when a string of the tool holds a lone surrogate, else ``None``."""
    name = tool.get("name")
    if isinstance(name, str) and _has_lone_surrogate(name):
        return "name"
    return "text" if any(_has_lone_surrogate(text) for text in _strings(tool)) else None


def _has_lone_surrogate(text: str) -> bool:
    if text.isascii():
        return False
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def _strings(value: Any, depth: int = 0) -> Iterator[str]:
    """Every key and string value inside ``value`` (bounded depth: the SDK refuses deeper)."""
    if depth > 64:
        return
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for key, item in value.items():
            if isinstance(key, str):
                yield key
            yield from _strings(item, depth + 1)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item, depth + 1)


__all__ = ["ToolScreen", "unusable_reason"]
