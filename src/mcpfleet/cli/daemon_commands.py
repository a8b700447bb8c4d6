"""``mcpfleet daemon run|start|stop|status|logs``: the per-user daemon that shares one fleet.

``run`` is the daemon itself, in the foreground (what the shim starts, detached); the others
speak to the running daemon over its socket (control operations ``stop`` and ``status``) or
read its log file. None of them starts a daemon except ``start`` (and ``run``), and none
imports the SDK: ``stop`` and ``status`` answer in milliseconds.

Exit codes: ``stop`` and ``status`` exit 0 when no daemon runs (they say so); ``stop`` exits
1 when the daemon is still there after ``STOP_WAIT_S``; a daemon that refuses the
connection (another version, other config folders) is an exit 1 with its reason.
"""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Callable
from typing import Any

from mcpfleet.cli.output import EXIT_FAILED, EXIT_OK, emit_json, error_line, output_line
from mcpfleet.daemon_client.control import DaemonLost, DaemonUnavailable, OperationFailed
from mcpfleet.errors import DaemonError

STOP_WAIT_S = 30.0
"""How long ``daemon stop`` waits for the daemon to be gone: the fleet's shutdown deadline
(5 s per server, in parallel) with room for a loaded machine."""
CONTROL_TIMEOUT_S = 30.0
"""The longest ``stop`` and ``status`` wait for the daemon's answer."""
DEFAULT_LOG_LINES = 50


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    daemon = subparsers.add_parser(
        "daemon",
        help="the per-user daemon that shares one fleet between host sessions",
        description="`mcpfleet serve` relays to the daemon when it can; these commands run it, "
        "stop it, show what it serves, and print its log.",
    )
    actions = daemon.add_subparsers(dest="daemon_action", metavar="ACTION", required=True)

    run = actions.add_parser("run", help="run the daemon in the foreground (what `serve` starts, detached)")
    run.add_argument(
        "--idle-timeout",
        type=_seconds,
        metavar="S",
        help="stop a shared server no session has used for S seconds (default: daemon.idleTimeout, 600)",
    )
    run.add_argument(
        "--daemon-idle-timeout",
        type=_seconds,
        metavar="S",
        help="exit after S seconds without any connection (default: daemon.daemonIdleTimeout, 1800)",
    )
    run.set_defaults(handler=run_command)

    start = actions.add_parser("start", help="start the daemon in the background unless one runs")
    start.set_defaults(handler=start_command)

    stop = actions.add_parser(
        "stop", help="stop the daemon: every server is closed, sessions reconnect later"
    )
    stop.set_defaults(handler=stop_command)

    status = actions.add_parser("status", help="the daemon's sessions and servers, and what they cost")
    status.set_defaults(handler=status_command)

    logs = actions.add_parser("logs", help="print the daemon's log")
    logs.add_argument(
        "-n",
        "--lines",
        type=int,
        default=DEFAULT_LOG_LINES,
        metavar="N",
        help=f"the last N lines (default {DEFAULT_LOG_LINES})",
    )
    logs.add_argument(
        "-f", "--follow", action="store_true", help="then print new lines as they come (Ctrl-C ends)"
    )
    logs.set_defaults(handler=logs_command)


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of seconds, got {text!r}") from None
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"must be a number of seconds above 0, got {text}")
    return value


def run_command(args: argparse.Namespace) -> int:
    from mcpfleet.daemon.service import DaemonNotStarted, DaemonOptions, run_daemon

    try:
        run_daemon(
            DaemonOptions(
                idle_timeout_s=args.idle_timeout,
                daemon_idle_timeout_s=args.daemon_idle_timeout,
                verbose=args.verbose,
            )
        )
    except DaemonNotStarted as error:
        error_line(str(error))
        return EXIT_FAILED
    return EXIT_OK


