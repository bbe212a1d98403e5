"""`make bench`: open-loop replay of 30 days at 15 s steps for one Deployment, timed.

Generates (once, cached under benchmarks/.cache/) a synthetic 30-day recording of an
HPA-scaled toy fleet (autoscaler.replay.synthetic), then times reading the file plus the
open-loop replay through the decision core with the default policy. Budget: < 10 s.
Writes the figures to benchmarks/results/replay.json; says OVER BUDGET on stderr when over
budget, and then exits 1 only with --strict.

Also the peak memory of the process after the read (`read_peak_rss_mib`: the recording as
Python objects). Options (the machine is often shared: wall times are noisy, CPU times less so):
  --repeat N        time read + replay N times, keep the fastest in CPU time (default 1)
  --breakdown       also time decide() alone over the same observations (built beforehand, in
                    the same interpreter after each timed run, here and for --baseline alike; the
                    decisions checked equal to the replay's), so the replay's own overhead
                    (observations, ticks) is replay - decide, and the part that is not decide()
                    (`non_decide_seconds`) is read + replay - decide; and the observations alone
                    (`build_cpu_seconds`: observation_of over every step, as the replay builds
                    them), so decide() in the replay loop is about replay - build. The two splits
                    differ by a second or so: decide() over stored observations runs faster than
                    in the loop (its inputs are laid out differently in memory)
  --baseline REF    also time the code of git revision REF (a `git archive` in a temporary
                    directory; the working tree and git state are left alone), same file, same
                    machine, interleaved with this run's repetitions
  --pure            also time this tree's own .py files as pure Python (a copy of autoscaler/
                    without the extensions `make compiled` builds), interleaved like --baseline,
                    and check both replays decide alike (a digest of every tick); `build` in
                    the figures says which build this tree imports
  --strict          exit 1 when over budget
  --slo             the same 30 days with the SLO series of recording version 2 on every ready
                    pod (prompt/generation token rates, TTFT, TPOT and queue-time histograms with
                    the simulator's vLLM bucket layouts, rates following the pod's load): the
                    file size, read and replay of the format as written by this tree; figures
                    to benchmarks/results/replay-slo.json (-mypyc.json from a compiled build)
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from autoscaler.baselines.hpa import HpaParams, HpaQueue
from autoscaler.policy.types import LatencyHistogram, MetricSample
from autoscaler.replay.format import FORMAT_VERSION, Step, write_recording
from autoscaler.replay.reader import read_recording
from autoscaler.replay.synthetic import generate

DAYS = 30
STEP = 15.0
BUDGET_SECONDS = 10.0
# the toy fleet: a diurnal load of 2-10 requests/s (+ bursts) on replicas finishing 4/s each,
# scaled by the HPA baseline: 1 to 8 replicas, about 3 on average
MAX_REPLICAS = 8
SERVICE_RATE = 4.0
HERE = Path(__file__).resolve().parent

# What one timed run does, as a program: run here and, for --baseline, on an older tree (it
# uses only APIs that have not changed since the replay exists, and the replay's adapter of
# decide() where it was before it moved to autoscaler.baselines).
TIMED_RUN = """
import hashlib, json, resource, sys, time
import autoscaler.policy
from autoscaler.policy import PolicyParams
from autoscaler.replay.open_loop import replay
try:
    from autoscaler.replay.reader import read_recording
except ImportError:  # trees before replay/reader.py
    from autoscaler.replay.format import read_recording
def make_policy():
    try:
        from autoscaler.baselines.queue_lead import QueueLead
        return QueueLead(PolicyParams(max_replicas=int(sys.argv[2])), name="default")
    except ImportError:
        from autoscaler.replay.open_loop import CorePolicy
        return CorePolicy("default", PolicyParams(max_replicas=int(sys.argv[2])))
