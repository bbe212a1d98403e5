"""Scaling policies behind one interface: ours (`queue-lead`) and the baselines.

Every policy sees the same `ClusterView` (Prometheus-scraped vLLM gauges per ready pod, live
outstanding requests where a baseline reads a proxy instead of Prometheus, pods in flight,
free GPUs) every `interval_s`, and returns the desired replicas. The runner clamps nothing:
bounds are each policy's own (all get the scenario's min/max replicas).

`make_policy(name, knob, ...)` builds one; `POLICIES[name].knob` is its main knob, the one the
cost-at-99 % sweep varies, with the grid it sweeps.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass
from typing import Any, Callable, Protocol

from autoscaler.baselines.hpa import (
    HpaDecision,
    HpaParams,
    HpaState,
    hpa_decide,
    hpa_sync,
)
from autoscaler.policy import (
    Decision,
    MetricSample,
    Observation,
    PodInFlight,
    PodStartup,
    PolicyParams,
    PolicyState,
    ReadyPod,
    decide,
)
from autoscaler.sim.cluster import ClusterView


class Policy(Protocol):
    name: str
    interval_s: float

    def decide(self, view: ClusterView, now: float) -> int: ...


def view_observation(view: ClusterView) -> Observation:
    """What the live loop would observe of this view (autoscaler/controller/observe.py): per ready pod its
    scraped gauges with their sample time, the pods in flight with stage and timestamps, the
    free GPUs. queue-lead's `decide()` and the HPA model (`autoscaler.baselines.hpa`) read it."""
    ready = []
    for p in view.ready:
        ts = p.sample_t if p.sample_t is not None else 0.0
        ready.append(ReadyPod(
            name=p.name,
            waiting=MetricSample(p.waiting, ts) if p.waiting is not None else None,
            running=MetricSample(p.running, ts) if p.running is not None else None,
            kv_cache_usage=MetricSample(p.kv, ts) if p.kv is not None else None,
            startup=PodStartup(p.created, p.scheduled, p.ready),
            completed_per_second=MetricSample(p.completed_per_second, ts) if p.completed_per_second is not None else None,
        ))
    flight = tuple(PodInFlight(f.name, f.stage, PodStartup(f.created, f.scheduled)) for f in view.in_flight)
    return Observation(spec_replicas=view.spec_replicas, ready_pods=tuple(ready), pods_in_flight=flight,
                       free_gpus=view.free_gpus)


# --------------------------------------------------------------------------------- queue-lead
class QueueLead:
    """Ours: the pure decision core `autoscaler.policy.decide()`, driven exactly as the live loop
    drives it (autoscaler/controller/loop.py, observe.py): every `tick_seconds` (15) an `Observation` of the
    Prometheus-scraped `vllm:num_requests_waiting`, `vllm:num_requests_running`,
    `vllm:kv_cache_usage_perc` and rate(vllm:request_success_total[1m]) per ready pod, the pods in
    flight with their stage and timestamps, and the free GPUs of the node pool."""

    name = "queue-lead"

    def __init__(self, params: PolicyParams, interval_s: float = 15.0) -> None:
        self.params = params
        self.interval_s = interval_s
        self.state = PolicyState()
        self.last: Decision | None = None

    def decide(self, view: ClusterView, now: float) -> int:
        d, self.state = decide(self.params, view_observation(view), self.state, now)
        self.last = d
        return d.desired_replicas


# --------------------------------------------------------------------------------- HPA family
class HpaQueue:
    """HPA v2 on a Pods metric `vllm:num_requests_waiting` (prometheus-adapter), target
    AverageValue 5, default behavior, tolerance 10 %, sync every 15 s: the replay's pure model
    of the HPA controller (`autoscaler.baselines.hpa.hpa_decide`, which follows kubernetes
    pkg/controller/podautoscaler: `calcPlainMetricReplicas`, `groupPods`,
    `normalizeDesiredReplicasWithBehaviors`), fed what the live loop would observe. One HPA model
    for replay and simulator.

    Pending pods (unschedulable, container creating) count as 0 on a scale-up; pods without a
    sample (loading, or ready but not yet scraped) are "missing": 0 on a scale-up, the target on
    a scale-down, and a change of direction holds. Example: 2 ready pods waiting 12 and 8,
    target 5: ratio 2.0, ceil(2.0 * 2) = 4 replicas."""

    name = "hpa-queue"
    interval_s = 15.0

    def __init__(self, target: float = 5.0, min_replicas: int = 1, max_replicas: int = 100,
                 tolerance: float = 0.1) -> None:
        self.params = HpaParams(target_average_value=target, min_replicas=min_replicas,
                                max_replicas=max_replicas, tolerance=tolerance)
        self.state = HpaState()
        self.last: HpaDecision | None = None

    def decide(self, view: ClusterView, now: float) -> int:
        self.last, self.state = hpa_decide(self.params, view_observation(view), self.state, now)
        return self.last.desired_replicas


