"""``status``, ``tools`` and ``call`` answered by the user's daemon when one runs.

The daemon already holds the fleet (servers up, tools listed), so asking it costs a socket
round trip instead of starting every server; the CLI process then loads neither the SDK nor
anyio. The daemon answers with the very document ``--json`` prints, and the text report is
drawn from that document either way (``cli.render``), so both paths print the same thing.

It is only asked when the invocation describes a fleet the daemon can serve: no ``--config``
file and no ``--no-cache`` (they change the fleet itself), and ``MCPFLEET_NO_DAEMON`` unset.
Whatever else goes wrong on the way (no daemon, a refused hello, the daemon gone mid-way) the
command runs in-process, silently; ``-v`` says why. One exception: a ``call`` whose request
reached the daemon before it went away is not repeated, since the tool may have run.

Nothing heavy is imported here: the daemon path must stay fast.
"""

from __future__ import annotations

import argparse
import dataclasses
import logging
from typing import Any

from mcpfleet.cli.options import FLEET_CHANGING_OPTIONS, FleetOptions
from mcpfleet.cli.output import EXIT_FAILED
from mcpfleet.contract.wire import EXA_ENTRY_FILTER, FleetSpec
from mcpfleet.daemon_client.control import DaemonLost, DaemonUnavailable, OperationFailed, connect_if_running
from mcpfleet.daemon_client.launch import daemon_disabled
from mcpfleet.errors import MCPFleetError

logger = logging.getLogger(__name__)


class CommandFailed(MCPFleetError):
    """The command failed with this message and exit code, wherever it ran."""

    def __init__(self, message: str, exit_code: int) -> None:
        super().__init__(message)
        self.message = message
        self.exit_code = exit_code


def daemon_fleet(args: argparse.Namespace) -> FleetSpec | None:
    """The fleet the daemon would serve for this invocation; None when only this process can."""
    if daemon_disabled():
        return None
    if any(getattr(args, name) for name in FLEET_CHANGING_OPTIONS):
        logger.info("--config and --no-cache change the fleet itself: serving in this process")
        return None
    if getattr(args, "roots", None):
        logger.info("--roots are offered by this process's fleet only: serving in this process")
        return None
    # What a command sees, in-process or not, is the agent's discovery: its Exa filter
    # (``agent.loader.agent_entry_filters``), named here without loading the agent layer.
    return dataclasses.replace(FleetOptions.from_args(args).fleet_spec(), entry_filters=(EXA_ENTRY_FILTER,))


def ask_daemon(
    args: argparse.Namespace, op: str, params: dict[str, Any], *, repeatable: bool = True
) -> dict[str, Any] | None:
    """The daemon's answer to ``op`` for this invocation's fleet; None to run in-process.

    ``repeatable`` False (a tool call): once the request reached the daemon, a daemon that
    goes away is a failure of the command, not a reason to run it again in-process.
    ``CommandFailed`` carries the daemon's own error answer (no such tool, a bad config).
    """
    fleet = daemon_fleet(args)
    if fleet is None:
        return None
    try:
        client = connect_if_running(host=f"mcpfleet {args.command}")
    except DaemonUnavailable as error:
        logger.info("%s: serving in this process", error)
        return None
    if client is None:
        return None
    with client:
        try:
            return client.request(op, {"fleet": fleet.to_json(), **params})
        except OperationFailed as failure:
            raise CommandFailed(failure.message, failure.exit_code) from None
        except DaemonLost as error:
            if error.request_sent and not repeatable:
                raise CommandFailed(
                    f"{error}: the mcpfleet daemon stopped while the call ran, so the tool may or may not "
                    "have run; check, then call it again",
                    EXIT_FAILED,
                ) from None
            logger.info("%s: serving in this process", error)
            return None
