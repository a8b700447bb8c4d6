"""The ``mcpfleet`` command line."""
