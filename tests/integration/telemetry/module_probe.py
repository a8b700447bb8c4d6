"""``mcpfleet`` run in this process (``python module_probe.py ARGS…`` is ``mcpfleet ARGS…``), which then
writes on stderr, as ``LOADED <json>``, the telemetry modules it had imported by its end: those
of OpenTelemetry and ``prometheus_client``."""

from __future__ import annotations

import json
import sys

from mcpfleet.cli.entry import main

PREFIXES = ("opentelemetry", "prometheus_client", "google.protobuf")

if __name__ == "__main__":
    try:
        code = main(sys.argv[1:])
    finally:
        loaded = sorted(name for name in sys.modules if name.startswith(PREFIXES))
        sys.stderr.write(f"LOADED {json.dumps(loaded)}\n")
    sys.exit(code)
