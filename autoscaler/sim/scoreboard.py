"""The scoreboard: a table of single runs, and the published document of a seeded sweep
(docs/benchmark.md: its JSON schema and Markdown table)."""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from rich.table import Table

from autoscaler.config.atomic import atomic_path
from autoscaler.sim.bound import LowerBound, combine
from autoscaler.sim.experiment import Outcome, Protocol, Scenario, SweepOutput
from autoscaler.sim.frontier import cost_at_with_ci, mean_ci
from autoscaler.sim.plot import plot_frontier
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
METRICS: dict[str, tuple[float, float]] = {  # each with its range (intervals are clipped to it)
    "slo_attainment": (0.0, 1.0), "gpu_hours_nodes": (0.0, math.inf), "gpu_hours_pods": (0.0, math.inf),
    "scale_actions": (0.0, math.inf)}


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


# --------------------------------------------------------------------------- single runs


def to_json(results: dict[str, RunResult], meta: dict[str, Any]) -> dict[str, Any]:
    return {"meta": meta, "policies": {k: r.summary() for k, r in results.items()}}


def rich_table(results: dict[str, RunResult], title: str) -> Table:
    t = Table(title=title)
    t.add_column("policy")
    t.add_column("knob", justify="right")
    for _, head in COLUMNS:
        t.add_column(head, justify="right")
    for name, r in results.items():
        t.add_row(name, _fmt("knob", r.knob), *[_fmt(k, getattr(r, k)) for k, _ in COLUMNS])
    return t


def markdown(results: dict[str, RunResult]) -> str:
    heads = ["policy", "knob"] + [h for _, h in COLUMNS]
    lines = ["| " + " | ".join(heads) + " |", "|" + "---|" * len(heads)]
    for name, r in results.items():
        row = [name, _fmt("knob", r.knob)] + [_fmt(k, getattr(r, k)) for k, _ in COLUMNS]
        lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines) + "\n"


# --------------------------------------------------------------------------- a sweep


def sweep_document(sc: Scenario, protocol: Protocol, grids: dict[str, tuple[float, ...]], seeds: Sequence[int],
                   out: SweepOutput, knob_names: dict[str, str], preregistered: bool,
                   meta: dict[str, Any]) -> dict[str, Any]:
    """The published JSON of a sweep (schema: docs/benchmark.md)."""
    targets = protocol.targets
    bound = lower_bound(out)
    policies: dict[str, Any] = {}
    for name, grid in grids.items():
        policies[name] = policy_entry(name, grid, seeds, out.outcomes, targets, knob_names.get(name, "knob"),
                                      out.refined.get(name, ()))
    return {
        "scenario": sc.name,
        "slo": {**sc.slo.as_dict(), "attainment_targets": list(targets)},
        "protocol": protocol.provenance(seeds, max((len(g) for g in grids.values()), default=0)),
        "preregistered": preregistered,
        "lower_bound": {"cost_at": bound.cost_at(targets), "curve": {"attainment": list(bound.a),
                                                                      "gpu_hours": list(bound.gpu_hours)}},
        "policies": policies,
        "meta": meta,
    }


def lower_bound(out: SweepOutput) -> LowerBound:
    return combine(np.asarray(out.grid), [np.asarray(b) for b in out.bounds])


def policy_entry(name: str, grid: Sequence[float], seeds: Sequence[int], outcomes: Sequence[Outcome],
                 targets: Sequence[float], knob_name: str, refined: Sequence[float] = ()) -> dict[str, Any]:
    """One policy's entry: per grid point (and per `refined` knob, run beyond the grid: the static
    fleet's `experiment.static_refinement`, listed under `refined`) the mean and interval of each
    metric and its per-seed values (`per_seed`, in the order of its `seeds`); per target the cost
    where the envelope of the mean points reaches it, with its interval (`frontier.cost_at_with_ci`),
    the seeds' linearized values behind that interval (`cost_at_seeds`) and each seed's attainment
    at that operating point (`attainment_at_seeds`); both empty when the target is not reached."""
    mine = [o for o in outcomes if o.policy == name]
    points: list[dict[str, Any]] = []
    mean_pts: list[tuple[float, float]] = []
    seed_pts: list[list[tuple[float, float]]] = []
    for k in sorted({*grid, *refined}) if refined else grid:
        runs = sorted((o for o in mine if o.knob == k), key=lambda o: o.seed)
        point: dict[str, Any] = {"knob": k, "seeds": [o.seed for o in runs]}
        for metric, (lo, hi) in METRICS.items():
            point[metric] = mean_ci([float(getattr(o, metric)) for o in runs], lo, hi)
        point["per_seed"] = {metric: [float(getattr(o, metric)) for o in runs] for metric in METRICS}
        points.append(point)
        mean_pts.append((point["gpu_hours_nodes"]["mean"], point["slo_attainment"]["mean"]))
        seed_pts.append([(float(o.gpu_hours_nodes), float(o.slo_attainment)) for o in runs])
    cost: dict[str, Any] = {}
    cost_seeds: dict[str, list[float]] = {}
    att_seeds: dict[str, list[float]] = {}
    for t in targets:
        key = f"{t:g}"
        cost[key], cost_seeds[key], att_seeds[key] = cost_at_with_ci(mean_pts, seed_pts, t)
    entry = {"knob": knob_name, "grid": list(grid), "points": points, "cost_at": cost, "cost_at_seeds": cost_seeds,
             "attainment_at_seeds": att_seeds}
    if refined:
        entry["refined"] = sorted(refined)
    return entry


