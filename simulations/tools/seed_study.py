"""How well 3 seeds estimate a cost at a target: a sweep run with many seeds (`autoscaler simulate
--sweep --seeds 10`), scored on every subset of k of its seeds as the published tables score their
3, against the value all its seeds give (docs/benchmark.md#how-far-3-seeds-are-from-10).

    python simulations/tools/seed_study.py SWEEP.json [--k 3] [--markdown OUT.md]

Per policy and attainment target: the all-seed cost and interval; over the subsets, the mean
estimate minus the all-seed cost (the bias of choosing the envelope's points from few seeds'
means), the range of the estimates, the share of subsets whose 95 % interval holds the all-seed
cost, and how many subsets reach the target at all. The all-seed cost is itself an estimate (with
the same bias, smaller) that contains each subset's own seeds, so even a right interval holds it
more often than 95 %, and one draw of n seeds moves the share a lot: `null_coverage` says how much
for normal data, and the table says it beside the shares. Nothing is run: the per-seed values of the document are rescored
(`autoscaler.sim.scoreboard.rescore`). Bad input: one line, exit 2.
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import statistics
import sys
from pathlib import Path
from typing import Any

from autoscaler.sim.scoreboard import rescore


def null_coverage(n: int, k: int, trials: int = 4000, seed: int = 0) -> tuple[float, float]:
    """(mean, 5th percentile) over `trials` draws of n normal values of the share of the k-subsets
    whose Student-t 95 % interval holds the mean of all n: what `study` would show if the
    intervals were right. Worked example: n = 10, k = 3 -> about (0.964, 0.91)."""
    import numpy as np

    from autoscaler.sim.frontier import t975

    x = np.random.default_rng(seed).standard_normal((trials, n))
    idx = np.array(list(itertools.combinations(range(n), k)))
    sub = x[:, idx]  # trials x subsets x k
    half = t975(k - 1) * sub.std(axis=2, ddof=1) / math.sqrt(k)
    held = np.abs(sub.mean(axis=2) - x.mean(axis=1, keepdims=True)) <= half
    share = held.mean(axis=1)
    return float(share.mean()), float(np.percentile(share, 5))


def subset(doc: dict[str, Any], seeds: tuple[int, ...]) -> dict[str, Any]:
    """`doc` with every point's per-seed values restricted to `seeds` (and its statistics left to
    `rescore`)."""
    out = dict(doc)
    out["policies"] = {}
    for name, entry in doc["policies"].items():
        points = []
        for p in entry["points"]:
            keep = [n for n, s in enumerate(p["seeds"]) if s in seeds]
            per_seed = {k: [v[n] for n in keep] for k, v in p["per_seed"].items()}
            points.append({**p, "seeds": [p["seeds"][n] for n in keep], "per_seed": per_seed})
        out["policies"][name] = {**entry, "points": points}
    return rescore(out)


def study(doc: dict[str, Any], k: int) -> list[dict[str, Any]]:
    """One row per (policy, target): the all-seed cost at the target and how the k-seed subsets
    estimate it (module docstring), by `row`."""
    seeds = sorted({s for e in doc["policies"].values() for p in e["points"] for s in p["seeds"]})
    if len(seeds) <= k:
        raise ValueError(f"{len(seeds)} seeds in the document: a study of {k}-seed subsets needs more")
    full = rescore(doc)
    subsets = [subset(doc, c) for c in itertools.combinations(seeds, k)]
    rows = []
    for name, entry in full["policies"].items():
        for target, cell in entry["cost_at"].items():
            ests = [s["policies"][name]["cost_at"][target] for s in subsets]
            rows.append(row(name, target, len(seeds), cell, ests))
            rows[-1]["first"] = ests[0]  # seeds 0 .. k - 1: the protocol's, what the tables publish
    return rows


def row(name: str, target: str, n_seeds: int, cell: dict[str, Any] | None,
        ests: list[dict[str, Any] | None]) -> dict[str, Any]:
    """The study's row for one policy at one target from the all-seed cell and the subsets' cells.

    Worked example: 10.0 with all seeds; 9.6 [9.0, 10.2], 10.2 [9.9, 10.5] and 9.7 [9.5, 9.9] on
    three subsets, a fourth not reaching the target -> bias (9.6 + 10.2 + 9.7) / 3 - 10 = -0.167,
    range 9.6 - 10.2, coverage 2 / 3 (the third interval ends below 10), 3 of 4 subsets reaching."""
    reached = [e for e in ests if e is not None]
    out: dict[str, Any] = {"policy": name, "target": float(target), "seeds": n_seeds, "subsets": len(ests),
                           "subsets_reaching": len(reached), "all_seeds": cell}
    if cell is None or not reached:
        return out
    truth = cell["mean"]
    values = [e["mean"] for e in reached]
    covered = [e for e in reached if e.get("ci95") and e["ci95"][0] <= truth <= e["ci95"][1]]
    bias = statistics.fmean(values) - truth
    out.update(bias=0.0 if abs(bias) <= 1e-9 * abs(truth) else bias,
               below=[v < truth for v in values].count(True) / len(values), low=min(values), high=max(values),
               coverage=len(covered) / len(reached))
    return out


def markdown(rows: list[dict[str, Any]], k: int, scenario: str) -> str:
    n = rows[0]["seeds"] if rows else k + 1
    mean, low = null_coverage(n, k)
    lines = [f"### {scenario}: cost at each target from every {k}-seed subset against all {n} seeds", "",
             f"If the intervals were right (normal data), the last-but-one column would read {100 * mean:.1f} % on "
             f"average and below {100 * low:.1f} % for 1 draw of {n} seeds in 20: the all-seed value contains each "
             f"subset's own seeds (`null_coverage`).", "",
             f"| policy | target | all seeds: node GPU-h | subsets reaching it | mean of the {k}-seed estimates - all seeds "
             f"| {k}-seed estimates: range | {k}-seed intervals holding the all-seed value "
             f"| the first {k} seeds (the published) |",
             "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        cell = r["all_seeds"]
        if cell is None:
            whole = "not reached"
        else:
            ci = cell.get("ci95")
            whole = f"{cell['mean']:.3g}" + (f" [{ci[0]:.3g}, {ci[1]:.3g}]" if ci else "")
        reach = f"{r['subsets_reaching']} / {r['subsets']}"
        if "bias" in r:
            rel = r["bias"] / cell["mean"] if cell and cell["mean"] else math.nan
            digits = max(0, 3 - math.floor(math.log10(abs(cell["mean"])))) if cell and cell["mean"] else 3
            rest = (f"{r['bias']:+.{digits}f} ({100 * rel:+.1f} %) | {r['low']:.3g} - {r['high']:.3g} | "
                    f"{100 * r['coverage']:.0f} %")
        else:
            rest = "- | - | -"
        first = r.get("first")
        rest += " | " + ("not reached" if first is None else f"{first['mean']:.3g}")
        lines.append(f"| {r['policy']} | {100 * r['target']:g} % | {whole} | {reach} | {rest} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("sweep", type=Path)
    ap.add_argument("--k", type=int, default=3, help="seeds per subset (the protocol's 3)")
    ap.add_argument("--markdown", type=Path, default=None, help="write the table here (whole or not at all)")
    args = ap.parse_args(argv)
    try:
        if args.k < 2:
            raise ValueError(f"--k {args.k}: an interval needs at least 2 seeds")
        doc = json.loads(args.sweep.read_text())
        if not isinstance(doc, dict) or not isinstance(doc.get("policies"), dict):
            raise ValueError("not a sweep document (autoscaler simulate --sweep --output-file)")
        rows = study(doc, args.k)
        text = markdown(rows, args.k, str(doc.get("scenario", args.sweep.stem)))
    except (OSError, ValueError, KeyError, TypeError, AttributeError, IndexError) as exc:
        print(f"seed_study: {args.sweep}: {exc}", file=sys.stderr)
        return 2
    if args.markdown:
        tmp = args.markdown.with_name(args.markdown.name + ".tmp")
        tmp.write_text(text)
        tmp.replace(args.markdown)
    print(text, end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
