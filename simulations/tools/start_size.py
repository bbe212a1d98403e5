"""queue-lead at its shipped defaults (the scenario's SLO its only input) from a chosen start fleet:
how it climbs from an under-sized fleet or sheds an over-sized one. For the tuning slices of
simulations/preregistered.yaml only (docs/slo-policy.md quotes its rows): never to choose a
default on an evaluation scenario.

    python simulations/tools/start_size.py tuning-servegen-m-mid-d2-2h --start 8 20 [--seeds 100 101 102]
    python simulations/tools/start_size.py tuning-servegen-m-mid-d7-1h --static 10 11

One line per (start, seed): attainment %, node GPU-hours, and the spec replicas every 10 minutes.
The seeds default to the protocol's tuning seeds (`tuning_seeds`), none of them an evaluation seed.
A start of 0 means the protocol's own start (`Prepared.initial_need`). `--static N ...`: a fixed
fleet of N replicas instead (the comparison docs/slo-policy.md quotes for a tuning slice).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from autoscaler.baselines.static import StaticFleet
from autoscaler.sim.experiment import REPO, Scenario, build_shipped, load_protocol, prepared_for, static_config
from autoscaler.sim.runner import run

SCENARIOS = REPO / "simulations" / "scenarios"
SERIES_EVERY = 10  # series points (one a minute) between two printed spec values


def run_from(sc: Scenario, seed: int, start: int) -> dict[str, Any]:
    """One run of queue-lead at shipped defaults (`experiment.build_shipped`) from `start` ready
    replicas (0: the protocol's start)."""
    prep = prepared_for(sc, seed)
    pol, cfg = build_shipped(prep)
    if start > 0:
        cfg = replace(cfg, initial_replicas=start)
    r = run(prep.trace, prep.profile, pol, cfg)
    spec = r.series["spec"]
    return {"start": cfg.initial_replicas, "seed": seed, "slo_attainment": r.slo_attainment,
            "gpu_hours_nodes": r.gpu_hours_nodes, "spec_every_10_min": [int(spec[i]) for i in range(0, len(spec), SERIES_EVERY)]}


def run_static(sc: Scenario, seed: int, replicas: int) -> dict[str, Any]:
    """One run of a static fleet of `replicas` (started ready, as the sweep's static fleet)."""
    prep = prepared_for(sc, seed)
    r = run(prep.trace, prep.profile, StaticFleet(replicas), static_config(prep.cfg, replicas))
    return {"replicas": replicas, "seed": seed, "slo_attainment": r.slo_attainment, "gpu_hours_nodes": r.gpu_hours_nodes}


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("scenario", help="a scenario name in simulations/scenarios (a tuning slice)")
    ap.add_argument("--start", type=int, nargs="+", default=[0])
    ap.add_argument("--seeds", type=int, nargs="+", default=None,
                    help="default: for a tuning slice the protocol's tuning seeds (none an evaluation seed), else seed 0")
    ap.add_argument("--static", type=int, nargs="+", default=[], metavar="N", help="static fleets of N replicas instead")
    args = ap.parse_args(argv)
    path = SCENARIOS / f"{args.scenario}.yaml"
    if not path.exists() or any(s < 0 for s in args.start) or any(n < 1 for n in args.static):
        print(f"start_size: no scenario {path}, a negative start or a static fleet below 1", file=sys.stderr)
        return 2
    protocol = load_protocol()
    if args.scenario in protocol.evaluation:
        print(f"start_size: {args.scenario} is an evaluation scenario of the protocol: tuning slices only", file=sys.stderr)
        return 2
    if args.seeds is None:  # a tuning slice: the tuning seeds; another scenario (the demo): seed 0
        args.seeds = list(protocol.seeds_for(args.scenario)) if args.scenario.startswith("tuning-") else [0]
    sc = Scenario.load(path)
    for n in args.static:
        for seed in args.seeds:
            row = run_static(sc, seed, n)
            print(f"{args.scenario} static {n} seed {seed}: {100 * row['slo_attainment']:.2f} % "
                  f"{row['gpu_hours_nodes']:.1f} node GPU-h")
    if args.static:
        return 0
    for start in args.start:
        for seed in args.seeds:
            row = run_from(sc, seed, start)
            print(f"{args.scenario} start {row['start']} seed {seed}: {100 * row['slo_attainment']:.2f} % "
                  f"{row['gpu_hours_nodes']:.1f} node GPU-h, spec every 10 min {row['spec_every_10_min']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
