"""queue-lead at its shipped defaults on every tuning slice x the rule's seeds, judged by the
tuning rule of simulations/tuning.yaml (`tuning_rule`), fixed there before a variant's runs
are looked at: a variant of the defaults is acceptable when every run (slice x seed) reaches
`min_attainment`; of the acceptable ones, the lowest total node GPU-hours wins. The seeds are
the rule's own (`tuning_rule.seeds`; without them the protocol's tuning seeds), none an
evaluation seed. Tuning slices only (`simulations/scenarios/tuning-*.yaml`), never an
evaluation scenario.

    python simulations/tools/tuning_check.py [--jobs 2] [--json FILE] [--against FILE]

One line per run (attainment %, node GPU-hours), then the verdict. `--against FILE` (an earlier
`--json` of this tool: the shipped defaults before a change, say) prints the two side by side
and which the rule prefers. A variant is a work tree with the change: run this tool from it
(`PYTHONPATH=<tree> python <tree>/simulations/tools/tuning_check.py`). The tables of
docs/slo-policy.md's tuning sections were made this way (before 2026-12-05 by the same runs
of `start_size.run_from`, with the rule unwritten).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from autoscaler.config.atomic import atomic_paths
from autoscaler.config.bounded import load_yaml_mapping
from autoscaler.sim.experiment import REPO, Scenario, load_protocol

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the tools' shared modules, run as a script or loaded
from start_size import run_from  # noqa: E402

SCENARIOS = REPO / "simulations" / "scenarios"
TUNING = REPO / "simulations" / "tuning.yaml"

Runs = Mapping[tuple[str, int], tuple[float, float]]  # (slice, seed) -> (attainment, node GPU-hours)


@dataclass(frozen=True)
class Verdict:
    acceptable: bool  # every run at or above the rule's attainment
    worst: float  # the lowest attainment of any run
    total: float  # node GPU-hours over every run


def judge(runs: Runs, min_attainment: float) -> Verdict:
    """The rule on one set of runs.

    Worked example, min 0.99: runs at (0.995, 10.0) and (0.9922, 20.0): acceptable, worst
    0.9922, total 30.0; with a run at 0.9859 instead: not acceptable, worst 0.9859."""
    if not runs:
        raise ValueError("no runs to judge")
    worst = min(a for a, _ in runs.values())
    return Verdict(worst >= min_attainment, worst, sum(c for _, c in runs.values()))


def prefer(a: Verdict, b: Verdict) -> str:
    """Which of two judged variants the rule prefers: "a", "b" or "neither" (none acceptable)
    or "tie" (both acceptable at the same total).

    Worked example: a acceptable at 1,032.9, b acceptable at 1,077.4: "a"; b acceptable, a
    not (a run at 98.59 %): "b"; neither acceptable: "neither"."""
    if a.acceptable and b.acceptable:
        return "a" if a.total < b.total else "b" if b.total < a.total else "tie"
    if a.acceptable or b.acceptable:
        return "a" if a.acceptable else "b"
    return "neither"


def _rule(path: Path) -> dict[str, Any]:
    rule = load_yaml_mapping(path, "tuning file").get("tuning_rule")
    if not isinstance(rule, dict) or not isinstance(rule.get("min_attainment"), (int, float)):
        raise ValueError(f"{path}: no tuning_rule.min_attainment")
    return rule


def min_attainment(path: Path = TUNING) -> float:
    value = float(_rule(path)["min_attainment"])
    if not 0.0 < value <= 1.0:
        raise ValueError(f"{path}: tuning_rule.min_attainment = {value}, must be in (0, 1]")
    return value


def rule_seeds(evaluation_seeds: Sequence[int], tuning_seeds: Sequence[int], path: Path = TUNING) -> tuple[int, ...]:
    """The seeds a variant is judged on: `tuning_rule.seeds`, distinct integers none of which is
    an evaluation seed; without the key, the protocol's tuning seeds.

    Worked example: seeds [100, 101, 102, 103], evaluation (0, 1, 2): (100, 101, 102, 103); no
    key, tuning seeds (100, 101, 102): (100, 101, 102); [100, 2]: refused (2 is an evaluation seed)."""
    raw = _rule(path).get("seeds")
    if raw is None:
        return tuple(tuning_seeds)
    if (not isinstance(raw, list) or not raw or not all(isinstance(x, int) and not isinstance(x, bool) for x in raw)
            or len(set(raw)) != len(raw) or set(raw) & set(evaluation_seeds)):
        raise ValueError(f"{path}: tuning_rule.seeds = {raw!r}, must be distinct integers, none of the evaluation "
                         f"seeds {list(evaluation_seeds)}")
    return tuple(raw)


def tuning_slices() -> list[str]:
    return sorted(p.stem for p in SCENARIOS.glob("tuning-*.yaml"))


def _one(job: tuple[str, int]) -> tuple[str, int, float, float]:
    name, seed = job
    r = run_from(Scenario.load(SCENARIOS / f"{name}.yaml"), seed, 0)
    return name, seed, float(r["slo_attainment"]), float(r["gpu_hours_nodes"])


def run_all(slices: Sequence[str], seeds: Sequence[int], jobs: int) -> dict[tuple[str, int], tuple[float, float]]:
    todo = [(s, seed) for s in slices for seed in seeds]
    out: dict[tuple[str, int], tuple[float, float]] = {}
    with ProcessPoolExecutor(max(1, jobs)) as pool:
        for name, seed, att, cost in pool.map(_one, todo):
            out[(name, seed)] = (att, cost)
            print(f"{name:32s} seed {seed}: {100 * att:6.2f} % {cost:8.1f} node GPU-h", flush=True)
    return out


def to_json(runs: Runs, verdict: Verdict, rule: float) -> dict[str, Any]:
    return {"rule": {"min_attainment": rule, "then": "lowest total node GPU-hours"},
            "runs": {f"{k[0]}|{k[1]}": list(v) for k, v in sorted(runs.items())},
            "verdict": {"acceptable": verdict.acceptable, "worst": verdict.worst, "total": verdict.total}}


def from_json(doc: Any) -> dict[tuple[str, int], tuple[float, float]]:
    """The runs of a document of this tool (or of its bare `runs` mapping): each key `SLICE|SEED`,
    each value [attainment in 0..1, node GPU-hours >= 0]; anything else raises ValueError."""
    runs = doc.get("runs", doc) if isinstance(doc, dict) else None
    if not isinstance(runs, dict) or not runs:
        raise ValueError("not a tuning_check document (no runs)")
    out = {}
    for key, value in runs.items():
        name, _, seed = str(key).rpartition("|")
        try:
            att, cost = (float(x) for x in value)
            where = (name, int(seed))
        except (TypeError, ValueError):
            raise ValueError(f"run {key!r}: {value!r} is not [attainment, node GPU-hours] of SLICE|SEED") from None
        if not name or not 0.0 <= att <= 1.0 or not 0.0 <= cost < math.inf:
            raise ValueError(f"run {key!r}: attainment {att} must be in [0, 1], node GPU-hours {cost} finite, >= 0")
        out[where] = (att, cost)
    return out


def refusal(args: argparse.Namespace, planned: set[tuple[str, int]],
            before: Mapping[tuple[str, int], tuple[float, float]] | None) -> str | None:
    """Why the arguments cannot give a verdict, checked before any run (None: they can)."""
    if args.jobs < 1:
        return f"--jobs {args.jobs}: must be at least 1"
    if args.json and not Path(args.json).resolve().parent.is_dir():
        return f"--json {args.json}: no folder {Path(args.json).resolve().parent}"
    if before is not None and set(before) != planned:
        return (f"--against {args.against}: its runs ({len(before)}) are not this tool's slices x the rule's seeds "
                f"({len(planned)}): the totals would not compare")
    return None


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--json", metavar="FILE", help="write the runs and the verdict to FILE")
    ap.add_argument("--against", metavar="FILE", help="an earlier --json of this tool to compare with")
    args = ap.parse_args(argv)
    try:
        rule = min_attainment()
        protocol = load_protocol()
        seeds = rule_seeds(protocol.seeds, protocol.tuning_seeds)
        before = from_json(json.loads(Path(args.against).read_text())) if args.against else None
    except (OSError, ValueError) as exc:
        print(f"tuning_check: {' '.join(str(exc).split())}", file=sys.stderr)
        return 2
    slices = tuning_slices()
    why = refusal(args, {(s, seed) for s in slices for seed in seeds}, before)
    if why is None and (not slices or set(slices) & set(protocol.evaluation)):
        why = "the tuning slices (simulations/scenarios/tuning-*.yaml) are none or include an evaluation scenario"
    if why is not None:
        print(f"tuning_check: {why}", file=sys.stderr)
        return 2
    runs = run_all(slices, seeds, args.jobs)
    verdict = judge(runs, rule)
    print(f"rule: every run >= {100 * rule:.2f} %, then the lowest total. This tree: "
          f"{'acceptable' if verdict.acceptable else 'NOT acceptable'}, worst {100 * verdict.worst:.2f} %, "
          f"total {verdict.total:,.1f} node GPU-h")
    if before is not None:
        old = judge(before, rule)
        print(f"against {args.against}: {'acceptable' if old.acceptable else 'NOT acceptable'}, worst "
              f"{100 * old.worst:.2f} %, total {old.total:,.1f}; the rule prefers "
              + {"a": "this tree", "b": "the other", "tie": "neither (a tie)", "neither": "neither (none acceptable)"}[
                  prefer(verdict, old)])
    if args.json:
        try:
            with atomic_paths([Path(args.json)]) as (out,):
                Path(out).write_text(json.dumps(to_json(runs, verdict, rule), indent=1) + "\n")
        except OSError as exc:  # after the runs: the verdict above stands, the file is not half-written
            print(f"tuning_check: --json {args.json}: {exc.strerror or exc}", file=sys.stderr)
            return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
