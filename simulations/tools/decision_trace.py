"""Record every queue-lead decision of one simulated run (reason, clamp, demand terms) next to
the oracle's need, to see which signal drove the fleet: `python simulations/tools/decision_trace.py
--scenario simulations/scenarios/azure-conv.yaml --out simulations/results/azure-conv-decisions.json`.

Writes a JSON with the run summary, a per-decision table and a summary: which demand term
(queue / kv / batch / forecast) was the largest while the fleet was above the oracle's need,
and the reason counts. Used for the findings in simulations/README.md ("Results").
"""

from __future__ import annotations

import argparse
import collections
import json
import math
from dataclasses import replace
from pathlib import Path
from typing import Any

from autoscaler.baselines.queue_lead import QueueLead
from autoscaler.baselines.view import ClusterView
from autoscaler.sim.experiment import Scenario, build, prepare
from autoscaler.sim.oracle import need_replicas
from autoscaler.sim.runner import run


class Recording(QueueLead):
    def __init__(self, inner: QueueLead) -> None:
        super().__init__(inner.params, interval_s=inner.interval_s)
        self.rows: list[dict[str, Any]] = []

    def decide(self, view: ClusterView, now: float) -> int:
        n = super().decide(view, now)
        d = self.last
        assert d is not None
        v = d.values
        self.rows.append({
            "t": now, "current": d.current_replicas, "desired": n, "reason": str(d.reason),
            "clamp": str(d.clamp) if d.clamp else None, "ready": v.ready_replicas,
            "in_flight": v.pods_in_flight, "waiting": v.waiting_total, "running": v.running_total,
            "kv_mean": v.kv_cache_usage_mean, "saturated": v.saturated_pods, "queue_model": v.queue_model,
            "arrivals_ps": v.arrivals_per_second, "replica_tput_ps": v.replica_throughput_per_second,
            "queue_r": v.queue_replicas, "kv_r": v.kv_replicas, "batch_r": v.batch_replicas,
            "demand_r": v.demand_replicas, "forecast_r": v.forecast_replicas, "lead_s": v.lead_time_seconds,
            "recommendation": v.recommendation, "stabilized": v.stabilized,
            "free_gpus": view.free_gpus, "router_pending": view.router_pending,
        })
        return n


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--scenario", required=True)
    ap.add_argument("--start", type=float, default=None)
    ap.add_argument("--duration", type=float, default=None)
    ap.add_argument("--rate-scale", type=float, default=None)
    ap.add_argument("--max-replicas", type=int, default=None)
    ap.add_argument("--dt", type=float, default=None)
    ap.add_argument("--knob", type=float, default=None, help="queue-lead knob (target_running_per_replica)")
    ap.add_argument("--set", action="append", default=[], help="PolicyParams override KEY=VALUE")
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    sc = Scenario.load(a.scenario)
    over: dict[str, Any] = {}
    for k in ("start", "duration", "max_replicas", "dt"):
        if getattr(a, k) is not None:
            over[k] = getattr(a, k)
    if a.rate_scale is not None:
        over["rate_scale"], over["peak_replicas"] = a.rate_scale, None
    ql = dict(sc.queue_lead)
    for kv in a.set:
        key, val = kv.split("=", 1)
        ql[key] = None if val == "None" else float(val)
    over["queue_lead"] = ql
    sc = replace(sc, **over)
    prep = prepare(sc)
    pol, cfg = build(prep, "queue-lead", a.knob)
    assert isinstance(pol, QueueLead)
    rec = Recording(pol)
    res = run(prep.trace, prep.profile, rec, cfg, knob=a.knob)
    need = need_replicas(prep.work, 0.85, sc.min_replicas)  # oracle's need per work bin (u = 0.85)
    bin_s = prep.trace.duration / max(len(need), 1)
    for r in rec.rows:
        r["oracle_need_u085"] = int(need[min(int(r["t"] // bin_s), len(need) - 1)]) if len(need) else None
    over_rows = [r for r in rec.rows if r["oracle_need_u085"] is not None and r["desired"] > r["oracle_need_u085"] * 1.2]
    drivers: collections.Counter[str] = collections.Counter()
    for r in over_rows:
        terms = {"queue": r["queue_r"], "kv": r["kv_r"], "batch": r["batch_r"], "forecast": r["forecast_r"]}
        drivers[max(terms, key=lambda k: terms[k])] += 1
    peak = max(rec.rows, key=lambda r: r["desired"]) if rec.rows else {}
    out = {
        "scenario": sc.name, "trace": prep.trace.describe(), "peak_need": prep.peak_need,
        "capacity_rps_per_replica": prep.capacity_rps, "queue_lead_params": ql, "knob": a.knob,
        "result": res.summary(),
        "decisions": len(rec.rows),
        "reasons": dict(collections.Counter(r["reason"] for r in rec.rows)),
        "up_reasons": dict(collections.Counter(r["reason"] for r in rec.rows if r["desired"] > r["current"])),
        "clamps": dict(collections.Counter(r["clamp"] for r in rec.rows if r["clamp"])),
        "over_need_x1.2_decisions": len(over_rows),
        "largest_term_when_over_need": dict(drivers),
        "peak_decision": peak,
        "oracle_need_max": int(need.max()) if len(need) else None,
        "oracle_bin_s": bin_s,
        "rows": rec.rows,
    }
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    Path(a.out).write_text(json.dumps(out, indent=0, default=lambda x: None if isinstance(x, float) and math.isnan(x) else str(x)))
    s = {k: v for k, v in out.items() if k != "rows"}
    print(json.dumps(s, indent=1, default=str))


if __name__ == "__main__":
    main()
