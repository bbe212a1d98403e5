"""The simulator's policies by name: ours (`queue-lead`), the baselines
(`autoscaler.baselines`, one module each) and the oracle (`autoscaler.sim.oracle`).

Every policy sees the same `ClusterView` (`autoscaler.baselines.view`) every `interval_s`,
and returns the desired replicas. The runner clamps nothing: bounds are each policy's own
(all get the scenario's min/max replicas).

`make_policy(name, knob, ...)` builds one; `POLICIES[name].knob` is its main knob, the one the
cost-at-99 % sweep varies, with the grid it sweeps.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable

from autoscaler.baselines.aibrix import AibrixApa
from autoscaler.baselines.hpa import HpaParams, HpaQueue
from autoscaler.baselines.hpa_cpu import HpaCpu
from autoscaler.baselines.interface import Policy
from autoscaler.baselines.keda import Keda
from autoscaler.baselines.kpa import Kpa
from autoscaler.baselines.queue_lead import QueueLead
from autoscaler.baselines.ray_serve import RayServe
from autoscaler.baselines.static import StaticPeak
from autoscaler.baselines.wva import Wva
from autoscaler.policy import PolicyParams


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
        return HpaQueue(HpaParams(target_average_value=k, min_replicas=min_replicas, max_replicas=max_replicas))
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
