"""``mcpfleet demo``: the whole lifecycle on the bundled example servers.

It runs in a throw-away home folder, so nothing of the user's own configs is read or
written. First the library (an agent session): cold start, a failing server isolated, a
tool call, a warm start that hands out cached (deferred) tools inside the gate, a call
through a deferred tool that waits for its server, ``/mcp reload``, and a shutdown that
leaves no process behind. Then the hosts (``mcpfleet.cli.demo_hosts``): two host sessions
through ``mcpfleet serve`` sharing one daemon's servers, a late server announced to both,
``daemon status`` and ``daemon stop``. With ``--json`` it prints nothing while it runs and
reports every step as one JSON document.
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
from typing import TYPE_CHECKING, Any

from mcpfleet.cli.output import EXIT_FAILED, EXIT_OK, emit_json
from mcpfleet.contract.defaults import STARTUP_TIMEOUT_MS
from mcpfleet.contract.text import safe_text

if TYPE_CHECKING:
    from rich.console import Console

    from mcpfleet.agent.session import AgentSession

SLOW_STARTUP_S = 1.5


def _late_server() -> dict[str, object]:
    """The server the second act adds to the config while two host sessions run."""
    return {"command": sys.executable, "args": ["-m", "mcpfleet.cli.demo_servers.slow", "--startup", "0.2"]}


def _demo_config(store: Path) -> dict[str, object]:
    python = sys.executable
    return {
        "mcpServers": {
            "notes": {
                "command": python,
                "args": ["-m", "mcpfleet.cli.demo_servers.notes", "--store", str(store)],
            },
            "slow": {
                "command": python,
                "args": ["-m", "mcpfleet.cli.demo_servers.slow", "--startup", str(SLOW_STARTUP_S)],
            },
            "failing": {"command": python, "args": ["-m", "mcpfleet.cli.demo_servers.failing"]},
        }
    }


def _isolate(home: Path, runtime: Path) -> None:
    """Point every user-level path of this process and its children at the throw-away home,
    and the daemon at a runtime folder of its own (never the user's own daemon)."""
    os.environ["HOME"] = str(home)
    os.environ["MCPFLEET_RUNTIME_DIR"] = str(runtime)
    os.environ["MCPFLEET_HOME"] = str(home / ".mcpfleet")
    for variable, folder in (
        ("XDG_CONFIG_HOME", ".config"),
        ("XDG_STATE_HOME", ".local/state"),
        ("XDG_CACHE_HOME", ".cache"),
    ):
        os.environ[variable] = str(home / folder)


class _Narrator:
    """Tells the demo as it happens on a terminal; under ``--json`` stays silent (the report
    is printed at the end instead).

    ``say`` takes plain strings and ``(text, style)`` pairs; neither is read as markup, and
    server text in them is shown through ``safe_text``.
    """

    def __init__(self, console: Console | None) -> None:
        self._console = console

    def say(self, *parts: str | tuple[str, str]) -> None:
        if self._console is None:
            return
        from rich.text import Text

        self._console.print(
            Text.assemble(
                *(
                    safe_text(part, multiline=True)
                    if isinstance(part, str)
                    else (safe_text(part[0], multiline=True), part[1])
                    for part in parts
                )
            )
        )


async def run_demo(args: argparse.Namespace) -> int:
    from mcpfleet import paths
    from mcpfleet.cli.demo_hosts import host_sessions_act
    from mcpfleet.cli.render import console

    show = _Narrator(None if args.json else console())
    report: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="mcpfleet-demo-") as scratch:
        root = Path(scratch)
        home, project = root / "home", root / "project"
        project.mkdir(parents=True)
        _isolate(home, root / "run")
        # The demo reports each server's failure itself; the library's warnings would repeat them.
        logging.getLogger("mcpfleet").setLevel(logging.ERROR)
        config_file = paths.user_config_file()
        config_file.parent.mkdir(parents=True)
        config_file.write_text(json.dumps(_demo_config(root / "notes.json"), indent=2))
        report.update(home=str(home), config_file=str(config_file), steps=[])
        show.say(("mcpfleet demo", "bold"), f" in a throw-away home: {home}")
        show.say(
            f"three example servers in {config_file}: notes (useful), slow ({SLOW_STARTUP_S}s), failing\n"
        )
        ok = await _lifecycle(show, project, report["steps"])
        ok = await host_sessions_act(show, project, config_file, _late_server(), report["steps"]) and ok
    report["ok"] = ok
    if args.json:
        emit_json(report)
    else:
        show.say(("\ndemo complete", "bold green") if ok else ("\ndemo found a problem", "bold red"))
    return EXIT_OK if ok else EXIT_FAILED


