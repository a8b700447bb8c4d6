"""A stdio MCP server whose every piece of text is chosen by the test: ``--text TEXT``.

It is ``fake_server.py`` (same flags, same tools) with TEXT appended to each tool
description, to the resource and prompt listings and to a line it prints on stderr at
start, plus a tool ``hostile`` whose result is TEXT. Tests pass rich markup and terminal
escape sequences as TEXT, to check that everything mcpfleet prints shows them as text.
"""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tests.servers.fake_server import TOOL_SCHEMAS, FakeServer, parse_args
else:
    # Run as a script, this file's folder is the first entry of sys.path.
    from fake_server import TOOL_SCHEMAS, FakeServer, parse_args


class HostileTextServer(FakeServer):
    def __init__(self, options: argparse.Namespace, text: str) -> None:
        super().__init__(options)
        self.text = text
        self.tool_names.append("hostile")

    def tool_list(self) -> list[dict[str, Any]]:
        tools = super().tool_list()
        for tool in tools:
            tool["description"] = (
                f"{TOOL_SCHEMAS.get(tool['name'], {}).get('description', 'Say')} {self.text}"
            )
        return tools

    def call_tool(self, request_id: Any, params: dict[str, Any]) -> None:
        if params.get("name") != "hostile":
            super().call_tool(request_id, params)
            return
        self.reply(request_id, {"content": [{"type": "text", "text": f"result {self.text}"}]})

    def handle(self, message: dict[str, Any]) -> None:
        method, request_id = message.get("method"), message.get("id")
        if method == "resources/list":
            resource = {"uri": "fake://readme", "name": f"readme {self.text}", "mimeType": "text/plain"}
            self.reply(request_id, {"resources": [resource]})
        elif method == "prompts/list":
            prompt = {"name": f"greet{self.text}", "description": self.text, "arguments": []}
            self.reply(request_id, {"prompts": [prompt]})
        else:
            super().handle(message)


def main(argv: list[str]) -> None:
    own = argparse.ArgumentParser(add_help=False)
    own.add_argument("--text", required=True)
    known, rest = own.parse_known_args(argv)
    options = parse_args(rest)
    sys.stderr.write(f"stderr {known.text}\n")
    sys.stderr.flush()
    if options.exit_before_handshake:
        sys.exit(options.exit_code)
    HostileTextServer(options, known.text).serve()


if __name__ == "__main__":
    main(sys.argv[1:])
