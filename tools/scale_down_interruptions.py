"""Requests a scale-down reaches, by which ready pods it removes (docs/scale-down.md).

Runs one policy on one scenario for a few seeds, once per `Cluster.scale_down_choice`
("replicaset": most recently ready first, what HPA/KEDA/KPA get; "random"; "least_work": the
controller's pod-deletion-cost marks), everything else equal (same slice, same seed, same
start-up draws), and prints, per choice: ready pods removed, requests in flight on them at
SIGTERM (per removed pod and per scale-down), requests killed at the end of the drain grace,
and the run's SLO attainment; then how well a pod's count at its last scrape predicts its count
at the scale-down (correlation over the ready pods present at the scale-downs).

    PYTHONPATH=$PWD python tools/scale_down_interruptions.py simulations/scenarios/demo.yaml \\
        --policy queue-lead --seeds 0 1 2 [--grace 30] [--routing random] [--scrape-s 5] [--json out.json]

`--grace S` overrides the profile's `drain_grace_s` (0: a pod that aborts what it holds on
SIGTERM, every request in flight then fails). `--routing random`: requests go to a ready pod
drawn at random (a Kubernetes Service) instead of the least loaded one (the simulator's router).
`--scrape-s S`: Prometheus scrapes every S seconds instead of 15 (the policy reads them too).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any
from unittest import mock

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from autoscaler.sim import runner
from autoscaler.sim.cluster import SCALE_DOWN_CHOICES, Cluster, Routing, ScaleDownChoice
from autoscaler.sim.experiment import Scenario, build, prepared_for
from autoscaler.sim.frontier import mean_ci


def run(scenario: Path, policy: str, seed: int, choice: ScaleDownChoice, grace: float | None,
        routing: Routing = "least_outstanding", scrape_s: float | None = None) -> dict[str, Any]:
    prep = prepared_for(Scenario.load(scenario), seed)
    if grace is not None:
        prep = replace(prep, profile=replace(prep.profile, drain_grace_s=grace))
    pol, cfg = build(prep, policy, None)
    if scrape_s is not None:
        cfg = replace(cfg, scrape_s=scrape_s)
    made: list[Cluster] = []
    pairs: list[tuple[float, float]] = []  # (running + waiting at the last scrape, at the decision) per ready pod

    class Recording(Cluster):
        def _deletion_costs(self, active: list[Any], n: int) -> dict[str, float]:
            out = self.engine.outstanding()
            pairs.extend((p.scraped[1] + p.scraped[2], float(out[p.slot])) for p in active
                         if p.ready is not None and p.slot is not None and p.scraped is not None)
            return super()._deletion_costs(active, n)

    def cluster(*args: Any, **kwargs: Any) -> Cluster:  # the runner's Cluster, with the choice set
        made.append(Recording(*args, **{**kwargs, "scale_down_choice": choice, "routing": routing}))
        return made[-1]

    with mock.patch.object(runner, "Cluster", cluster):
        result = runner.run(prep.trace, prep.profile, pol, cfg)
    [cl] = made
    downs = sum(1 for _, a, b in cl.scale_events if b < a)
    in_flight = [r.in_flight for r in cl.removals]
    killed = [r.killed or 0 for r in cl.removals]
    return {"choice": choice, "seed": seed, "scale_downs": downs, "pods_removed": len(cl.removals),
            "in_flight": sum(in_flight), "killed": sum(killed), "idle_removed": sum(1 for x in in_flight if x == 0),
            "slo_attainment": result.slo_attainment, "requests": result.requests, "pairs": pairs}


def _ci(values: list[float]) -> str:
    if len(values) < 2:
        return "-"
    cell = mean_ci(values)
    ci = cell["ci95"]
    return f"{cell['mean']:.1f} [{ci[0]:.1f}, {ci[1]:.1f}]" if isinstance(ci, list) else f"{cell['mean']:.1f}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("scenario", type=Path)
    parser.add_argument("--policy", default="queue-lead")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--grace", type=float, default=None, help="drain_grace_s override, seconds")
    parser.add_argument("--routing", choices=["least_outstanding", "random"], default="least_outstanding")
    parser.add_argument("--scrape-s", type=float, default=None, help="Prometheus scrape interval, seconds (15)")
    parser.add_argument("--json", type=Path, default=None, help="also write the per-run rows here")
    args = parser.parse_args(argv)
    rows = [run(args.scenario, args.policy, seed, choice, args.grace, args.routing, args.scrape_s)
            for choice in SCALE_DOWN_CHOICES for seed in args.seeds]
    print(f"{'choice':<11} {'downs':>5} {'pods':>5} {'idle':>5} {'in flight':>9} {'/pod':>6} {'/down':>6}"
          f" {'killed':>6} {'SLO %':>7}")
    for choice in SCALE_DOWN_CHOICES:
        mine = [r for r in rows if r["choice"] == choice]
        downs, pods = sum(r["scale_downs"] for r in mine), sum(r["pods_removed"] for r in mine)
        flight, killed = sum(r["in_flight"] for r in mine), sum(r["killed"] for r in mine)
        idle = sum(r["idle_removed"] for r in mine)
        slo = sum(r["slo_attainment"] * r["requests"] for r in mine) / max(1, sum(r["requests"] for r in mine))
        print(f"{choice:<11} {downs:>5} {pods:>5} {idle:>5} {flight:>9} {flight / max(pods, 1):>6.2f}"
              f" {flight / max(downs, 1):>6.2f} {killed:>6} {100 * slo:>7.2f}")
    print("requests in flight per removed pod, mean over seeds with a 95 % interval; the difference "
          "with the ReplicaSet's order is paired by seed (same slice, same start-up draws):")
    base = {r["seed"]: r for r in rows if r["choice"] == "replicaset" and r["pods_removed"]}
    for choice in SCALE_DOWN_CHOICES:
        mine = {r["seed"]: r for r in rows if r["choice"] == choice and r["pods_removed"]}
        per_seed = [r["in_flight"] / r["pods_removed"] for r in mine.values()]
        diffs = [mine[s]["in_flight"] / mine[s]["pods_removed"] - base[s]["in_flight"] / base[s]["pods_removed"]
                 for s in mine if s in base]
        print(f"  {choice:<15} {_ci(per_seed)}   minus replicaset: {_ci(diffs)}")
    pairs = [pair for r in rows if r["choice"] == "replicaset" for pair in r.pop("pairs")]
    for r in rows:
        r.pop("pairs", None)
    if len(pairs) > 1:
        scraped, now = zip(*pairs)
        print(f"correlation of a ready pod's running + waiting at its last scrape with the count at the "
              f"scale-down, {len(pairs)} pods: {statistics.correlation(scraped, now):.2f}")
    if args.json is not None:
        args.json.write_text(json.dumps(rows, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
