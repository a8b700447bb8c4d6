"""``mcpfleet team key add NAME --team FILE`` and ``mcpfleet team key revoke NAME --team FILE``.

Service accounts (CI jobs, agents without a person behind them) reach a team gateway with an
API key in ``Authorization: Bearer``. ``add`` prints the new key once, alone on stdout (so
``KEY=$(mcpfleet team key add ci --team team.yaml)`` captures it; ``--json``:
``{"name", "key"}``) and stores only its hash in the team file's ``identity.api_keys`` file;
``revoke`` removes it, and a running gateway refuses the key from its next request on
(``team.api_keys``). Neither starts a server or needs the identity provider.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from mcpfleet.cli.output import EXIT_FAILED, EXIT_OK, EXIT_USAGE, emit_json, error_line, json_output_requested
from mcpfleet.errors import ConfigError


def register_key_commands(team_actions: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """``key add`` and ``key revoke`` under ``mcpfleet team``."""
    key = team_actions.add_parser("key", help="service-account API keys of a team gateway")
    actions = key.add_subparsers(dest="key_action", metavar="ACTION", required=True)
    add = actions.add_parser("add", help="make a key for a service account and print it once")
    revoke = actions.add_parser("revoke", help="revoke a service account's key")
    for parser in (add, revoke):
        parser.add_argument("name", metavar="NAME", help="the service account (policies match it in users:)")
        parser.add_argument(
            "--team", type=Path, required=True, metavar="FILE", help="the team file naming identity.api_keys"
        )
    add.set_defaults(handler=add_key_command)
    revoke.set_defaults(handler=revoke_key_command)


def add_key_command(args: argparse.Namespace) -> int:
    from mcpfleet.team.api_keys import ApiKeyFileError, add_key, check_account_name

    try:
        check_account_name(args.name)
    except ApiKeyFileError as error:
        error_line(str(error))
        return EXIT_USAGE
    try:
        key = add_key(api_keys_file(args.team), args.name)
    except ApiKeyFileError as error:
        error_line(str(error))
        return EXIT_FAILED
    if json_output_requested():
        emit_json({"name": args.name, "key": key})
    else:
        print(key, flush=True)  # alone on stdout, nothing else: a script captures it as it is
    return EXIT_OK


def revoke_key_command(args: argparse.Namespace) -> int:
    from mcpfleet.team.api_keys import ApiKeyFileError, revoke_key

    path = api_keys_file(args.team)
    try:
        revoked = revoke_key(path, args.name)
    except ApiKeyFileError as error:
        error_line(str(error))
        return EXIT_FAILED
    if json_output_requested():
        emit_json({"name": args.name, "revoked": revoked})
    if not revoked:
        error_line(f"{path}: service account {args.name!r} has no key; `mcpfleet team key add` makes one")
        return EXIT_FAILED
    return EXIT_OK


def api_keys_file(team_file: Path) -> Path:
    """The key file the team file names in ``identity.api_keys`` (resolved by the loader against
    the team file's folder). A team file that does not load, or names no key file, is a
    ``ConfigError`` (exit 2) naming the file, the key and the fix."""
    from mcpfleet.team.loading import load_team_file

    team = load_team_file(team_file)
    if team.identity.api_keys is None:
        raise ConfigError(
            f"{team_file}: identity.api_keys is not set; add `api_keys: api-keys.json` under identity "
            "(the file of hashed service-account keys, beside the team file)",
            path=str(team_file),
        )
    return team.identity.api_keys
