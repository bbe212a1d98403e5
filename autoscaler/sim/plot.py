"""The figure: arrivals, queue and replicas over time, one line per policy."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from autoscaler.sim.runner import RunResult


def plot(results: dict[str, RunResult], out: str | Path, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(3, 1, figsize=(11, 9), sharex=True)
    first = next(iter(results.values()))
    t_h = [x / 3600.0 for x in first.series["t_s"]]
    axes[0].plot(t_h, first.series["arrivals_per_s"], color="black", lw=0.8)
    axes[0].set_ylabel("arrivals / s")
    axes[0].set_title(title)
    for name, r in results.items():
        th = [x / 3600.0 for x in r.series["t_s"]]
        axes[1].plot(th, [max(w, 0.5) for w in r.series["waiting"]], lw=0.8, label=name)
        axes[2].step(th, r.series["spec"], where="post", lw=0.9, label=f"{name} ({r.gpu_hours:.1f} GPU-h, {100 * r.slo_attainment:.1f} %)")
    axes[1].set_yscale("log")
    axes[1].set_ylabel("requests waiting (fleet)")
    axes[2].set_ylabel("replicas (desired)")
    axes[2].set_xlabel("hours")
    axes[2].legend(fontsize=7, ncol=2, loc="upper left")
    fig.tight_layout()
    fig.savefig(str(out), dpi=110)
    plt.close(fig)


def plot_frontier(doc: dict[str, Any], out: str | Path) -> None:
    """Node GPU-hours vs SLO misses (1 - attainment, log scale, fewer misses to the right) per
    policy: means over seeds with 95 % bars both ways, each policy's envelope as a line, and the
    lower bound's curve."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from autoscaler.sim.frontier import envelope

    fig, ax = plt.subplots(figsize=(10, 6.5))
    for name, entry in doc["policies"].items():
        pts = entry["points"]
        att = [p["slo_attainment"]["mean"] for p in pts]
        y = [p["gpu_hours_nodes"]["mean"] for p in pts]
        x = [_miss(a) for a in att]
        xerr = [[_miss(a) - _miss(_ci(p["slo_attainment"], a)[1]) for a, p in zip(att, pts)],
                [_miss(_ci(p["slo_attainment"], a)[0]) - _miss(a) for a, p in zip(att, pts)]]
        yerr = [[c - _ci(p["gpu_hours_nodes"], c)[0] for c, p in zip(y, pts)],
                [_ci(p["gpu_hours_nodes"], c)[1] - c for c, p in zip(y, pts)]]
        line = ax.errorbar(x, y, xerr=xerr, yerr=yerr, fmt="o", ms=3.5, capsize=2, lw=0.8, label=name)
        env = envelope(list(zip(y, att)))
        ax.plot([_miss(a) for _, a in env], [c for c, _ in env], lw=1.0, color=line[0].get_color())
    curve = doc["lower_bound"].get("curve")
    if curve:
        keep = [(_miss(a), c) for a, c in zip(curve["attainment"], curve["gpu_hours"]) if a >= 0.5]
        ax.plot([a for a, _ in keep], [c for _, c in keep], "k--", lw=1.2, label="lower bound")
    for t in doc["slo"]["attainment_targets"]:
        ax.axvline(_miss(float(t)), color="grey", lw=0.5, ls=":")
    ax.set_xscale("log")
    ax.set_xlim(60.0, MIN_MISS_PCT)
    ticks = [50, 20, 10, 5, 2, 1, 0.5, 0.1, 0.01]
    ax.set_xticks(ticks, [f"{100 - t:g}" for t in ticks])
    ax.set_xlabel("SLO attainment (%), mean over seeds (log scale of the misses)")
    ax.set_ylabel("node GPU-hours, mean over seeds")
    ax.set_title(f"{doc['scenario']}: cost frontier ({len(doc['protocol']['seeds'])} seeds, 95 % intervals)"
                 + ("" if doc.get("preregistered") else " - NOT PREREGISTERED"))
    ax.legend(fontsize=8, ncol=2)
    fig.tight_layout()
    fig.savefig(str(out), dpi=110)
    plt.close(fig)


MIN_MISS_PCT = 0.005
"""Misses below this (100 % attainment included) are drawn at it."""


def _miss(attainment: float) -> float:
    return max(100.0 * (1.0 - attainment), MIN_MISS_PCT)


def _ci(v: dict[str, Any], mean: float) -> tuple[float, float]:
    ci = v.get("ci95")
    return (mean, mean) if ci is None else (float(ci[0]), float(ci[1]))
