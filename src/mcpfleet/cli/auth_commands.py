"""``mcpfleet login NAME`` and ``mcpfleet logout NAME``: OAuth for HTTP servers.

The OAuth client (and with it the SDK) is imported only when one of these commands runs.
"""

from __future__ import annotations

import argparse
import functools
import os
import sys
from typing import TYPE_CHECKING, Any

from mcpfleet.cli.options import FleetOptions
from mcpfleet.cli.output import EXIT_FAILED, EXIT_OK, emit_json, info_line, report_error
from mcpfleet.errors import ConfigError, ConnectError

if TYPE_CHECKING:
    from mcpfleet.config.model import ServerConfig

DEFAULT_LOGIN_TIMEOUT_S = 300.0


def register(subparsers: Any) -> None:
    login_parser = subparsers.add_parser(
        "login",
        help="log in to an HTTP MCP server with OAuth and store its tokens",
        description="Run the OAuth flow for one HTTP or SSE server: print the URL to open, wait for "
        "the browser to come back to a loopback address, store the tokens (mode 0600) and "
        "connect once to check them.",
    )
    login_parser.add_argument("name", metavar="NAME", help="server name, as `mcpfleet config` shows it")
    login_parser.add_argument(
        "--timeout",
        type=float,
        default=DEFAULT_LOGIN_TIMEOUT_S,
        metavar="SECONDS",
        help=f"how long to wait for the browser (default {DEFAULT_LOGIN_TIMEOUT_S:g})",
    )
    login_parser.add_argument(
        "--no-browser", action="store_true", help="only print the URL; do not try to open a browser"
    )
    login_parser.set_defaults(handler=run_login)

    logout_parser = subparsers.add_parser(
        "logout",
        help="forget the OAuth tokens of an HTTP MCP server",
        description="Delete the tokens and the client registration stored for one server.",
    )
    logout_parser.add_argument("name", metavar="NAME", help="server name, as `mcpfleet config` shows it")
    logout_parser.set_defaults(handler=run_logout)


def find_server(args: argparse.Namespace, *, for_login: bool) -> ServerConfig:
    """The config of ``args.name``, active or disabled; ``ConfigError`` when there is none
    (or, for a login, when it is a project server still waiting for approval)."""
    name: str = args.name
    discovery = FleetOptions.from_args(args).discover()
    active = discovery.configs.get(name)
    if active is not None:
        return active
    for entry in discovery.entries:
        if entry.name != name or entry.config is None:
            continue
        if entry.state == "pending-approval" and for_login:
            raise ConfigError(
                f'MCP server "{name}" from {entry.source.path} is not approved yet: run '
                f"mcpfleet approve {name} (or pass --trust-project), then log in",
                path=entry.source.path,
                server=name,
            )
        if entry.state in ("disabled", "pending-approval"):
            return entry.config
    raise ConfigError(
        f'No MCP server named "{name}" in the discovered configs; `mcpfleet config` lists them', server=name
    )


def run_login(args: argparse.Namespace) -> int:
    from mcpfleet.auth.login import login
    from mcpfleet.auth.settings import server_url_of
    from mcpfleet.auth.storage import FileTokenStorage

    name: str = args.name
    config = find_server(args, for_login=True)
    url = server_url_of(name, config)
    open_browser = not args.no_browser and _graphical_session()

    def announce(authorize_url: str) -> None:
        info_line(f"Open this URL to log in to {name}: {authorize_url}")
        if open_browser:
            import webbrowser

            webbrowser.open(authorize_url)
        info_line(f"Waiting up to {args.timeout:g}s for the browser to come back…")

    import anyio

    try:
        anyio.run(
            functools.partial(
                login,
                name,
                config,
                on_authorize_url=announce,
                timeout_s=args.timeout,
                cwd=FleetOptions.from_args(args).project_root,
            )
        )
    except ConnectError as error:
        report_error(error)
        return EXIT_FAILED
    logged_in = FileTokenStorage(url).has_tokens()
    if args.json:
        emit_json({"server": name, "logged_in": logged_in})
    elif logged_in:
        info_line(f"Logged in to {name}; its tokens are stored and the connection works.")
    else:
        info_line(f"{name} accepted the connection without asking for a login; nothing was stored.")
    return EXIT_OK


def run_logout(args: argparse.Namespace) -> int:
    from mcpfleet.auth.login import logout

    name: str = args.name
    forgot = logout(name, find_server(args, for_login=False))
    if args.json:
        emit_json({"server": name, "forgot_tokens": forgot})
    elif forgot:
        info_line(f"Forgot the OAuth tokens of {name}.")
    else:
        info_line(f"No OAuth tokens were stored for {name}.")
    return EXIT_OK


def _graphical_session() -> bool:
    """Whether ``webbrowser`` would open a window rather than a text browser in this terminal."""
    if sys.platform in ("darwin", "win32"):
        return True
    return bool(os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY"))
