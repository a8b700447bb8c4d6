"""``mcpfleet demo``: the whole lifecycle on the bundled example servers.

It runs in a throw-away home folder, so nothing of the user's own configs is read or
written: cold start, a failing server isolated, a tool call, a warm start that hands
out cached (deferred) tools inside the gate, a call through a deferred tool that waits
for its server, ``/mcp reload``, and a shutdown that leaves no process behind.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING

from mcpfleet.cli.output import EXIT_FAILED, EXIT_OK

if TYPE_CHECKING:
    from rich.console import Console

    from mcpfleet.session import AgentSession

SLOW_STARTUP_S = 1.5


def _demo_config(store: Path) -> dict[str, object]:
    python = sys.executable
    return {
        "mcpServers": {
            "notes": {"command": python, "args": ["-m", "mcpfleet.examples.notes", "--store", str(store)]},
            "slow": {
                "command": python,
                "args": ["-m", "mcpfleet.examples.slow", "--startup", str(SLOW_STARTUP_S)],
            },
            "failing": {"command": python, "args": ["-m", "mcpfleet.examples.failing"]},
        }
    }


def _isolate(home: Path) -> None:
    """Point every user-level path of this process at the throw-away home."""
    os.environ["HOME"] = str(home)
    os.environ["MCPFLEET_HOME"] = str(home / ".mcpfleet")
    for variable, folder in (
        ("XDG_CONFIG_HOME", ".config"),
        ("XDG_STATE_HOME", ".local/state"),
        ("XDG_CACHE_HOME", ".cache"),
    ):
        os.environ[variable] = str(home / folder)


async def run_demo(args: argparse.Namespace) -> int:
    from rich.console import Console

    from mcpfleet import paths

    out = Console(highlight=False)
    with tempfile.TemporaryDirectory(prefix="mcpfleet-demo-") as scratch:
        root = Path(scratch)
        home, project = root / "home", root / "project"
        project.mkdir(parents=True)
        _isolate(home)
        # The demo reports each server's failure itself; the library's warnings would repeat them.
        logging.getLogger("mcpfleet").setLevel(logging.ERROR)
        config_file = paths.user_config_file()
        config_file.parent.mkdir(parents=True)
        config_file.write_text(json.dumps(_demo_config(root / "notes.json"), indent=2))
        out.print(f"[bold]mcpfleet demo[/] in a throw-away home: {home}")
        out.print(
            f"three example servers in {config_file}: notes (useful), slow ({SLOW_STARTUP_S}s), failing\n"
        )
        ok = await _lifecycle(out, project)
    out.print("\n[bold green]demo complete[/]" if ok else "\n[bold red]demo found a problem[/]")
    return EXIT_OK if ok else EXIT_FAILED


async def _lifecycle(out: Console, project: Path) -> bool:
    from mcpfleet.commands import MCPCommandController
    from mcpfleet.session import create_agent_session

    out.print("[bold]1. cold start[/] (empty tool cache: the gate waits for servers it knows nothing of)")
    started = time.perf_counter()
    session = await create_agent_session(project, startup_timeout_ms=250)
    async with session:
        _report_start(out, session, started)
        result = await session.call_tool("mcp_notes_add_note", {"title": "demo", "body": "mcpfleet was here"})
        out.print(f"   call mcp_notes_add_note → {result.text}")
        pids = _server_pids(session)
    out.print(f"   session closed; server processes left: {_alive(pids) or 'none'}\n")

    out.print("[bold]2. warm start[/] (tool cache filled: tools are handed out inside the 250 ms gate)")
    started = time.perf_counter()
    session = await create_agent_session(project, startup_timeout_ms=250)
    async with session:
        _report_start(out, session, started)
        waited = time.perf_counter()
        result = await session.call_tool("mcp_slow_clock_now", {})
        out.print(
            f"   call through deferred mcp_slow_clock_now waited for its server: "
            f"{(time.perf_counter() - waited) * 1000:.0f} ms → {result.text}"
        )
        out.print("\n[bold]3. /mcp reload[/]")
        controller = MCPCommandController(session)
        out.print(_indent(await controller.handle("/mcp reload")))
        for name in ("notes", "slow"):
            await session.wait_for_mcp_server(name)
        out.print("   after waiting for the deferred servers, /mcp list:")
        out.print(_indent(await controller.handle("/mcp list")))
        pids = _server_pids(session)
        closing = time.perf_counter()
    out.print(
        f"\n[bold]4. shutdown[/] in {(time.perf_counter() - closing) * 1000:.0f} ms; "
        f"server processes left: {_alive(pids) or 'none'}"
    )
    return not _alive(pids)


def _report_start(out: Console, session: AgentSession, started: float) -> None:
    elapsed = (time.perf_counter() - started) * 1000
    manager = session.mcp_manager
    out.print(f"   session ready in {elapsed:.0f} ms with {len(session.tools)} tools")
    for name in ("notes", "slow", "failing"):
        error = manager.get_errors().get(name)
        if error:
            out.print(f"   [red]✗ {name}[/]: {_shorten(error)}")
            continue
        deferred = " [yellow](deferred, from cache)[/]" if manager.is_deferred(name) else ""
        total = manager.get_timings(name).get("total")
        took = f" in {total:.0f} ms" if total is not None else ""
        out.print(f"   [green]●[/] {name}: {manager.get_connection_status(name)}{took}{deferred}")


def _shorten(text: str, width: int = 100) -> str:
    line = " ".join(text.split())
    return line if len(line) <= width else line[: width - 1] + "…"


def _indent(text: str) -> str:
    return "\n".join("   " + _shorten(line, 110) for line in text.splitlines())


def _server_pids(session: AgentSession) -> list[int]:
    manager = session.mcp_manager
    pids = []
    for name in manager.get_connected_servers():
        connection = manager.get_connection(name)
        if connection is not None and connection.pid is not None:
            pids.append(connection.pid)
    return pids


def _alive(pids: list[int]) -> list[int]:
    alive = []
    for pid in pids:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            continue
        except PermissionError:
            pass
        alive.append(pid)
    return alive