def rescore(doc: dict[str, Any]) -> dict[str, Any]:
    """`doc` with every policy entry recomputed from its points' per-seed values (`per_seed`):
    what the sweep would have written with today's statistics, without running anything. A
    document written by `sweep_document` comes back unchanged (tests/sim/test_experiment_sweep.py).
    ValueError when a point lacks its per-seed values (documents before protocol 3)."""
    targets = [float(t) for t in doc["slo"]["attainment_targets"]]
    out = dict(doc)
    out["policies"] = {}
    for name, entry in doc["policies"].items():
        outcomes: list[Outcome] = []
        for p in entry["points"]:
            per_seed = p.get("per_seed")
            if per_seed is None:
                raise ValueError(f"{doc.get('scenario')}: {name} knob {p['knob']:g}: no per_seed values to rescore")
            for n, seed in enumerate(p["seeds"]):
                outcomes.append(Outcome(name, p["knob"], seed, per_seed["slo_attainment"][n],
                                        per_seed["gpu_hours_nodes"][n], per_seed["gpu_hours_pods"][n],
                                        int(per_seed["scale_actions"][n]), 0, 0.0))
        seeds = sorted({o.seed for o in outcomes})
        out["policies"][name] = policy_entry(name, entry["grid"], seeds, outcomes, targets, entry["knob"],
                                             entry.get("refined", ()))
    return out


# --------------------------------------------------------------------------- its Markdown


def _interval(v: dict[str, Any] | None, digits: int = 3) -> str:
    """`mean [low, high]` (`[-]` without an interval), or "not reached"."""
    if v is None:
        return "not reached"
    ci = v.get("ci95")
    text = f"{v['mean']:.{digits}g}"
    return text + (f" [{ci[0]:.{digits}g}, {ci[1]:.{digits}g}]" if ci else " [-]")


def cost_cell(entry: dict[str, Any], target: str) -> str:
    """A policy entry's cost at `target` ("0.99") as a table cell."""
    return _interval(entry["cost_at"].get(target))


def nearest_point(entry: dict[str, Any], target: float) -> dict[str, Any]:
    return min(entry["points"], key=lambda p: abs(p["slo_attainment"]["mean"] - target))


def sweep_markdown(doc: dict[str, Any]) -> str:
    """The scenario's table: cost at each target with intervals, and the point nearest the last."""
    targets = [float(t) for t in doc["slo"]["attainment_targets"]]
    near = targets[-1]
    heads = ["policy"] + [f"node GPU-h @{100 * t:g} %" for t in targets] + [
        f"knob @~{100 * near:g} %", "SLO %", "node GPU-h", "pod GPU-h", "scale actions"]
    lines = [f"## {doc['scenario']}", "",
             f"Protocol `{doc['protocol']['path']}` (sha256 {doc['protocol']['sha256'][:12]}), seeds "
             f"{doc['protocol']['seeds']}, {doc['protocol']['grid_points']} grid points per policy"
             + (" (the static fleet also every integer fleet around each target)"
                if doc["policies"].get("static", {}).get("refined") else "")
             + ("" if doc.get("preregistered") else " - NOT PREREGISTERED (exploratory grid or settings)") + ".",
             f"SLO: {_slo_text(doc['slo'])}. Means over seeds, 95 % Student-t intervals in brackets "
             "(docs/benchmark.md)." + _routing_text(doc.get("meta") or {}), "",
             "| " + " | ".join(heads) + " |", "|" + "---|" * len(heads)]
    for name, entry in doc["policies"].items():
        p = nearest_point(entry, near)
        row = [name] + [cost_cell(entry, f"{t:g}") for t in targets] + [
            f"{p['knob']:g}", _interval({"mean": 100 * p["slo_attainment"]["mean"], "ci95": _pct(p["slo_attainment"])},
                                        4),
            _interval(p["gpu_hours_nodes"]), _interval(p["gpu_hours_pods"]), _interval(p["scale_actions"])]
        lines.append("| " + " | ".join(row) + " |")
    lb = doc["lower_bound"]["cost_at"]
    lines.append("| lower bound | " + " | ".join(f"{lb[f'{t:g}']:.3g}" for t in targets) + " | - | - | - | - | - |")
    lines += ["", winners_line(doc), ""]
    return "\n".join(lines)


