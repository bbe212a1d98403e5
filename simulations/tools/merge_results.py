"""Merge the `autoscaler simulate --sweep --json` outputs of ONE scenario run in parts (e.g. the
policies split over processes, so that a long 2-day sweep fits 2 cores and a slow part can be
re-run alone) into one results JSON and its Markdown table:

    python simulations/tools/merge_results.py /tmp/mmid-A.json /tmp/mmid-B.json \
        --json simulations/results/servegen-m-mid-2d.json --markdown simulations/results/servegen-m-mid-2d.md

A policy may appear in several parts (more grid points run later): its default-knob runs must
agree, its sweep runs are united by knob, and a knob run in two parts must have the same results.

Fails (exit 2, one line) when the parts are not the same scenario at the same scale and
profile, or when two parts disagree about the same run.
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
            runs = [RunResult(**s) for s in doc.get("sweeps", {}).get(pol, [])]
            if pol not in results:
                results[pol], sweeps[pol] = RunResult(**summary), runs
                continue
            _same_run(name, pol, results[pol], RunResult(**summary))
            have = {r.knob: r for r in sweeps[pol]}
            for r in runs:
                if r.knob in have:
                    _same_run(name, pol, have[r.knob], r)
                else:
                    sweeps[pol].append(r)
    meta = dict(meta0)
    # a part that is itself a merge (a policy added to published results) lists its own parts
    meta["merged_from"] = [n for name, doc in docs for n in doc["meta"].get("merged_from", [name])]
    desc = (f"{meta0['trace']} | {meta0['profile']} | capacity {meta0['capacity_rps_per_replica']:.1f} req/s/replica | "
            f"peak needs {meta0['peak_need']} replicas")
    return to_json(results, sweeps, meta), f"{desc}\n\n" + markdown(results, sweeps)


def _same_run(part: str, policy: str, a: RunResult, b: RunResult) -> None:
    """The same policy at the same knob must have given the same results (wall time aside)."""
    da, db = a.summary(), b.summary()
    diff = [k for k in da if k not in ("wall_s", "series") and da[k] != db.get(k)]
    if diff:
        raise ValueError(f"{part}: policy {policy} at knob {b.knob:g} differs from an earlier part in {', '.join(diff)}")


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
