"""Re-run one policy of a published sweep after its code changed, and put its entry in place.

    python simulations/tools/replace_policy.py SCENARIO [--policy queue-lead] [--jobs N]

Runs `autoscaler simulate --scenario simulations/scenarios/SCENARIO.yaml --sweep --policy POLICY`
on the protocol's grid and seeds (the lower bound is recomputed with it and must equal the
published one: same trace, seeds and bound code), replaces `policies[POLICY]` in
simulations/results/SCENARIO.json (a routing-sensitivity scenario's in results/sensitivity/) and
rewrites its .md and .png from the document. The other
policies' entries are left as published: use this only when their code did not change (a test
pins the baselines' results, tests/sim/test_slo_signals.py). `meta.replaced` records which
policy was re-run and when; `make experiments` reruns everything.

The protocol file may have changed since the published sweep only where it does not define the
experiment: its `tuning` list and `tuning_seeds` (the traces and seeds queue-lead's defaults may be
tuned on) and comments. The
published sweep's protocol is found in the file's git history by its sha256 and compared field by
field; any other difference refuses. `meta.replaced.protocol_sha256` records the file the re-run read.
"""

from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from autoscaler.sim.scoreboard import publish

REPO = Path(__file__).resolve().parents[2]
RESULTS = REPO / "simulations" / "results"
SENSITIVITY = "sensitivity-"


def published_path(scenario: str) -> Path:
    """Where `make experiments` writes a scenario's sweep: simulations/results/SCENARIO.json, and
    for a routing-sensitivity scenario (`make sensitivity`) results/sensitivity/ without the prefix.

    Worked example: azure-conv -> results/azure-conv.json; sensitivity-azure-conv-random-routing
    -> results/sensitivity/azure-conv-random-routing.json."""
    if scenario.startswith(SENSITIVITY):
        return RESULTS / "sensitivity" / f"{scenario[len(SENSITIVITY):]}.json"
    return RESULTS / f"{scenario}.json"


def rerun(scenario: str, policy: str, jobs: int) -> dict[str, Any]:
    """The sweep document of `policy` alone, from the CLI (the same code path as make experiments)."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "one.json"
        subprocess.run([sys.executable, "-m", "autoscaler.cli", "simulate", "--scenario",
                        str(REPO / "simulations" / "scenarios" / f"{scenario}.yaml"), "--sweep", "--policy", policy,
                        "--jobs", str(jobs), "--output-file", str(out)], check=True, cwd=REPO, stdout=subprocess.DEVNULL)
        doc: dict[str, Any] = json.loads(out.read_text())
        return doc


sys.path.insert(0, str(Path(__file__).resolve().parent))  # the tools' shared module, run as a script or loaded
from protocol_history import NOT_THE_EXPERIMENT, PROTOCOL, protocol_texts_in_history, same_experiment  # noqa: E402,F401


BOUND_RTOL = 1e-9
"""Relative tolerance of "the same lower bound": the solver's last bits move with the order of
float sums in the code around it (measured: 4e-15 on the m-small day, 2026-12-04); a bound that
really moved does so by far more."""


def same_numbers(a: Any, b: Any, rtol: float = BOUND_RTOL) -> bool:
    """Equal structure, and numbers equal to `rtol` (relative; bools and strings exactly).

    Worked example: {"x": [1.0, 2.0]} and {"x": [1.0, 2.0000000000001]}: the same; 2.01: not;
    {"x": [1.0]}: not (another shape)."""
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same_numbers(a[k], b[k], rtol) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same_numbers(x, y, rtol) for x, y in zip(a, b, strict=True))
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, int | float) and isinstance(b, int | float):
        return math.isclose(a, b, rel_tol=rtol, abs_tol=0.0)
    return bool(a == b)


def replace_entry(published: dict[str, Any], fresh: dict[str, Any], policy: str,
                  protocol_texts: Callable[[], dict[str, str]] = protocol_texts_in_history) -> dict[str, Any]:
    """`published` with `fresh`'s entry of `policy`; refuses when the two runs do not share their
    protocol, SLO and lower bound (they would not be one experiment; the bound to `BOUND_RTOL`:
    the published one is kept)."""
    # A sweep of one policy is marked exploratory by the CLI; it is the published experiment's
    # when the protocol (seeds, grids, scenarios: the file up to its tuning list), the SLO, the
    # bound and the policy's grid are the same.
    pub_p, fresh_p = published["protocol"], fresh["protocol"]
    pub_sha, fresh_sha = pub_p.get("sha256", ""), fresh_p.get("sha256", "")
    same_runs = {**pub_p, "sha256": None} == {**fresh_p, "sha256": None}  # path, seeds, grid points
    if not same_runs or not (pub_sha == fresh_sha or same_experiment(pub_sha, fresh_sha, protocol_texts())):
        raise ValueError("protocol differs from the published sweep; rerun make experiments")
    if published["slo"] != fresh["slo"]:
        raise ValueError("slo differs from the published sweep; rerun make experiments")
    if not same_numbers(published["lower_bound"], fresh["lower_bound"]):
        raise ValueError("lower_bound differs from the published sweep; rerun make experiments")
    if published["policies"][policy]["grid"] != fresh["policies"][policy]["grid"]:
        raise ValueError(f"{policy}'s grid differs from the published sweep; rerun make experiments")
    doc = dict(published)
    doc["policies"] = {name: (fresh["policies"][policy] if name == policy else entry)
                       for name, entry in published["policies"].items()}
    doc["meta"] = {**published["meta"], "replaced": {"policy": policy, "at": time.strftime("%Y-%m-%d"),
                                                      "protocol_sha256": fresh_p.get("sha256")}}
    return doc


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("scenario")
    ap.add_argument("--policy", default="queue-lead")
    ap.add_argument("--jobs", type=int, default=2)
    args = ap.parse_args(argv)
    path = published_path(args.scenario)
    if not path.is_file() or not (REPO / "simulations" / "scenarios" / f"{args.scenario}.yaml").is_file():
        print(f"replace_policy: {args.scenario}: no published sweep or scenario file (simulations/results, "
              "simulations/scenarios)", file=sys.stderr)
        return 2
    try:
        doc = replace_entry(json.loads(path.read_text()), rerun(args.scenario, args.policy, args.jobs), args.policy)
    except (ValueError, KeyError, subprocess.CalledProcessError) as exc:
        print(f"replace_policy: {args.scenario}: {exc}", file=sys.stderr)
        return 2
    publish(doc, path)
    print(f"replace_policy: {args.policy} re-run in {path.name}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
