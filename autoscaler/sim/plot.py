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
    """Node GPU-hours vs SLO attainment per policy (means over seeds, 95 % bars both ways), each
    policy's envelope as a line, and the lower bound's curve."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from autoscaler.sim.frontier import envelope

    fig, ax = plt.subplots(figsize=(10, 6.5))
    for name, entry in doc["policies"].items():
        pts = entry["points"]
        x = [100 * p["slo_attainment"]["mean"] for p in pts]
        y = [p["gpu_hours_nodes"]["mean"] for p in pts]
        xerr = [_half(p["slo_attainment"], 100.0) for p in pts]
        yerr = [_half(p["gpu_hours_nodes"], 1.0) for p in pts]
        line = ax.errorbar(x, y, xerr=xerr, yerr=yerr, fmt="o", ms=3.5, capsize=2, lw=0.8, label=name)
        env = envelope([(c, a) for a, c in zip(x, y)])
        ax.plot([a for _, a in env], [c for c, _ in env], lw=1.0, color=line[0].get_color())
    curve = doc["lower_bound"].get("curve")
    if curve:
        keep = [(100 * a, c) for a, c in zip(curve["attainment"], curve["gpu_hours"]) if a >= 0.5]
        ax.plot([a for a, _ in keep], [c for _, c in keep], "k--", lw=1.2, label="lower bound")
    for t in doc["slo"]["attainment_targets"]:
        ax.axvline(100 * float(t), color="grey", lw=0.5, ls=":")
    ax.set_xlabel("SLO attainment (%), mean over seeds")
    ax.set_ylabel("node GPU-hours, mean over seeds")
    ax.set_title(f"{doc['scenario']}: cost frontier ({len(doc['protocol']['seeds'])} seeds, 95 % intervals)"
                 + ("" if doc.get("preregistered") else " - NOT PREREGISTERED"))
    ax.set_xlim(left=max(0.0, min([90.0] + [100 * p["slo_attainment"]["mean"] for e in doc["policies"].values()
                                            for p in e["points"]]) - 1.0), right=100.2)
    ax.legend(fontsize=8, ncol=2)
    fig.tight_layout()
    fig.savefig(str(out), dpi=110)
    plt.close(fig)


def _half(v: dict[str, Any], scale: float) -> float:
    ci = v.get("ci95")
    return 0.0 if ci is None else scale * (ci[1] - ci[0]) / 2.0
