"""The public surface: what ``import mcpfleet`` offers is exactly this list, and each name is
the object its room defines (a re-export, never a copy). A name added or dropped by accident
fails here first."""

from __future__ import annotations

import subprocess
import sys

import pytest

import mcpfleet
from mcpfleet import errors

PUBLIC = {
    # the library of the seed
    "AgentSession",
    "DeferredMCPTool",
    "MCPManager",
    "MCPTool",
    "MCPToolCache",
    "ToolRegistry",
    "ToolResult",
    "create_agent_session",
    "discover_and_load_mcp_tools",
    "discover_mcp_servers",
    "load_all_mcp_configs",
    "open_agent_session",
    # what the manager reports and takes
    "Failure",
    "ManagerEvent",
    "ReconnectPolicy",
    "ServerState",
    "StartupReport",
    # every error mcpfleet raises on purpose
    "MCPFleetError",
    "ConfigError",
    "ConfigWriteError",
    "UnsafeConfigPathError",
    "ApprovalRequiredError",
    "ConnectError",
    "ConnectTimeoutError",
    "EraMismatchError",
    "ServerExitedError",
    "CommandNotFoundError",
    "AuthRequiredError",
    "LoginError",
    "SecretResolutionError",
    "SandboxError",
    "ServeAddressError",
    "ConnectionClosedError",
    "ServerReconnectingError",
    "ServerNotConnectedError",
    "ToolCallError",
    "RequestError",
    "ToolNotFoundError",
    "CacheUnavailableError",
    "DaemonError",
}


def test_the_public_names_are_exactly_these() -> None:
    assert set(mcpfleet.__all__) == PUBLIC
    assert len(mcpfleet.__all__) == len(PUBLIC)
    for name in PUBLIC:
        assert getattr(mcpfleet, name) is not None


def test_every_error_class_is_public() -> None:
    defined = {
        name
        for name, value in vars(errors).items()
        if isinstance(value, type) and issubclass(value, errors.MCPFleetError)
    }
    assert defined <= set(mcpfleet.__all__)
    assert all(getattr(mcpfleet, name) is getattr(errors, name) for name in defined)


def test_the_old_result_name_still_works() -> None:
    from mcpfleet.fleet.manager import MCPLoadResult

    assert MCPLoadResult is mcpfleet.StartupReport


def test_each_name_is_loaded_on_first_use() -> None:
    # `import mcpfleet` (and so `mcpfleet --help`) must not pay for the fleet it may not use.
    probe = (
        "import sys, mcpfleet; "
        "before = 'mcpfleet.fleet.manager' in sys.modules; "
        "mcpfleet.MCPManager; "
        "print(before, 'mcpfleet.fleet.manager' in sys.modules, 'MCPManager' in dir(mcpfleet))"
    )
    shown = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert shown.stdout.split() == ["False", "True", "True"]


def test_an_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no attribute 'Nope'"):
        mcpfleet.Nope  # noqa: B018
