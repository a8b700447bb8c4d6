"""``python -m mcpfleet``: the ``mcpfleet`` command, as the console script runs it (the shim
starts the daemon this way: ``python -m mcpfleet daemon run``)."""

import sys

from mcpfleet.cli.entry import main

if __name__ == "__main__":
    sys.exit(main())
