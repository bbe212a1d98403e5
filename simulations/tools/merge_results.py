"""Merge the `autoscaler simulate --sweep --json` outputs of ONE scenario run in parts (e.g. the
policies split over processes, so that a long 2-day sweep fits 2 cores and a slow part can be
re-run alone) into one results JSON and its Markdown table:

    python simulations/tools/merge_results.py /tmp/mmid-A.json /tmp/mmid-B.json \
        --json simulations/results/servegen-m-mid-2d.json --markdown simulations/results/servegen-m-mid-2d.md

Fails (exit 2, one line) when the parts are not the same scenario at the same scale and
profile, or when a policy appears in two parts.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from autoscaler.sim.runner import RunResult
from autoscaler.sim.scoreboard import markdown, to_json

SAME = ("scenario", "trace", "rate_scale", "profile", "capacity_rps_per_replica", "peak_need", "slo", "dt_s",
        "queue_lead_params", "queue_lead_knob", "initial_replicas")


def merge(docs: list[tuple[str, dict[str, Any]]]) -> tuple[dict[str, Any], str]:
    meta0 = docs[0][1]["meta"]
    results: dict[str, RunResult] = {}
    sweeps: dict[str, list[RunResult]] = {}
    for name, doc in docs:
        meta = doc["meta"]
        for key in SAME:
            if meta.get(key) != meta0.get(key):
                raise ValueError(f"{name}: meta.{key} = {meta.get(key)!r}, the first part has {meta0.get(key)!r}")
        for pol, summary in doc["policies"].items():
            if pol in results:
                raise ValueError(f"{name}: policy {pol} is already in an earlier part")
            results[pol] = RunResult(**summary)
            sweeps[pol] = [RunResult(**s) for s in doc.get("sweeps", {}).get(pol, [])]
    meta = dict(meta0)
    # a part that is itself a merge (a policy added to published results) lists its own parts
    meta["merged_from"] = [n for name, doc in docs for n in doc["meta"].get("merged_from", [name])]
    desc = (f"{meta0['trace']} | {meta0['profile']} | capacity {meta0['capacity_rps_per_replica']:.1f} req/s/replica | "
            f"peak needs {meta0['peak_need']} replicas")
    return to_json(results, sweeps, meta), f"{desc}\n\n" + markdown(results, sweeps)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("parts", nargs="+")
    ap.add_argument("--json", required=True)
    ap.add_argument("--markdown", required=True)
    a = ap.parse_args()
    try:
        docs = [(p, json.loads(Path(p).read_text())) for p in a.parts]
        merged, md = merge(docs)
    except (OSError, ValueError, KeyError, TypeError) as exc:
        print(f"merge_results: {exc}", file=sys.stderr)
        return 2
    Path(a.json).write_text(json.dumps(merged, indent=1, default=float))
    Path(a.markdown).write_text(md)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
