"""The figure: arrivals, queue and replicas over time, one line per policy."""

from __future__ import annotations

from pathlib import Path

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
