"""``mcpfleet serve``: the whole fleet as one MCP server, on stdio or streamable HTTP.

This is the in-process gateway: what ``--no-daemon``, ``--http`` and ``python -m
mcpfleet.cli.main serve`` run. The console script sends a plain ``mcpfleet serve`` to the
user's daemon through the shim instead (``mcpfleet.cli.entry``).

stdout carries the protocol (stdio) and nothing else: every log line goes to stderr.
SIGINT and SIGTERM stop the gateway (a team gateway drains first on SIGTERM); every backend is
closed before it exits.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import signal
from collections.abc import Callable
from typing import TYPE_CHECKING

from mcpfleet.cli.options import FleetOptions
from mcpfleet.cli.output import EXIT_FAILED, EXIT_INTERRUPTED, EXIT_OK, EXIT_USAGE, error_line
from mcpfleet.contract.environment import GATEWAY_TOKEN_VARIABLE as TOKEN_VARIABLE
from mcpfleet.contract.options import SERVE, SERVE_HELP, add_serve_options
from mcpfleet.errors import ConfigError, first_leaf

if TYPE_CHECKING:
    from contextlib import AbstractAsyncContextManager

    from mcpfleet.fleet.manager import MCPManager
    from mcpfleet.gateway.assembly import GatewayOptions
    from mcpfleet.gateway.draining import Drain
    from mcpfleet.gateway.http import HttpListener
    from mcpfleet.gateway.relay import Relay
    from mcpfleet.team.model import TeamFile

logger = logging.getLogger(__name__)

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    serve = subparsers.add_parser(SERVE, help=SERVE_HELP)
    add_serve_options(serve)
    serve.set_defaults(handler=serve_command)


def serve_command(args: argparse.Namespace) -> int:
    import anyio

    from mcpfleet.config.gateway_entry import mark_gateway_environment, nested_gateway_refusal

    if args.auth_token is not None:
        raise ConfigError(
            "--auth-token shows the token to every user of this machine (ps): put it in a file "
            f"for --auth-token-file FILE, or in {TOKEN_VARIABLE}"
        )
    if args.http is None and (args.auth_token_file is not None or args.insecure_no_auth):
        given = "--auth-token-file" if args.auth_token_file is not None else "--insecure-no-auth"
        raise ConfigError(f"{given} applies to --http only: add --http [HOST:]PORT, or drop it")
    if args.team is not None:
        _check_team_options(args)
    # Before anything starts: an unknown profile or a broken user config is a usage error, and
    # so is an OTEL_* variable telemetry cannot honour (docs/telemetry.md).
    options = _gateway_options(args)
    from mcpfleet import telemetry

    telemetry.start("team-gateway" if args.team is not None else "gateway")

    refusal = nested_gateway_refusal()
    if refusal is not None:
        error_line(refusal)
        return EXIT_USAGE
    # Every backend inherits the mark, so a `mcpfleet serve` that one of them starts, through
    # any wrapper discovery cannot see through, ends at the check above.
    mark_gateway_environment(os.environ)
    from mcpfleet.team.state import TeamStateError

    try:
        if args.http is not None:
            return anyio.run(_serve_http, args, options)
        # The HTTP gateway's key, exported for it in the user's shell, is no backend's business.
        os.environ.pop(TOKEN_VARIABLE, None)
        anyio.run(_serve, args, options)
    except TeamStateError as error:
        # A team gateway whose state cannot be opened serves nothing: its calls could not be recorded.
        error_line(str(error))
        return EXIT_FAILED
    except BaseExceptionGroup as group:
        # The fleet's task groups wrap what the gateway raised on its way up: a config error
        # (two servers offering one name under --prefix none) is still a usage error.
        config_errors, _ = group.split(ConfigError)
        if config_errors is not None:
            raise first_leaf(config_errors) from None
        raise
    return EXIT_OK


def _check_team_options(args: argparse.Namespace) -> None:
    """``--team``: over HTTP, signed in through the team's identity provider, on its own servers."""
    if args.http is None:
        raise ConfigError(
            "--team serves over HTTP only: add --http HOST:PORT (clients reach it at the team "
            "file's public_url)"
        )
    if args.auth_token_file is not None or args.insecure_no_auth:
        given = "--auth-token-file" if args.auth_token_file is not None else "--insecure-no-auth"
        raise ConfigError(
            f"{given} does not apply to --team: a team gateway signs its users in through the "
            "team file's identity provider (and service-account keys); drop it"
        )
    if args.extra_configs:
        raise ConfigError(
            "--config does not apply to --team: a team gateway serves the team file's servers "
            "only; add the server to its servers: instead"
        )


def _gateway_options(args: argparse.Namespace) -> GatewayOptions:
    """``serve``'s gateway options, the tool budget read from the user config now (once)."""
    from mcpfleet.gateway.assembly import GatewayOptions

    return GatewayOptions.read(
        tools=args.tool_mode,
        max_tools=args.max_tools,
        profile=args.profile,
        prefix=args.prefix,
        max_name_length=args.max_name_length,
        startup_timeout_ms=args.startup_timeout,
    )


