"""MCP tools as agent tools: naming, lookup, calls and result conversion.

These are the tool objects the manager hands out (``get_tools()``): they sit between the
manager (which owns the connections) and a session (which owns the tool registry), so they
live in the fleet, below the agent that uses them. They speak to the manager only through
the small ``ToolBackend`` protocol and never import the SDK: call results arrive either as
SDK models, which are dumped to their JSON shape, or as plain dicts of that same shape.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, ClassVar, NamedTuple, Protocol

from mcpfleet.client.definitions import ToolDefinition
from mcpfleet.contract.defaults import MAX_TOOL_NAME_LENGTH, MIN_TOOL_NAME_LENGTH, TOOL_NAME_HASH_LENGTH

__all__ = [
    "DeferredMCPTool",
    "MCPTool",
    "NamedServer",
    "ToolBackend",
    "ToolResult",
    "assign_tool_names",
    "convert_call_result",
    "mcp_tool_name",
    "resolve_tool_name",
    "servers_named_by",
]

logger = logging.getLogger(__name__)

MCP_TOOL_PREFIX = "mcp_"
_CLAUDE_PREFIX = "mcp__"
_CLAUDE_SEPARATOR = "__"

_DISALLOWED_CHARACTERS = re.compile(r"[^A-Za-z0-9_-]")
_UNDERSCORE_RUN = re.compile(r"_{2,}")


class ToolBackend(Protocol):
    """What a tool needs from the fleet; ``MCPManager`` implements it."""

    def get_provider_name(self, server_name: str) -> str | None: ...

    async def call_tool(
        self,
        server_name: str,
        tool_name: str,
        arguments: dict[str, Any],
        *,
        timeout_ms: int | None = None,
    ) -> Any: ...

    async def wait_for_connection(self, server_name: str) -> None: ...


@dataclass(frozen=True)
class ToolResult:
    """The outcome of one tool call, as the session hands it to the model.

    ``content`` keeps the server's blocks (text, image, audio, resource, resource_link);
    ``text`` is their readable rendering, with binary payloads summarised rather than
    dumped. ``details`` says which server, tool and provider answered.
    """

    content: list[dict[str, Any]]
    text: str
    structured: Any = None
    is_error: bool = False
    details: dict[str, Any] = field(default_factory=dict)


# --- naming -------------------------------------------------------------------------------------


def _sanitize(part: str, fallback: str) -> str:
    cleaned = _UNDERSCORE_RUN.sub("_", _DISALLOWED_CHARACTERS.sub("_", part)).strip("_")
    return cleaned or fallback


def _prefix_key(part: str) -> str:
    # "GitHub"/"github_x" and "my-server"/"my_server_x" are the same redundant prefix.
    return part.lower().replace("-", "_")


def _short_hash(text: str) -> str:
    # A lone surrogate (JSON can carry one, from a cache file say) must still hash, not raise.
    return hashlib.sha256(text.encode("utf-8", errors="surrogatepass")).hexdigest()[:TOOL_NAME_HASH_LENGTH]


def _with_hash_suffix(name: str, hashed: str, max_length: int) -> str:
    kept = max_length - TOOL_NAME_HASH_LENGTH - 1
    return f"{name[:kept].rstrip('_')}_{_short_hash(hashed)}"


def _check_max_length(max_length: int) -> None:
    if max_length < MIN_TOOL_NAME_LENGTH:
        raise ValueError(f"a tool name limit must be at least {MIN_TOOL_NAME_LENGTH}, not {max_length}")


def mcp_tool_name(
    server_name: str,
    tool_name: str,
    *,
    prefix: str = MCP_TOOL_PREFIX,
    max_length: int = MAX_TOOL_NAME_LENGTH,
) -> str:
    """The agent-facing name ``<prefix><server>_<tool>`` of one server's tool (``mcp_`` by
    default; the gateway serves ``<server>_<tool>``).

    Both parts are reduced to ``[A-Za-z0-9_-]`` (anything else becomes ``_``, runs of
    ``_`` collapse, edges are trimmed); a tool name that repeats the server name as its
    prefix loses it (``github`` + ``github_create_issue`` → ``mcp_github_create_issue``);
    a name longer than ``max_length`` (64) keeps its start and gains a hash of the whole, so
    it stays stable and distinct.
    """
    _check_max_length(max_length)
    server = _sanitize(server_name, "server")
    tool = _sanitize(tool_name, "tool")
    redundant_prefix = _prefix_key(server) + "_"
    if _prefix_key(tool).startswith(redundant_prefix) and len(tool) > len(redundant_prefix):
        tool = tool[len(redundant_prefix) :]
    name = f"{prefix}{server}_{tool}"
    if len(name) > max_length:
        name = _with_hash_suffix(name, name, max_length)
    return name


def assign_tool_names(
    pairs: Iterable[tuple[str, str]],
    *,
    prefix: str = MCP_TOOL_PREFIX,
    max_length: int = MAX_TOOL_NAME_LENGTH,
) -> dict[tuple[str, str], str]:
    """A unique agent-facing name for every ``(server, tool)`` pair (see ``mcp_tool_name``).

    Pairs are named in sorted order, so the same set of pairs always gets the same names
    whatever order the servers connected in: the first pair keeps a contested name and
    each later one gets a hash suffix derived from its own server and tool.
    """
    assigned: dict[tuple[str, str], str] = {}
    owner_of_name: dict[str, tuple[str, str]] = {}
    for server, tool in sorted(set(pairs)):
        base_name = mcp_tool_name(server, tool, prefix=prefix, max_length=max_length)
        name = base_name
        attempt = 0
        while name in owner_of_name:
            # The attempt counter only matters if a suffixed name is itself taken, which needs
            # a server to advertise a tool spelled exactly like another tool's suffixed name.
            name = _with_hash_suffix(base_name, f"{server}\0{tool}\0{attempt}", max_length)
            attempt += 1
        if name != base_name:
            winner_server, winner_tool = owner_of_name[base_name]
            logger.warning(
                "MCP tool name collision: %s/%s and %s/%s both map to %s; "
                "%s/%s keeps it and %s/%s is registered as %s",
                winner_server,
                winner_tool,
                server,
                tool,
                base_name,
                winner_server,
                winner_tool,
                server,
                tool,
                name,
            )
        assigned[(server, tool)] = name
        owner_of_name[name] = (server, tool)
    return assigned


def _claude_style_candidates(query: str) -> list[tuple[str, str]]:
    """Every ``(server, tool)`` reading of ``mcp__<server>__<tool>``.

    The split is tried at each ``__`` because server and tool names may contain it.
    """
    if not query.startswith(_CLAUDE_PREFIX):
        return []
    rest = query[len(_CLAUDE_PREFIX) :]
    readings: list[tuple[str, str]] = []
    start = rest.find(_CLAUDE_SEPARATOR)
    while start != -1:
        server, tool = rest[:start], rest[start + len(_CLAUDE_SEPARATOR) :]
        if server and tool:
            readings.append((server, tool))
        start = rest.find(_CLAUDE_SEPARATOR, start + 1)
    return readings


def resolve_tool_name(
    query: str, tools: Iterable[MCPTool | DeferredMCPTool]
) -> MCPTool | DeferredMCPTool | None:
    """The tool a model or a user meant by ``query``, or None when none or several match.

    Accepts the registered name, the raw ``<server>/<tool>`` label and the Claude Code
    spelling ``mcp__<server>__<tool>`` (compared after sanitising both sides, since
    Claude Code replaces the same characters mcpfleet does).
    """
    candidates = list(tools)
    by_name = [tool for tool in candidates if tool.name == query]
    if by_name:
        return _only(by_name)
    by_label = [tool for tool in candidates if tool.label == query]
    if by_label:
        return _only(by_label)
    readings = {
        (_sanitize(server, "server"), _sanitize(tool, "tool"))
        for server, tool in _claude_style_candidates(query)
    }
    return _only(
        [
            tool
            for tool in candidates
            if (_sanitize(tool.server_name, "server"), _sanitize(tool.mcp_tool_name, "tool")) in readings
        ]
    )


class NamedServer(NamedTuple):
    """What a tool name says of its server, before any server is started."""

    written: str | None
    """The server part as written; ``None`` for a bare tool name, which names no server."""
    servers: list[str]
    """The known servers it can mean (in ``mcp_a_b_c`` both ``a`` and ``a_b`` can be)."""
    tool: str
    """The rest: the tool part as written."""


def servers_named_by(query: str, server_names: Iterable[str]) -> NamedServer:
    """Which of ``server_names`` a tool name spells out, in each spelling ``resolve_tool_name``
    accepts: ``<server>/<tool>``, ``mcp__<server>__<tool>`` and ``mcp_<server>_<tool>`` (whose
    server part, as written, is read up to its next ``_``)."""
    names = list(server_names)
    if "/" in query:
        written, tool = query.split("/", 1)
        matches = [name for name in names if query.startswith(f"{name}/") and len(query) > len(name) + 1]
        return NamedServer(written, matches, tool)
    readings = _claude_style_candidates(query)
    if readings:
        spelled = {_sanitize(server, "server") for server, _ in readings}
        matches = [name for name in names if _sanitize(name, "server") in spelled]
        return NamedServer(readings[0][0], matches, readings[0][1])
    rest = query[len(MCP_TOOL_PREFIX) :]
    if query.startswith(MCP_TOOL_PREFIX) and "_" in rest:
        written, tool = rest.split("_", 1)
        matches = []
        for name in names:
            prefix = f"{MCP_TOOL_PREFIX}{_sanitize(name, 'server')}_"
            if query.startswith(prefix) and len(query) > len(prefix):
                matches.append(name)
        return NamedServer(written, matches, tool)
    return NamedServer(None, [], query)


def _only(found: list[MCPTool]) -> MCPTool | None:
    return found[0] if len(found) == 1 else None


# --- result conversion --------------------------------------------------------------------------


def _base64_size(data: str) -> int:
    """Decoded size of a base64 payload, without decoding it."""
    compact = "".join(data.split()).rstrip("=")
    return len(compact) * 3 // 4


def _describe_block(block: dict[str, Any]) -> str:
    """The readable text of one content block; binary payloads become a one-line summary."""
    block_type = block.get("type")
    if block_type == "text":
        return str(block.get("text", ""))
    if block_type in ("image", "audio"):
        label = "Image" if block_type == "image" else "Audio"
        mime_type = block.get("mimeType") or "unknown type"
        return f"[{label}: {mime_type}, {_base64_size(str(block.get('data', '')))} bytes]"
    if block_type == "resource":
        resource = block.get("resource")
        resource = resource if isinstance(resource, dict) else {}
        header = f"[Resource: {resource.get('uri', 'unknown')}]"
        if isinstance(resource.get("text"), str):
            return f"{header}\n{resource['text']}"
        if isinstance(resource.get("blob"), str):
            mime_type = resource.get("mimeType") or "binary"
            return f"{header} ({mime_type}, {_base64_size(resource['blob'])} bytes)"
        return header
    if block_type == "resource_link":
        name = block.get("name")
        summary = f"[Resource link: {block.get('uri', 'unknown')}]"
        return f"{summary} {name}" if name else summary
    return f"[{block_type} content]"


def _parsed(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return text


def _texts_carry(texts: list[str], structured: Any) -> bool:
    """True when the text blocks already say what ``structuredContent`` says.

    Servers built on the SDK wrap a return value that is not an object as
    ``{"result": value}`` and put the value itself (one text block per item of a list) in
    the text blocks: that counts as carried too, so the model does not read it twice.
    """
    if any(_parsed(text) == structured for text in texts):
        return True
    if not (isinstance(structured, dict) and set(structured) == {"result"}):
        return False
    wrapped = structured["result"]
    values = [_parsed(text) for text in texts]
    return values == [wrapped] or (isinstance(wrapped, list) and bool(wrapped) and values == wrapped)


def _result_as_dict(result: Any) -> dict[str, Any] | None:
    fields = _call_result_fields(result)
    if fields is not None:
        return fields
    if hasattr(result, "model_dump"):
        dumped = result.model_dump(by_alias=True, exclude_none=True, mode="json")
        return dumped if isinstance(dumped, dict) else None
    return result if isinstance(result, dict) else None


def _call_result_fields(result: Any) -> dict[str, Any] | None:
    """The fields of an SDK ``CallToolResult`` that a ``ToolResult`` reads, taken from the model
    without dumping the whole of it (every call pays for the dump, and it is most of what the
    conversion costs); ``None`` for anything else, which is dumped."""
    content = getattr(result, "content", None)
    if not isinstance(content, list) or not hasattr(result, "structured_content"):
        return None
    return {
        "content": [_block_as_dict(block) for block in content],
        "structuredContent": result.structured_content,
        "isError": bool(getattr(result, "is_error", False)),
    }


def _block_as_dict(block: Any) -> Any:
    """A content block's JSON shape: a plain text block (most of them) is built directly, any
    other block dumped as the SDK writes it."""
    if (
        getattr(block, "type", None) == "text"
        and isinstance(getattr(block, "text", None), str)
        and getattr(block, "annotations", None) is None
        and getattr(block, "meta", None) is None
    ):
        return {"type": "text", "text": block.text}
    if hasattr(block, "model_dump"):
        return block.model_dump(by_alias=True, exclude_none=True, mode="json")
    return block


def _details(server: str, tool: str, provider: str | None) -> dict[str, Any]:
    return {"server": server, "tool": tool, "provider": provider}


def _error_result(message: str, *, server: str, tool: str, provider: str | None) -> ToolResult:
    text = f"MCP error: {message}"
    return ToolResult(
        content=[{"type": "text", "text": text}],
        text=text,
        is_error=True,
        details=_details(server, tool, provider),
    )


def convert_call_result(result: Any, *, server: str, tool: str, provider: str | None) -> ToolResult:
    """Turn a ``tools/call`` result (SDK model or its JSON dict) into a ``ToolResult``.

    ``structuredContent`` is kept in ``structured`` and, so that models reading only text
    still see it, appended as a JSON text block unless a text block already holds it.
    """
    data = _result_as_dict(result)
    if data is None:
        return _error_result(
            f"tool {tool} on server {server} returned no usable result ({type(result).__name__})",
            server=server,
            tool=tool,
            provider=provider,
        )
    raw_content = data.get("content")
    content = (
        [block for block in raw_content if isinstance(block, dict)] if isinstance(raw_content, list) else []
    )
    structured = data.get("structuredContent")
    texts = [str(block.get("text", "")) for block in content if block.get("type") == "text"]
    if structured is not None and not _texts_carry(texts, structured):
        content.append({"type": "text", "text": json.dumps(structured, indent=2, ensure_ascii=False)})
    return ToolResult(
        content=content,
        text="\n".join(_describe_block(block) for block in content),
        structured=structured,
        is_error=bool(data.get("isError", False)),
        details=_details(server, tool, provider),
    )


# --- tools --------------------------------------------------------------------------------------


class MCPTool:
    """One MCP tool of a connected server, callable by the agent."""

    deferred: ClassVar[bool] = False

    def __init__(
        self,
        backend: ToolBackend,
        server_name: str,
        definition: ToolDefinition,
        *,
        name: str | None = None,
        provider_name: str | None = None,
    ) -> None:
        self.backend = backend
        self.server_name = server_name
        self.definition = definition
        self.mcp_tool_name = definition.name
        self.name = name if name is not None else mcp_tool_name(server_name, definition.name)
        self.label = f"{server_name}/{definition.name}"
        self.description = definition.description or f"MCP tool from {server_name}"
        self.parameters = definition.input_schema
        self._provider_name = provider_name

    @property
    def provider_name(self) -> str | None:
        """The config provider the server came from; the manager may learn it after construction."""
        if self._provider_name is not None:
            return self._provider_name
        return self.backend.get_provider_name(self.server_name)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r}, label={self.label!r})"

    async def _before_call(self) -> None:
        """Hook for work that must finish before the call; a live tool has none."""

    def _tool_result(self, result: Any, provider: str | None) -> ToolResult:
        """What the backend answered (a ``tools/call`` result here) as the session's result."""
        return convert_call_result(
            result, server=self.server_name, tool=self.mcp_tool_name, provider=provider
        )

    async def execute(
        self, arguments: dict[str, Any] | None = None, *, timeout_ms: int | None = None
    ) -> ToolResult:
        """Call the tool; failures come back as an error result, cancellation propagates.

        Only ``Exception`` is caught: cancellation (``CancelledError``, trio's
        ``Cancelled``) and ``KeyboardInterrupt`` derive from ``BaseException`` and pass
        through, so an aborted call stays aborted instead of turning into a tool result.
        """
        provider = self.provider_name
        try:
            await self._before_call()
            result = await self.backend.call_tool(
                self.server_name,
                self.mcp_tool_name,
                arguments if arguments is not None else {},
                timeout_ms=timeout_ms,
            )
            return self._tool_result(result, provider)
        except Exception as error:
            return _error_result(
                str(error) or type(error).__name__,
                server=self.server_name,
                tool=self.mcp_tool_name,
                provider=provider,
            )


class DeferredMCPTool(MCPTool):
    """A tool known from the cache while its server is still connecting.

    It is registered at once so the session starts fast; a call first waits for the
    connection (bounded by the server's timeout in the backend), then proceeds as usual.
    """

    deferred: ClassVar[bool] = True

    async def _before_call(self) -> None:
        await self.backend.wait_for_connection(self.server_name)
