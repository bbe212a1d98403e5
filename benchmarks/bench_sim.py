"""Speed benchmark of the fleet simulator (`make bench`): one policy over one simulated day at a
peak of >= 30 replicas, on one core. Target: <= 90 s wall (>= 1,000x real time).

Writes its figures to benchmarks/results/bench_sim.json (and prints them); not a timed test.
`wall_s` is the run (the loop over the day); `prepare_s` reads the trace, samples its requests
once (kept in memory, `MaterializedTrace`) and computes the oracle's work; `cpu_s` is the run's
process CPU time, the figure to trust when other processes share the machine. Earlier figures
in the file are kept under "history". Usage:
python benchmarks/bench_sim.py [--policy queue-lead] [--peak 30] [--dt 1.0] [--label TEXT]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time
from pathlib import Path

from autoscaler.sim.experiment import Scenario, prepare, run_one

ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--policy", default="queue-lead")
    ap.add_argument("--peak", type=int, default=30)
    ap.add_argument("--dt", type=float, default=1.0)
    ap.add_argument("--trace", default=str(ROOT / "simulations" / "data" / "traces" / "servegen" / "m-mid"))
    ap.add_argument("--label", default="")
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "bench_sim.json"))
    a = ap.parse_args()
    sc = Scenario(name="bench", trace=a.trace, start=0.0, duration=86_400.0, peak_replicas=a.peak,
                  max_replicas=4 * a.peak, dt=a.dt)
    t0 = time.perf_counter()
    prep = prepare(sc)
    t_prep = time.perf_counter() - t0
    c0 = time.process_time()
    r = run_one(prep, a.policy)
    cpu = time.process_time() - c0
    wall = r.wall_s
    fig = {
        "policy": a.policy, "trace": prep.trace.describe(), "simulated_s": 86_400.0, "dt_s": a.dt,
        "peak_replicas_target": a.peak, "peak_replicas_reached": r.peak_replicas, "requests": r.requests,
        "wall_s": round(wall, 2), "cpu_s": round(cpu, 2), "prepare_s": round(t_prep, 2),
        "end_to_end_s": round(wall + t_prep, 2), "load_avg_1m": round(os.getloadavg()[0], 2), "label": a.label, "speedup_x_real_time": round(86_400.0 / wall, 1),
        "target_wall_s": 90.0, "meets_target": bool(wall <= 90.0 and r.peak_replicas >= 30),
        "slo_attainment": r.slo_attainment, "gpu_hours": r.gpu_hours,
        "cpu": platform.processor() or platform.machine(), "python": platform.python_version(),
        "cores_used": 1, "os_cpu_count": os.cpu_count(),
    }
    write_figures(Path(a.out), fig)
    print(json.dumps(fig, indent=1))


def write_figures(out: Path, fig: dict[str, object]) -> None:
    """`fig` to `out`, the file's earlier figures kept under "history" (a file that does not
    parse starts a new history)."""
    out.parent.mkdir(parents=True, exist_ok=True)
    history: list[dict[str, object]] = []
    if out.exists():
        try:
            old = json.loads(out.read_text())
            history = list(old.pop("history", []))
            history.append(old)
        except (ValueError, AttributeError):
            history = []
    out.write_text(json.dumps({**fig, "history": history}, indent=1))


if __name__ == "__main__":
    main()