def _own_fleet(
    args: argparse.Namespace, options: GatewayOptions
) -> Callable[[Relay], AbstractAsyncContextManager[MCPManager]]:
    """This process's own fleet, as ``open_gateway`` opens it: an ``MCPManager`` whose
    backends' questions go to the gateway's relay (the gateway enters the manager itself)."""
    from mcpfleet.fleet.manager import MCPManager

    fleet_options = FleetOptions.from_args(args)
    profile = options.budget.profile
    # A profile's servers are the only ones started: the others are left out at discovery.
    entry_filter = profile.entry_filter() if profile is not None else None

    def open_manager(relay: Relay) -> AbstractAsyncContextManager[MCPManager]:
        # No Exa filter here (unlike an agent session): a host has no native Exa to fall back on.
        manager = MCPManager(
            fleet_options.project_root,
            **fleet_options.session_settings(),
            on_uncached="late-join",
            server_requests=relay,
            entry_filter=entry_filter,
            # Every log a 2026-07-28 backend writes: each client's own level filters them (sessions.py).
            log_level="debug",
        )
        return contextlib.nullcontext(manager)

    return open_manager


async def _serve(args: argparse.Namespace, options: GatewayOptions) -> None:
    """Serve until stdin ends or a SIGTERM/SIGINT arrives; either way every backend is closed
    within the fleet's shutdown deadline before this returns."""
    import anyio

    from mcpfleet.gateway.assembly import open_gateway
    from mcpfleet.gateway.stdio import serve_stdio

    async def stop_on_signal(scope: anyio.CancelScope) -> None:
        with anyio.open_signal_receiver(*STOP_SIGNALS) as signals:
            async for received in signals:
                logger.info(
                    "mcpfleet serve: %s received; closing every server", signal.Signals(received).name
                )
                scope.cancel()
                return

    async with anyio.create_task_group() as task_group:
        task_group.start_soon(stop_on_signal, task_group.cancel_scope)
        async with open_gateway(_own_fleet(args, options), options) as gateway:
            await serve_stdio(gateway)
        task_group.cancel_scope.cancel()


async def _serve_http(args: argparse.Namespace, options: GatewayOptions) -> int:
    """Serve until SIGINT (exit 130, as Ctrl-C does elsewhere) or SIGTERM (exit 0: asked to stop,
    stopped cleanly), every backend closed either way. A team gateway drains on SIGTERM
    (``gateway.draining``: no new work, calls in flight finish within ``drain_timeout``) and
    stops then; a SIGINT during the drain stops it at once.

    The port is taken and the token settled before any backend starts, so a port in use or an
    unwritable token file costs no process. A signal cancels the serving scope from the event
    loop's own handler (mcpfleet runs on asyncio): no watcher task, so an error of the gateway
    comes out as itself, not wrapped in a task group's exception group. A second signal during
    the shutdown changes nothing: the backends still get their deadline.
    """
    import asyncio

    import anyio

    from mcpfleet.config.gateway_entry import announce_gateway_endpoint, mark_gateway_environment
    from mcpfleet.gateway.assembly import open_gateway
    from mcpfleet.gateway.draining import Drain
    from mcpfleet.gateway.http import HttpListener, parse_bind, resolve_auth_token, serve_http, stderr_notice
    from mcpfleet.team.loading import load_team_file

    # A bad team file is one line before any port is taken.
    team = load_team_file(args.team) if args.team is not None else None
    listener = HttpListener.open(parse_bind(args.http))
    with contextlib.closing(listener):
        # Taken out of the environment here, before any backend inherits it.
        token = (
            resolve_auth_token(
                token_file=args.auth_token_file,
                insecure_no_auth=args.insecure_no_auth,
                loopback=listener.loopback,
                environment=os.environ,
                notice=stderr_notice,
            )
            if team is None
            else None
        )
        from mcpfleet.gateway.handlers import build_server  # the SDK: once there is somewhere to serve

        received: list[int] = []
        loop = asyncio.get_running_loop()
        drain = Drain(team.drain_timeout_s) if team is not None else None
        with anyio.CancelScope() as serving:

            def stop(signal_number: int) -> None:
                received.append(signal_number)
                if drain is not None and signal_number == signal.SIGTERM:
                    # A team replica drains (its calls in flight finish) and then stops by itself.
                    logger.info("mcpfleet serve --team: SIGTERM received; draining")
                    drain.start()
                    return
                logger.info(
                    "mcpfleet serve: %s received; closing every server", signal.Signals(signal_number).name
                )
                serving.cancel()

            for signal_number in STOP_SIGNALS:
                loop.add_signal_handler(signal_number, stop, signal_number)
            try:
                # Discovery here and on this machine recognises this URL as the gateway's own.
                mark_gateway_environment(os.environ, url=listener.url)
                if team is not None:
                    assert drain is not None
                    await _serve_team(args, options, team, listener, drain)
                else:
                    with announce_gateway_endpoint(listener.url):
                        async with open_gateway(_own_fleet(args, options), options) as gateway:
                            await serve_http(build_server(gateway), listener, auth_token=token)
            finally:
                for signal_number in STOP_SIGNALS:
                    loop.remove_signal_handler(signal_number)
    return EXIT_INTERRUPTED if received[:1] == [signal.SIGINT] else EXIT_OK


async def _serve_team(
    args: argparse.Namespace, options: GatewayOptions, team: TeamFile, listener: HttpListener, drain: Drain
) -> None:
    """The team gateway of ``team`` on ``listener`` (``mcpfleet.team.serving``), until cancelled
    or drained (SIGTERM: ``drain`` started)."""
    from mcpfleet.gateway.handlers import build_server
    from mcpfleet.gateway.http import serve_http
    from mcpfleet.team.serving import open_team_gateway

    async with open_team_gateway(
        team, options, startup_timeout_ms=args.startup_timeout, use_cache=not args.no_cache
    ) as served:
        await serve_http(
            build_server(served.gateway),
            listener,
            auth_token=None,
            around=served.around(drain),
            admission=served.admission,
            public_url=team.public_url,
            drain=drain,
            event_store=served.event_store,
            sessions=served.shared_sessions,
        )
