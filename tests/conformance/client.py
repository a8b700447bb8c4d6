"""The MCP client that the official conformance suite (``@modelcontextprotocol/conformance``) judges.

The suite starts one scenario server per scenario and runs this script with the server URL as
its last argument, the scenario name in ``MCP_CONFORMANCE_SCENARIO`` and, for some scenarios, a
JSON object in ``MCP_CONFORMANCE_CONTEXT`` (pre-registered credentials, keys). Every scenario
goes through mcpfleet's own code, so what the suite judges is mcpfleet:

- plain scenarios: an ``MCPManager`` connects a ``ServerConfig`` built from the URL and the
  tools are called as the agent calls them (``MCPTool.execute``), with the arguments the
  scenario's context names (``toolCalls``) or placeholders; the manager's host hooks accept
  every elicitation with the schema's defaults, which is how ``input_required`` rounds of a
  2026-07-28 server are answered;
- schema scenarios: ``json-schema-ref-no-deref`` only lists (its server serves no calls);
  ``json-schema-2020-12-preservation`` sends the focal tool's schema, exactly as mcpfleet
  holds it for the agent, back through the scenario's echo tool;
- elicitation: ``connect_to_server`` with an ``elicitation_handler`` that accepts the
  schema's defaults (the host hook of ``mcpfleet.client.connection``);
- ``auth/*``: mcpfleet's OAuth provider (``oauth_auth_for``) with its token files and its
  loopback callback, run headless: the authorization URL is followed with HTTP GETs, as a
  browser would, down to the loopback callback. Client-credentials and enterprise-managed
  (identity assertion) scenarios need no person and run through the manager's own,
  non-interactive OAuth.

Tokens and every user file live in a temporary ``MCPFLEET_HOME`` for the run. Exit status: 0
when the scenario's client side went through, 1 otherwise (the suite judges the traffic).
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import sys
import tempfile
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx2

from mcpfleet.auth.provider import oauth_auth_for
from mcpfleet.client.connection import ServerConnection
from mcpfleet.client.opening import connect_to_server
from mcpfleet.config.model import ServerConfig, SourceInfo
from mcpfleet.fleet.manager import MCPManager
from mcpfleet.fleet.tools import MCPTool

SERVER_NAME = "conformance"
CLIENT_METADATA_URL = "https://conformance-test.local/client-metadata.json"
"""The client ID metadata document URL the CIMD scenario expects (it never fetches it)."""
CONNECT_TIMEOUT_MS = 20_000
SSE_RETRY_SETTLE_S = 2.0
"""How long to stay connected after the SSE-retry tool so the reconnection GET is observed."""
SCHEMA_ECHO_TOOL = "json_schema_echo"
"""The tool of ``json-schema-2020-12-preservation`` that takes a schema back for inspection."""

logger = logging.getLogger("mcpfleet.conformance")


# -- host hooks -------------------------------------------------------------------------------------------
async def accept_with_defaults(request: dict[str, Any]) -> dict[str, Any]:
    """The elicitation answer of a host whose user accepts every proposed default."""
    schema = request.get("requestedSchema")
    properties = schema.get("properties", {}) if isinstance(schema, dict) else {}
    content = {
        field: spec["default"]
        for field, spec in properties.items()
        if isinstance(spec, dict) and "default" in spec
    }
    return {"action": "accept", "content": content}


async def follow_like_a_browser(authorize_url: str) -> None:
    """Open the authorization URL and follow its redirects to mcpfleet's loopback callback.

    The scenario's authorization server approves at once; the last hop is the loopback
    listener, which hands the code to the OAuth flow.
    """
    async with httpx2.AsyncClient(follow_redirects=True, timeout=15) as browser:
        response = await browser.get(authorize_url)
        logger.info("authorization ended at %s with HTTP %s", response.url, response.status_code)


# -- scenario helpers -------------------------------------------------------------------------------------
def placeholder_arguments(schema: dict[str, Any]) -> dict[str, Any]:
    """Arguments that satisfy a simple input schema: 1 for numbers, true, or a short string."""
    arguments: dict[str, Any] = {}
    properties = schema.get("properties", {})
    for name, spec in properties.items() if isinstance(properties, dict) else ():
        kind = spec.get("type") if isinstance(spec, dict) else None
        if "default" in spec:
            arguments[name] = spec["default"]
        elif kind in ("number", "integer"):
            arguments[name] = 1
        elif kind == "boolean":
            arguments[name] = True
        elif kind == "object":
            arguments[name] = {}
        elif kind == "array":
            arguments[name] = []
        else:
            arguments[name] = "conformance"
    return arguments


async def call_every_tool(connection: ServerConnection) -> None:
    for tool in await connection.list_tools():
        result = await connection.call_tool(tool.name, placeholder_arguments(tool.input_schema))
        # A tool may answer by asking for input first; that answer has no is_error.
        logger.info("%s -> is_error=%s", tool.name, getattr(result, "is_error", None))


def server_config(url: str, oauth: dict[str, Any] | None = None) -> ServerConfig:
    return ServerConfig(
        name=SERVER_NAME, transport="http", url=url, timeout_ms=CONNECT_TIMEOUT_MS, oauth=oauth
    )


def planned_calls(tools: list[MCPTool], context: dict[str, Any]) -> list[tuple[MCPTool, dict[str, Any]]]:
    """The calls a scenario asks for: its context's ``toolCalls`` in order, else every tool once.

    ``json-schema-2020-12-preservation`` gets its echo tool called with the other tool's schema
    as the agent sees it (``MCPTool.parameters``), so any keyword mcpfleet dropped shows.
    """
    by_mcp_name = {tool.mcp_tool_name: tool for tool in tools}
    requested = context.get("toolCalls")
    if isinstance(requested, list):
        return [(by_mcp_name[call["name"]], call.get("arguments") or {}) for call in requested]
    if SCHEMA_ECHO_TOOL in by_mcp_name:
        focal = next(tool for tool in tools if tool.mcp_tool_name != SCHEMA_ECHO_TOOL)
        return [(by_mcp_name[SCHEMA_ECHO_TOOL], {"schema": focal.parameters})]
    return [(tool, placeholder_arguments(tool.parameters)) for tool in tools]


async def run_with_manager(
    config: ServerConfig, context: dict[str, Any], *, settle_s: float = 0.0, call_tools: bool = True
) -> None:
    """Connect through the manager and make the scenario's tool calls as an agent session would."""
    source = SourceInfo(provider="conformance", provider_name="conformance", path="", level="user")
    async with MCPManager(
        Path.cwd(), cache=None, startup_timeout_ms=0, elicitation_handler=accept_with_defaults
    ) as manager:
        loaded = await manager.connect_servers({SERVER_NAME: config}, {SERVER_NAME: source})
        if SERVER_NAME in loaded.errors:
            raise RuntimeError(loaded.errors[SERVER_NAME])
        tools = [tool for tool in manager.get_tools() if isinstance(tool, MCPTool)]
        logger.info("listed %s", ", ".join(tool.mcp_tool_name for tool in tools))
        for tool, arguments in planned_calls(tools, context) if call_tools else []:
            result = await tool.execute(arguments)
            logger.info("%s -> %s", tool.name, result.text[:200])
            if result.is_error:
                raise RuntimeError(f"{tool.name} failed: {result.text}")
        if settle_s:
            await asyncio.sleep(settle_s)


