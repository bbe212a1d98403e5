"""When did a policy miss the SLO? Runs (policy, knob) pairs on one scenario and tables, per
window of ARRIVAL time, the requests that arrived and how many of them missed the SLO under each
run, with the ready replicas at the window's start:

    python simulations/tools/misses_by_time.py --scenario simulations/scenarios/azure-code.yaml \\
        --run queue-lead=96 --run queue-lead=32 --run static=3.5 --window-s 300 --out /tmp/misses.md

An investigation tool (not part of `make experiments`): e.g. on Azure code every autoscaler
misses in the first minutes, before a replica asked for at t = 0 can serve.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from autoscaler.sim.experiment import Scenario, known_policies, known_policy, prepare, run_one
from autoscaler.sim.runner import SERIES_S, RunResult


def parse_run(text: str) -> tuple[str, float]:
    name, sep, knob = text.partition("=")
    if not sep:
        raise ValueError(f"--run {text!r}: expected POLICY=KNOB, e.g. queue-lead=96")
    if not known_policy(name):
        raise ValueError(f"--run {text!r}: unknown policy {name!r}; known: {', '.join(known_policies())}")
    try:
        return name, float(knob)
    except ValueError:
        raise ValueError(f"--run {text!r}: knob {knob!r} is not a number") from None


def series_per_window(window_s: float) -> int:
    """How many 60 s series points one window holds; ValueError unless a positive multiple."""
    per = int(round(window_s / SERIES_S))
    if per < 1 or abs(per * SERIES_S - window_s) > 1e-9:
        raise ValueError(f"--window-s {window_s:g}: must be a positive multiple of {SERIES_S:g} s")
    return per


def windows(results: list[RunResult], window_s: float) -> list[dict[str, Any]]:
    """Per window of `window_s` (a multiple of the 60 s series): arrivals, and per run the SLO
    misses of the requests that arrived in it and the ready replicas at its start.

    Example: window 120 s, arrivals/s per minute [1, 1, 2], misses [0, 3, 6], ready [2, 2, 4]
    -> [{t0 0, arrivals 120, misses [3], ready [2]}, {t0 120, arrivals 120, misses [6], ready [4]}]."""
    per = series_per_window(window_s)
    n = len(results[0].series["t_s"])
    out = []
    for i in range(0, n, per):
        arrivals = sum(results[0].series["arrivals_per_s"][i : i + per]) * SERIES_S
        out.append({"t0_s": i * SERIES_S, "arrivals": int(round(arrivals)),
                    "misses": [int(sum(r.series["slo_missed"][i : i + per])) for r in results],
                    "ready": [int(r.series["ready"][i]) for r in results]})
    return out


def markdown(title: str, results: list[RunResult], rows: list[dict[str, Any]]) -> str:
    head = ["window (min)", "arrivals"] + [f"{r.policy} {r.knob:g}: misses (ready)" for r in results]
    md = [f"### {title}", "", "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for w in rows:
        t0 = w["t0_s"] / 60.0
        cells = [f"{m} ({rd})" for m, rd in zip(w["misses"], w["ready"])]
        md.append(f"| {t0:g}- | {w['arrivals']} | " + " | ".join(cells) + " |")
    total = ["**all**", str(sum(w["arrivals"] for w in rows))]
    total += [f"{sum(w['misses'][j] for w in rows)} ({100 * r.slo_attainment:.2f} % met, {r.gpu_hours:.2f} GPU-h)"
              for j, r in enumerate(results)]
    md.append("| " + " | ".join(total) + " |")
    return "\n".join(md) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--scenario", required=True)
    ap.add_argument("--run", action="append", required=True, help="POLICY=KNOB; repeat")
    ap.add_argument("--window-s", type=float, default=300.0)
    ap.add_argument("--out", help="write the Markdown table here")
    a = ap.parse_args()
    try:
        runs = [parse_run(r) for r in a.run]
        series_per_window(a.window_s)  # before the runs, not after
        sc = Scenario.load(a.scenario)
        prep = prepare(sc)
    except (ValueError, OSError) as e:
        print(f"misses_by_time: {e}", file=sys.stderr)
        return 2
    results = [run_one(prep, name, knob) for name, knob in runs]
    title = (f"{sc.name}: SLO misses by arrival time ({prep.trace.describe()}; every autoscaler starts "
             f"from {prep.cfg.initial_replicas} ready replicas, static-peak from its own size)")
    md = markdown(title, results, windows(results, a.window_s))
    if a.out:
        Path(a.out).write_text(md)
    print(md)
    return 0


if __name__ == "__main__":
    sys.exit(main())