class Keda:
    """KEDA ScaledObject of the vLLM production-stack (docs/source/use_cases/autoscaling-keda.rst,
    helm `keda:` values): prometheus trigger on `vllm:num_requests_waiting`, threshold 5,
    pollingInterval 15 s, cooldownPeriod 360 s, minReplicaCount 1.

    KEDA hands the HPA an External metric with an AverageValue target (the threshold), so the
    HPA computes `GetExternalPerPodMetricReplicas`: ratio = sum / (5 * current replicas); outside
    the 10 % tolerance, ceil(sum / 5); then the same HPA sync and default behavior as `hpa-queue`
    (`autoscaler.baselines.hpa.hpa_sync`). cooldownPeriod only governs scaling to zero
    (minReplicaCount 0), so with min 1 it never acts. We sum the query
    (`sum(vllm:num_requests_waiting)`): KEDA's Prometheus scaler rejects a query that returns
    one series per pod; an empty answer reads as 0 (`ignoreNullValues`, default true:
    kedacore/keda-docs content/docs/2.10/scalers/prometheus.md). Example: 3 replicas, 40
    waiting in total: 40 / 15 = 2.7 > 1.1, so ceil(40 / 5) = 8."""

    name = "keda"
    interval_s = 15.0

    def __init__(self, threshold: float = 5.0, min_replicas: int = 1, max_replicas: int = 100,
                 tolerance: float = 0.1) -> None:
        self.threshold = threshold
        self.params = HpaParams(target_average_value=threshold, min_replicas=min_replicas,
                                max_replicas=max_replicas, tolerance=tolerance)
        self.state = HpaState()
        self.last: HpaDecision | None = None

    def propose(self, view: ClusterView) -> tuple[int | None, float | None]:
        current = max(view.spec_replicas, 1)
        total = sum(p.waiting for p in view.ready if p.waiting is not None)  # empty -> 0
        if abs(1.0 - total / (self.threshold * current)) > self.params.tolerance:
            return math.ceil(total / self.threshold - 1e-9), total / current
        return view.spec_replicas, total / current

    def decide(self, view: ClusterView, now: float) -> int:
        self.last, self.state = hpa_sync(self.params, view.spec_replicas, lambda: self.propose(view), self.state, now)
        return self.last.desired_replicas


class HpaCpu:
    """HPA v2 on CPU utilisation (the default `kubectl autoscale`, 80 %): a vLLM pod's CPU sits
    far below its request while the GPU saturates (one busy Python core of many requested), so
    it never scales. Returns the minimum replicas forever."""

    name = "hpa-cpu"
    interval_s = 15.0

    def __init__(self, min_replicas: int = 1) -> None:
        self.min_replicas = min_replicas

    def decide(self, view: ClusterView, now: float) -> int:
        return max(self.min_replicas, 1)


# --------------------------------------------------------------------------------- Knative
class Kpa:
    """Knative Pod Autoscaler (knative/serving pkg/autoscaler/scaling/autoscaler.go, defaults in
    config-autoscaler): concurrency target `container-concurrency-target-default` (100) times
    `container-concurrency-target-percentage` (70 %), stable window 60 s, panic window 6 s
    (10 %), panic threshold 200 %, max scale-up rate 1000, max scale-down rate 2, tick 2 s.

    Concurrency = requests in flight per pod as queue-proxy / activator see them (waiting +
    running, plus requests held while no pod is ready). desired = ceil(avg concurrency / target)
    over the stable window, or over the panic window while panicking (panic when that is >= 2x
    the ready pods; in panic the count never decreases; panic ends a stable window after the
    last over-threshold tick). Example: target 100 * 0.7 = 70, 6 s average 700 on 4 ready pods:
    ceil(700 / 70) = 10 >= 2 * 4: panic, 10 replicas."""

    name = "kpa"
    interval_s = 2.0

    def __init__(self, target: float = 100.0, utilization: float = 0.7, min_replicas: int = 1,
                 max_replicas: int = 100) -> None:
        self.target = target * utilization
        self.min_replicas = min_replicas
        self.max_replicas = max_replicas
        self.hist: deque[tuple[float, float]] = deque()
        self.panic_time: float | None = None
        self.max_panic = 0

    def decide(self, view: ClusterView, now: float) -> int:
        conc = sum(p.outstanding_now for p in view.ready) + view.router_pending
        self.hist.append((now, float(conc)))
        while self.hist and now - self.hist[0][0] >= 60.0:
            self.hist.popleft()
        stable = sum(v for _, v in self.hist) / len(self.hist)
        recent = [v for t, v in self.hist if now - t < 6.0]
        panic_v = sum(recent) / len(recent)
        ready = max(1, len(view.ready))
        up, down = math.ceil(1000 * ready), math.floor(ready / 2)
        dspc = min(max(math.ceil(stable / self.target - 1e-9), down), up)
        dppc = min(max(math.ceil(panic_v / self.target - 1e-9), down), up)
        over = dppc / ready >= 2.0
        if over:
            self.panic_time = now
        elif self.panic_time is not None and now - self.panic_time > 60.0:
            self.panic_time = None
            self.max_panic = 0
        if self.panic_time is not None:
            desired = max(dppc, self.max_panic)
            self.max_panic = desired
        else:
            desired = dspc
        return min(max(desired, self.min_replicas), self.max_replicas)


