"""Discovery's entry filters by name (``config.entry_filters``): every name the wire accepts
has its hook, the same names give the same hook (sessions with equal filters share one
discovery in the daemon), and filters apply in order."""

from __future__ import annotations

from pathlib import Path

import pytest

from mcpfleet.agent.loader import agent_entry_filter, agent_entry_filters
from mcpfleet.cli.main import build_parser
from mcpfleet.cli.options import serve_fleet_spec
from mcpfleet.cli.through_daemon import daemon_fleet
from mcpfleet.config import ServerConfig
from mcpfleet.config import entry_filters as module
from mcpfleet.config.entry_filters import ENTRY_FILTERS, named_entry_filter
from mcpfleet.config.exa import EXA_FILTERED_REASON, exa_entry_filter
from mcpfleet.contract import wire

EXA_SEARCH = ServerConfig(name="search", transport="http", url="https://mcp.exa.ai/mcp?exaApiKey=k")
LOCAL = ServerConfig(name="local", transport="stdio", command="local-server")


def test_every_filter_the_wire_accepts_has_a_hook() -> None:
    assert set(ENTRY_FILTERS) == wire.ENTRY_FILTERS


def test_the_same_names_give_the_same_hook() -> None:
    assert named_entry_filter(()) is None
    assert named_entry_filter(("exa",)) is exa_entry_filter
    assert named_entry_filter(("exa",)) is named_entry_filter(("exa",))


def test_the_agent_decides_and_the_cli_names_the_same_filters(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert agent_entry_filters(filter_exa=True) == ("exa",)
    assert agent_entry_filters(filter_exa=False) == ()
    assert agent_entry_filter(filter_exa=True) is exa_entry_filter
    # A CLI command through the daemon sees what the agent's discovery would show it; a host's
    # session (``serve``, the shim's spec) names none, as it does in-process.
    monkeypatch.delenv("MCPFLEET_NO_DAEMON", raising=False)
    command = daemon_fleet(build_parser().parse_args(["--cwd", str(tmp_path), "status"]))
    assert command is not None and command.entry_filters == agent_entry_filters(filter_exa=True)
    served = serve_fleet_spec(build_parser().parse_args(["--cwd", str(tmp_path), "serve"]))
    assert served.entry_filters == ()


def test_filters_apply_in_order_and_the_first_reason_is_the_entrys(monkeypatch: pytest.MonkeyPatch) -> None:
    def no_local_servers(config: ServerConfig) -> str | None:
        return "no local servers here" if config.transport == "stdio" else None

    def nothing_at_all(_config: ServerConfig) -> str | None:
        return "nothing at all"

    monkeypatch.setitem(module.ENTRY_FILTERS, "no-local", no_local_servers)
    monkeypatch.setitem(module.ENTRY_FILTERS, "nothing", nothing_at_all)
    both = named_entry_filter(("exa", "no-local"))
    assert both is not None
    assert both(EXA_SEARCH) == EXA_FILTERED_REASON
    assert both(LOCAL) == "no local servers here"
    reversed_order = named_entry_filter(("nothing", "exa"))
    assert reversed_order is not None and reversed_order(EXA_SEARCH) == "nothing at all"
