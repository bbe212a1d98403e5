"""`make bench`: open-loop replay of 30 days at 15 s steps for one Deployment, timed.

Generates (once, cached under benchmarks/.cache/) a synthetic 30-day recording of an
HPA-scaled toy fleet (autoscaler.replay.synthetic), then times reading the file plus the
open-loop replay through the decision core with the default policy. Budget: < 10 s.
Writes the figures to benchmarks/results/replay.json; says OVER BUDGET on stderr when over
budget, and then exits 1 only with --strict.
"""

from __future__ import annotations

import json
import platform
import sys
import time
from pathlib import Path

from autoscaler.policy import PolicyParams
from autoscaler.replay.format import read_recording, write_recording
from autoscaler.replay.hpa import HpaParams
from autoscaler.replay.open_loop import CorePolicy, HpaPolicy, replay
from autoscaler.replay.synthetic import generate

DAYS = 30
STEP = 15.0
BUDGET_SECONDS = 10.0
# the toy fleet: a diurnal load of 2-10 requests/s (+ bursts) on replicas finishing 4/s each,
# scaled by the HPA baseline: 1 to 8 replicas, about 3 on average
MAX_REPLICAS = 8
SERVICE_RATE = 4.0
HERE = Path(__file__).resolve().parent


def main() -> int:
    steps = int(DAYS * 86_400 / STEP)
    cache = HERE / ".cache" / f"recording-{DAYS}d-{int(STEP)}s-{MAX_REPLICAS}x{SERVICE_RATE:g}-v1b.jsonl.gz"
    cache.parent.mkdir(parents=True, exist_ok=True)
    if not cache.exists():
        started = time.perf_counter()
        header, gen = generate(HpaPolicy("hpa-queue", HpaParams(max_replicas=MAX_REPLICAS)), steps=steps,
                               step_seconds=STEP, service_rate=SERVICE_RATE)
        write_recording(cache, header, gen)
        print(f"generated {cache} ({steps} steps) in {time.perf_counter() - started:.1f} s", file=sys.stderr)

    t0 = time.perf_counter()
    recording = read_recording(cache)
    t1 = time.perf_counter()
    result = replay(recording, CorePolicy("default", PolicyParams(max_replicas=MAX_REPLICAS)))
    t2 = time.perf_counter()
    total = t2 - t0
    figures = {
        "benchmark": "open-loop replay, 30 days at 15 s, one Deployment",
        "steps": len(recording.steps),
        "pods_per_step_max": max(len(s.pods) for s in recording.steps),
        "pods_per_step_mean": round(sum(len(s.pods) for s in recording.steps) / len(recording.steps), 2),
        "file_bytes": cache.stat().st_size,
        "read_seconds": round(t1 - t0, 3),
        "replay_seconds": round(t2 - t1, 3),
        "total_seconds": round(total, 3),
        "budget_seconds": BUDGET_SECONDS,
        "within_budget": total < BUDGET_SECONDS,
        "read_us_per_step": round((t1 - t0) / len(recording.steps) * 1e6, 1),
        "replay_us_per_tick": round((t2 - t1) / len(recording.steps) * 1e6, 1),
        "ticks_differing_from_recorded_hpa": sum(1 for t in result.ticks if t.differs),
        "python": platform.python_version(),
        "machine": platform.machine(),
        "measured_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    out = HERE / "results" / "replay.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(figures, indent=2) + "\n")
    print(json.dumps(figures, indent=2))
    if total >= BUDGET_SECONDS:
        print(f"OVER BUDGET: {total:.1f} s for a {BUDGET_SECONDS:g} s budget", file=sys.stderr)
        return 1 if "--strict" in sys.argv[1:] else 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