def start_command(args: argparse.Namespace) -> int:
    from mcpfleet.daemon_client.launch import start_daemon

    try:
        started = start_daemon()
        pid = int(_ask("ping")["pid"])
    # OSError: DaemonStartError, RuntimeFolderError; NoDaemon: it exited right after it started.
    except (OSError, NoDaemon, DaemonUnavailable, OperationFailed) as error:
        error_line(f"the daemon did not start: {error}")
        return EXIT_FAILED
    if args.json:
        emit_json({"pid": pid, "started": started})
    else:
        output_line(f"the mcpfleet daemon {'started' if started else 'already runs'} (pid {pid})")
    return EXIT_OK


def stop_command(args: argparse.Namespace) -> int:
    try:
        pid = int(_ask("ping")["pid"])
    except NoDaemon:
        _report_none(args)
        return EXIT_OK
    except (DaemonUnavailable, OperationFailed) as error:
        error_line(f"cannot stop the daemon: {error}")
        return EXIT_FAILED
    try:
        _ask("stop")
    except (NoDaemon, DaemonLost):
        pass  # it went away between the two questions: waited for below all the same
    except (DaemonUnavailable, OperationFailed) as error:
        error_line(f"cannot stop the daemon: {error}")
        return EXIT_FAILED
    deadline = time.monotonic() + STOP_WAIT_S
    while process_alive(pid):
        if time.monotonic() > deadline:
            error_line(
                f"the daemon (pid {pid}) still runs {STOP_WAIT_S:g} s after `stop`; "
                "see `mcpfleet daemon logs`"
            )
            return EXIT_FAILED
        time.sleep(0.05)
    if args.json:
        emit_json({"stopped": True, "pid": pid})
    else:
        output_line(f"the daemon (pid {pid}) stopped")
    return EXIT_OK


def status_command(args: argparse.Namespace) -> int:
    try:
        document = _ask("status")
    except NoDaemon:
        _report_none(args)
        return EXIT_OK
    except (DaemonUnavailable, OperationFailed) as error:
        error_line(f"cannot read the daemon's status: {error}")
        return EXIT_FAILED
    if args.json:
        emit_json({"running": True, **document})
    else:
        from mcpfleet.cli.render import print_daemon_status

        print_daemon_status(document)
    return EXIT_OK


def logs_command(args: argparse.Namespace) -> int:
    from mcpfleet.daemon.logs import follow, last_lines
    from mcpfleet.daemon_client import paths

    path = paths.log_path()
    if not path.exists() and not args.follow:
        error_line(f"no daemon log yet at {path}: the daemon has never run under this user")
        return EXIT_FAILED
    if args.json and not args.follow:
        emit_json({"log": str(path), "lines": last_lines(path, args.lines)})
        return EXIT_OK
    # Followed under --json: JSON Lines, one document per log line, as each one comes.
    show: Callable[[str], None] = (
        (lambda line: emit_json({"line": line}, one_line=True)) if args.json else output_line
    )
    for line in last_lines(path, args.lines):
        show(line)
    if args.follow:
        for line in follow(path):
            show(line)
    return EXIT_OK


def _report_none(args: argparse.Namespace) -> None:
    from mcpfleet.daemon_client import paths

    if args.json:
        emit_json({"running": False, "socket": str(paths.socket_path()), "log": str(paths.log_path())})
    else:
        output_line(f"no mcpfleet daemon runs (nothing answers on {paths.socket_path()})")


def process_alive(pid: int) -> bool:
    """Whether ``pid`` still runs; a zombie does not (a daemon is reaped by whoever inherited
    it, perhaps late, perhaps never in a container whose first process reaps nothing)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rpartition(")")[2].split()[0] != "Z"
    except OSError:
        return True


class NoDaemon(DaemonError):
    """Nothing answers on the daemon's socket."""


def _ask(op: str) -> dict[str, Any]:
    """The result of one control operation on the running daemon; ``NoDaemon`` when none runs."""
    from mcpfleet.daemon_client import paths
    from mcpfleet.daemon_client.control import connect_if_running

    client = connect_if_running(host="mcpfleet daemon")
    if client is None:
        raise NoDaemon(f"nothing answers on {paths.socket_path()}; see `mcpfleet daemon logs`")
    with client:
        # A daemon that hangs must not hang the command: ``DaemonLost`` once the time is up.
        return client.request(op, timeout_s=CONTROL_TIMEOUT_S)
