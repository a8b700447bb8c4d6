"""A small notes server: add, list, read and search text notes kept in one JSON file.

Run: ``python -m mcpfleet.cli.demo_servers.notes [--store FILE]`` (stdio). The store defaults to
``notes.json`` in the working directory.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from mcp.server.mcpserver import MCPServer


def build_server(store: Path) -> MCPServer:
    server = MCPServer("notes", instructions="Keeps short text notes for the current project.")

    def load() -> dict[str, str]:
        if not store.exists():
            return {}
        data = json.loads(store.read_text(encoding="utf-8"))
        return {str(title): str(body) for title, body in data.items()}

    def save(notes: dict[str, str]) -> None:
        temporary = store.with_suffix(".tmp")
        temporary.write_text(json.dumps(notes, indent=2, ensure_ascii=False), encoding="utf-8")
        temporary.replace(store)

    @server.tool(description="Save a note under a title (replaces a note with the same title).")
    def add_note(title: str, body: str) -> str:
        notes = load()
        notes[title] = body
        save(notes)
        return f"Saved note {title!r} ({len(body)} characters)."

    @server.tool(description="List the titles of every note.")
    def list_notes() -> list[str]:
        return sorted(load())

    @server.tool(description="Read one note by its title.")
    def read_note(title: str) -> str:
        notes = load()
        if title not in notes:
            raise ValueError(f"No note titled {title!r}; list_notes shows the titles")
        return notes[title]

    @server.tool(description="Find notes whose title or body contains the text (case-insensitive).")
    def search_notes(text: str) -> list[str]:
        needle = text.casefold()
        return sorted(t for t, body in load().items() if needle in t.casefold() or needle in body.casefold())

    @server.resource("notes://all", description="Every note as one JSON document.")
    def all_notes() -> str:
        return json.dumps(load(), indent=2, ensure_ascii=False)

    @server.prompt(description="Ask the model to summarise every note.")
    def summarise_notes() -> str:
        return "Summarise these notes in three bullet points:\n" + json.dumps(load(), ensure_ascii=False)

    return server


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--store", type=Path, default=Path("notes.json"))
    args = parser.parse_args()
    build_server(args.store.resolve()).run("stdio")


if __name__ == "__main__":
    main()
