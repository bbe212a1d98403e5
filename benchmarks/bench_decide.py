"""decide() alone: CPU per call, no Prometheus, no Kubernetes, seconds to run.

    python benchmarks/bench_decide.py [--targets 1000] [--pods 5] [--rounds 7] [--slo] [--against REF] [--pure] [--json PATH]

The fleet of `bench_scale.py` (issue 6) without the servers around it: `--targets` targets of
`--pods` ready pods each, every one with its startup times and all four series, and each
target's `PolicyState` warmed by 8 ticks 15 s apart, as a running controller has it. Then
decide() for every target, CPU time by `time.process_time`, best of `--rounds`, in two loads:

* steady: bench_scale's load (0 waiting, 4 running, KV 0.5, 1 request/s finished per pod):
  the decisions hold;
* queued: 5 to 11 waiting, 8 running, KV 0.7, 1.6 requests/s per pod: the rate model, the
  forecast and the scale-up path.

`--slo` gives every pod the SLO series too (issue 15): prompt and generation token rates and
TTFT and TPOT histograms of 20 buckets (a reference older than the SLO step ignores them).
Where the core has `slo_series.sum_slo_series`, each observation carries the pods' SLO series
summed, as the observation builders make it; that is work moved out of `decide()`, so it is
timed too, two ways (best of `--rounds` each): alone (`sum_slo_series` over every target's
pods, after the others: data out of the caches), and as the live loop runs it, per target the
`Observation` built (with the summary where the core has it) and decided at once ("build +
decide"; both cores build their `Observation`, so the difference is the builder's added cost
and decide()'s).

`--against REF` also times the decision core of git revision REF (`git archive` of
autoscaler/policy into a temporary package; the work tree and the index are left alone),
interleaved round by round with the work tree's so that both see the same machine noise, and
checks that both give the same decisions and states for every job (exit 1 if not): every
value the same, floats to 12 significant digits (summing the pods' buckets before
interpolating moves a share in its last bits); how many are the same to the last bit is
printed too.

`--pure` also times the work tree's own decision core as pure Python (its `.py` files copied
into a temporary package, without the extensions `make compiled` builds), interleaved and
checked the same way: with a compiled build in place, that is compiled against pure, one run.
The first line says which build `autoscaler.policy` is (`autoscaler.policy.COMPILED_MODULES`).

Prints a table; `--json PATH` also writes its figures (ms, best of `--rounds`) to PATH
(`benchmarks/results/decide-slo-pods*.json`; `bench_scale.py` keeps the issue-6 figure).
"""

from __future__ import annotations

import argparse
import importlib
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path
from types import ModuleType
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

TICK_SECONDS = 15.0
WARM_TICKS = 8
LOADS = ("steady", "queued")


def load_ref(ref: str | None, workdir: Path, name: str = "ref_policy") -> ModuleType:
    """autoscaler/policy as of `ref`, importable as the package `name`; ref None: the work
    tree's `.py` files as they are (pure Python even where compiled extensions sit beside them)."""
    if ref is None:
        shutil.copytree(ROOT / "autoscaler" / "policy", workdir / "autoscaler" / "policy",
                        ignore=shutil.ignore_patterns("__pycache__", "*.so", "*.pyd"))
    else:
        blob = subprocess.run(
            ["git", "-C", str(ROOT), "archive", "--format=tar", ref, "autoscaler/policy"],
            check=True, capture_output=True,
        ).stdout
        with tarfile.open(fileobj=io.BytesIO(blob)) as tar:
            if hasattr(tarfile, "data_filter"):  # Python >= 3.11.4
                tar.extractall(workdir, filter="data")
            else:
                tar.extractall(workdir)  # noqa: S202 - our own repository's archive
    package = workdir / name
    shutil.move(str(workdir / "autoscaler" / "policy"), package)
    for path in package.glob("*.py"):
        text = path.read_text().replace("autoscaler.policy.", f"{name}.")
        path.write_text(text.replace("from autoscaler.policy import", f"from {name} import"))
    if str(workdir) not in sys.path:
        sys.path.insert(0, str(workdir))
    return importlib.import_module(name)


def build_of(p: ModuleType) -> str:
    """Which build a decision core is: compiled (mypyc, how many modules) or pure Python."""
    compiled = getattr(p, "COMPILED_MODULES", ())
    return f"compiled (mypyc: {len(compiled)} modules)" if compiled else "pure Python"


TTFT_BOUNDS = (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5,
               10.0, 20.0, 40.0, 80.0, float("inf"))  # vLLM's TTFT buckets, cut to 20