async def run_with_connection(
    config: ServerConfig,
    *,
    auth: object | None = None,
    elicitation: Callable[[dict[str, Any]], Awaitable[dict[str, Any]]] | None = None,
) -> None:
    async with connect_to_server(
        SERVER_NAME, config, cwd=Path.cwd(), auth=auth, elicitation_handler=elicitation
    ) as connection:
        await call_every_tool(connection)


async def authorization_server_of(url: str) -> str:
    """The authorization server an administrator would configure for enterprise-managed
    authorization: the first one the MCP server's protected resource metadata names."""
    parts = urlsplit(url)
    metadata_url = f"{parts.scheme}://{parts.netloc}/.well-known/oauth-protected-resource{parts.path}"
    async with httpx2.AsyncClient(timeout=15) as http:
        response = await http.get(metadata_url)
        response.raise_for_status()
    return str(response.json()["authorization_servers"][0])


async def identity_assertion_settings(url: str, context: dict[str, Any], home: Path) -> dict[str, Any]:
    id_token_file = home / "id-token"
    id_token_file.write_text(context["idp_id_token"], encoding="utf-8")
    id_token_file.chmod(0o600)
    return {
        "grant_type": "identity_assertion",
        "issuer": await authorization_server_of(url),
        "client_id": context["client_id"],
        "client_secret": context["client_secret"],
        "idp_token_endpoint": context["idp_token_endpoint"],
        "idp_client_id": context["idp_client_id"],
        "id_token_file": str(id_token_file),
    }


