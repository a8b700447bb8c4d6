"""``mcpfleet audit [--team FILE] [--user U] [--since ISO] [--json]``: read a team gateway's audit log.

The records come from the team state the team file names (``team.loading``: PostgreSQL when
``state.postgres`` is set, else the SQLite file, beside the team file by default), oldest
first: every call of every user, or of one (``--user``, the token's ``sub``), from a time on
(``--since``, ISO 8601; a time without a zone is UTC). ``--json`` prints ``{"records": [...]}``,
each record with the contract's fields; otherwise a table. Nothing is started: the command
reads the store and returns, while the gateway may be serving (SQLite's readers never block
its writer).

Exit codes: 0 with the records (none is still 0); 2 for a bad command line or team file (the
flag or key named, with the fix); 1 when the store cannot be read.
"""

from __future__ import annotations

import argparse
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mcpfleet.cli.output import EXIT_FAILED, EXIT_OK, emit_json, error_line, info_line, json_output_requested
from mcpfleet.errors import ConfigError

if TYPE_CHECKING:
    from mcpfleet.team.model import StateSettings

TEAM_FILE_NAMES = ("team.yaml", "team.yml", "team.json")
"""Looked for in the current folder when ``--team`` is not given."""


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    audit = subparsers.add_parser(
        "audit", help="a team gateway's audit log: who called what, and how it ended"
    )
    audit.add_argument(
        "--team",
        type=Path,
        metavar="FILE",
        help=f"the team file (default: {', '.join(TEAM_FILE_NAMES)} in the current folder)",
    )
    audit.add_argument("--user", metavar="U", help="only the calls of this user (the token's sub)")
    audit.add_argument(
        "--since",
        type=since_time,
        metavar="ISO",
        help="only calls from this time on, ISO 8601 (2026-12-02, 2026-12-02T08:00:00Z); no zone: UTC",
    )
    audit.set_defaults(handler=audit_command)


def since_time(text: str) -> datetime:
    """``--since``: an ISO 8601 date or time; one without a zone is taken as UTC."""
    try:
        moment = datetime.fromisoformat(text.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not an ISO 8601 time; write it as 2026-12-02 or 2026-12-02T08:00:00Z"
        ) from None
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment


def audit_command(args: argparse.Namespace) -> int:
    import anyio

    from mcpfleet.team.loading import load_team_file
    from mcpfleet.team.state import TeamStateError

    settings = load_team_file(_team_file(args.team)).state
    if settings.postgres is None and not settings.sqlite_path.exists():
        # Reading must not create the gateway's file: it has not served yet.
        info_line(f"no audit records yet: {settings.sqlite_path} does not exist until the gateway serves")
        records: list[dict[str, Any]] = []
    else:
        try:
            records = anyio.run(_read_records, settings, args.user, args.since)
        except TeamStateError as error:
            error_line(str(error))
            return EXIT_FAILED
    if json_output_requested():
        emit_json({"records": records})
    else:
        _print_records(records)
    return EXIT_OK


async def _read_records(
    settings: StateSettings, user: str | None, since: datetime | None
) -> list[dict[str, Any]]:
    from mcpfleet.team.audit import record_document
    from mcpfleet.team.stores import open_team_state

    state = await open_team_state(settings)
    try:
        return [record_document(record) for record in await state.audit_records(user=user, since=since)]
    finally:
        await state.aclose()


def _team_file(given: Path | None) -> Path:
    if given is not None:
        return given
    for name in TEAM_FILE_NAMES:
        if Path(name).is_file():
            return Path(name)
    raise ConfigError(f"no team file in {Path.cwd()} ({', '.join(TEAM_FILE_NAMES)}): pass --team FILE")


def _print_records(records: list[dict[str, Any]]) -> None:
    from mcpfleet.cli.output import output_line, rich_text
    from mcpfleet.cli.render import console, print_table, render_table

    if not records:
        output_line("no audit records")
        return
    columns = ("time", "user", "client", "server", "tool", "outcome", "ms", "arguments")
    # Names come from clients and tokens: shown as text, never read as markup.
    rows = (
        (
            record["time"],
            rich_text(record["user"]),
            rich_text(record["client"] or ""),
            rich_text(record["server"]),
            rich_text(record["tool"]),
            record["outcome"],
            f"{record['duration_ms']:.1f}",
            record["arguments_digest"][:12],
        )
        for record in records
    )
    print_table(console(), render_table(f"{len(records)} audit records", columns, rows))