# --------------------------------------------------------------------------------- AIBrix
class AibrixApa:
    """AIBrix APA (vllm-project/aibrix pkg/controller/podautoscaler/algorithm/apa.go; defaults in
    pkg/controller/podautoscaler/context/context.go NewBaseScalingContext): on the
    mean per-pod metric over ready pods vs the target, hold within a 10 % fluctuation tolerance,
    else go to ceil(ratio * ready), at most x2 up (max scale-up rate 2) and /2 down (max
    scale-down rate 2); no scale-down within the 300 s scale-down delay after the last change.
    Metric: `vllm:gpu_cache_usage_perc` (KV-cache usage, the metric of AIBrix's vLLM examples),
    target 0.5; sync every 15 s. Example: 4 ready pods at KV 0.9: ratio 1.8 > 1.1, so
    min(ceil(1.8 * 4), 2 * 4) = 8."""

    name = "aibrix-apa"
    interval_s = 15.0

    def __init__(self, target: float = 0.5, min_replicas: int = 1, max_replicas: int = 100,
                 tolerance: float = 0.1, cooldown_s: float = 300.0) -> None:
        self.target = target
        self.tol = tolerance
        self.cooldown = cooldown_s
        self.min_replicas, self.max_replicas = min_replicas, max_replicas
        self.last_change = -1e18

    def decide(self, view: ClusterView, now: float) -> int:
        current = view.spec_replicas
        kv = [p.kv for p in view.ready if p.kv is not None]
        if not kv:
            return current
        ready = len(kv)
        ratio = sum(kv) / ready / self.target
        desired = current
        if ratio > 1 + self.tol:
            desired = max(current, min(math.ceil(2 * ready), math.ceil(ratio * ready - 1e-9)))
        elif ratio < 1 - self.tol and now - self.last_change >= self.cooldown:
            desired = min(current, max(math.floor(ready / 2), math.ceil(ratio * ready - 1e-9)))
        desired = min(max(desired, self.min_replicas), self.max_replicas)
        if desired != current:
            self.last_change = now
        return desired


