"""A server that cannot start: it reports a missing credential and exits with code 3.

Run: ``python -m mcpfleet.cli.demo_servers.failing``. mcpfleet shows its last stderr lines in
the error, isolates it, and keeps every other server running.
"""

from __future__ import annotations

import sys


def main() -> None:
    print("failing: loading configuration", file=sys.stderr)
    print("failing: error: WEATHER_API_KEY is not set; export it and restart", file=sys.stderr)
    sys.exit(3)


if __name__ == "__main__":
    main()