TPOT_BOUNDS = (0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5,
               10.0, 20.0, 40.0, 80.0, float("inf"))


def slo_series(p: ModuleType, done: float, at: float) -> dict[str, Any]:
    """Token rates and TTFT/TPOT histograms of one pod finishing `done` requests/s."""
    def hist(bounds: tuple[float, ...], knee: int) -> Any:
        rates = tuple(done * min(1.0, (i + 1) / knee) for i in range(len(bounds)))
        return p.types.LatencyHistogram(bounds, rates, at)

    return {
        "prompt_tokens_per_second": p.MetricSample(done * 500.0, at),
        "generation_tokens_per_second": p.MetricSample(done * 200.0, at),
        "ttft": hist(TTFT_BOUNDS, 12),
        "tpot": hist(TPOT_BOUNDS, 5),
    }


def summer(p: ModuleType) -> Any:
    """The core's `sum_slo_series`, or None for a core without it."""
    try:
        return importlib.import_module(p.__name__ + ".slo_series").sum_slo_series
    except ImportError:
        return None


def observation(p: ModuleType, load: str, target: int, pods: int, now: float, slo: bool = False) -> Any:
    if load == "steady":
        waiting, running, kv, done = 0.0, 4.0, 0.5, 1.0
    else:
        waiting, running, kv, done = 5.0 + (now / TICK_SECONDS + target) % 7, 8.0, 0.7, 1.6
    at = now - 2.0
    ready = tuple(
        p.ReadyPod(
            f"model-{target:04d}-6d8f9c7b5-{j:05d}",
            p.MetricSample(waiting, at),
            p.MetricSample(running, at),
            p.MetricSample(kv, at),
            p.PodStartup(created_at=1000.0, scheduled_at=1010.0, ready_at=1200.0 + j),
            completed_per_second=p.MetricSample(done, at),
            **(slo_series(p, done, at) if slo else {}),
        )
        for j in range(pods)
    )
    summed = summer(p)
    if summed is None:
        return p.Observation(spec_replicas=pods, ready_pods=ready, free_gpus=10)
    return p.Observation(spec_replicas=pods, ready_pods=ready, free_gpus=10, slo_series=summed(ready))


def jobs(p: ModuleType, load: str, targets: int, pods: int, now: float, slo: bool = False) -> list[tuple[Any, Any, Any]]:
    """(policy, observation at `now`, state warmed up to the tick before) per target."""
    policy = p.PolicyParams(max_replicas=20)
    out = []
    for t in range(targets):
        state = p.PolicyState()
        for k in range(WARM_TICKS, 0, -1):
            tick = now - k * TICK_SECONDS
            _, state = p.decide(policy, observation(p, load, t, pods, tick, slo), state, tick)
        out.append((policy, observation(p, load, t, pods, now, slo), state))
    return out


def cpu_seconds(p: ModuleType, work: list[tuple[Any, Any, Any]], now: float) -> float:
    decide = p.decide
    started = time.process_time()
    for policy, obs, state in work:
        decide(policy, obs, state, now)
    return time.process_time() - started


def tick_seconds(p: ModuleType, work: list[tuple[Any, Any, Any]], now: float) -> float:
    """CPU of the live loop's order: per target the `Observation` built of its pods (the SLO
    series summed where the core sums them) and decided at once."""
    decide, observation_type, summed = p.decide, p.Observation, summer(p)
    started = time.process_time()
    if summed is None:
        for policy, obs, state in work:
            decide(policy, observation_type(obs.spec_replicas, obs.ready_pods, free_gpus=10), state, now)
    else:
        for policy, obs, state in work:
            pods = obs.ready_pods
            o = observation_type(obs.spec_replicas, pods, free_gpus=10, slo_series=summed(pods))
            decide(policy, o, state, now)
    return time.process_time() - started


def builder_seconds(p: ModuleType, work: list[tuple[Any, Any, Any]]) -> float:
    """CPU of the builder's added work: the pods' SLO series summed, for every target."""
    summed = summer(p)
    if summed is None:
        return 0.0
    started = time.process_time()
    for _, obs, _ in work:
        summed(obs.ready_pods)
    return time.process_time() - started


FLOAT = re.compile(r"-?\d+\.\d*(?:e[-+]?\d+)?")


