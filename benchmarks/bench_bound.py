"""Speed and memory of the published lower bound (`make bench`): one seed of the largest published
slice (the ServeGen m-small day, ~34 M requests), the fluid bound alone against the fluid and
lead-time bounds together (`experiment.bound_of`), each in a fresh process (peak RSS is per
process). Targets, as ratios measured in one run: the lead-time bound adds at most 10 % to the
fluid bound's peak memory (it groups requests 2 M at a time) and at most 3x its time.

Writes benchmarks/results/bench_bound.json (and prints it); earlier figures are kept under
"history". Usage: python benchmarks/bench_bound.py [--scenario NAME] [--seed N] [--label TEXT]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

from bench_sim import write_figures  # benchmarks/ is the script's directory, first on sys.path

ROOT = Path(__file__).resolve().parents[1]
MEMORY_RATIO_TARGET = 1.10
TIME_RATIO_TARGET = 3.0

CHILD = """
import json, resource, sys, time
from autoscaler.sim.experiment import Scenario, bound_of, prepared_for
sc = Scenario.load(sys.argv[1])
prep = prepared_for(sc, int(sys.argv[2]))
t0 = time.perf_counter()
b = bound_of(prep, lead_time=sys.argv[3] == "lead")
print(json.dumps({"bound_s": time.perf_counter() - t0, "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                  "at_0.99": float(b[1980])}))
"""


def measure(scenario: Path, seed: int, mode: str) -> dict[str, float]:
    out = subprocess.run([sys.executable, "-c", CHILD, str(scenario), str(seed), mode], check=True, cwd=ROOT,
                         capture_output=True, text=True).stdout
    fig: dict[str, float] = json.loads(out.strip().splitlines()[-1])
    return fig


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--scenario", default="servegen-m-small-1d")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--label", default="")
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "bench_bound.json"))
    a = ap.parse_args()
    path = ROOT / "simulations" / "scenarios" / f"{a.scenario}.yaml"
    if not path.is_file():
        print(f"bench_bound: no scenario {path}", file=sys.stderr)
        raise SystemExit(2)
    started = time.strftime("%Y-%m-%dT%H:%M:%S")
    fluid = measure(path, a.seed, "fluid")
    both = measure(path, a.seed, "lead")
    time_ratio = both["bound_s"] / fluid["bound_s"]
    memory_ratio = both["peak_rss_mb"] / fluid["peak_rss_mb"]
    fig = {
        "scenario": a.scenario, "seed": a.seed, "at": started, "label": a.label,
        "fluid": {k: round(v, 3) for k, v in fluid.items()}, "fluid_and_lead": {k: round(v, 3) for k, v in both.items()},
        "time_ratio": round(time_ratio, 2), "memory_ratio": round(memory_ratio, 3),
        "time_ratio_target": TIME_RATIO_TARGET, "memory_ratio_target": MEMORY_RATIO_TARGET,
        "meets_target": bool(time_ratio <= TIME_RATIO_TARGET and memory_ratio <= MEMORY_RATIO_TARGET),
        "load_avg_1m": round(os.getloadavg()[0], 2), "python": platform.python_version(), "os_cpu_count": os.cpu_count(),
    }
    write_figures(Path(a.out), fig)
    print(json.dumps(fig, indent=1))


if __name__ == "__main__":
    main()