# --------------------------------------------------------------------------------- llm-d WVA
class Wva:
    """llm-d workload-variant-autoscaler, V1 saturation analyzer (llm-d-incubation/
    workload-variant-autoscaler internal/saturation/analyzer.go; defaults kvCacheThreshold 0.8,
    queueLengthThreshold 5, kvSpareTrigger 0.1, queueSpareTrigger 3 from its saturation
    ConfigMap docs; MinNonSaturatedReplicasForScaleDown = 2), one variant, every 60 s:

    * a replica is saturated when its KV usage >= 0.8 or its queue >= 5; the spare KV (0.8 - KV)
      and spare queue (5 - waiting) are averaged over the *non-saturated* replicas (0 when all
      are saturated);
    * while the model is in transition (spec != ready replicas with metrics, or pods pending),
      hold;
    * scale up to ready + 1 when the average spare KV < 0.1 or the average spare queue < 3;
    * else scale down to ready - 1 when it is safe: at least 2 non-saturated replicas and,
      with their load spread over one fewer (x N / (N - 1)), both spares still >= the triggers.

    Example: 4 ready pods at KV 0.75, 0.5, 0.5, 0.9 (the last saturated): spare KV over the
    three others (0.05 + 0.3 + 0.3) / 3 = 0.217 >= 0.1, spare queue 5 >= 3: no scale-up;
    scale-down: KV load 0.583 x 3 / 2 = 0.875 > 0.8 - 0.1: not safe, so hold at 4."""

    name = "wva"
    interval_s = 60.0

    def __init__(self, kv_threshold: float = 0.8, queue_threshold: float = 5.0, kv_spare: float = 0.1,
                 queue_spare: float = 3.0, min_replicas: int = 1, max_replicas: int = 100) -> None:
        self.kv_t, self.q_t, self.kv_s, self.q_s = kv_threshold, queue_threshold, kv_spare, queue_spare
        self.min_replicas, self.max_replicas = min_replicas, max_replicas

    def decide(self, view: ClusterView, now: float) -> int:
        current = view.spec_replicas
        pods = [p for p in view.ready if p.kv is not None and p.waiting is not None]
        if not pods or view.in_flight or len(pods) != current:
            return current  # in transition (or no metrics): hold
        free = [p for p in pods if (p.kv or 0.0) < self.kv_t and (p.waiting or 0.0) < self.q_t]
        n = len(free)
        spare_kv = sum(self.kv_t - (p.kv or 0.0) for p in free) / n if n else 0.0
        spare_q = sum(self.q_t - (p.waiting or 0.0) for p in free) / n if n else 0.0
        ready = len(pods)
        desired = ready
        if spare_kv < self.kv_s or spare_q < self.q_s:
            desired = ready + 1
        elif n >= 2:
            f = n / (n - 1)
            if (self.kv_t - (self.kv_t - spare_kv) * f >= self.kv_s
                    and self.q_t - (self.q_t - spare_q) * f >= self.q_s):
                desired = ready - 1
        return min(max(desired, self.min_replicas), self.max_replicas)


# --------------------------------------------------------------------------------- Ray Serve
class RayServe:
    """Ray Serve autoscaling (ray-project/ray python/ray/serve/autoscaling_policy.py, defaults in
    serve/config.py AutoscalingConfig): desired = ceil(running replicas * (1 + (ongoing /
    (target_ongoing_requests * running) - 1) * smoothing 1.0)), ongoing = requests queued and
    running at the replicas averaged over look_back_period_s (30 s); applied only after the
    decision held for upscale_delay_s (30 s) up or downscale_delay_s (600 s) down. Control
    loop every 1 s here (Ray: 0.1 s; the delays are in seconds either way). Example: target 64,
    4 replicas, 30 s average of 512 in flight: ratio 2, ceil(4 * 2) = 8 after 30 s."""

    name = "ray"
    interval_s = 1.0

    def __init__(self, target: float = 64.0, min_replicas: int = 1, max_replicas: int = 100,
                 upscale_delay_s: float = 30.0, downscale_delay_s: float = 600.0) -> None:
        self.target = target
        self.min_replicas, self.max_replicas = min_replicas, max_replicas
        self.up_n = upscale_delay_s / self.interval_s
        self.down_n = downscale_delay_s / self.interval_s
        self.counter = 0
        self.hist: deque[tuple[float, float]] = deque()

    def decide(self, view: ClusterView, now: float) -> int:
        current = view.spec_replicas
        ongoing = sum(p.outstanding_now for p in view.ready) + view.router_pending
        self.hist.append((now, float(ongoing)))
        while self.hist and now - self.hist[0][0] >= 30.0:
            self.hist.popleft()
        running = len(view.ready)
        if running == 0:
            return current
        avg = sum(v for _, v in self.hist) / len(self.hist)
        desired = math.ceil(running * (avg / (self.target * running)) - 1e-9)
        desired = min(max(desired, self.min_replicas), self.max_replicas)
        if desired > current:
            self.counter = max(self.counter, 0) + 1
            if self.counter > self.up_n:
                self.counter = 0
                return desired
        elif desired < current:
            self.counter = min(self.counter, 0) - 1
            if self.counter < -self.down_n:
                self.counter = 0
                return desired
        else:
            self.counter = 0
        return current


# --------------------------------------------------------------------------------- static
class StaticPeak:
    """A fixed fleet sized for the peak (what most GPU fleets run): `replicas` forever."""

    name = "static-peak"
    interval_s = 60.0

    def __init__(self, replicas: int) -> None:
        self.replicas = replicas

    def decide(self, view: ClusterView, now: float) -> int:
        return self.replicas


# --------------------------------------------------------------------------------- registry
@dataclass(frozen=True)
class PolicySpec:
    knob: str
    default: float
    grid: tuple[float, ...]  # from cheapest to most generous
    doc: str


