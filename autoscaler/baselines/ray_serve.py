"""Ray Serve autoscaling: a target of ongoing requests per replica, with up/down delays."""

from __future__ import annotations

import math
from collections import deque

from autoscaler.baselines.view import ClusterView


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