async def _lifecycle(show: _Narrator, project: Path, steps: list[dict[str, Any]]) -> bool:
    """Run the four steps, narrating each and recording it in ``steps``; ``True`` when no
    server process outlived its session."""
    from mcpfleet.agent.session import open_agent_session
    from mcpfleet.cli.demo_hosts import alive
    from mcpfleet.cli.slash import MCPCommandController

    show.say(("1. cold start", "bold"), " (empty tool cache: the gate waits for servers it knows nothing of)")
    started = time.perf_counter()
    async with open_agent_session(project, startup_timeout_ms=STARTUP_TIMEOUT_MS) as session:
        cold = _report_start(show, session, started, "cold start")
        result = await session.call_tool("mcp_notes_add_note", {"title": "demo", "body": "mcpfleet was here"})
        cold["call"] = {"tool": "mcp_notes_add_note", "is_error": result.is_error, "text": result.text}
        show.say(f"   call mcp_notes_add_note → {result.text}")
        pids = _server_pids(session)
    cold["processes_left"] = alive(pids)
    steps.append(cold)
    show.say(f"   session closed; server processes left: {alive(pids) or 'none'}\n")

    show.say(
        ("2. warm start", "bold"),
        f" (tool cache filled: tools are handed out inside the {STARTUP_TIMEOUT_MS} ms gate)",
    )
    started = time.perf_counter()
    async with open_agent_session(project, startup_timeout_ms=STARTUP_TIMEOUT_MS) as session:
        warm = _report_start(show, session, started, "warm start")
        waited = time.perf_counter()
        result = await session.call_tool("mcp_slow_clock_now", {})
        waited_ms = (time.perf_counter() - waited) * 1000
        warm["call"] = {
            "tool": "mcp_slow_clock_now",
            "is_error": result.is_error,
            "text": result.text,
            "waited_ms": round(waited_ms, 1),
        }
        steps.append(warm)
        show.say(
            "   call through deferred mcp_slow_clock_now waited for its server: "
            f"{waited_ms:.0f} ms → {result.text}"
        )
        show.say(("\n3. /mcp reload", "bold"))
        controller = MCPCommandController(session)
        reloaded = await controller.handle("/mcp reload")
        show.say(_indent(reloaded))
        for name in ("notes", "slow"):
            await session.wait_for_mcp_server(name)
        listed = await controller.handle("/mcp list")
        steps.append({"step": "reload", "reload": reloaded, "list": listed})
        show.say("   after waiting for the deferred servers, /mcp list:")
        show.say(_indent(listed))
        pids = _server_pids(session)
        closing = time.perf_counter()
    shutdown_ms = (time.perf_counter() - closing) * 1000
    left = alive(pids)
    steps.append({"step": "shutdown", "shutdown_ms": round(shutdown_ms, 1), "processes_left": left})
    show.say(("\n4. shutdown", "bold"), f" in {shutdown_ms:.0f} ms; server processes left: {left or 'none'}")
    return not left


def _report_start(show: _Narrator, session: AgentSession, started: float, step: str) -> dict[str, Any]:
    elapsed = (time.perf_counter() - started) * 1000
    manager = session.mcp_manager
    show.say(f"   session ready in {elapsed:.0f} ms with {len(session.tools)} tools")
    servers = []
    for name in ("notes", "slow", "failing"):
        error = manager.get_errors().get(name)
        deferred = manager.is_deferred(name)
        total = manager.get_timings(name).get("total")
        status = "failed" if error else manager.get_connection_status(name)
        servers.append(
            {
                "name": name,
                "status": status,
                "error": error,
                "deferred": deferred,
                "total_ms": round(total, 1) if total is not None else None,
            }
        )
        if error:
            show.say((f"   ✗ {name}", "red"), f": {_shorten(error)}")
            continue
        took = f" in {total:.0f} ms" if total is not None else ""
        show.say(
            ("   ●", "green"),
            f" {name}: {status}{took}",
            (" (deferred, from cache)", "yellow") if deferred else "",
        )
    return {"step": step, "ready_ms": round(elapsed, 1), "tools": len(session.tools), "servers": servers}


def _shorten(text: str, width: int = 100) -> str:
    # The demo's servers run under this interpreter, whose path (a virtualenv's, deep in a
    # checkout) would crowd the reason out of the shortened line.
    line = " ".join(text.replace(sys.executable, "python").split())
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
