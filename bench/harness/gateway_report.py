"""The "Gateway" section of BENCHMARKS.md, from the results of ``bench.gateway.run``."""

from __future__ import annotations

import statistics
from typing import Any

from bench.harness import sections

HEADING = "## 8. Gateway: `mcpfleet serve` and its peers"
WARM_RATIO_GOAL = 1.1
ADDED_LATENCY_GOAL_MS = 0.3
TRANSPORTS = {
    "stdio": "stdio",
    "streamable-http": "streamable HTTP",
    "sse": "HTTP+SSE (2024-11-05)",
    "direct": "stdio, to each backend",
}

Runs = list[dict[str, Any]]


def _good(runs: Runs) -> Runs:
    return [run for run in runs if "error" not in run]


def median(runs: Runs, field: str) -> float | None:
    values = [run[field] for run in _good(runs) if field in run]
    return statistics.median(values) if values else None


def _error(runs: Runs) -> str | None:
    return next((run["error"] for run in runs if "error" in run), None)


def _s(value: float | None) -> str:
    return "—" if value is None else f"{value:.2f} s"


def _ms(value: float | None) -> str:
    return "—" if value is None else f"{value:.2f} ms"


def _mb(value: float | None) -> str:
    return "—" if value is None else f"{value:.0f} MiB"


def _count(value: float | None) -> str:
    return "—" if value is None else f"{value:.0f}"


class GatewayFigures:
    """Medians per gateway and scenario, and the mcpfleet goals derived from them."""

    def __init__(self, results: dict[str, Any]) -> None:
        self.results = results
        self.scenarios: dict[str, dict[str, Runs]] = results["scenarios"]

    def runs(self, scenario: str, gateway: str) -> Runs:
        return self.scenarios.get(scenario, {}).get(gateway, [])

    def median(self, scenario: str, gateway: str, field: str) -> float | None:
        return median(self.runs(scenario, gateway), field)

    def warm_ratio(self) -> float | None:
        slow = self.median("slow", "mcpfleet-warm", "first_list_s")
        none = self.median("none", "mcpfleet-warm", "first_list_s")
        return slow / none if slow is not None and none else None

    def added_ms(self, gateway: str) -> float | None:
        """p50 through the gateway minus p50 of the direct calls alternated with them (median of runs)."""
        return self.median("slow", gateway, "added_p50_ms")


def render(results: dict[str, Any]) -> str:
    figures = GatewayFigures(results)
    lines: list[str] = [HEADING, ""]
    lines += _method(results)
    lines += _goals(figures)
    lines += _starts(figures)
    lines += _calls_and_memory(figures)
    lines += _notes(figures)
    return "\n".join(lines).rstrip() + "\n"