def _routing_text(meta: dict[str, Any]) -> str:
    """The routing, when not the published runs' least outstanding (docs/benchmark.md)."""
    routing = meta.get("routing", "least_outstanding")
    if routing == "least_outstanding":
        return ""
    return (f" Routing: {routing} (each request to a ready pod drawn at random, as a Kubernetes Service does; "
            "the published tables route to the least loaded pod).")


def _pct(v: dict[str, Any]) -> list[float] | None:
    ci = v.get("ci95")
    return None if ci is None else [100 * ci[0], 100 * ci[1]]


def _slo_text(slo: dict[str, Any]) -> str:
    ttft = f"TTFT <= {slo['ttft_s']:g} s"
    if slo.get("ttft_idle_factor") is not None:
        ttft = f"TTFT <= max({slo['ttft_s']:g} s, {slo['ttft_idle_factor']:g} x the prompt's idle-replica TTFT)"
    return f"{ttft} and TPOT <= {slo['tpot_s']:g} s"


def winners_line(doc: dict[str, Any], ours: str = "queue-lead") -> str:
    """Where a baseline is cheaper than `ours` (on the means), said plainly; where both reach the
    target, with the paired difference over seeds (`paired_difference`): the seeds are common
    random numbers (the same arrivals, start-up times and tie-breaks for every policy), so the
    difference is known far better than two marginal intervals say."""
    targets = [f"{float(t):g}" for t in doc["slo"]["attainment_targets"]]
    pols = doc["policies"]
    if ours not in pols:
        return f"({ours} was not run.)"
    parts: list[str] = []
    for t in targets:
        mine = pols[ours]["cost_at"].get(t)
        better = [n for n, e in pols.items() if n != ours and e["cost_at"].get(t) is not None
                  and (mine is None or e["cost_at"][t]["mean"] < mine["mean"])]
        if better:
            parts.append(f"at {100 * float(t):g} %: " + ", ".join(n + paired_difference(pols[n], pols[ours], t)
                                                                for n in better))
    if not parts:
        return f"No baseline is cheaper than {ours} at any target (means)."
    return (f"Baselines cheaper than {ours} (means; in brackets the difference in node GPU-hours, paired by "
            "seed, with its 95 % interval): " + "; ".join(parts) + ".")


def paired_difference(entry: dict[str, Any], ours: dict[str, Any], target: str) -> str:
    """` -2.8 [-3.9, -1.7]`: the mean and Student-t interval over seeds of entry's minus ours'
    linearized costs at `target` (`cost_at_seeds`, both in seed order); "" when either lacks them.
    Worked example: theirs 7.6, 7.5, 7.7 and ours 10.0, 10.5, 10.6 -> -2.4, -3.0, -2.9: mean
    -2.77, sd 0.32, h = 4.303 x 0.32 / sqrt(3) = 0.80 -> -2.77 [-3.57, -1.97]."""
    theirs = entry.get("cost_at_seeds", {}).get(target) or []
    mine = ours.get("cost_at_seeds", {}).get(target) or []
    if len(theirs) < 2 or len(theirs) != len(mine):
        return ""
    d = mean_ci([a - b for a, b in zip(theirs, mine)])
    ci = d["ci95"]
    assert isinstance(ci, list)
    return f" {d['mean']:+.3g} [{ci[0]:+.3g}, {ci[1]:+.3g}]"


def publish(doc: dict[str, Any], path: Path) -> None:
    """Write a sweep document where results are published: `path` (JSON), its .md
    (`sweep_markdown`) and its .png (`plot.plot_frontier`), each replaced atomically."""
    with atomic_path(path) as tmp:
        Path(tmp).write_text(json.dumps(doc, indent=1) + "\n")
    with atomic_path(path.with_suffix(".md")) as tmp:
        Path(tmp).write_text(sweep_markdown(doc))
    with atomic_path(path.with_suffix(".png")) as tmp:
        plot_frontier(doc, tmp)