def client_credentials_settings(context: dict[str, Any], home: Path) -> dict[str, Any]:
    settings: dict[str, Any] = {"grant_type": "client_credentials", "client_id": context["client_id"]}
    if "private_key_pem" in context:
        key_file = home / "client-key.pem"
        key_file.write_text(context["private_key_pem"], encoding="utf-8")
        key_file.chmod(0o600)
        settings.update(
            private_key_file=str(key_file), signing_algorithm=context.get("signing_algorithm", "RS256")
        )
    else:
        settings["client_secret"] = context["client_secret"]
    return settings


async def run_scenario(url: str, scenario: str, context: dict[str, Any], home: Path) -> None:
    if scenario == "elicitation-sep1034-client-defaults":
        await run_with_connection(server_config(url), elicitation=accept_with_defaults)
    elif scenario == "sse-retry":
        await run_with_manager(server_config(url), context, settle_s=SSE_RETRY_SETTLE_S)
    elif scenario == "json-schema-ref-no-deref":
        await run_with_manager(server_config(url), context, call_tools=False)
    elif scenario == "auth/enterprise-managed-authorization":
        settings = await identity_assertion_settings(url, context, home)
        await run_with_manager(server_config(url, settings), context)
    elif scenario.startswith("auth/client-credentials-"):
        await run_with_manager(server_config(url, client_credentials_settings(context, home)), context)
    elif scenario.startswith("auth/"):
        oauth: dict[str, Any] = {"client_metadata_url": CLIENT_METADATA_URL}
        if "client_id" in context:
            oauth = {"client_id": context["client_id"], "client_secret": context.get("client_secret")}
        config = server_config(url, oauth)
        auth = oauth_auth_for(SERVER_NAME, config, interactive=True, on_authorize_url=follow_like_a_browser)
        await run_with_connection(config, auth=auth)
    else:
        await run_with_manager(server_config(url), context)


def main(argv: list[str]) -> int:
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(name)s: %(message)s")
    if len(argv) < 2:
        sys.stderr.write("usage: client.py SERVER_URL (scenario in MCP_CONFORMANCE_SCENARIO)\n")
        return 2
    url = argv[-1]
    scenario = os.environ.get("MCP_CONFORMANCE_SCENARIO", "")
    raw_context = os.environ.get("MCP_CONFORMANCE_CONTEXT")
    context: dict[str, Any] = json.loads(raw_context) if raw_context else {}
    with tempfile.TemporaryDirectory(prefix="mcpfleet-conformance-") as home:
        # Tokens, caches and registrations of this run only: no user file is read or written.
        os.environ["MCPFLEET_HOME"] = home
        try:
            asyncio.run(run_scenario(url, scenario, context, Path(home)))
        except Exception as error:
            sys.stderr.write(
                f"scenario {scenario} failed on the client side: {type(error).__name__}: {error}\n"
            )
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