POLICIES: dict[str, PolicySpec] = {
    "queue-lead": PolicySpec("target_kv_cache_usage_ratio", 0.8, (0.95, 0.9, 0.8, 0.7, 0.6, 0.5, 0.4),
                             "ours: autoscaler.policy.decide()"),
    "hpa-queue": PolicySpec("target waiting per pod", 5.0, (20.0, 10.0, 5.0, 3.0, 2.0, 1.0, 0.5), "HPA Pods metric"),
    "hpa-cpu": PolicySpec("min_replicas", 1.0, (), "never scales"),
    "keda": PolicySpec("threshold (waiting)", 5.0, (20.0, 10.0, 5.0, 3.0, 2.0, 1.0, 0.5), "KEDA prometheus trigger"),
    "kpa": PolicySpec("container-concurrency-target", 100.0, (300.0, 200.0, 150.0, 100.0, 70.0, 50.0, 30.0), "Knative KPA"),
    "aibrix-apa": PolicySpec("target KV usage", 0.5, (0.9, 0.8, 0.7, 0.6, 0.5, 0.4, 0.3), "AIBrix APA"),
    "wva": PolicySpec("kvCacheThreshold", 0.8, (0.95, 0.9, 0.8, 0.7, 0.6, 0.5, 0.4), "llm-d WVA saturation"),
    "ray": PolicySpec("target_ongoing_requests", 64.0, (256.0, 160.0, 128.0, 96.0, 64.0, 48.0, 32.0), "Ray Serve"),
    "static-peak": PolicySpec("replicas (x peak need)", 1.0, (0.7, 0.8, 0.9, 1.0, 1.1, 1.25, 1.5, 2.0, 2.5, 3.0),
                              "fixed fleet"),
    "oracle": PolicySpec("utilisation of capacity", 0.85, (1.0, 0.95, 0.9, 0.85, 0.8, 0.75, 0.7, 0.6, 0.5, 0.4, 0.3),
                         "clairvoyant"),
}


# queue-lead can sweep either target (scenario `queue_lead_knob`); the KV target is the default.
# With `target_running_per_replica` swept, the KV target stays at the scenario's / PolicyParams'.
QUEUE_LEAD_KNOBS: dict[str, PolicySpec] = {
    "target_kv_cache_usage_ratio": POLICIES["queue-lead"],
    "target_running_per_replica": PolicySpec("target_running_per_replica", 96.0,
                                             (256.0, 192.0, 160.0, 128.0, 112.0, 96.0, 80.0, 64.0, 48.0, 32.0),
                                             "ours: autoscaler.policy.decide(), batch target swept"),
}


def queue_lead_spec(knob_name: str | None) -> PolicySpec:
    return QUEUE_LEAD_KNOBS[knob_name or "target_kv_cache_usage_ratio"]


def make_policy(name: str, knob: float | None, min_replicas: int, max_replicas: int,
                params: dict[str, Any] | None = None, peak_need: int = 1,
                oracle_factory: Callable[[float], Policy] | None = None,
                queue_lead_knob: str | None = None) -> Policy:
    """One policy at its knob (None = its default). `params` = queue-lead PolicyParams overrides;
    `queue_lead_knob` = which PolicyParams field the knob sets (default the KV target)."""
    spec = queue_lead_spec(queue_lead_knob) if name == "queue-lead" else POLICIES[name]
    k = spec.default if knob is None else knob
    if name == "queue-lead":
        kw: dict[str, Any] = {"min_replicas": min_replicas, "max_replicas": max_replicas}
        kw.update(params or {})
        if knob is not None or spec.knob not in kw:
            kw[spec.knob] = k
        return QueueLead(PolicyParams(**kw))
    if name == "hpa-queue":
        return HpaQueue(k, min_replicas, max_replicas)
    if name == "keda":
        return Keda(k, min_replicas, max_replicas)
    if name == "hpa-cpu":
        return HpaCpu(min_replicas)
    if name == "kpa":
        return Kpa(k, 0.7, min_replicas, max_replicas)
    if name == "aibrix-apa":
        return AibrixApa(k, min_replicas, max_replicas)
    if name == "wva":
        return Wva(kv_threshold=k, min_replicas=min_replicas, max_replicas=max_replicas)
    if name == "ray":
        return RayServe(k, min_replicas, max_replicas)
    if name == "static-peak":
        return StaticPeak(max(1, math.ceil(k * peak_need - 1e-9)))
    if name == "oracle":
        if oracle_factory is None:
            raise ValueError("the oracle needs the trace (oracle_factory)")
        return oracle_factory(k)
    raise KeyError(name)
