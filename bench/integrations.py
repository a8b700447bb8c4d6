"""The framework-integration figures of BENCHMARKS.md (section 9), measured in this process on the
project's venv (where `make test` installed the frameworks).

    python -m bench.integrations            # print the section
    python -m bench.integrations --write    # and put it into BENCHMARKS.md

Per framework, native MCP integration against mcpfleet's, side by side in one run, with 10
synthetic stdio servers of which one starts 5 s late (``bench/servers/synthetic_server.py``):

- **first call**: from building the servers' objects and the agent until the model holds the
  answer of its first tool call (on a fast server), through the framework's real agent loop
  with a scripted model (no network);
- **cold**: nothing cached (mcpfleet's first start ever); **warm**: the same fleet again
  (mcpfleet has every tool in its cache, so the 5 s server is deferred);
- **close**: leaving the block (native: the framework's own close) until every server is gone.

Frameworks: the OpenAI Agents SDK (native: ``MCPServerStdio`` × 10 under ``MCPServerManager``,
connected in parallel) and Google ADK (native: ``McpToolset`` × 10). Pydantic AI and LangChain
are not measured here: their native MCP clients need fastmcp and langchain-mcp-adapters, which
the project's venv does not carry (their venvs under .tools/bench-venvs do not carry
mcpfleet); sections 1–5 measure those clients without the agent loop.

Every run gets a fresh home folder, so no configuration or cache of the user's is read.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Coroutine
from pathlib import Path
from typing import Any

from bench.harness import sections

REPO_ROOT = Path(__file__).resolve().parents[1]
SYNTHETIC_SERVER = REPO_ROOT / "bench" / "servers" / "synthetic_server.py"
HEADING = "## 9. Framework integrations"
SERVERS = 10
TOOLS_PER_SERVER = 5
SLOW_START_S = 5.0
RUNS = 3
MESSAGE = "ping from the benchmark"
GATE_S = 0.25
"""mcpfleet's default start-up gate."""


def server_argv(index: int) -> list[str]:
    delay = SLOW_START_S if index == SERVERS - 1 else 0.0
    return [
        os.path.realpath(sys.executable),
        "-S",
        str(SYNTHETIC_SERVER),
        *("--name", f"s{index}", "--tools", str(TOOLS_PER_SERVER), "--init-delay", str(delay)),
    ]


def use_fresh_home() -> Path:
    """Point HOME and the XDG folders at a new folder holding only the fleet's config."""
    home = Path(tempfile.mkdtemp(prefix="mcpfleet-bench-home-"))
    os.environ["HOME"] = str(home)
    for variable, folder in (
        ("XDG_CONFIG_HOME", ".config"),
        ("XDG_STATE_HOME", ".local/state"),
        ("XDG_CACHE_HOME", ".cache"),
        ("XDG_DATA_HOME", ".local/share"),
    ):
        os.environ[variable] = str(home / folder)
    for variable in ("MCPFLEET_HOME", "CODEX_HOME", "CLAUDE_CONFIG_DIR"):
        os.environ.pop(variable, None)
    from mcpfleet.paths import user_config_file

    config = user_config_file()
    config.parent.mkdir(parents=True, exist_ok=True)
    servers = {f"s{i}": {"command": server_argv(i)[0], "args": server_argv(i)[1:]} for i in range(SERVERS)}
    config.write_text(json.dumps({"mcpServers": servers}))
    (home / "project").mkdir()
    return home / "project"


class Timings:
    """When the model held its first tool answer, and how long the close took (seconds)."""

    def __init__(self) -> None:
        self.started = time.perf_counter()
        self.first_answer: float | None = None
        self.close: float | None = None

    def answered(self) -> None:
        if self.first_answer is None:
            self.first_answer = time.perf_counter() - self.started


# -- OpenAI Agents SDK -------------------------------------------------------------------------------


