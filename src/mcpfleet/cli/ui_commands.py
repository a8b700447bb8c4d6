"""``mcpfleet ui [--no-browser] [--metrics]``: the fleet's dashboard, served by the daemon
(docs/ui.md).

Starts the daemon when none runs (as ``daemon start`` does), asks it for a one-time login
link (the ``ui`` control op; the daemon starts its dashboard on the first), prints the link
alone on stdout and opens it in the user's browser (``webbrowser``) unless ``--no-browser``,
then returns: the dashboard lives with the daemon. ``--metrics`` asks instead for what a
Prometheus scraper needs: the dashboard's ``/metrics`` address and its bearer token, one per
line (``--json``: ``{"url", "token"}``), and opens nothing. Standard library only until the
browser.
"""

from __future__ import annotations

import argparse

from mcpfleet.cli.output import EXIT_FAILED, EXIT_OK, EXIT_USAGE, emit_json, error_line, output_line
from mcpfleet.daemon_client.control import DaemonUnavailable, OperationFailed

UI_TIMEOUT_S = 30.0
"""The longest ``ui`` waits for the daemon's link (its dashboard starts on the first request)."""


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    ui = subparsers.add_parser(
        "ui",
        help="open the fleet's dashboard (served by the daemon, started if none runs)",
    )
    ui.add_argument(
        "--no-browser", action="store_true", help="print the one-time login link without opening it"
    )
    ui.add_argument(
        "--metrics",
        action="store_true",
        help="print the address of the dashboard's /metrics and the bearer token a scraper sends",
    )
    ui.set_defaults(handler=ui_command)


def ui_command(args: argparse.Namespace) -> int:
    from mcpfleet.daemon_client.control import connect_if_running
    from mcpfleet.daemon_client.launch import daemon_disabled, start_daemon

    if daemon_disabled():
        error_line("the dashboard is the daemon's: unset MCPFLEET_NO_DAEMON to use `mcpfleet ui`")
        return EXIT_USAGE
    try:
        start_daemon()
        client = connect_if_running(host="mcpfleet ui")
        if client is None:
            raise DaemonUnavailable("it exited right after it started; see `mcpfleet daemon logs`")
        with client:
            answer = client.request("ui", {"metrics": True} if args.metrics else {}, timeout_s=UI_TIMEOUT_S)
    except OperationFailed as error:
        if error.exit_code == EXIT_USAGE:  # an unknown op: a daemon of this version from before it
            error_line(
                "the running daemon has no dashboard (it started before this mcpfleet was installed): "
                "`mcpfleet daemon stop`, then `mcpfleet ui`"
            )
        else:
            error_line(f"the daemon could not start its dashboard: {error.message}")
        return EXIT_FAILED
    # OSError: DaemonStartError, RuntimeFolderError.
    except (OSError, DaemonUnavailable) as error:
        error_line(f"no dashboard: the daemon is not available ({error})")
        return EXIT_FAILED
    url = str(answer["url"])
    if args.metrics:
        token = str(answer["token"])
        if args.json:
            emit_json({"url": url, "token": token})
        else:
            output_line(url)
            output_line(token)
        return EXIT_OK
    if args.json:
        emit_json({"url": url})
    else:
        output_line(url)
    if not args.no_browser:
        import webbrowser

        webbrowser.open(url)
    return EXIT_OK
