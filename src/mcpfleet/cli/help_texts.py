"""What ``mcpfleet COMMAND --help`` says about each command: a description and examples.

Kept here, in one table by the command's words, rather than beside each ``add_parser``: one
place to read them all, and a test (``tests/unit/cli/test_cli_options.py``) holds every
command and action to having both. Standard library only: ``mcpfleet --help`` loads it.
"""

from __future__ import annotations

import argparse

EXAMPLES_HEADING = "examples:"

COMMAND_HELP: dict[tuple[str, ...], tuple[str, tuple[str, ...]]] = {
    ("config",): (
        "List every server the discovered config files declare, with its file, level (user or "
        "project), state (active, disabled, shadowed, pending-approval, invalid, filtered) and why. "
        "Starts nothing.",
        ("mcpfleet config", "mcpfleet config --json", "mcpfleet config --cwd ~/src/app --strict"),
    ),
    ("status",): (
        "Connect every server as an agent session would, wait for each to settle (each within its "
        "own timeout), report its state, tool count, timings and error, then shut everything down. "
        "Exits 0 when it could report; --strict exits 1 when a server failed.",
        ("mcpfleet status", "mcpfleet status --json", "mcpfleet status --strict -v"),
    ),
    ("tools",): (
        "The tools an agent would see: name, server, description, and whether they come from the "
        "tool cache (deferred) or a live server. Answers as the start-up gate does: servers not "
        "ready within --startup-timeout give their cached tools; --live waits for every server. "
        "--server starts that server only. `tools review [SERVER]` shows each tool withheld because "
        "it changed or was added since its server's tools were pinned (a diff, and its poisoning "
        "warnings); `tools approve SERVER [TOOL…]` accepts them (docs/integrity.md).",
        (
            "mcpfleet tools",
            "mcpfleet tools --server git --json",
            'mcpfleet tools --search "read a file" --limit 3',
            "mcpfleet tools --profile work",
            "mcpfleet tools review",
            "mcpfleet tools approve github create_issue",
        ),
    ),
    ("call",): (
        "Call one tool and print its result; exit 1 when the tool reports an error or there is no "
        "such tool. Only the server of the tool is started. The name is mcp_<server>_<tool>, "
        "<server>/<tool> or mcp__<server>__<tool>; the arguments are one JSON object.",
        (
            'mcpfleet call time/get_current_time \'{"timezone": "UTC"}\'',
            'mcpfleet call mcp_files_read_text_file \'{"path": "README.md"}\' --json',
            "mcpfleet call docs/list_allowed_directories --roots .",
        ),
    ),
    ("shell",): (
        "An interactive agent session: type /tools, /call TOOL JSON, /mcp list|reload|reconnect|"
        "enable|disable|add|remove|test|resources|prompts, /exit. Reads commands from stdin, so a "
        "script can be piped in. Config edits are applied while it runs.",
        ("mcpfleet shell", "printf '/tools\\n/call time/now {}\\n' | mcpfleet shell"),
    ),
    ("demo",): (
        "The whole lifecycle on bundled example servers: discovery, a cold and a warm start, a "
        "crash, a reload, and the shutdown. Touches none of your files.",
        ("mcpfleet demo",),
    ),
    ("approve",): (
        "Approve project servers so that they start (the approval is stored outside the "
        "repository). For each NAME, the entry that would be active, or the one in --source.",
        ("mcpfleet approve docs", "mcpfleet approve docs --source .cursor/mcp.json"),
    ),
    ("revoke",): (
        "Revoke the approval of project servers: they stay in their file and stop starting.",
        ("mcpfleet revoke docs",),
    ),
    ("add",): (
        "Add a stdio server (--command CMD [--arg ARG]…) or an HTTP/SSE one (--url URL) to "
        "mcpfleet's own config file (user level, or the project's with --project), atomically.",
        (
            "mcpfleet add time --command uvx --arg mcp-server-time",
            "mcpfleet add docs --url https://example.com/mcp --header 'Authorization=Bearer ${TOKEN}'",
        ),
    ),
    ("remove",): (
        "Remove a server from mcpfleet's own config file (user level, or the project's with --project).",
        ("mcpfleet remove time", "mcpfleet remove docs --project"),
    ),
    ("enable",): (
        "Enable a server that was disabled for mcpfleet, whichever tool's file declares it.",
        ("mcpfleet enable git",),
    ),
    ("disable",): (
        "Disable a server for mcpfleet, whichever tool's file declares it (recorded in mcpfleet's "
        "own config; that file is left alone).",
        ("mcpfleet disable git",),
    ),
    ("login",): (
        "Run the OAuth flow for one HTTP or SSE server and store its tokens.",
        ("mcpfleet login linear", "mcpfleet login linear --no-browser --timeout 600"),
    ),
    ("logout",): (
        "Forget the OAuth tokens and the client registration stored for one server.",
        ("mcpfleet logout linear",),
    ),
    ("serve",): (
        "Serve every configured MCP server as one MCP server, on stdio (through the user's daemon "
        "when it can) or on streamable HTTP with --http. This is the command an MCP host runs.",
        (
            "mcpfleet serve",
            "mcpfleet serve --tools search --profile work",
            "mcpfleet serve --http 8765",
            "mcpfleet serve --no-daemon --cwd ~/src/app",
        ),
    ),
    ("hosts",): (
        "Without an action: list the MCP hosts found here and whether each one's user config runs "
        "`mcpfleet serve`. install and uninstall write or remove that entry.",
        ("mcpfleet hosts", "mcpfleet hosts --json", "mcpfleet hosts install claude-code --replace"),
    ),
    ("hosts", "install"): (
        "Write the gateway entry into HOST's user config (atomically, with a backup beside it); "
        "--replace also moves aside the entries the gateway now serves.",
        ("mcpfleet hosts install cursor", "mcpfleet hosts install claude-code --replace --profile work"),
    ),
    ("hosts", "uninstall"): (
        "Remove the gateway entry from HOST's user config and put back what --replace moved aside.",
        ("mcpfleet hosts uninstall cursor",),
    ),
    ("audit",): (
        "A team gateway's audit log, oldest first: one record per call (time, user, client, "
        "server, tool, outcome, duration, the arguments' SHA-256 digest), from the team state the "
        "team file names. --user keeps one user's calls (the token's sub), --since those from an "
        'ISO 8601 time on (UTC when it has no zone). --json: {"records": [...]}.',
        (
            "mcpfleet audit --team team.yaml",
            "mcpfleet audit --team team.yaml --user alice@example.com --since 2026-12-02",
            "mcpfleet audit --since 2026-12-02T08:00:00Z --json",
        ),
    ),
    ("daemon",): (
        "The per-user daemon that shares one fleet between host sessions: `mcpfleet serve` relays "
        "to it when it can. These actions run it, stop it, show what it serves, and print its log.",
        ("mcpfleet daemon status", "mcpfleet daemon logs -f", "mcpfleet daemon stop"),
    ),
    ("daemon", "run"): (
        "Run the daemon in the foreground, as `mcpfleet serve` starts it (detached).",
        ("mcpfleet daemon run -v", "mcpfleet daemon run --idle-timeout 60"),
    ),
    ("daemon", "start"): (
        "Start the daemon in the background, unless one runs already.",
        ("mcpfleet daemon start", "mcpfleet daemon start --json"),
    ),
    ("daemon", "stop"): (
        "Stop the daemon: every server it runs is closed; host sessions reconnect to a new one later.",
        ("mcpfleet daemon stop",),
    ),
    ("daemon", "status"): (
        "The daemon's sessions and servers, and what their processes cost. Exits 0 when no "
        "daemon runs (it says so).",
        ("mcpfleet daemon status", "mcpfleet daemon status --json"),
    ),
    ("ui",): (
        "Open the fleet's dashboard: the daemon (started if none runs) serves it on a loopback "
        "port; this prints a one-time login link alone on stdout and opens it in your browser, "
        "then returns. The link works once; without it every page is refused (docs/ui.md). "
        "--metrics prints instead the address of the dashboard's Prometheus /metrics and the "
        'bearer token a scraper sends, one per line (--json: {"url", "token"}).',
        ("mcpfleet ui", "mcpfleet ui --no-browser", "mcpfleet ui --metrics --json"),
    ),
    ("daemon", "logs"): (
        "Print the last lines of the daemon's log; -f then prints new lines as they come. With "
        '--json: {"log", "lines"}, or with -f one {"line"} document per line (JSON Lines).',
        ("mcpfleet daemon logs", "mcpfleet daemon logs -n 200", "mcpfleet daemon logs -f --json"),
    ),
    ("team",): (
        "Operate a team gateway (`mcpfleet serve --http HOST:PORT --team FILE`): check its team "
        "file (servers, identity provider, policies, state, audit: docs/team.md), manage its "
        "service-account keys.",
        ("mcpfleet team check team.yaml", "mcpfleet team key add ci --team team.yaml"),
    ),
    ("team", "check"): (
        "Read FILE as the team gateway would (its ${VAR} from this environment): a short summary "
        "and exit 0 when it is good, else one line naming the file, the key and the fix, exit 2.",
        ("mcpfleet team check team.yaml", "mcpfleet team check team.json --json"),
    ),
    ("team", "key"): (
        "Service accounts' API keys, sent as `Authorization: Bearer <key>`; the team file's "
        "identity.api_keys keeps their hashes only.",
        ("mcpfleet team key add ci --team team.yaml", "mcpfleet team key revoke ci --team team.yaml"),
    ),
    ("team", "key", "add"): (
        "Make a key for service account NAME and print it once, alone on stdout (--json: "
        '{"name", "key"}); only its hash is stored. An account that has a key must be revoked first.',
        (
            "KEY=$(mcpfleet team key add ci --team team.yaml)",
            "mcpfleet team key add deploy-bot --team team.yaml --json",
        ),
    ),
    ("team", "key", "revoke"): (
        "Revoke service account NAME's key: a running gateway refuses it from its next request on.",
        ("mcpfleet team key revoke ci --team team.yaml",),
    ),
}


class HelpFormatter(argparse.HelpFormatter):
    """argparse's own, except that the examples keep their lines as written."""

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        if text.startswith(EXAMPLES_HEADING):
            return "".join(indent + line for line in text.splitlines(keepends=True))
        return super()._fill_text(text, width, indent)


def describe_command(parser: argparse.ArgumentParser, path: tuple[str, ...]) -> None:
    """Give the parser of the command ``path`` its description and examples."""
    parser.formatter_class = HelpFormatter
    known = COMMAND_HELP.get(path)
    if known is None:
        return
    description, examples = known
    parser.description = description
    parser.epilog = "\n".join([EXAMPLES_HEADING, *(f"  {example}" for example in examples)])
