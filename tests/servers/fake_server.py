"""A scriptable stdio MCP server for tests, the demo and benchmarks (stdlib only, starts fast).

Speaks line-delimited JSON-RPC on stdin/stdout, handshake era (``initialize``; with
``--discover`` it also answers ``server/discover`` and serves requests without a handshake, as
a dual-era server does; of the 2026-07-28 result fields only ``tools/list`` carries them).
Answers
``ping``, ``tools/list`` (paginated with ``--page-size``), ``tools/call``,
``resources/list``, ``resources/templates/list`` (``fake://notes/{id}``), ``resources/read``,
``prompts/list``, ``prompts/get`` and ``completion/complete`` (the prompt's ``who`` and the
template's ``id``); unknown methods get -32601 unless ``--drop-unknown``.

Tools (all by default; ``--tool NAME`` keeps only the named ones, repeatable):
  echo {message}            text + structuredContent {"message"}
  add {a, b}                text of a + b, structuredContent {"sum"}
  sleep {seconds, progress_interval=0.2}
                            sleeps, sending notifications/progress when the call carries a
                            progress token; a notifications/cancelled stops it early
  fail {message?}           an isError result
  crash {code=1}            the process exits at once with that code
  env {name}                structuredContent {"value": os.environ.get(name), "cwd": os.getcwd()}
  roots {}                  asks the client for roots/list and returns its answer as text
``--tool log``, ``--tool refuse``, ``--tool request_id``, ``--tool wait_for`` and ``--tool picture``
(only when named) add:
  log {level=info, message} sends notifications/message (logger "fake-internal") then answers
  refuse {code, message, data?}
                            answers with that JSON-RPC error (its own refusal, not a failure)
  request_id {}             text: the JSON-RPC id the call came under, as JSON (which client
                            code sent it: the SDK's ids are integers)
  wait_for {path}           creates PATH.started, then answers once PATH exists (a call that
                            lasts until the test says so)
  picture {}                an image block (``PICTURE_PNG``, a 2x2 PNG) and a caption
``--tools N`` adds N more echo-like tools ``tool_0`` … ``tool_<N-1>``.
``--hostile-tools`` adds three that misbehave:
  big {bytes}               a text result of that many bytes ("x" repeated)
  hang {}                   never answers (a notifications/cancelled is still logged)
  wrong_id {}               answers, but under another request id
``--unusable-tools`` lists, after the others, five tools no client can use (``UNUSABLE_TOOLS``):
a lone surrogate in a name, one in a description, an ``inputSchema`` of type "string", one
that is not an object at all, and an entry without a name.
``--rich-tools`` adds one tool that carries every optional field a tool may have:
  fancy {}                  title, icons, annotations, outputSchema, execution and _meta
                            (``RICH_TOOL``), answering structuredContent {"ok": true}

Flags:
  --name NAME               serverInfo name and instructions (default "fake")
  --delay-start SECONDS     sleep before reading stdin (a slow cold start)
  --start-when-exists PATH  wait until PATH exists before reading stdin (late by the test's say-so)
  --exit-code N             exit code used by --exit-before-handshake / --crash-after-calls
  --exit-before-handshake   print --stderr-lines and exit with --exit-code before reading stdin
  --crash-after-calls N     exit with --exit-code (default 1) when the N-th tools/call arrives
  --ignore-sigterm          ignore SIGTERM (only SIGKILL ends it)
  --ignore-stdin-eof        keep running after stdin closes
  --banner                  print non-JSON lines on stdout at start and after every answer
  --stderr-lines N          print N numbered lines on stderr at start ("stderr line <i>")
  --spawn-grandchild        start a sleeping child process in the same process group
  --discover                answer server/discover with a 2026-07-28 DiscoverResult
  --drop-unknown            never answer unknown methods (like servers that make the SDK's
                            server/discover probe wait 10 s); each is logged on stderr as
                            ``dropped unknown request <method>``
  --list-changed-after S    S seconds after the handshake, add tool "late_tool" and send
                            notifications/tools/list_changed
  --page-size N             tools/list pages of N tools with nextCursor
  --pid-file PATH           write "<pid>\\n" (and "<grandchild pid>\\n") to PATH at start
  --pid-dir DIR             create the file DIR/<pid> at start (one per process ever started)
  --exit-after S            S seconds after the handshake, exit with --exit-code (default 1)
  --resource-updates        advertise resources.subscribe; each resources/subscribe is answered,
                            then followed 0.1 s later by notifications/resources/updated for its URI
  --catalog-changed-after S S seconds after the handshake, send notifications/resources/list_changed
                            and notifications/prompts/list_changed
  --list-changed-every S    after the handshake, send notifications/tools/list_changed every S seconds
                            until the process ends (a notification flood)
  --flood-logs              with --list-changed-every, also send a notifications/message at each step
  --flood-for S             with --list-changed-every, stop the flood after S seconds: add tool
                            "late_tool" and send one last notifications/tools/list_changed at once
  --list-changed-burst N    right after the handshake, write N times the three list_changed
                            notifications (tools, resources, prompts) in one go, then nothing
  --duplicate-tool NAME     list tool NAME a second time, with another description, right after the first
                            (repeatable)
  --request-log PATH        append the method of every request received to PATH, one per line
  --exit-if-exists PATH     when PATH exists, wait --delay-start seconds, then exit with --exit-code
                            without reading stdin (one config, two outcomes: switched by a file)

  --extra-tool-if-exists PATH
                            list one more echo-like tool, "extra", when PATH exists at start
  --cancel-log PATH         append "cancelled <id>" to PATH for every notifications/cancelled received
  --slow-listings S         wait S seconds before answering prompts/list

Every received notifications/cancelled is logged on stderr as ``cancelled request <id>``.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import signal
import subprocess
import sys
import threading
import time
from typing import Any

TOOL_SCHEMAS: dict[str, dict[str, Any]] = {
    "echo": {
        "description": "Echo a message back",
        "inputSchema": {
            "type": "object",
            "properties": {"message": {"type": "string"}},
            "required": ["message"],
        },
    },
    "add": {
        "description": "Add two numbers",
        "inputSchema": {
            "type": "object",
            "properties": {"a": {"type": "number"}, "b": {"type": "number"}},
            "required": ["a", "b"],
        },
    },
    "sleep": {
        "description": "Sleep, reporting progress",
        "inputSchema": {
            "type": "object",
            "properties": {"seconds": {"type": "number"}, "progress_interval": {"type": "number"}},
        },
    },
    "fail": {"description": "Return an error result", "inputSchema": {"type": "object", "properties": {}}},
    "crash": {"description": "Exit the server process", "inputSchema": {"type": "object", "properties": {}}},
    "env": {
        "description": "Read an environment variable of the server process",
        "inputSchema": {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]},
    },
    "roots": {
        "description": "Ask the client for its roots",
        "inputSchema": {"type": "object", "properties": {}},
    },
}
OPT_IN_TOOL_SCHEMAS: dict[str, dict[str, Any]] = {
    "log": {
        "description": "Send a log message to the client",
        "inputSchema": {
            "type": "object",
            "properties": {"level": {"type": "string"}, "message": {"type": "string"}},
        },
    },
    "refuse": {
        "description": "Answer with the JSON-RPC error given",
        "inputSchema": {
            "type": "object",
            "properties": {"code": {"type": "integer"}, "message": {"type": "string"}, "data": {}},
            "required": ["code", "message"],
        },
    },
    "request_id": {
        "description": "Answer with the JSON-RPC id of this call",
        "inputSchema": {"type": "object", "properties": {}},
    },
    "wait_for": {
        "description": "Create PATH.started, then answer once PATH exists",
        "inputSchema": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]},
    },
    "picture": {
        "description": "Answer with a small picture",
        "inputSchema": {"type": "object", "properties": {}},
    },
}
PICTURE_PNG = (
    "iVBORw0KGgoAAAANSUhEUgAAAAIAAAACCAIAAAD91JpzAAAAEklEQVR4nGP4H8DAUPGfAUIBACZqBY2p8lalAAAAAElFTkSuQmCC"
)
"""A 2x2 PNG, base64: what ``picture`` answers."""
UNUSABLE_TOOLS: list[dict[str, Any]] = [
    {"name": "lone\ud800surrogate", "inputSchema": {"type": "object"}},
    {"name": "surrogate_text", "description": "text \udfff here", "inputSchema": {"type": "object"}},
    {"name": "string_schema", "inputSchema": {"type": "string"}},
    {"name": "schema_not_object", "inputSchema": "object"},
    {"description": "no name at all", "inputSchema": {"type": "object"}},
]
"""Written with ``json.dumps``, whose ``\\ud800`` escapes are what Python and JavaScript
servers emit for a lone surrogate."""

RICH_TOOL: dict[str, Any] = {
    "name": "fancy",
    "title": "A Fancy Tool",
    "description": "Carries every optional field",
    "inputSchema": {
        "type": "object",
        "properties": {"level": {"type": "integer", "minimum": 1, "description": "how fancy"}},
        "additionalProperties": False,
    },
    "outputSchema": {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]},
    "icons": [{"src": "https://example.com/fancy.png", "mimeType": "image/png", "sizes": ["48x48"]}],
    "annotations": {"title": "Fancy", "readOnlyHint": True, "idempotentHint": True, "openWorldHint": False},
    "execution": {"taskSupport": "forbidden"},
    "_meta": {"example.com/owner": "tests", "example.com/rank": 3},
}
NOTE_TEMPLATE = {"uriTemplate": "fake://notes/{id}", "name": "note", "mimeType": "text/plain"}
HOSTILE_TOOL_SCHEMAS: dict[str, dict[str, Any]] = {
    "big": {
        "description": "Answer with a large text",
        "inputSchema": {"type": "object", "properties": {"bytes": {"type": "integer"}}},
    },
    "hang": {"description": "Never answer", "inputSchema": {"type": "object", "properties": {}}},
    "wrong_id": {
        "description": "Answer under another request id",
        "inputSchema": {"type": "object", "properties": {}},
    },
}


class FakeServer:
    def __init__(self, options: argparse.Namespace) -> None:
        self.options = options
        self.write_lock = threading.Lock()
        self.state_lock = threading.Lock()
        self.cancelled: dict[Any, threading.Event] = {}
        self.pending_client_requests: dict[int, tuple[threading.Event, list[Any]]] = {}
        self.next_request_id = 1000
        self.calls = 0
        self.tool_names = list(options.tool or TOOL_SCHEMAS)
        self.tool_names += [f"tool_{index}" for index in range(options.tools)]
        if options.hostile_tools:
            self.tool_names += list(HOSTILE_TOOL_SCHEMAS)
        if options.rich_tools:
            self.tool_names.append(RICH_TOOL["name"])
        if options.extra_tool_if_exists and os.path.exists(options.extra_tool_if_exists):
            self.tool_names.append("extra")

    # -- output -------------------------------------------------------------------------------------------
    def send(self, message: dict[str, Any]) -> None:
        line = json.dumps(message)
        with self.write_lock:
            sys.stdout.write(line + "\n")
            if self.options.banner:
                sys.stdout.write("[fake] banner between messages\n")
            sys.stdout.flush()

    def reply(self, request_id: Any, result: dict[str, Any]) -> None:
        self.send({"jsonrpc": "2.0", "id": request_id, "result": result})

    def reply_error(self, request_id: Any, code: int, message: str, data: Any = None) -> None:
        error: dict[str, Any] = {"code": code, "message": message}
        if data is not None:
            error["data"] = data
        self.send({"jsonrpc": "2.0", "id": request_id, "error": error})

    def notify(self, method: str, params: dict[str, Any]) -> None:
        self.send({"jsonrpc": "2.0", "method": method, "params": params})

    def ask_client(self, method: str, params: dict[str, Any], timeout: float = 5.0) -> Any:
        with self.state_lock:
            request_id = self.next_request_id
            self.next_request_id += 1
            waiter: tuple[threading.Event, list[Any]] = (threading.Event(), [])
            self.pending_client_requests[request_id] = waiter
        self.send({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params})
        if not waiter[0].wait(timeout):
            return {"error": "no answer"}
        return waiter[1][0]

    # -- catalog ------------------------------------------------------------------------------------------
    def tool_list(self) -> list[dict[str, Any]]:
        tools = []
        for name in self.tool_names:
            if name == RICH_TOOL["name"]:
                tools.append(RICH_TOOL)
                continue
            schema = (
                TOOL_SCHEMAS.get(name)
                or HOSTILE_TOOL_SCHEMAS.get(name)
                or OPT_IN_TOOL_SCHEMAS.get(name)
                or TOOL_SCHEMAS["echo"]
            )
            tools.append({"name": name, **schema})
            if name in self.options.duplicate_tool:
                tools.append({"name": name, **schema, "description": "a second definition of the same name"})
        if self.options.unusable_tools:
            tools += UNUSABLE_TOOLS
        return tools

    def list_tools(self, params: dict[str, Any]) -> dict[str, Any]:
        tools = self.tool_list()
        page_size = self.options.page_size
        if not page_size:
            return {"tools": tools}
        start = int(params.get("cursor") or 0)
        result: dict[str, Any] = {"tools": tools[start : start + page_size]}
        if start + page_size < len(tools):
            result["nextCursor"] = str(start + page_size)
        return result

    # -- tools --------------------------------------------------------------------------------------------
    def call_tool(self, request_id: Any, params: dict[str, Any]) -> None:
        name = params.get("name")
        arguments = params.get("arguments") or {}
        progress_token = (params.get("_meta") or {}).get("progressToken")
        cancelled = self.cancelled.setdefault(request_id, threading.Event())
        try:
            if name not in self.tool_names:
                self.reply_error(request_id, -32602, f"Unknown tool: {name}")
            elif name in ("echo", "late_tool", "extra") or str(name).startswith("tool_"):
                message = str(arguments.get("message", ""))
                self.reply(
                    request_id,
                    {
                        "content": [{"type": "text", "text": message}],
                        "structuredContent": {"message": message},
                    },
                )
            elif name == "add":
                total = arguments["a"] + arguments["b"]
                self.reply(
                    request_id,
                    {"content": [{"type": "text", "text": str(total)}], "structuredContent": {"sum": total}},
                )
            elif name == "sleep":
                self.sleep(request_id, arguments, progress_token, cancelled)
            elif name == "fail":
                text = str(arguments.get("message", "the tool failed"))
                self.reply(request_id, {"content": [{"type": "text", "text": text}], "isError": True})
            elif name == "crash":
                os._exit(int(arguments.get("code", 1)))
            elif name == "env":
                value = os.environ.get(str(arguments["name"]))
                self.reply(
                    request_id,
                    {
                        "content": [{"type": "text", "text": str(value)}],
                        "structuredContent": {"value": value, "cwd": os.getcwd()},
                    },
                )
            elif name == "log":
                message = str(arguments.get("message", ""))
                level = str(arguments.get("level", "info"))
                self.notify(
                    "notifications/message", {"level": level, "logger": "fake-internal", "data": message}
                )
                self.reply(request_id, {"content": [{"type": "text", "text": f"logged {message}"}]})
            elif name == "refuse":
                code, message = int(arguments["code"]), str(arguments["message"])
                self.reply_error(request_id, code, message, arguments.get("data"))
            elif name == "picture":
                image = {"type": "image", "data": PICTURE_PNG, "mimeType": "image/png"}
                self.reply(request_id, {"content": [image, {"type": "text", "text": "a 2x2 picture"}]})
            elif name == "request_id":
                self.reply(request_id, {"content": [{"type": "text", "text": json.dumps(request_id)}]})
            elif name == "wait_for":
                path = str(arguments["path"])
                open(f"{path}.started", "w").close()
                while not os.path.exists(path):
                    if cancelled.wait(0.02):
                        return  # a cancelled request gets no answer
                self.reply(request_id, {"content": [{"type": "text", "text": f"released by {path}"}]})
            elif name == RICH_TOOL["name"]:
                self.reply(
                    request_id,
                    {
                        "content": [{"type": "text", "text": '{"ok": true}'}],
                        "structuredContent": {"ok": True},
                    },
                )
            elif name == "roots":
                answer = self.ask_client("roots/list", {})
                self.reply(request_id, {"content": [{"type": "text", "text": json.dumps(answer)}]})
            elif name == "big":
                text = "x" * int(arguments.get("bytes", 1000))
                self.reply(request_id, {"content": [{"type": "text", "text": text}]})
            elif name == "hang":
                cancelled.wait()
            elif name == "wrong_id":
                wrong_id = request_id + 100_000 if isinstance(request_id, int) else f"{request_id}-wrong"
                self.reply(wrong_id, {"content": [{"type": "text", "text": "answered under another id"}]})
        finally:
            self.cancelled.pop(request_id, None)

    def sleep(
        self, request_id: Any, arguments: dict[str, Any], progress_token: Any, cancelled: threading.Event
    ) -> None:
        seconds = float(arguments.get("seconds", 1))
        interval = float(arguments.get("progress_interval", 0.2))
        started = time.monotonic()
        step = 0
        while True:
            elapsed = time.monotonic() - started
            if elapsed >= seconds:
                break
            wait = min(
                interval if interval > 0 and progress_token is not None else seconds, seconds - elapsed
            )
            if cancelled.wait(wait):
                return  # a cancelled request gets no answer
            if progress_token is not None and interval > 0 and time.monotonic() - started < seconds:
                step += 1
                self.notify(
                    "notifications/progress",
                    {"progressToken": progress_token, "progress": step, "message": f"step {step}"},
                )
        self.reply(request_id, {"content": [{"type": "text", "text": f"slept {seconds}"}]})

    # -- dispatch -----------------------------------------------------------------------------------------
    def handle(self, message: dict[str, Any]) -> None:
        method = message.get("method")
        request_id = message.get("id")
        params = message.get("params") or {}
        if method is None:
            waiter = (
                self.pending_client_requests.pop(request_id, None) if isinstance(request_id, int) else None
            )
            if waiter is not None:
                waiter[1].append(message.get("result", message.get("error")))
                waiter[0].set()
            return
        if request_id is None:
            self.handle_notification(method, params)
            return
        if self.options.request_log:
            with self.state_lock, open(self.options.request_log, "a") as log:
                log.write(f"{method}\n")
        if method == "initialize":
            version = params.get("protocolVersion", "2025-06-18")
            self.reply(
                request_id,
                {
                    "protocolVersion": version,
                    "capabilities": {
                        "tools": {"listChanged": True},
                        "resources": (
                            {"subscribe": True, "listChanged": True} if self.options.resource_updates else {}
                        ),
                        "prompts": {},
                        "logging": {},
                        "completions": {},
                    },
                    "serverInfo": {"name": self.options.name, "version": "1.2.3"},
                    "instructions": f"fake server {self.options.name}",
                },
            )
        elif method == "ping":
            self.reply(request_id, {})
        elif method == "server/discover" and self.options.discover:
            self.reply(
                request_id,
                {
                    "supportedVersions": ["2026-07-28"],
                    "capabilities": {"tools": {"listChanged": True}},
                    "resultType": "complete",
                    "ttlMs": 0,
                    "cacheScope": "public",
                },
            )
        elif method == "tools/list":
            listing = self.list_tools(params)
            if "io.modelcontextprotocol/protocolVersion" in (params.get("_meta") or {}):
                # A 2026-07-28 listing carries its caching hints.
                listing.update(ttlMs=0, cacheScope="private", resultType="complete")
            self.reply(request_id, listing)
        elif method == "tools/call":
            with self.state_lock:
                self.calls += 1
                crash = self.options.crash_after_calls and self.calls >= self.options.crash_after_calls
            if crash:
                sys.stderr.write("crashing as asked\n")
                sys.stderr.flush()
                os._exit(self.options.exit_code or 1)
            threading.Thread(target=self.call_tool, args=(request_id, params), daemon=True).start()
        elif method == "resources/list":
            resource = {"uri": "fake://readme", "name": "readme", "mimeType": "text/plain"}
            self.reply(request_id, {"resources": [resource]})
        elif method in ("resources/subscribe", "resources/unsubscribe") and self.options.resource_updates:
            self.reply(request_id, {})
            if method == "resources/subscribe":
                uri = params.get("uri")
                threading.Timer(0.1, self.notify, ("notifications/resources/updated", {"uri": uri})).start()
        elif method == "resources/templates/list":
            self.reply(request_id, {"resourceTemplates": [NOTE_TEMPLATE]})
        elif method == "completion/complete":
            self.reply(request_id, {"completion": self.complete(params)})
        elif method == "resources/read":
            uri = params.get("uri")
            if isinstance(uri, str) and uri.startswith("fake://notes/"):
                note = f"note {uri.removeprefix('fake://notes/')} of {self.options.name}"
                self.reply(request_id, {"contents": [{"uri": uri, "mimeType": "text/plain", "text": note}]})
            elif uri != "fake://readme":
                self.reply_error(request_id, -32002, f"Resource not found: {uri}", {"uri": uri})
            else:
                text = f"readme of {self.options.name}"
                self.reply(request_id, {"contents": [{"uri": uri, "mimeType": "text/plain", "text": text}]})
        elif method == "prompts/list":
            time.sleep(self.options.slow_listings)
            prompt = {"name": "greet", "description": "Greet someone", "arguments": [{"name": "who"}]}
            self.reply(request_id, {"prompts": [prompt]})
        elif method == "prompts/get":
            who = (params.get("arguments") or {}).get("who", "world")
            message = {"role": "user", "content": {"type": "text", "text": f"Hello {who}"}}
            self.reply(request_id, {"messages": [message]})
        elif self.options.drop_unknown:
            sys.stderr.write(f"dropped unknown request {method}\n")
            sys.stderr.flush()
        else:
            self.reply_error(request_id, -32601, f"Method not found: {method}")

    def complete(self, params: dict[str, Any]) -> dict[str, Any]:
        ref = params.get("ref") or {}
        argument = params.get("argument") or {}
        if ref.get("type") == "ref/prompt" and ref.get("name") == "greet":
            candidates = ["alice", "bob", f"{self.options.name}-friend"]
        elif ref.get("type") == "ref/resource" and ref.get("uri") == NOTE_TEMPLATE["uriTemplate"]:
            candidates = ["1", "2", "10"]
        else:
            candidates = []
        prefix = str(argument.get("value", ""))
        values = [value for value in candidates if value.startswith(prefix)]
        return {"values": values, "total": len(values), "hasMore": False}

    def handle_notification(self, method: str, params: dict[str, Any]) -> None:
        if method == "notifications/cancelled":
            request_id = params.get("requestId")
            sys.stderr.write(f"cancelled request {request_id}\n")
            sys.stderr.flush()
            if self.options.cancel_log:
                with self.state_lock, open(self.options.cancel_log, "a") as log:
                    log.write(f"cancelled {request_id}\n")
            event = self.cancelled.get(request_id)
            if event is not None:
                event.set()
        elif method == "notifications/initialized":
            if self.options.list_changed_after is not None:
                threading.Timer(self.options.list_changed_after, self.change_tools).start()
            if self.options.catalog_changed_after is not None:
                threading.Timer(self.options.catalog_changed_after, self.change_catalog).start()
            if self.options.exit_after is not None:
                threading.Timer(self.options.exit_after, self.exit_as_asked).start()
            if self.options.list_changed_every is not None:
                threading.Thread(target=self.flood_list_changed, daemon=True).start()
            if self.options.list_changed_burst:
                self.burst_list_changed(self.options.list_changed_burst)

    def change_tools(self) -> None:
        with self.state_lock:
            self.tool_names.append("late_tool")
        self.notify("notifications/tools/list_changed", {})

    def flood_list_changed(self) -> None:
        flood_for = self.options.flood_for
        ends_at = math.inf if flood_for is None else time.monotonic() + flood_for
        while time.monotonic() < ends_at:
            self.notify("notifications/tools/list_changed", {})
            if self.options.flood_logs:
                self.notify("notifications/message", {"level": "info", "logger": "flood", "data": "flooding"})
            time.sleep(self.options.list_changed_every)
        self.change_tools()

    def burst_list_changed(self, times: int) -> None:
        methods = [f"notifications/{kind}/list_changed" for kind in ("tools", "resources", "prompts")]
        lines = [json.dumps({"jsonrpc": "2.0", "method": method}) for method in methods] * times
        with self.write_lock:
            sys.stdout.write("\n".join(lines) + "\n")
            sys.stdout.flush()

    def change_catalog(self) -> None:
        self.notify("notifications/resources/list_changed", {})
        self.notify("notifications/prompts/list_changed", {})

    def exit_as_asked(self) -> None:
        sys.stderr.write("exiting as asked\n")
        sys.stderr.flush()
        os._exit(self.options.exit_code or 1)

    def serve(self) -> None:
        for raw in sys.stdin:
            line = raw.strip()
            if not line:
                continue
            try:
                message = json.loads(line)
            except ValueError:
                sys.stderr.write(f"ignoring non-JSON input: {line[:80]}\n")
                continue
            for item in message if isinstance(message, list) else [message]:
                self.handle(item)


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="Scriptable stdio MCP server for tests")
    parser.add_argument("--name", default="fake")
    parser.add_argument("--tool", action="append")
    parser.add_argument("--tools", type=int, default=0)
    parser.add_argument("--hostile-tools", action="store_true")
    parser.add_argument("--rich-tools", action="store_true")
    parser.add_argument("--unusable-tools", action="store_true")
    parser.add_argument("--delay-start", type=float, default=0.0)
    parser.add_argument("--start-when-exists")
    parser.add_argument("--exit-code", type=int, default=0)
    parser.add_argument("--exit-before-handshake", action="store_true")
    parser.add_argument("--crash-after-calls", type=int, default=0)
    parser.add_argument("--ignore-sigterm", action="store_true")
    parser.add_argument("--ignore-stdin-eof", action="store_true")
    parser.add_argument("--banner", action="store_true")
    parser.add_argument("--stderr-lines", type=int, default=0)
    parser.add_argument("--spawn-grandchild", action="store_true")
    parser.add_argument("--drop-unknown", action="store_true")
    parser.add_argument("--discover", action="store_true")
    parser.add_argument("--list-changed-after", type=float, default=None)
    parser.add_argument("--page-size", type=int, default=0)
    parser.add_argument("--pid-file")
    parser.add_argument("--pid-dir")
    parser.add_argument("--exit-after", type=float, default=None)
    parser.add_argument("--resource-updates", action="store_true")
    parser.add_argument("--catalog-changed-after", type=float, default=None)
    parser.add_argument("--list-changed-every", type=float, default=None)
    parser.add_argument("--flood-logs", action="store_true")
    parser.add_argument("--flood-for", type=float, default=None)
    parser.add_argument("--list-changed-burst", type=int, default=0)
    parser.add_argument("--duplicate-tool", action="append", default=[])
    parser.add_argument("--request-log")
    parser.add_argument("--exit-if-exists")
    parser.add_argument("--extra-tool-if-exists")
    parser.add_argument("--cancel-log")
    parser.add_argument("--slow-listings", type=float, default=0.0)
    return parser.parse_args(argv)


def main(argv: list[str]) -> None:
    options = parse_args(argv)
    if options.ignore_sigterm:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    pids = [os.getpid()]
    if options.spawn_grandchild:
        grandchild = subprocess.Popen(
            [sys.executable, "-c", "import time; time.sleep(300)"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        pids.append(grandchild.pid)
    if options.pid_file:
        # Written aside and renamed into place: a test that sees the file reads every pid,
        # never the empty file that open() creates before write() fills it.
        staging = f"{options.pid_file}.{os.getpid()}.tmp"
        with open(staging, "w") as handle:
            handle.write("".join(f"{pid}\n" for pid in pids))
        os.replace(staging, options.pid_file)
    if options.pid_dir:
        open(os.path.join(options.pid_dir, str(os.getpid())), "w").close()
    for index in range(options.stderr_lines):
        sys.stderr.write(f"stderr line {index}\n")
    sys.stderr.flush()
    if options.exit_if_exists and os.path.exists(options.exit_if_exists):
        time.sleep(options.delay_start)
        sys.exit(options.exit_code)
    if options.exit_before_handshake:
        sys.exit(options.exit_code)
    if options.banner:
        sys.stdout.write(f"Starting {options.name} server... (not JSON)\n")
        sys.stdout.flush()
    if options.delay_start:
        time.sleep(options.delay_start)
    if options.start_when_exists:
        while not os.path.exists(options.start_when_exists):
            time.sleep(0.02)
    FakeServer(options).serve()
    if options.ignore_stdin_eof:
        while True:
            time.sleep(3600)


if __name__ == "__main__":
    main(sys.argv[1:])