def _method(results: dict[str, Any]) -> list[str]:
    machine = results.get("machine", {})
    load = results["load_average"]
    slow = results["slow_start_s"]
    servers, tools = results["servers"], results["tools_per_server"]
    latency = results["latency"]["slow"]
    limits = results["repeat_limit_s"]
    how = "smoke run" if results["smoke"] else "also run by `make bench`"
    return [
        f"Measured by `python -m bench.gateway` ({how}) in {results['seconds']:.0f} s. Machine:"
        f" {machine.get('nproc', '?')} CPUs ({machine.get('cpu', '?')}),"
        f" Python {machine.get('python', '?')}, load average {load['before'][0]:.1f} before and"
        f" {load['after'][0]:.1f} after (the cores were shared with other work, so compare rows of this"
        f" run, not runs). mcpfleet measured: {results.get('source', 'unknown')}.",
        "",
        f"{servers} stdio backends (`bench/servers/synthetic_server.py`, {tools} echo tools each,"
        f" `python -S`), named `s0`…`s{servers - 1}`, in one `mcpServers` file that every gateway"
        f" reads. Scenario *slow*: the last backend sleeps {slow:g} s before it reads stdin; scenario"
        " *none*: no backend is slow."
        " Every run is a fresh client process (`bench/peers/gateway_client.py`): the official SDK's"
        ' `Client` (project venv, `mode="legacy"`, the handshake hosts use), over the transport each'
        " gateway serves. The clock starts when the gateway is launched (the SDK spawning it for stdio;"
        " `Popen` for HTTP, then connecting until it answers). *First `tools/list`*: the first answered"
        " list and how many backend tools it held; *all tools*: the first list that held all"
        f" {servers * tools}, asking again on each `notifications/tools/list_changed` and every 50 ms."
        f" Calls: up to {latency['calls']:.0f} sequential `tools/call` of `s0`'s `tool_0` after"
        f" {latency['warmup_calls']:.0f} warm-up calls, within {latency['call_budget_s']:g} s, with"
        " every backend up (scenario *slow*), each followed by the same call straight to one more"
        " backend like `s0` (no gateway): *added* is the p50 through the gateway minus the p50 of those"
        " direct calls, so both halves of the difference saw the same load. RSS from /proc once every"
        " tool was listed: the gateway's processes (its helpers included) apart from the backends below"
        " them. mcpfleet *cold* starts with an empty tool"
        " cache every run; *warm* shares one cache per scenario, filled by an unmeasured start."
        f" Medians of up to {results['reps']} runs{_more_runs(results)}, interleaved; a run whose first"
        " list took more than"
        f" {limits['slow']:g} s (*slow*) or {limits['none']:g} s (*none*) is not repeated.",
        "",
        "| virtualenv / package | versions |",
        "|---|---|",
        *(
            f"| {name} | {', '.join(f'{package} {version}' for package, version in sorted(found.items()))} |"
            for name, found in results["versions"].items()
        ),
        "",
    ]


def _more_runs(results: dict[str, Any]) -> str:
    """Which gateways got more runs than the others (those whose figures the goals judge)."""
    more = [
        f"{gateway['max_runs']} for {gateway['label'].replace('**', '')}"
        for gateway in results["gateways"].values()
        if gateway.get("max_runs", results["reps"]) > results["reps"]
    ]
    return f" ({'; '.join(more)}, whose figures the goals judge)" if more else ""


def _verdict(met: bool | None) -> str:
    return "—" if met is None else ("**met**" if met else "**missed**")


def _goals(figures: GatewayFigures) -> list[str]:
    slow = figures.median("slow", "mcpfleet-warm", "first_list_s")
    none = figures.median("none", "mcpfleet-warm", "first_list_s")
    ratio = figures.warm_ratio()
    p50 = figures.median("slow", "mcpfleet-warm", "p50_ms")
    direct = figures.median("slow", "mcpfleet-warm", "direct_p50_ms")
    added = figures.added_ms("mcpfleet-warm")
    return [
        "| goal (mcpfleet serve) | measured (median) | verdict |",
        "|---|---|---|",
        f"| warm: first `tools/list` with the slow backend ≤ {WARM_RATIO_GOAL} × without | {_s(slow)} vs"
        f" {_s(none)} = {'—' if ratio is None else f'{ratio:.2f}×'} |"
        f" {_verdict(None if ratio is None else ratio <= WARM_RATIO_GOAL)} |",
        f"| warm: call latency added at p50 ≤ {ADDED_LATENCY_GOAL_MS} ms | {_ms(p50)} vs {_ms(direct)}"
        " direct in the same run ="
        f" {'—' if added is None else f'+{added:.2f} ms'} |"
        f" {_verdict(None if added is None else added <= ADDED_LATENCY_GOAL_MS)} |",
        "",
    ]


def _gateways(figures: GatewayFigures) -> dict[str, dict[str, Any]]:
    described: dict[str, dict[str, Any]] = figures.results["gateways"]
    return described


def _first_list(figures: GatewayFigures, scenario: str, key: str) -> str:
    runs = figures.runs(scenario, key)
    seconds = median(runs, "first_list_s")
    if seconds is None:
        failure = _error(runs)
        return f"failed: {failure}" if failure else "—"
    return f"{seconds:.2f} s ({_count(median(runs, 'first_list_tools'))})"