policy = make_policy()
w0, c0 = time.perf_counter(), time.process_time()
recording = read_recording(sys.argv[1])
w1, c1 = time.perf_counter(), time.process_time()
read_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # peak so far: the read's, in MiB
result = replay(recording, policy)
w2, c2 = time.perf_counter(), time.process_time()
compiled = getattr(autoscaler.policy, "COMPILED_MODULES", ())
digest = hashlib.sha256("\\n".join(map(repr, result.ticks)).encode()).hexdigest()
figures = {"build": f"compiled (mypyc: {len(compiled)} modules)" if compiled else "pure Python",
           "ticks_digest": digest, "read_seconds": w1 - w0, "replay_seconds": w2 - w1, "read_cpu_seconds": c1 - c0,
           "replay_cpu_seconds": c2 - c1, "read_peak_rss_mib": read_rss,
           "ticks_differing": sum(1 for t in result.ticks if t.differs)}
if sys.argv[3] == "breakdown":  # decide() alone over the same observations, built beforehand (not timed)
    import gc
    from autoscaler.replay.open_loop import observation_of
    gc.collect()
    gc.disable()  # the observations alone, each dropped when the next is built (as replay() builds them)
    c4 = time.process_time()
    for s in recording.steps:
        observation_of(s)
    figures["build_cpu_seconds"] = time.process_time() - c4
    gc.enable()
    observations = [(observation_of(s), s.t) for s in recording.steps]
    fresh = make_policy()
    decisions = []
    gc.collect()
    gc.disable()  # as replay() runs it
    w3, c3 = time.perf_counter(), time.process_time()
    for obs, now in observations:
        decisions.append(fresh(obs, now))
    figures["decide_seconds"], figures["decide_cpu_seconds"] = time.perf_counter() - w3, time.process_time() - c3
    gc.enable()
    # the same decisions as the replay's, to the last bit
    assert [(t.desired, t.reason, t.clamp) for t in result.ticks] == decisions
print(json.dumps(figures))
"""


def _recording() -> Path:
    steps = int(DAYS * 86_400 / STEP)
    cache = HERE / ".cache" / f"recording-{DAYS}d-{int(STEP)}s-{MAX_REPLICAS}x{SERVICE_RATE:g}-v1b.jsonl.gz"
    cache.parent.mkdir(parents=True, exist_ok=True)
    if not cache.exists():
        started = time.perf_counter()
        header, gen = generate(HpaQueue(HpaParams(max_replicas=MAX_REPLICAS)), steps=steps,
                               step_seconds=STEP, service_rate=SERVICE_RATE)
        write_recording(cache, header, gen)
        print(f"generated {cache} ({steps} steps) in {time.perf_counter() - started:.1f} s", file=sys.stderr)
    return cache


def _with_slo(step: Step) -> Step:
    """The step with SLO series on each pod that has a throughput sample: token rates of 500
    prompt and 200 generated tokens a request, histograms whose knee follows the pod's queue."""
    from autoscaler.sim.engine import QUEUE_BOUNDS, TPOT_BOUNDS, TTFT_BOUNDS

    pods = []
    for p in step.pods:
        if p.completed is None or p.waiting is None:
            pods.append(p)
            continue
        done, ts, queued = max(p.completed.value, 0.0), p.completed.timestamp, p.waiting.value

        def hist(bounds: tuple[float, ...], knee: float) -> LatencyHistogram:
            n = len(bounds) + 1
            rates = tuple(round(done * min(1.0, (i + 1) / knee), 6) for i in range(n - 1)) + (done,)
            return LatencyHistogram((*bounds, math.inf), rates, ts)

        knee = 4.0 + min(queued, 10.0)
        pods.append(p._replace(prompt_tokens=MetricSample(round(done * 500.0, 3), ts),
                               generation_tokens=MetricSample(round(done * 200.0, 3), ts),
                               ttft=hist(TTFT_BOUNDS, knee), tpot=hist(TPOT_BOUNDS, knee / 2),
                               queue_time=hist(QUEUE_BOUNDS, knee / 3)))
    return Step(step.t, step.spec, step.ready, step.rollout, tuple(pods), step.demand)


def _slo_recording(plain: Path) -> Path:
    """The 30-day recording with the SLO series, in this tree's format version (cached)."""
    cache = plain.with_name(plain.name.replace(".jsonl.gz", f"-slo-format{FORMAT_VERSION}.jsonl.gz"))
    if not cache.exists():
        started = time.perf_counter()
        rec = read_recording(plain)
        write_recording(cache, rec.header, (_with_slo(s) for s in rec.steps))
        print(f"generated {cache} in {time.perf_counter() - started:.1f} s", file=sys.stderr)
    return cache