def same_results(a: ModuleType, b: ModuleType, work_a: list[Any], work_b: list[Any], now: float) -> tuple[int, int]:
    """(jobs with the same decision and state to the last bit, to 12 significant digits)."""
    def text(x: Any, name: str) -> str:
        return repr(x).replace(name, "P")

    def rounded(t: str) -> str:
        return FLOAT.sub(lambda m: f"{float(m.group()):.12g}", t)

    exact = close = 0
    for (pa, oa, sa), (pb, ob, sb) in zip(work_a, work_b, strict=True):
        da, na = a.decide(pa, oa, sa, now)
        db, nb = b.decide(pb, ob, sb, now)
        ta, tb = text((da, na), a.__name__), text((db, nb), b.__name__)
        exact += ta == tb
        close += rounded(ta) == rounded(tb)
    return exact, close


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--targets", type=int, default=1000)
    ap.add_argument("--pods", type=int, default=5)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--slo", action="store_true", help="pods also carry token rates and TTFT/TPOT histograms")
    ap.add_argument("--against", metavar="REF", help="also time autoscaler/policy of this git revision")
    ap.add_argument("--pure", action="store_true", help="also time the work tree's policy as pure Python")
    ap.add_argument("--json", metavar="PATH", help="also write the figures to PATH")
    args = ap.parse_args()

    import autoscaler.policy as tree

    now = 1_700_000_000.0
    cores: dict[str, ModuleType] = {"work tree": tree}
    tmp = None
    if args.against or args.pure:
        tmp = tempfile.TemporaryDirectory()
    if args.against:
        cores[args.against] = load_ref(args.against, Path(tmp.name) / "ref", "ref_policy")
    if args.pure:
        cores["pure"] = load_ref(None, Path(tmp.name) / "pure", "pure_policy")
    builds = {name: build_of(p) for name, p in cores.items()}
    print("builds: " + ", ".join(f"{name}: {build}" for name, build in builds.items()))
    work = {(name, load): jobs(p, load, args.targets, args.pods, now, args.slo) for name, p in cores.items() for load in LOADS}

    status = 0
    for other in cores:
        if other == "work tree":
            continue
        for load in LOADS:
            exact, close = same_results(cores[other], tree, work[other, load], work["work tree", load], now)
            print(f"same decisions and states, {other} and the work tree ({load}): {close} of {args.targets}"
                  f" to 12 digits, {exact} to the last bit")
            if close != args.targets:
                print(f"DIFFERENT RESULTS ({load}): {other} and the work tree disagree", file=sys.stderr)
                status = 1

    best: dict[tuple[str, str], float] = {}
    built: dict[tuple[str, str], float] = {}
    ticked: dict[tuple[str, str], float] = {}
    for _ in range(args.rounds):
        for name, p in cores.items():
            for load in LOADS:
                s = cpu_seconds(p, work[name, load], now)
                best[name, load] = min(best.get((name, load), s), s)
                b = builder_seconds(p, work[name, load]) if args.slo else 0.0
                built[name, load] = min(built.get((name, load), b), b)
                t = tick_seconds(p, work[name, load], now)
                ticked[name, load] = min(ticked.get((name, load), t), t)

    slo = " with the SLO series" if args.slo else ""
    print(f"decide() CPU, best of {args.rounds}: {args.targets} targets x {args.pods} ready pods{slo}")
    print("  load    core           decide()  us/call  builder alone  decide()+builder  build + decide")
    for load in LOADS:
        for name in cores:
            s, b, t = best[name, load], built[name, load], ticked[name, load]
            line = (f"  {load:7s} {name:12s} {s * 1000:6.1f} ms  {s * 1e6 / args.targets:6.1f}  "
                    f"{b * 1000:10.1f} ms  {(s + b) * 1000:13.1f} ms  {t * 1000:11.1f} ms")
            if name != "work tree":
                w = ("work tree", load)
                line += (f"   work tree / {name}: decide() {best[w] / s:.3f}, decide()+builder"
                         f" {(best[w] + built[w]) / (s + b):.3f}, build + decide {ticked[w] / t:.3f}")
            print(line)
    if args.json:
        figures = {
            "targets": args.targets, "pods_per_target": args.pods, "slo_series": args.slo, "rounds": args.rounds,
            "against": args.against, "pure": args.pure, "builds": builds,
            "same_decisions": status == 0, "budget_ms": 50.0, "load_average_1m": round(os.getloadavg()[0], 2),
            "ms": {f"{name} {load}": {"decide": round(best[name, load] * 1000, 1),
                                      "builder_alone": round(built[name, load] * 1000, 1),
                                      "build_and_decide": round(ticked[name, load] * 1000, 1)}
                   for name in cores for load in LOADS},
        }
        Path(args.json).write_text(json.dumps(figures, indent=2) + "\n")
    if tmp is not None:
        tmp.cleanup()
    return status


if __name__ == "__main__":
    sys.exit(main())
