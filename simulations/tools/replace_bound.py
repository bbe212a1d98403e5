"""Recompute the lower bound of published sweeps after the bound's code changed, and put it in place.

    python simulations/tools/replace_bound.py [SCENARIO ...] [--jobs N]

The bound depends only on the scenario's slices (trace, seeds) and the bound's code, not on any
policy's runs, so a published sweep's `lower_bound` can be recomputed without re-running its
policies: each seed's bound (`experiment.bound_job`, what the sweep runs), combined as the sweep
combines them (`scoreboard.lower_bound`). The policies' entries are left as published;
`meta.replaced_bound` records when. The .md and .png are rewritten from the document. With no
SCENARIO: every published sweep in simulations/results. `make experiments` reruns everything.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from autoscaler.sim.executor import make_executor
from autoscaler.sim.experiment import Scenario, SweepOutput, bound_job
from autoscaler.sim.scoreboard import lower_bound, publish

REPO = Path(__file__).resolve().parents[2]
RESULTS = REPO / "simulations" / "results"
SCENARIOS = REPO / "simulations" / "scenarios"


def is_sweep(doc: Any) -> bool:
    """A published sweep document: a bound to replace, the seeds it was computed on, targets."""
    return (isinstance(doc, dict) and "lower_bound" in doc and "policies" in doc and isinstance(doc.get("meta"), dict)
            and isinstance(doc.get("protocol"), dict) and isinstance(doc["protocol"].get("seeds"), list)
            and isinstance(doc.get("slo"), dict) and isinstance(doc["slo"].get("attainment_targets"), list))


def read_sweep(name: str) -> dict[str, Any] | None:
    """simulations/results/NAME.json when it is a sweep document with its scenario file, else None."""
    path = RESULTS / f"{name}.json"
    if not path.is_file() or not (SCENARIOS / f"{name}.yaml").is_file():
        return None
    try:
        doc = json.loads(path.read_text())
    except ValueError:
        return None
    return doc if is_sweep(doc) else None


def published(names: Sequence[str]) -> list[str]:
    """The named sweeps, or every sweep document in simulations/results."""
    if names:
        return list(names)
    return [p.stem for p in sorted(RESULTS.glob("*.json")) if read_sweep(p.stem) is not None]


def with_bound(doc: dict[str, Any], per_seed: Sequence[Sequence[float]]) -> dict[str, Any]:
    """`doc` with the bound combined from `per_seed` (on `bound.attainment_grid()`)."""
    bound = lower_bound(SweepOutput([], [list(b) for b in per_seed]))
    targets = doc["slo"]["attainment_targets"]
    out = dict(doc)
    out["lower_bound"] = {"cost_at": bound.cost_at(targets),
                          "curve": {"attainment": list(bound.a), "gpu_hours": list(bound.gpu_hours)}}
    out["meta"] = {**doc["meta"], "replaced_bound": {"at": time.strftime("%Y-%m-%d")}}
    return out


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("scenario", nargs="*")
    ap.add_argument("--jobs", type=int, default=2)
    args = ap.parse_args(argv)
    names = published(args.scenario)
    read = {n: read_sweep(n) for n in names}
    missing = [n for n, doc in read.items() if doc is None]
    if missing or args.jobs < 1:
        print(f"replace_bound: {', '.join(missing) or '--jobs'}: no published sweep or scenario file "
              "(simulations/results, simulations/scenarios), or --jobs below 1", file=sys.stderr)
        return 2
    docs = {n: doc for n, doc in read.items() if doc is not None}
    with make_executor("local", args.jobs) as ex:
        futs = {n: [ex.submit(bound_job, Scenario.load(SCENARIOS / f"{n}.yaml"), s)
                    for s in docs[n]["protocol"]["seeds"]] for n in names}
        for n in names:
            doc = with_bound(docs[n], [f.result() for f in futs[n]])
            path = RESULTS / f"{n}.json"
            publish(doc, path)
            old, new = docs[n]["lower_bound"]["cost_at"], doc["lower_bound"]["cost_at"]
            print(f"replace_bound: {n}: " + ", ".join(f"@{t} {old[t]:.3g} -> {new[t]:.3g}" for t in new), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
