"""Closed-loop counterfactual: rebuild the demand of a recording, drive the fleet model
(`autoscaler.sim`) under the recorded policy and a candidate, report the simulator's scoreboard
for both, and how far the rebuilt run of the recorded policy lands from the recording.

Demand rebuild (`RebuiltTrace`), per recorded step k of length s:

* arrivals per second `a_k = max(0, c_k + (L_{k+1} - L_k) / s)` where `c_k` is the fleet's
  finished requests per second (`demand.requests_per_second`, else the sum of the pods'
  `rate(vllm:request_success_total)`) and `L` is the fleet's load, waiting + running: what
  came in is what left plus what piled up;
* arrival times: a Poisson process at `a_k` within the step (seeded);
* token lengths: drawn from the recorded request-length histograms
  (`vllm:request_prompt_tokens` / `vllm:request_generation_tokens`, summed over the whole
  recording, uniform within a bucket) when recorded, else the means from the token counters
  (`prompt_tokens_per_second / requests_per_second`), else `default_lengths`. Prompt and
  output lengths are drawn independently (their correlation is not in the metrics).

Fidelity: the rebuilt run of the recorded policy vs the recording, per minute: mean absolute
error of the spec replicas, relative error of the replica-hours, and mean absolute error of
the requests waiting.

Needs numpy and the simulator (`autoscaler.sim`).
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from autoscaler.baselines.hpa import HpaQueue
from autoscaler.baselines.interface import ObservationPolicy, Policy
from autoscaler.baselines.queue_lead import QueueLead
from autoscaler.baselines.view import ClusterView
from autoscaler.policy import MetricSample
from autoscaler.replay.format import Header, RecordedPod, Recording, Step
from autoscaler.sim.profile import Profile
from autoscaler.sim.runner import SERIES_S, RunConfig, RunResult, run
from autoscaler.sim.traces import Chunk, Trace

DEFAULT_LENGTHS = (230.0, 220.0)  # ShareGPT-like mean prompt / output tokens


def _load(step: Step) -> float:
    return sum((p.waiting.value if p.waiting else 0.0) + (p.running.value if p.running else 0.0)
               for p in step.pods if p.ready and (p.waiting is None or math.isfinite(p.waiting.value))
               and (p.running is None or math.isfinite(p.running.value)))


def _completed(step: Step) -> float:
    rps = step.demand.get("requests_per_second")
    if isinstance(rps, float | int) and math.isfinite(rps):
        return float(rps)
    return sum(p.completed.value for p in step.pods if p.ready and p.completed and math.isfinite(p.completed.value))


def arrival_rates(recording: Recording) -> list[float]:
    """Rebuilt arrivals per second of each step."""
    steps = recording.steps
    s = recording.header.step_seconds
    loads = [_load(x) for x in steps]
    out = []
    for k, step in enumerate(steps):
        growth = (loads[k + 1] - loads[k]) / s if k + 1 < len(steps) else 0.0
        out.append(max(0.0, _completed(step) + growth))
    return out


def _histogram(recording: Recording, key: str) -> list[tuple[float, float, float]] | None:
    """(lo, hi, weight) buckets of a request-length histogram summed over the recording."""
    total: dict[float, float] = {}
    for step in recording.steps:
        b = step.demand.get(key)
        if isinstance(b, dict):
            for le, v in b.items():
                edge = math.inf if le in ("+Inf", "Inf") else float(le)
                if isinstance(v, float | int) and math.isfinite(v):
                    total[edge] = total.get(edge, 0.0) + float(v)
    if not total:
        return None
    edges = sorted(total)
    out = []
    lo, prev = 0.0, 0.0
    for e in edges:
        w = total[e] - prev
        prev = total[e]
        hi = e if math.isfinite(e) else max(lo * 2, lo + 1)
        if w > 0:
            out.append((lo, hi, w))
        lo = hi
    return out or None


def _mean_length(recording: Recording, key: str) -> float | None:
    toks = sum(float(s.demand.get(key, 0.0) or 0.0) for s in recording.steps)
    reqs = sum(float(s.demand.get("requests_per_second", 0.0) or 0.0) for s in recording.steps)
    return toks / reqs if reqs > 0 and toks > 0 else None


class RebuiltTrace(Trace):
    """The demand of a recording as a simulator trace; time 0 = the recording's first step."""

    def __init__(self, recording: Recording, seed: int = 0,
                 default_lengths: tuple[float, float] = DEFAULT_LENGTHS) -> None:
        self.recording = recording
        self.name = f"rebuilt:{recording.header.target}"
        self.start = 0.0
        self.step = recording.header.step_seconds
        self.duration = len(recording.steps) * self.step
        self.scale = 1.0
        self.seed = seed
        self.rates = arrival_rates(recording)
        self.hist_in = _histogram(recording, "prompt_tokens_buckets")
        self.hist_out = _histogram(recording, "generation_tokens_buckets")
        self.mean_in = _mean_length(recording, "prompt_tokens_per_second") or default_lengths[0]
        self.mean_out = _mean_length(recording, "generation_tokens_per_second") or default_lengths[1]
        self.how = {
            "arrivals": "finished requests/s + growth of waiting+running, Poisson within each step",
            "prompt_lengths": "request_prompt_tokens histogram" if self.hist_in else f"mean {self.mean_in:.0f} tokens",
            "output_lengths": "request_generation_tokens histogram" if self.hist_out else f"mean {self.mean_out:.0f} tokens",
        }

    def _lengths(self, rng: np.random.Generator, n: int, hist: list[tuple[float, float, float]] | None,
                 mean: float) -> Any:
        if hist is None:
            # geometric-like spread around the mean (exponential, at least 1 token)
            return np.maximum(1, np.rint(rng.exponential(mean, n))).astype(np.int64)
        w = np.array([b[2] for b in hist])
        idx = rng.choice(len(hist), size=n, p=w / w.sum())
        lo = np.array([b[0] for b in hist])[idx]
        hi = np.array([b[1] for b in hist])[idx]
        return np.maximum(1, np.rint(rng.uniform(lo, hi))).astype(np.int64)

    def chunks(self) -> Iterator[Chunk]:
        rng = np.random.default_rng(self.seed)
        times: list[Any] = []
        for k, rate in enumerate(self.rates):
            n = int(rng.poisson(rate * self.step))
            if n:
                times.append(np.sort(rng.uniform(k * self.step, (k + 1) * self.step, n)))
        arr = np.concatenate(times) if times else np.zeros(0)
        yield Chunk(arr, self._lengths(rng, arr.size, self.hist_in, self.mean_in),
                    self._lengths(rng, arr.size, self.hist_out, self.mean_out))

    def peak_rate(self) -> float:
        return max(self.rates, default=0.0)

    def mean_lengths(self) -> tuple[float, float]:
        return self.mean_in, self.mean_out


