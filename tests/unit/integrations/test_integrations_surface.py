"""What every integration shares, without a server: which frameworks load when, the install
line when one is missing, and the session-or-folder rule of the constructors."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from mcpfleet.agent.session import AgentSession
from mcpfleet.integrations._framework import installed, require_framework
from mcpfleet.integrations._lease import SessionLease

FRAMEWORKS = ("agents", "pydantic_ai", "langchain_core", "google.adk")


def test_importing_mcpfleet_and_its_integrations_package_loads_no_framework() -> None:
    probe = (
        "import sys, mcpfleet, mcpfleet.integrations; "
        f"print([name for name in {FRAMEWORKS!r} if name in sys.modules])"
    )
    shown = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert shown.stdout.strip() == "[]"


def test_an_integration_that_runs_the_fleet_brings_the_sdk_client_with_its_object(tmp_path: Path) -> None:
    # Every integration serves from a SessionLease. Left to the first connection, the SDK's
    # import would hold back every handshake of the first start (and a warm start's first
    # call) while the framework runs its own first steps. A borrowed session (the daemon's,
    # say) or a lease without a fleet does not need it.
    probe = textwrap.dedent(
        f"""
        import sys
        from mcpfleet.agent.session import AgentSession
        from mcpfleet.client import opening
        from mcpfleet.integrations._lease import SessionLease

        def loaded():
            name = opening.CONNECTION_MODULE
            print(name in sys.modules, name in opening._imported)

        loaded()
        SessionLease("Thing", AgentSession({str(tmp_path)!r}, manager=None, owns_manager=False), None, {{}})
        loaded()
        SessionLease("Thing", None, {str(tmp_path)!r}, {{"enable_mcp": False}})
        loaded()
        SessionLease("Thing", None, {str(tmp_path)!r}, {{}})
        loaded()
        """
    )
    shown = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert shown.stdout.splitlines() == ["False False"] * 3 + ["True True"]


def test_a_missing_framework_names_the_extra_to_install() -> None:
    expected = r"needs Some Framework .*'some-extra'.*pip install -e '\.\[some-extra\]'"
    with pytest.raises(ImportError, match=expected):
        require_framework("mcpfleet_no_such_framework", "Some Framework", "some-extra")


def test_a_framework_under_a_missing_namespace_is_missing_not_an_error() -> None:
    assert not installed("mcpfleet_no_such_namespace.adk")
    assert installed("mcpfleet.integrations")


def test_exactly_one_of_session_and_cwd(tmp_path: Path) -> None:
    session = AgentSession(tmp_path, manager=None, owns_manager=False)
    with pytest.raises(TypeError, match="exactly one of session="):
        SessionLease("Thing", None, None, {})
    with pytest.raises(TypeError, match="exactly one of session="):
        SessionLease("Thing", session, tmp_path, {})


def test_session_options_only_go_with_cwd(tmp_path: Path) -> None:
    session = AgentSession(tmp_path, manager=None, owns_manager=False)
    with pytest.raises(TypeError, match=r"\['trust_project'\] only apply with cwd="):
        SessionLease("Thing", session, None, {"trust_project": True})


def test_a_lease_used_before_entry_says_how_to_start_it(tmp_path: Path) -> None:
    lease = SessionLease("Thing", None, tmp_path, {})
    assert lease.owned
    with pytest.raises(RuntimeError, match=r"use `async with Thing\(cwd=...\)` first"):
        lease.tools()


@pytest.mark.anyio
async def test_a_borrowed_session_is_served_and_never_closed(tmp_path: Path) -> None:
    session = AgentSession(tmp_path, manager=None, owns_manager=False)
    lease = SessionLease("Thing", session, None, {})
    assert await lease.enter() is session
    await lease.exit()
    await lease.exit()  # one exit too many is harmless
    assert lease.session is session
    answer = await lease.call("mcp_gone_tool", {})
    assert answer.is_error and answer.text.startswith("MCP error: no tool named 'mcp_gone_tool'")