def _starts(figures: GatewayFigures) -> list[str]:
    total = figures.results["servers"] * figures.results["tools_per_server"]
    slow = figures.results["slow_start_s"]
    lines = [
        f"Start: from launching the gateway (backend tools in the first list in brackets; {total} in all).",
        "",
        f"| gateway | client transport | first `tools/list`, slow | all {total} tools, slow |"
        f" first `tools/list`, none | all {total} tools, none | first list slow ÷ none | runs slow/none |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for key, gateway in _gateways(figures).items():
        slow_first = figures.median("slow", key, "first_list_s")
        none_first = figures.median("none", key, "first_list_s")
        ratio = f"{slow_first / none_first:.2f}×" if slow_first is not None and none_first else "—"
        runs = "/".join(str(len(_good(figures.runs(scenario, key)))) for scenario in ("slow", "none"))
        lines.append(
            f"| {gateway['label']} | {TRANSPORTS[gateway['transport']]} |"
            f" {_first_list(figures, 'slow', key)} |"
            f" {_s(figures.median('slow', key, 'full_list_s'))} | {_first_list(figures, 'none', key)} |"
            f" {_s(figures.median('none', key, 'full_list_s'))} | {ratio} | {runs} |"
        )
    waiting = f"The slow backend alone takes {slow:g} s: a gateway that waits for it cannot answer sooner."
    lines += ["", waiting, ""]
    return lines


def _calls_and_memory(figures: GatewayFigures) -> list[str]:
    lines = [
        "Calls and memory (scenario *slow*, every backend up).",
        "",
        "| gateway | call p50 | call p99 | direct p50, same run | added at p50 | calls |"
        " gateway RSS (processes) | backends RSS (processes) | `list_changed` received | orphans |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for key, gateway in _gateways(figures).items():
        runs = figures.runs("slow", key)
        added = figures.added_ms(key)
        if key == "direct":
            added_text, gateway_rss = "—", "no gateway"
        else:
            added_text = "—" if added is None else f"{added:+.2f} ms"
            processes = _count(median(runs, "gateway_processes"))
            gateway_rss = f"{_mb(median(runs, 'gateway_rss_mb'))} ({processes})"
        backends = median(runs, "backend_processes")
        backends_rss = (
            "none running (started per request)"
            if backends == 0
            else f"{_mb(median(runs, 'backends_rss_mb'))} ({_count(backends)})"
        )
        notified = median(runs, "list_changed")
        orphans = sum(int(run.get("orphans", 0)) for run in runs)
        lines.append(
            f"| {gateway['label']} | {_ms(median(runs, 'p50_ms'))} | {_ms(median(runs, 'p99_ms'))} |"
            f" {_ms(median(runs, 'direct_p50_ms'))} | {added_text} | {_count(median(runs, 'calls'))} |"
            f" {gateway_rss} | {backends_rss} |"
            f" {'—' if notified is None else f'{notified:.0f}'} | {orphans} |"
        )
    lines.append("")
    return lines


def _notes(figures: GatewayFigures) -> list[str]:
    keys = set(_gateways(figures))
    notes = []
    if "fastmcp-run" in keys:
        notes.append(
            "- `fastmcp run mcp.json` builds its proxy with a fresh client per request: every `tools/list`"
            " and every `tools/call` starts every backend again (the slow one included) and stops them"
            " after, hence its call latency and no backend running between requests."
        )
    if "mcp-proxy" in keys:
        notes.append(
            "- mcp-proxy serves each backend on its own endpoint (`/servers/NAME/mcp`) and opens its HTTP"
            " port only once every backend has been initialised, one after the other; its *first list*"
            " is that of `s0`'s endpoint, *all tools* the ten endpoints listed at once."
        )
    if "mcp-hub" in keys:
        notes.append(
            "- mcp-hub serves the old HTTP+SSE transport at `/mcp` and answers before its backends are"
            " up (an empty list, then `list_changed`). Before it starts any backend it fetches a"
            " marketplace catalog from the internet unless its cached copy is under an hour old: each"
            " run is given a fresh cached copy, so no run waits for (or reaches) the network."
        )
    return [*notes, ""] if notes else []


def carry_over(previous: str | None, regenerated: str) -> str:
    """Keep the gateway section of the report being replaced when the new one has none (a report
    rendered again from results saved before the gateway benchmark existed)."""
    return sections.carry_over(previous, regenerated, HEADING)
