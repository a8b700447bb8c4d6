"""Exa servers: the agent has a native Exa integration, so an Exa MCP server that only
offers the native tool is left out of the fleet and its API key handed to that integration.

Discovery knows nothing of Exa: the agent layer asks for ``exa_entry_filter`` as discovery's
``entry_filter`` hook (by its name, ``"exa"``, through ``config.entry_filters``: the daemon
applies it the same way), and reads the keys back from the result with ``exa_api_keys``.
"""

from __future__ import annotations

import re
from urllib.parse import parse_qs, urlsplit

from mcpfleet.config.model import DiscoveryResult, ServerConfig

NATIVE_EXA_TOOLS = frozenset({"web_search_exa"})
EXA_FILTERED_REASON = "Exa server: the agent's native Exa integration is used instead (API key collected)"
_EXA_HOST = re.compile(r"mcp\.exa\.ai", re.IGNORECASE)
_ARG_KEY = re.compile(r"exaApiKey=([^&\s]+)")
_ARG_TOOLS = re.compile(r"^(?:--)?tools=(.+)$")


def is_exa_server(config: ServerConfig) -> bool:
    """Named ``exa``, or pointing at ``mcp.exa.ai`` (by url or in its args)."""
    if config.name.lower() == "exa":
        return True
    if config.transport != "stdio":
        return bool(config.url and _EXA_HOST.search(config.url))
    return any(_EXA_HOST.search(arg) for arg in config.args)


def exa_api_key(config: ServerConfig) -> str | None:
    """The key from the url query ``exaApiKey=``, an argument, or ``env.EXA_API_KEY``."""
    if config.url:
        values = parse_qs(urlsplit(config.url).query).get("exaApiKey")
        if values and values[0]:
            return values[0]
    for arg in config.args:
        match = _ARG_KEY.search(arg)
        if match:
            return match.group(1)
    return config.env.get("EXA_API_KEY") or None


def requested_exa_tools(config: ServerConfig) -> list[str]:
    """Tools the entry asks for: url query ``tools=``, or args ``--tools x``/``--tools=x``/``tools=x``."""
    raw: list[str] = []
    if config.url:
        raw.extend(parse_qs(urlsplit(config.url).query).get("tools", []))
    args = list(config.args)
    for index, arg in enumerate(args):
        match = _ARG_TOOLS.match(arg)
        if match:
            raw.append(match.group(1))
        elif arg == "--tools" and index + 1 < len(args):
            raw.append(args[index + 1])
    return [tool.strip() for value in raw for tool in value.split(",") if tool.strip()]


def should_filter_exa(config: ServerConfig) -> bool:
    """An Exa server is kept only when it asks for tools beyond the native integration's."""
    if not is_exa_server(config):
        return False
    return not any(tool not in NATIVE_EXA_TOOLS for tool in requested_exa_tools(config))


def exa_entry_filter(config: ServerConfig) -> str | None:
    """Discovery's ``entry_filter`` for the agent: why an Exa server is left out, or None."""
    return EXA_FILTERED_REASON if should_filter_exa(config) else None


def exa_api_keys(discovery: DiscoveryResult) -> list[str]:
    """The Exa API keys of every entry discovery resolved, in precedence order, each once.

    Resolved entries are the active ones and those this module's filter left out: their
    configs have had their substitutions run, so a key written as ``${EXA_KEY}`` is the
    value. A disabled, shadowed or unapproved entry gives no key.
    """
    keys: list[str] = []
    for entry in discovery.entries:
        left_out_here = entry.state == "filtered" and entry.reason == EXA_FILTERED_REASON
        if entry.config is None or not (entry.state == "active" or left_out_here):
            continue
        key = exa_api_key(entry.config) if is_exa_server(entry.config) else None
        if key and key not in keys:
            keys.append(key)
    return keys