def agents_model(tool_name: str, timings: Timings) -> Any:
    from agents import ModelResponse, Usage
    from agents.models.interface import Model
    from openai.types.responses import ResponseFunctionToolCall, ResponseOutputMessage, ResponseOutputText

    class Scripted(Model):
        async def get_response(self, system_instructions: Any, input: Any, *args: Any, **kwargs: Any) -> Any:
            answered = isinstance(input, list) and any(
                (item.get("type") if isinstance(item, dict) else None) == "function_call_output"
                for item in input
            )
            if not answered:
                call = ResponseFunctionToolCall(
                    type="function_call",
                    call_id="c0",
                    name=tool_name,
                    arguments=json.dumps({"message": MESSAGE}),
                )
                return ModelResponse(output=[call], usage=Usage(), response_id=None)
            timings.answered()
            text = ResponseOutputText(type="output_text", text="done", annotations=[])
            message = ResponseOutputMessage(
                id="m", type="message", role="assistant", status="completed", content=[text]
            )
            return ModelResponse(output=[message], usage=Usage(), response_id=None)

        def stream_response(self, *args: Any, **kwargs: Any) -> AsyncIterator[Any]:
            raise NotImplementedError

    return Scripted()


async def agents_native(timings: Timings) -> None:
    from agents import Agent, RunConfig, Runner
    from agents.mcp import MCPServerManager, MCPServerStdio

    servers = [
        MCPServerStdio(
            {"command": server_argv(i)[0], "args": server_argv(i)[1:]},
            name=f"s{i}",
            client_session_timeout_seconds=30,
        )
        for i in range(SERVERS)
    ]
    manager = MCPServerManager(servers, connect_in_parallel=True, strict=True)
    await manager.__aenter__()
    try:
        # Ten servers all listing tool_0…tool_4: the SDK refuses the clash unless it prefixes names.
        agent = Agent(
            name="a",
            model=agents_model("mcp_s0__tool_0", timings),
            mcp_servers=list(manager.active_servers),
            mcp_config={"include_server_in_tool_names": True},
        )
        await Runner.run(agent, "go", run_config=RunConfig(tracing_disabled=True))
    finally:
        closing = time.perf_counter()
        await manager.__aexit__(None, None, None)
        timings.close = time.perf_counter() - closing


async def agents_mcpfleet(timings: Timings, project: Path) -> None:
    from agents import Agent, RunConfig, Runner

    from mcpfleet.integrations.openai_agents import MCPFleetServer

    fleet = MCPFleetServer(cwd=project)
    await fleet.connect()
    try:
        agent = Agent(name="a", model=agents_model("mcp_s0_tool_0", timings), mcp_servers=[fleet])
        await Runner.run(agent, "go", run_config=RunConfig(tracing_disabled=True))
    finally:
        closing = time.perf_counter()
        await fleet.cleanup()
        timings.close = time.perf_counter() - closing


# -- Google ADK -------------------------------------------------------------------------------------


def adk_model(tool_name: str, timings: Timings) -> Any:
    from google.adk.models.base_llm import BaseLlm
    from google.adk.models.llm_request import LlmRequest
    from google.adk.models.llm_response import LlmResponse
    from google.genai import types

    class Scripted(BaseLlm):
        async def generate_content_async(
            self, llm_request: LlmRequest, stream: bool = False
        ) -> AsyncGenerator[LlmResponse, None]:
            parts = [part for content in llm_request.contents for part in content.parts or []]
            if not any(part.function_response for part in parts):
                call = types.FunctionCall(id="c0", name=tool_name, args={"message": MESSAGE})
                yield LlmResponse(content=types.Content(role="model", parts=[types.Part(function_call=call)]))
                return
            timings.answered()
            yield LlmResponse(content=types.Content(role="model", parts=[types.Part(text="done")]))

    return Scripted(model="scripted")


async def adk_run(tools: list[Any], model: Any) -> Any:
    from google.adk.agents import LlmAgent
    from google.adk.runners import InMemoryRunner
    from google.genai import types

    runner = InMemoryRunner(agent=LlmAgent(name="a", model=model, tools=tools), app_name="bench")
    session = await runner.session_service.create_session(app_name="bench", user_id="u")
    message = types.Content(role="user", parts=[types.Part(text="go")])
    async for _ in runner.run_async(user_id="u", session_id=session.id, new_message=message):
        pass
    return runner


async def adk_native(timings: Timings) -> None:
    from google.adk.tools.mcp_tool import McpToolset, StdioConnectionParams
    from mcp import StdioServerParameters

    toolsets = [
        McpToolset(
            connection_params=StdioConnectionParams(
                server_params=StdioServerParameters(command=server_argv(i)[0], args=server_argv(i)[1:]),
                timeout=30,
            ),
            tool_name_prefix=f"s{i}",
        )
        for i in range(SERVERS)
    ]
    runner = await adk_run(list(toolsets), adk_model("s0_tool_0", timings))
    closing = time.perf_counter()
    await runner.close()
    timings.close = time.perf_counter() - closing