def sim_policy(policy: ObservationPolicy) -> Policy:
    """A fresh copy of a replay policy (`open_loop.load_policy`) for the fleet model, under the
    simulator's name, with every parameter the replay was given (an HPA's windows and scaling
    policies included)."""
    if isinstance(policy, QueueLead):
        return QueueLead(policy.params)
    if isinstance(policy, HpaQueue):
        return HpaQueue(policy.params)
    raise TypeError(f"no simulator policy for {policy!r}")


@dataclass(frozen=True)
class Fidelity:
    replicas_mae: float  # per minute, mean |rebuilt spec - recorded spec|
    replica_hours_error: float  # (rebuilt - recorded) / recorded
    waiting_mae: float  # per minute, mean |rebuilt waiting - recorded waiting|
    recorded_waiting_mean: float
    minutes: int

    def as_dict(self) -> dict[str, float | int]:
        return {k: getattr(self, k) for k in self.__dataclass_fields__}


def _per_minute(recording: Recording) -> tuple[list[float], list[float]]:
    spec: dict[int, list[float]] = {}
    wait: dict[int, list[float]] = {}
    t0 = recording.header.start
    for s in recording.steps:
        m = int((s.t - t0) // SERIES_S)
        spec.setdefault(m, []).append(float(s.spec or 0))
        wait.setdefault(m, []).append(sum(p.waiting.value for p in s.pods if p.ready and p.waiting
                                          and math.isfinite(p.waiting.value)))
    n = max(spec) + 1 if spec else 0
    return ([spec[m][0] if m in spec else math.nan for m in range(n)],
            [wait[m][0] if m in wait else math.nan for m in range(n)])


def fidelity(recording: Recording, rebuilt: RunResult) -> Fidelity:
    rec_spec, rec_wait = _per_minute(recording)
    sim_spec = rebuilt.series.get("spec", [])
    sim_wait = rebuilt.series.get("waiting", [])
    n = min(len(rec_spec), len(sim_spec))
    pairs = [(a, b, c, d) for a, b, c, d in zip(rec_spec[:n], sim_spec[:n], rec_wait[:n], sim_wait[:n])
             if not math.isnan(a)]
    if not pairs:
        return Fidelity(math.nan, math.nan, math.nan, math.nan, 0)
    rs = sum(p[0] for p in pairs)
    return Fidelity(
        replicas_mae=float(sum(abs(p[1] - p[0]) for p in pairs) / len(pairs)),
        replica_hours_error=float((sum(p[1] for p in pairs) - rs) / rs) if rs else math.nan,
        waiting_mae=float(sum(abs(p[3] - p[2]) for p in pairs) / len(pairs)),
        recorded_waiting_mean=float(sum(p[2] for p in pairs) / len(pairs)),
        minutes=len(pairs),
    )


SCOREBOARD_KEYS = ("slo_attainment", "ttft_p99_s", "gpu_hours", "scale_actions", "peak_replicas", "requests")


def counterfactual(recording: Recording, recorded_policy: Any, candidates: list[Any], profile: Profile,
                   seed: int = 0) -> dict[str, Any]:
    """Run the recorded policy and each candidate on the rebuilt demand; scoreboard + fidelity.
    Start-up times are the profile's fixed ones: the fidelity check compares with a recording
    whose pods' lead times were what they were, not draws."""
    trace = RebuiltTrace(recording, seed=seed)
    first = recording.steps[0].spec or 1

    def one(policy: Any) -> RunResult:
        sp = sim_policy(policy)
        lo = getattr(policy.params, "min_replicas", 1)
        hi = getattr(policy.params, "max_replicas", 100)
        cfg = RunConfig(min_replicas=lo, max_replicas=hi, initial_replicas=max(lo, min(hi, first)),
                        warmup_s=0.0, scrape_s=min(15.0, recording.header.step_seconds), seed=seed,
                        startup="fixed")
        return run(trace, profile, sp, cfg)

    base = one(recorded_policy)
    results = [base] + [one(c) for c in candidates]
    names = [recorded_policy.name] + [c.name for c in candidates]
    return {
        "demand_rebuild": trace.how,
        "fidelity": fidelity(recording, base).as_dict(),
        "scoreboard": [{"policy": n, **{k: float(getattr(r, k)) if isinstance(getattr(r, k), float)
                                        else getattr(r, k) for k in SCOREBOARD_KEYS}}
                       for n, r in zip(names, results)],
        "results": results,
    }


class RecordingPolicy:
    """Wraps a simulator policy and records, at each of its decisions, the Step a recorder
    would have captured from the simulated fleet's scraped metrics: a recording of the
    simulator's own metrics, to measure the fidelity of the rebuild.

    The demand's token rates are the fleet's own (the sum over ready pods of
    rate(vllm:prompt_tokens_total) and rate(vllm:generation_tokens_total), as the recorder's
    queries) once every ready pod reports them; before (a pod younger than two scrapes) they
    are the finished requests/s times `mean_lengths`. The pods' latency histograms are in the
    view but not in the recording: `RecordedPod` has no field for them yet (recording format 1)."""

    def __init__(self, inner: Policy, mean_lengths: tuple[float, float]) -> None:
        self.inner = inner
        self.name = inner.name
        self.interval_s = inner.interval_s
        self.steps: list[Step] = []
        self.mean_in, self.mean_out = mean_lengths

    def decide(self, view: ClusterView, now: float) -> int:
        pods = []
        for p in view.ready:
            ts = p.sample_t if p.sample_t is not None else now

            def s(v: float | None, ts: float = ts) -> MetricSample | None:
                return None if v is None else MetricSample(v, ts)

            pods.append(RecordedPod(p.name, True, None, s(p.waiting), s(p.running), s(p.kv),
                                    "vllm:kv_cache_usage_perc", s(p.completed_per_second),
                                    p.created, p.scheduled, p.ready))
        for f in view.in_flight:
            pods.append(RecordedPod(f.name, False, f.stage, created=f.created, scheduled=f.scheduled))
        rps = sum(p.completed_per_second or 0.0 for p in view.ready)
        prompt_tps, gen_tps = rps * self.mean_in, rps * self.mean_out
        if view.ready and all(p.prompt_tokens_per_second is not None and p.generation_tokens_per_second is not None
                              for p in view.ready):
            prompt_tps = sum(p.prompt_tokens_per_second or 0.0 for p in view.ready)
            gen_tps = sum(p.generation_tokens_per_second or 0.0 for p in view.ready)
        self.steps.append(Step(t=now, spec=view.spec_replicas, ready=len(view.ready),
                               pods=tuple(sorted(pods, key=lambda p: p.name)),
                               demand={"requests_per_second": rps, "prompt_tokens_per_second": prompt_tps,
                                       "generation_tokens_per_second": gen_tps}))
        return self.inner.decide(view, now)

    def recording(self, namespace: str = "sim", deployment: str = "sim") -> Recording:
        step = self.interval_s
        header = Header(namespace, deployment, step, self.steps[0].t, self.steps[-1].t,
                        {"source": "simulator", "readiness_source": "simulator", "spec_source": "simulator"})
        return Recording(header, tuple(self.steps))
