"""Knative Pod Autoscaler (KPA): stable and panic windows on concurrency."""

from __future__ import annotations

import math
from collections import deque

from autoscaler.baselines.view import ClusterView


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
