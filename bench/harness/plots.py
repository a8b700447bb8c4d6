"""Draws the report's PNG plots. Runs in the `plot` venv (matplotlib is no project dependency).

python plots.py RESULTS_JSON DOCS_DIR    # prints the path of each PNG it wrote
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")  # no display: choose the backend before pyplot is imported
import matplotlib.pyplot as plt

HIGHLIGHT = "mcpfleet"


def median_of(runs: list[dict[str, Any]], field: str) -> float | None:
    values = [run[field] for run in runs if "error" not in run and field in run]
    return statistics.median(values) if values else None


def cold_start(results: dict[str, Any], docs: Path) -> Path:
    sizes = [key for key in ("cold-1", "cold-10", "cold-20", "cold-50") if key in results["scenarios"]]
    counts = [int(key.split("-")[1]) for key in sizes]
    figure, axes = plt.subplots(figsize=(8, 5))
    for peer in results["scenarios"][sizes[0]]:
        points = [
            (count, median_of(results["scenarios"][key].get(peer, []), "seconds"))
            for count, key in zip(counts, sizes, strict=True)
        ]
        xs = [count for count, value in points if value is not None]
        ys = [value for _, value in points if value is not None]
        style = {"linewidth": 3, "color": "black"} if peer == HIGHLIGHT else {"linewidth": 1.2}
        if peer == "floor":
            style = {"linestyle": "--", "color": "grey"}
        axes.plot(xs, ys, marker="o", label=results["peers"][peer].replace("**", ""), **style)
    axes.set_xscale("log")
    axes.set_yscale("log")
    axes.set_xticks(counts, [str(count) for count in counts])
    axes.set_xlabel("stdio servers (each takes 0.3 s to start)")
    axes.set_ylabel("seconds until every tool is usable (median)")
    axes.set_title("Cold start against the number of servers")
    axes.grid(True, which="both", alpha=0.3)
    axes.legend(fontsize=7, loc="upper left")
    figure.tight_layout()
    path = docs / "bench-cold-start.png"
    figure.savefig(path, dpi=110)
    return path


def latency(results: dict[str, Any], docs: Path) -> Path:
    runs = results["scenarios"]["latency"]
    labels, samples = [], []
    for peer, peer_runs in runs.items():
        good = [run for run in peer_runs if "error" not in run]
        if not good or peer == "langchain":
            continue
        labels.append(results["peers"][peer].replace("**", ""))
        samples.append([value for run in good for value in run["samples_ms"]])
    figure, axes = plt.subplots(figsize=(9, 5))
    axes.boxplot(samples, vert=False, whis=(1, 99), showfliers=False)
    axes.set_yticks(range(1, len(labels) + 1), labels, fontsize=7)
    axes.set_xlabel("ms per call (box: quartiles, whiskers: p1-p99)")
    axes.set_title("Tool-call latency on one connection (langchain, ~50 ms per call, left out)")
    axes.grid(True, axis="x", alpha=0.3)
    figure.tight_layout()
    path = docs / "bench-latency.png"
    figure.savefig(path, dpi=110)
    return path


def main() -> None:
    results = json.loads(Path(sys.argv[1]).read_text())
    docs = Path(sys.argv[2])
    docs.mkdir(parents=True, exist_ok=True)
    print(cold_start(results, docs))
    if "latency" in results["scenarios"]:
        print(latency(results, docs))


if __name__ == "__main__":
    main()
