"""The HPA baselines: a HorizontalPodAutoscaler (autoscaling/v2) with one `Pods` metric, target
type AverageValue, and the default behavior:

* `hpa` (simulator and replay): the per-pod sum `vllm:num_requests_waiting +
  vllm:num_requests_running` (what a prometheus-adapter rule `sum by (pod) (waiting + running)`
  serves), the metric that rises before a replica saturates;
* `hpa-queue` (the replay's original baseline, kept for its recordings): `vllm:num_requests_waiting`
  alone, which stays 0 until a replica is saturated.

(The simulator's `hpa-waiting`, production-stack's Object-metric example, is `hpa_waiting.py`.)
Pure: `hpa_decide(params, observation, state, now) -> (decision, new_state)`; `HpaQueue` drives
it, one sync per tick, for the simulator and the replay alike.

Follows kubernetes pkg/controller/podautoscaler (release-1.30):

* replica_calculator.go `calcPlainMetricReplicas` / `groupPods`: pods being deleted or Failed
  are ignored; Pending pods are "unready"; a non-pending pod without a metric is "missing";
  every other pod counts as ready (for a non-CPU metric readiness is not checked). Usage =
  sum of the pods' metric (milli-units, int64) / number of pods with a metric (integer
  division, `metricsclient.GetMetricUsageRatio`); ratio = usage / target. Without unready
  (on scale-up) or missing pods: within tolerance (|1 - ratio| <= 0.1) -> current replicas,
  else ceil(ratio * readyPodCount). Otherwise missing pods count as the target on a
  scale-down and as 0 on a scale-up; on a scale-up unready pods count as 0; the ratio is
  recomputed; within tolerance or a flipped direction -> current; ceil(newRatio * pods with
  a metric), and no change when that goes against the direction. No pod at all, or no pod
  with a metric: an error, and the HPA does not scale.
* horizontal.go `reconcileAutoscaler`: spec replicas 0 (with minReplicas > 0) disables
  scaling; current > max -> max; current < min -> min; else the metric's proposal through
  `normalizeDesiredReplicasWithBehaviors`: `maybeInitScaleDownStabilizationWindow` (the
  current replicas as the first recommendation), `stabilizeRecommendationWithBehaviors`
  (scale up to the lowest, down to the highest recommendation of the window; up 0 s, down
  300 s by default; the window keeps samples strictly after the cut-off), then
  `convertDesiredReplicasWithBehaviorRate` with the default policies (up: max(+100 %, +4 pods)
  per 15 s; down: -100 % per 15 s) and min/max replicas; scale events are kept per period.

The controller's sync period is 15 s: replay one HPA evaluation per recorded step.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from autoscaler.baselines.interface import ObservationAdapter, Outcome
from autoscaler.policy.types import Observation, PodStage, ReadyPod

HPA_BASELINE_NAME = "hpa-queue"
# baseline name -> the per-pod gauges its Pods metric sums
HPA_METRICS: dict[str, tuple[str, ...]] = {"hpa-queue": ("waiting",), "hpa": ("waiting", "running")}


@dataclass(frozen=True)
class ScalingPolicy:
    kind: str  # "Pods" | "Percent"
    value: int
    period_seconds: int


@dataclass(frozen=True)
class HpaParams:
    target_average_value: float = 5.0
    min_replicas: int = 1
    max_replicas: int = 10
    tolerance: float = 0.1
    scale_up_window_seconds: int = 0
    scale_down_window_seconds: int = 300
    scale_up_policies: tuple[ScalingPolicy, ...] = (ScalingPolicy("Percent", 100, 15), ScalingPolicy("Pods", 4, 15))
    scale_down_policies: tuple[ScalingPolicy, ...] = (ScalingPolicy("Percent", 100, 15),)
    gpus_per_replica: int = 1
    metric: tuple[str, ...] = ("waiting",)  # the per-pod gauges summed into the Pods metric


@dataclass(frozen=True)
class HpaState:
    recommendations: tuple[tuple[float, int], ...] | None = None  # None: window not initialised
    scale_up_events: tuple[tuple[float, int], ...] = ()
    scale_down_events: tuple[tuple[float, int], ...] = ()


@dataclass(frozen=True)
class HpaDecision:
    desired_replicas: int
    current_replicas: int
    reason: str  # scale_up / scale_down / hold_* (see below)
    metric_replicas: int | None = None
    usage: float | None = None  # average metric per pod the HPA saw
    limit: str | None = None  # ScaleUpLimit | ScaleDownLimit | TooManyReplicas | TooFewReplicas
    values: dict[str, float | int | None] = field(default_factory=dict)


def _milli(v: float) -> int:
    return int(math.ceil(v * 1000 - 1e-9))


def _usage_ratio(metrics: dict[str, int], target_milli: int) -> tuple[float, int]:
    total = sum(metrics.values())
    n = len(metrics)
    usage = total // n if total >= 0 else -(-total // n)  # Go's int64 division truncates
    return usage / target_milli, usage


def pod_metric(gauges: tuple[str, ...], pod: ReadyPod) -> float | None:
    """The pod's Pods-metric value: the sum of its scraped `gauges` ("waiting", "running"), None
    when one is missing or not finite (the adapter then serves no value for the pod)."""
    total = 0.0
    for g in gauges:
        sample = pod.waiting if g == "waiting" else pod.running if g == "running" else pod.kv_cache_usage
        if sample is None or not math.isfinite(sample.value):
            return None
        total += sample.value
    return total


def metric_replicas(params: HpaParams, observation: Observation) -> tuple[int | None, float | None]:
    """The replica count the one metric proposes (None: the metric is unusable -> no scaling)."""
    current = observation.spec_replicas
    target = _milli(params.target_average_value)
    metrics: dict[str, int] = {}
    missing: list[str] = []
    unready: list[str] = []
    ready_count = 0
    for p in observation.ready_pods:
        value = pod_metric(params.metric, p)
        if value is None:
            missing.append(p.name)
            continue
        metrics[p.name] = _milli(value)
        ready_count += 1
    for f in observation.pods_in_flight:
        if f.stage in (PodStage.UNSCHEDULABLE, PodStage.SCHEDULED):
            unready.append(f.name)  # phase Pending
        else:
            missing.append(f.name)  # Running, the server is loading: no /metrics yet
    if not observation.ready_pods and not observation.pods_in_flight:
        return None, None
    if not metrics:
        return None, None
    ratio, usage = _usage_ratio(metrics, target)
    scale_up_with_unready = bool(unready) and ratio > 1.0
    if not scale_up_with_unready and not missing:
        if abs(1.0 - ratio) <= params.tolerance:
            return current, usage / 1000
        return math.ceil(ratio * ready_count), usage / 1000
    if missing:
        fill = target if ratio < 1.0 else 0
        for name in missing:
            metrics[name] = fill
    if scale_up_with_unready:
        for name in unready:
            metrics[name] = 0
    new_ratio, _ = _usage_ratio(metrics, target)
    if abs(1.0 - new_ratio) <= params.tolerance or (ratio < 1.0 < new_ratio) or (ratio > 1.0 > new_ratio):
        return current, usage / 1000
    new = math.ceil(new_ratio * len(metrics))
    if (new_ratio < 1.0 and new > current) or (new_ratio > 1.0 and new < current):
        return current, usage / 1000
    return new, usage / 1000


def object_value_replicas(current: int, usage: float, target: float, ready_pods: int, tolerance: float) -> int:
    """An Object metric with a `Value` target (replica_calculator.go `GetObjectMetricReplicas`,
    `getUsageRatioReplicaCount`): ratio = usage / target (milli-units); within tolerance the
    current replicas, else ceil(ratio x ready pods) (from 0 replicas: ceil(ratio)). Worked
    example: 6 waiting in the namespace, target 1, 2 ready pods: ratio 6 -> ceil(6 x 2) = 12."""
    ratio = _milli(usage) / _milli(target)
    if current == 0:
        return math.ceil(ratio)
    if abs(1.0 - ratio) <= tolerance:
        return current
    return math.ceil(ratio * ready_pods)


def external_average_value_replicas(status_replicas: int, usage: float, target_per_pod: float,
                                    tolerance: float) -> tuple[int, float]:
    """An External metric with an `AverageValue` target (replica_calculator.go
    `GetExternalPerPodMetricReplicas`): ratio = usage / (target x status replicas); outside the
    tolerance ceil(usage / target), else the status replicas; also the usage per pod. Worked
    example: 3 pods, usage 400, target 78: 400 / 234 = 1.71 -> ceil(400 / 78) = 6."""
    u, t = _milli(usage), _milli(target_per_pod)
    replicas = status_replicas
    if status_replicas == 0 or abs(1.0 - u / (t * status_replicas)) > tolerance:
        replicas = math.ceil(u / t)
    return replicas, usage / max(status_replicas, 1)


def _change_in_period(events: tuple[tuple[float, int], ...], period: int, now: float) -> int:
    cutoff = now - period
    return sum(n for t, n in events if t > cutoff)


def _scale_up_limit(current: int, state: HpaState, params: HpaParams, now: float) -> int:
    result = -(2**31)
    for pol in params.scale_up_policies:
        added = _change_in_period(state.scale_up_events, pol.period_seconds, now)
        deleted = _change_in_period(state.scale_down_events, pol.period_seconds, now)
        start = current - added + deleted
        proposed = start + pol.value if pol.kind == "Pods" else math.ceil(start * (1 + pol.value / 100))
        result = max(result, proposed)
    return result


def _scale_down_limit(current: int, state: HpaState, params: HpaParams, now: float) -> int:
    result = 2**31 - 1
    for pol in params.scale_down_policies:
        added = _change_in_period(state.scale_up_events, pol.period_seconds, now)
        deleted = _change_in_period(state.scale_down_events, pol.period_seconds, now)
        start = current - added + deleted
        proposed = start - pol.value if pol.kind == "Pods" else int(start * (1 - pol.value / 100))
        result = min(result, proposed)
    return result


def hpa_decide(
    params: HpaParams, observation: Observation, state: HpaState, now: float
) -> tuple[HpaDecision, HpaState]:
    """One HPA sync of the `Pods` metric (`params.metric` summed per pod, `metric_replicas`)."""
    return hpa_sync(params, observation.spec_replicas, lambda: metric_replicas(params, observation), state, now)


def hpa_sync(
    params: HpaParams,
    current: int,
    propose: Callable[[], tuple[int | None, float | None]],
    state: HpaState,
    now: float,
) -> tuple[HpaDecision, HpaState]:
    """`reconcileAutoscaler` around any metric: `propose()` -> (replicas the metric asks for, or
    None when it is unusable, and the usage it saw), then the default behavior. The `hpa-queue`
    baseline proposes from a Pods metric, KEDA (sim) from an External one; both share this."""
    if current == 0 and params.min_replicas != 0:
        return HpaDecision(0, 0, "hold_scaling_disabled"), state
    if current > params.max_replicas:
        desired, reason = params.max_replicas, "scale_down_max_replicas"
        return _done(params, state, current, desired, reason, None, None, None, now)
    if current < params.min_replicas:
        desired, reason = params.min_replicas, "scale_up_min_replicas"
        return _done(params, state, current, desired, reason, None, None, None, now)
    proposal, usage = propose()
    if proposal is None:
        return HpaDecision(current, current, "hold_metrics_unavailable"), state
    # normalizeDesiredReplicasWithBehaviors
    recs = state.recommendations
    if recs is None:
        recs = ((now, current),) if params.scale_down_window_seconds > 0 else ()
    up_cut = now - params.scale_up_window_seconds
    down_cut = now - params.scale_down_window_seconds
    up_rec = down_rec = proposal
    old_index: int | None = None
    for i, (t, r) in enumerate(recs):
        if t > up_cut:
            up_rec = min(up_rec, r)
        if t > down_cut:
            down_rec = max(down_rec, r)
        if t < up_cut and t < down_cut:
            old_index = i
    stabilized = max(current, up_rec)
    stabilized = min(stabilized, down_rec)
    if old_index is not None:
        new_recs = recs[:old_index] + ((now, proposal),) + recs[old_index + 1:]
    else:
        new_recs = recs + ((now, proposal),)
    state = replace(state, recommendations=new_recs)
    desired, limit = stabilized, None
    if stabilized > current:
        up_limit = max(_scale_up_limit(current, state, params, now), current)
        allowed, limit_name = (up_limit, "ScaleUpLimit") if params.max_replicas > up_limit else (params.max_replicas, "TooManyReplicas")
        if stabilized > allowed:
            desired, limit = allowed, limit_name
    elif stabilized < current:
        down_limit = min(_scale_down_limit(current, state, params, now), current)
        allowed, limit_name = (down_limit, "ScaleDownLimit") if params.min_replicas < down_limit else (params.min_replicas, "TooFewReplicas")
        if stabilized < allowed:
            desired, limit = allowed, limit_name
    if desired > current:
        reason = "scale_up_queue"
    elif desired < current:
        reason = "scale_down"
    elif proposal > current:
        reason = "hold_max_replicas" if current >= params.max_replicas else "hold_scale_up_window"
    elif proposal < current:
        reason = "hold_min_replicas" if current <= params.min_replicas else "hold_scale_down_window"
    elif usage is not None and abs(1.0 - usage / params.target_average_value) <= params.tolerance:
        reason = "hold_within_tolerance"
    else:
        reason = "hold_steady"
    return _done(params, state, current, desired, reason, proposal, usage, limit, now)


def _done(
    params: HpaParams,
    state: HpaState,
    current: int,
    desired: int,
    reason: str,
    proposal: int | None,
    usage: float | None,
    limit: str | None,
    now: float,
) -> tuple[HpaDecision, HpaState]:
    if desired > current:
        state = replace(state, scale_up_events=_prune(state.scale_up_events, params.scale_up_policies, now) + ((now, desired - current),))
    elif desired < current:
        state = replace(state, scale_down_events=_prune(state.scale_down_events, params.scale_down_policies, now) + ((now, current - desired),))
    return HpaDecision(desired, current, reason, proposal, usage, limit), state


def _prune(events: tuple[tuple[float, int], ...], policies: tuple[ScalingPolicy, ...], now: float) -> tuple[tuple[float, int], ...]:
    longest = max((p.period_seconds for p in policies), default=0)
    return tuple(e for e in events if e[0] > now - longest)


def parse_baseline(spec: str) -> HpaParams | None:
    """`hpa-queue`, `hpa` or `hpa:target=78,min=1,max=10` -> HpaParams (metric: waiting for
    `hpa-queue`, waiting + running for `hpa`); None if not a baseline name.
    Raises ValueError on a bad option."""
    name, _, opts = spec.partition(":")
    if name not in HPA_METRICS:
        return None
    kw: dict[str, float | int | tuple[str, ...]] = {"metric": HPA_METRICS[name]}
    keys = {"target": ("target_average_value", float), "min": ("min_replicas", int), "max": ("max_replicas", int),
            "tolerance": ("tolerance", float), "down_window": ("scale_down_window_seconds", int),
            "gpus_per_replica": ("gpus_per_replica", int)}
    seen: set[str] = set()
    for part in filter(None, opts.split(",")):
        k, eq, v = part.partition("=")
        if k not in keys:
            raise ValueError(f"{spec}: unknown option {k!r} (known: {', '.join(keys)})")
        if not eq:
            raise ValueError(f"{spec}: {k} needs a value ({k}=...)")
        if k in seen:
            raise ValueError(f"{spec}: {k} is given twice")
        seen.add(k)
        field_name, typ = keys[k]
        try:
            kw[field_name] = typ(v)
        except ValueError:
            kind = "a whole number" if typ is int else "a number"
            raise ValueError(f"{spec}: {k}={v!r} is not {kind}") from None
    params = HpaParams(**kw)  # type: ignore[arg-type]
    if params.min_replicas > params.max_replicas or params.target_average_value <= 0:
        raise ValueError(f"{spec}: need 0 < target and min <= max")
    return params


class HpaQueue(ObservationAdapter[HpaParams, HpaState, HpaDecision]):
    """HPA v2 on a Pods metric (prometheus-adapter): `vllm:num_requests_waiting` (`hpa-queue`) or
    waiting + running (`hpa`, `params.metric`), target AverageValue, default behavior, tolerance
    10 %, sync every 15 s: `hpa_decide` fed what the live loop would observe, keeping its
    `HpaState` across syncs and the last `HpaDecision`.

    Pending pods (unschedulable, container creating) count as 0 on a scale-up; pods without a
    sample (loading, or ready but not yet scraped) are "missing": 0 on a scale-up, the target on
    a scale-down, and a change of direction holds. Example: 2 ready pods waiting 12 and 8,
    target 5: ratio 2.0, ceil(2.0 * 2) = 4 replicas."""

    def __init__(self, params: HpaParams, name: str = HPA_BASELINE_NAME) -> None:
        super().__init__(name, params, HpaState(), 15.0, params.gpus_per_replica)
        self.needs = params.metric
        self.pod_concurrency_limit: int | None = None  # the HPA caps nothing per pod

    def __call__(self, observation: Observation, now: float) -> Outcome:
        decision, self.state = hpa_decide(self.params, observation, self.state, now)
        self.last = decision
        return decision.desired_replicas, decision.reason, decision.limit
