"""``mcpfleet team …``: the commands of a team gateway's operator (DESIGN.md, "Team mode").

``team key add|revoke`` (``cli.team_key_commands``) manage service-account API keys.
``team check FILE`` reads the file as the gateway would (``mcpfleet.team.loading``), with this
shell's environment for its ``${VAR}``: exit 0 and a short summary (``--json``: the same as a
document) when it would serve, exit 2 and one line on stderr naming the file, the key and the
fix when it would not.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mcpfleet.cli.output import EXIT_OK, emit_json, json_output_requested, output_line
from mcpfleet.cli.team_key_commands import register_key_commands

if TYPE_CHECKING:
    from mcpfleet.team.model import TeamFile


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    team = subparsers.add_parser("team", help="operate a team gateway (mcpfleet serve --team FILE)")
    actions = team.add_subparsers(dest="team_action", metavar="ACTION", required=True)
    check = actions.add_parser(
        "check", help="validate a team file: exit 2 with the key and the fix if it is wrong"
    )
    check.add_argument("file", type=Path, metavar="FILE", help="the team file (JSON or YAML)")
    check.set_defaults(handler=check_command)
    register_key_commands(actions)


def check_command(args: argparse.Namespace) -> int:
    from mcpfleet.team.loading import load_team_file

    team = load_team_file(args.file)  # a TeamFileError is a ConfigError: one line, exit 2
    summary = team_summary(team)
    if json_output_requested():
        emit_json(summary)
    else:
        for line in summary_lines(summary):
            output_line(line)
    return EXIT_OK


def team_summary(team: TeamFile) -> dict[str, Any]:
    """What ``team check`` says of a good team file (its ``--json`` document)."""
    return {
        "file": str(team.path),
        "public_url": team.public_url,
        "issuer": team.identity.issuer,
        "audience": team.identity.audience,
        "servers": [
            {"name": name, "credentials": entry.get("credentials", "shared")}
            for name, entry in sorted(team.servers.items())
        ],
        "policies": len(team.policies),
        "state": "postgres" if team.state.postgres is not None else "sqlite",
        "shared": "redis" if team.state.redis is not None else None,
        "limits": {"per_user": team.limits.per_user, "per_tool": dict(team.limits.per_tool)},
        "audit": {
            "store": team.audit.store,
            "file": str(team.audit.file) if team.audit.file is not None else None,
            "on_failure": "closed" if team.audit.fail_closed else "open",
        },
        "ui": None
        if team.ui is None
        else {
            "client_id": team.ui.client_id,
            "admins": {"users": list(team.ui.admin_users), "groups": list(team.ui.admin_groups)},
        },
    }


def summary_lines(summary: dict[str, Any]) -> list[str]:
    servers = summary["servers"]
    per_user = [server["name"] for server in servers if server["credentials"] == "per-user"]
    names = ", ".join(server["name"] for server in servers) or "none"
    audit = "to the store" if summary["audit"]["store"] else "not to the store"
    if summary["audit"]["file"]:
        audit += f" and to {summary['audit']['file']}"
    lines = [
        f"{summary['file']}: ok",
        f"  serves {summary['public_url']} to users of {summary['issuer']}",
        f"  {len(servers)} server(s): {names}" + (f" (per-user: {', '.join(per_user)})" if per_user else ""),
        f"  {summary['policies']} polic{'y' if summary['policies'] == 1 else 'ies'}; "
        "first match wins, no match is denied",
        f"  state in {summary['state']}; audit {audit}",
        "  shared with the other replicas through Redis"
        if summary["shared"]
        else "  no state.redis: one replica only (limits counted in its memory)",
    ]
    ui = summary["ui"]
    if ui is None:
        lines.append("  no ui: block, so no dashboard at /ui")
    else:
        admins = [*ui["admins"]["users"], *(f"group {group}" for group in ui["admins"]["groups"])]
        lines.append(f"  dashboard at /ui for {', '.join(admins)} (client {ui['client_id']})")
    if summary["policies"] == 0:
        lines.append("  warning: no policies, so every tool is denied to everyone")
    return lines