async def adk_mcpfleet(timings: Timings, project: Path) -> None:
    from mcpfleet.integrations.google_adk import MCPFleetToolset

    toolset = MCPFleetToolset(cwd=project)
    async with toolset:
        runner = await adk_run([toolset], adk_model("mcp_s0_tool_0", timings))
        await runner.close()
        closing = time.perf_counter()
    timings.close = time.perf_counter() - closing


# -- the run ----------------------------------------------------------------------------------------

Native = Callable[[Timings], Coroutine[Any, Any, None]]
Fleet = Callable[[Timings, Path], Coroutine[Any, Any, None]]
FRAMEWORKS: dict[str, tuple[Native, Fleet]] = {
    "OpenAI Agents SDK": (agents_native, agents_mcpfleet),
    "Google ADK": (adk_native, adk_mcpfleet),
}


def measure(run: Callable[[], Coroutine[Any, Any, None]], timings: Timings) -> tuple[float, float]:
    asyncio.run(run())
    if timings.first_answer is None or timings.close is None:
        raise AssertionError("the scripted model never received its tool answer")
    return timings.first_answer, timings.close


def run_framework(native: Native, fleet: Fleet) -> dict[str, list[float]]:
    samples: dict[str, list[float]] = {key: [] for key in ("native", "native close", "cold", "warm", "close")}
    for _ in range(RUNS):
        project = use_fresh_home()
        timings = Timings()
        first, close = measure(lambda timings=timings: native(timings), timings)
        samples["native"].append(first)
        samples["native close"].append(close)
        timings = Timings()
        first, _ = measure(lambda timings=timings, project=project: fleet(timings, project), timings)
        samples["cold"].append(first)
        timings = Timings()
        first, close = measure(lambda timings=timings, project=project: fleet(timings, project), timings)
        samples["warm"].append(first)
        samples["close"].append(close)
    return samples


def section(results: dict[str, dict[str, list[float]]]) -> str:
    def median(values: list[float]) -> str:
        return f"{statistics.median(values):.2f} s"

    lines = [
        HEADING,
        "",
        f"`python -m bench.integrations` ({platform.python_version()}, {os.cpu_count()} cores, medians of "
        f"{RUNS}). {SERVERS} stdio servers ({TOOLS_PER_SERVER} tools each), one of them starting "
        f"{SLOW_START_S:.0f} s late; time from building the agent to the model holding its first tool "
        "answer (a fast server's tool), through the framework's agent loop with a scripted model, and "
        "the time to close. mcpfleet's start-up gate is 250 ms. Pydantic AI and LangChain: not "
        "measured here (see the module's docstring).",
        "",
        "| framework | native first call | mcpfleet cold | mcpfleet warm | native close | mcpfleet close |",
        "|---|---|---|---|---|---|",
    ]
    verdicts = []
    for name, samples in results.items():
        lines.append(
            f"| {name} | {median(samples['native'])} | {median(samples['cold'])} | {median(samples['warm'])} "
            f"| {median(samples['native close'])} | {median(samples['close'])} |"
        )
        warm = statistics.median(samples["warm"])
        cold_over = statistics.median(samples["cold"]) - statistics.median(samples["native"])
        verdicts.append(
            f"- {name}: warm {warm:.2f} s against the goal of gate + 0.1 s = {GATE_S + 0.1:.2f} s "
            f"({'met' if warm <= GATE_S + 0.1 else 'missed'}); cold {cold_over:+.2f} s against native "
            f"({'met' if cold_over <= 0 else 'missed'}: never slower)."
        )
    return "\n".join([*lines, "", *verdicts]) + "\n"


def write_section(text: str) -> None:
    path = REPO_ROOT / "BENCHMARKS.md"
    path.write_text(sections.splice(path.read_text(encoding="utf-8"), HEADING, text), encoding="utf-8")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help="put the section into BENCHMARKS.md")
    options = parser.parse_args()
    results = {name: run_framework(*sides) for name, sides in FRAMEWORKS.items()}
    text = section(results)
    print(text)
    print(json.dumps(results, indent=1), file=sys.stderr)
    if options.write:
        write_section(text)


if __name__ == "__main__":
    main()
