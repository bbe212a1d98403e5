"""The scoreboard: one row per policy, the cost to reach 99 % attainment, JSON and Markdown."""

from __future__ import annotations

import math
from typing import Any

from rich.table import Table

from autoscaler.sim.runner import RunResult

COLUMNS: tuple[tuple[str, str], ...] = (
    ("slo_attainment", "SLO %"),
    ("ttft_p50_s", "TTFT p50 s"),
    ("ttft_p99_s", "TTFT p99 s"),
    ("queue_wait_p99_s", "wait p99 s"),
    ("gpu_hours", "GPU-h"),
    ("short_lived_gpu_hours", "short-lived GPU-h"),
    ("scale_actions", "actions"),
    ("direction_flips_10min", "flips<10m"),
    ("peak_replicas", "peak"),
)


def _fmt(key: str, v: Any) -> str:
    if v is None:
        return "-"
    if key == "slo_attainment":
        return f"{100 * v:.2f}"
    if isinstance(v, float):
        if math.isinf(v):
            return "inf"
        return f"{v:.3g}" if abs(v) < 100 else f"{v:.0f}"
    return str(v)


def to_json(results: dict[str, RunResult], sweeps: dict[str, list[RunResult]] | None, meta: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {"meta": meta, "policies": {k: r.summary() for k, r in results.items()}}
    if sweeps is not None:
        cost: dict[str, float | None] = {}
        knob: dict[str, float | None] = {}
        for name, runs in sweeps.items():
            best = cheapest(runs)
            cost[name] = best.gpu_hours if best else None
            knob[name] = best.knob if best else None
        out["cost_at_99"] = cost
        out["knob_at_99"] = knob
        out["sweeps"] = {k: [r.summary() for r in v] for k, v in sweeps.items()}
    return out


def cheapest(runs: list[RunResult], target: float = 0.99) -> RunResult | None:
    ok = [r for r in runs if r.slo_attainment >= target]
    return min(ok, key=lambda r: r.gpu_hours) if ok else None


def rich_table(results: dict[str, RunResult], sweeps: dict[str, list[RunResult]] | None, title: str) -> Table:
    t = Table(title=title)
    t.add_column("policy")
    t.add_column("knob", justify="right")
    for _, head in COLUMNS:
        t.add_column(head, justify="right")
    if sweeps is not None:
        t.add_column("GPU-h @99%", justify="right")
        t.add_column("knob @99%", justify="right")
    for name, r in results.items():
        row = [name, _fmt("knob", r.knob)] + [_fmt(k, getattr(r, k)) for k, _ in COLUMNS]
        if sweeps is not None:
            best = cheapest(sweeps.get(name, []))
            row += [_fmt("gpu_hours", best.gpu_hours) if best else "not reached", _fmt("knob", best.knob) if best else "-"]
        t.add_row(*row)
    return t


def markdown(results: dict[str, RunResult], sweeps: dict[str, list[RunResult]] | None) -> str:
    heads = ["policy", "knob"] + [h for _, h in COLUMNS] + (["GPU-h @99%", "knob @99%"] if sweeps is not None else [])
    lines = ["| " + " | ".join(heads) + " |", "|" + "---|" * len(heads)]
    for name, r in results.items():
        row = [name, _fmt("knob", r.knob)] + [_fmt(k, getattr(r, k)) for k, _ in COLUMNS]
        if sweeps is not None:
            best = cheapest(sweeps.get(name, []))
            row += [_fmt("gpu_hours", best.gpu_hours) if best else "not reached", _fmt("knob", best.knob) if best else "-"]
        lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines) + "\n"