def _timed_run(tree: Path, recording: Path, breakdown: bool) -> dict[str, Any]:
    """One read + replay in a fresh interpreter on the code under `tree`; with `breakdown`, then
    `decide()` alone over the same observations (`decide_seconds`)."""
    env = {**os.environ, "PYTHONPATH": str(tree)}
    out = subprocess.run([sys.executable, "-c", TIMED_RUN, str(recording), str(MAX_REPLICAS),
                          "breakdown" if breakdown else "-"], cwd=tree, env=env,
                         capture_output=True, text=True, check=True)
    figures: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return figures


def results_file(slo: bool, build: str) -> Path:
    """Where a run's figures go: a compiled build's beside the pure ones, never over them.

    Worked example: (True, "pure Python") -> results/replay-slo.json; (True, "compiled (mypyc: 16
    modules)") -> results/replay-slo-mypyc.json; (False, "compiled ...") -> results/replay-mypyc.json."""
    return HERE / "results" / f"replay{'-slo' if slo else ''}{'-mypyc' if build.startswith('compiled') else ''}.json"


def _best(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """The run of the least CPU time (read + replay): on a shared machine the wall time also
    counts the other jobs' turns."""
    return min(runs, key=lambda r: r["read_cpu_seconds"] + r["replay_cpu_seconds"])


def _breakdown(run: dict[str, Any], steps: int) -> dict[str, Any]:
    """A run's replay split into decide() and the rest (the observations, the ticks)."""
    decide_s, decide_cpu = run["decide_seconds"], run["decide_cpu_seconds"]
    build = run["build_cpu_seconds"]
    return {"build_cpu_seconds": round(build, 3), "read_plus_build_cpu_seconds": round(run["read_cpu_seconds"] + build, 3),
            "replay_minus_build_cpu_seconds": round(run["replay_cpu_seconds"] - build, 3),
            "decide_seconds": round(decide_s, 3), "decide_us_per_tick": round(decide_s / steps * 1e6, 1),
            "replay_overhead_seconds": round(run["replay_seconds"] - decide_s, 3),
            "non_decide_seconds": round(run["read_seconds"] + run["replay_seconds"] - decide_s, 3),
            "decide_cpu_seconds": round(decide_cpu, 3),
            "replay_overhead_cpu_seconds": round(run["replay_cpu_seconds"] - decide_cpu, 3),
            "non_decide_cpu_seconds": round(run["read_cpu_seconds"] + run["replay_cpu_seconds"] - decide_cpu, 3)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--breakdown", action="store_true")
    parser.add_argument("--baseline", metavar="REF", default=None)
    parser.add_argument("--pure", action="store_true")
    parser.add_argument("--strict", action="store_true")
    parser.add_argument("--slo", action="store_true")
    args = parser.parse_args()
    cache = _recording()
    if args.slo:
        cache = _slo_recording(cache)
    root = HERE.parent

    with tempfile.TemporaryDirectory(prefix="bench-replay-baseline-") as tmp:
        base_tree: Path | None = None
        if args.baseline:
            archive = subprocess.run(["git", "-C", str(root), "archive", args.baseline], capture_output=True, check=True)
            base_tree = Path(tmp) / "baseline"
            base_tree.mkdir()
            subprocess.run(["tar", "-x", "-C", str(base_tree)], input=archive.stdout, check=True)
        pure_tree: Path | None = None
        if args.pure:
            pure_tree = Path(tmp) / "pure"
            shutil.copytree(root / "autoscaler", pure_tree / "autoscaler",
                            ignore=shutil.ignore_patterns("__pycache__", "*.so", "*.pyd"))
        runs: list[dict[str, Any]] = []
        base_runs: list[dict[str, Any]] = []
        pure_runs: list[dict[str, Any]] = []
        for _ in range(max(1, args.repeat)):
            runs.append(_timed_run(root, cache, args.breakdown))
            if base_tree is not None:
                base_runs.append(_timed_run(base_tree, cache, args.breakdown))
            if pure_tree is not None:
                pure_runs.append(_timed_run(pure_tree, cache, args.breakdown))

    best = _best(runs)
    recording = read_recording(cache)
    steps = len(recording.steps)
    total = best["read_seconds"] + best["replay_seconds"]
    figures: dict[str, Any] = {
        "benchmark": "open-loop replay, 30 days at 15 s, one Deployment" + (", SLO series" if args.slo else ""),
        "build": best.get("build", "pure Python"),
        "format_version": recording.header.version,
        "steps": steps,
        "pods_per_step_max": max(len(s.pods) for s in recording.steps),
        "pods_per_step_mean": round(sum(len(s.pods) for s in recording.steps) / steps, 2),
        "file_bytes": cache.stat().st_size,
        "read_seconds": round(best["read_seconds"], 3),
        "replay_seconds": round(best["replay_seconds"], 3),
        "total_seconds": round(total, 3),
        "budget_seconds": BUDGET_SECONDS,
        "within_budget": total < BUDGET_SECONDS,
        "read_us_per_step": round(best["read_seconds"] / steps * 1e6, 1),
        "replay_us_per_tick": round(best["replay_seconds"] / steps * 1e6, 1),
        "read_cpu_seconds": round(best["read_cpu_seconds"], 3),
        "replay_cpu_seconds": round(best["replay_cpu_seconds"], 3),
        "read_peak_rss_mib": round(best["read_peak_rss_mib"]),
        "runs": len(runs),
        "ticks_differing_from_recorded_hpa": best["ticks_differing"],
    }
    del recording
    if args.breakdown:
        figures.update(_breakdown(best, steps))
    if base_runs:
        b = _best(base_runs)
        figures["baseline"] = {
            "ref": args.baseline,
            "read_seconds": round(b["read_seconds"], 3),
            "replay_seconds": round(b["replay_seconds"], 3),
            "total_seconds": round(b["read_seconds"] + b["replay_seconds"], 3),
            **(_breakdown(b, steps) if args.breakdown else {}),
            "read_cpu_seconds": round(b["read_cpu_seconds"], 3),
            "replay_cpu_seconds": round(b["replay_cpu_seconds"], 3),
            "read_peak_rss_mib": round(b["read_peak_rss_mib"]),
            "runs": len(base_runs),
            "ticks_differing_from_recorded_hpa": b["ticks_differing"],
        }
    status = 0
    if pure_runs:
        b = _best(pure_runs)
        same = {r["ticks_digest"] for r in runs} == {r["ticks_digest"] for r in pure_runs}
        figures["pure"] = {
            "build": b["build"],
            "read_seconds": round(b["read_seconds"], 3),
            "replay_seconds": round(b["replay_seconds"], 3),
            "total_seconds": round(b["read_seconds"] + b["replay_seconds"], 3),
            "read_cpu_seconds": round(b["read_cpu_seconds"], 3),
            "replay_cpu_seconds": round(b["replay_cpu_seconds"], 3),
            "runs": len(pure_runs),
            "same_ticks_as_this_build": same,
            "this_build_replay_cpu_ratio": round(best["replay_cpu_seconds"] / b["replay_cpu_seconds"], 3),
            "this_build_total_ratio": round(total / (b["read_seconds"] + b["replay_seconds"]), 3),
        }
        if not same:
            print("DIFFERENT TICKS: this build and the pure-Python copy replay differently", file=sys.stderr)
            status = 1
    figures.update({
        "python": platform.python_version(),
        "machine": platform.machine(),
        "load_average_1m": round(os.getloadavg()[0], 2),
        "measured_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    })
    out = results_file(args.slo, str(figures.get("build", "")))
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(figures, indent=2) + "\n")
    print(json.dumps(figures, indent=2))
    if total >= BUDGET_SECONDS:
        print(f"OVER BUDGET: {total:.1f} s for a {BUDGET_SECONDS:g} s budget", file=sys.stderr)
        return 1 if args.strict else status
    return status


if __name__ == "__main__":
    sys.exit(main())
