"""``mcpfleet team …``: the commands of a team gateway's operator (DESIGN.md, "Team mode").

``team key add|revoke`` (``cli.team_key_commands``) manage service-account API keys.
"""

from __future__ import annotations

import argparse

from mcpfleet.cli.team_key_commands import register_key_commands


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    team = subparsers.add_parser(
        "team",
        help="operate a team gateway (mcpfleet serve --team FILE)",
        description="Commands about a team file and the gateway it describes.",
    )
    actions = team.add_subparsers(dest="team_action", metavar="ACTION", required=True)
    register_key_commands(actions)
