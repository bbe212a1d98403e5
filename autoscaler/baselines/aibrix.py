"""AIBrix APA: a KV-cache usage target with a fluctuation tolerance and rate limits."""

from __future__ import annotations

import math

from autoscaler.baselines.view import ClusterView


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
