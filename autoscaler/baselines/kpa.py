"""Knative Pod Autoscaler (KPA) with `containerConcurrency`, the activator and a scale-down delay.

Sources: knative/serving (release-1.15) pkg/autoscaler/scaling/autoscaler.go (`Scale`: stable and
panic desired pods, rate limits, panic mode, the delay window), pkg/autoscaler/config/config.go
and config/core/configmaps/autoscaler.yaml (defaults: stable-window 60 s, panic-window-percentage
10 %, panic-threshold-percentage 200 %, container-concurrency-target-percentage 70 %,
max-scale-up-rate 1000, max-scale-down-rate 2, scale-down-delay 0 s, tick 2 s,
target-burst-capacity 211), pkg/reconciler/autoscaling/resources/target.go
(`ResolveMetricTarget`: with containerConcurrency CC set, target = CC x 70 %), pkg/activator and
pkg/queue (queue-proxy): CC is a hard limit per pod, the requests beyond it wait in the activator
(when it is in the path) or in the pod's queue-proxy; both report them as concurrency.

As run here (the knob is CC):

* `pod_concurrency_limit` = CC: the simulator's router holds what no pod may take, FIFO (the
  activator's queue). Not modelled: the activator leaving the path once excess burst capacity is
  positive, when the excess would queue in each pod's queue-proxy instead of centrally.
* every 2 s, the concurrency = requests held by the ready pods (engine waiting + running) plus
  those waiting at the router, averaged over the stable window (60 s) and the panic window (6 s),
  time-weighted (`window.TimeWindow`);
* desired = ceil(average / (0.7 x CC)), clamped to [floor(ready / 2), ceil(1000 x ready)];
  panic while the panic desired is >= 2 x ready pods (it ends 60 s after the last such tick);
  in panic the count never decreases and takes the larger of the stable and panic desires;
* scale-down-delay = 300 s (`autoscaling.knative.dev/scale-down-delay`, 0 s .. 1 h): Knative
  recommends it to keep pods through lulls when a cold start is costly (knative/docs
  serving/autoscaling/scale-bounds.md, "Scale Down Delay", whose example is 15m); 5 min is the
  value AIBrix's own KPA sample uses for an 8B model (deepseek-r1-distill-llama-8b,
  `kpa.autoscaling.aibrix.ai/scale-down-delay: 5m`) and equals the HPA's default scale-down
  stabilization, so the two differ by their algorithm, not by their patience. The desired count
  is the highest of the last 300 s.

Example: CC 100 (target 70), 700 in flight over the last 6 s on 4 ready pods: ceil(700 / 70) = 10
>= 2 x 4 -> panic, 10 replicas.

`kpa-soft` (`Kpa(..., hard_limit=False)`): the same autoscaler with `containerConcurrency: 0` and
the soft target `autoscaling.knative.dev/target` = the knob, which is how a KServe or Knative SRE
would run vLLM (it batches on its own; a hard cap would queue requests a free batch slot could
take). `ResolveMetricTarget` (pkg/reconciler/autoscaling/resources/target.go): with CC 0 the
annotation's target is the total, times the same 70 % utilisation. With no CC the activator's
breaker has no limit, so nothing waits outside the pods: no `pod_concurrency_limit`.
Example: target 100 (70 per pod), 700 in flight on 4 ready pods -> 10 replicas, as above.
"""

from __future__ import annotations

import math

from autoscaler.baselines.view import ClusterView
from autoscaler.baselines.window import TimeWindow


class Kpa:
    """Knative KPA on concurrency, with a hard `containerConcurrency` per pod (or, `hard_limit`
    False, a soft target and none)."""

    name = "kpa"
    interval_s = 2.0  # the autoscaler's tick

    def __init__(self, container_concurrency: float = 116.0, utilization: float = 0.7, min_replicas: int = 1,
                 max_replicas: int = 100, stable_window_s: float = 60.0, panic_window_pct: float = 10.0,
                 panic_threshold: float = 2.0, max_scale_up_rate: float = 1000.0, max_scale_down_rate: float = 2.0,
                 scale_down_delay_s: float = 300.0, hard_limit: bool = True) -> None:
        if not hard_limit:
            self.name = "kpa-soft"
        self.pod_concurrency_limit: int | None = max(1, int(container_concurrency)) if hard_limit else None
        self.target = max(0.01, container_concurrency * utilization)  # autoscaling.TargetMin = 0.01
        self.min_replicas, self.max_replicas = min_replicas, max_replicas
        self.stable_s = stable_window_s
        self.panic_s = stable_window_s * panic_window_pct / 100.0
        self.panic_threshold = panic_threshold
        self.up_rate, self.down_rate = max_scale_up_rate, max_scale_down_rate
        self.delay_s = scale_down_delay_s
        self.concurrency = TimeWindow(stable_window_s)
        self.delay_window = TimeWindow(scale_down_delay_s)
        self.panic_time: float | None = None
        self.max_panic_pods = 0

    def _desired(self, average: float, ready: int) -> int:
        up, down = math.ceil(self.up_rate * ready), math.floor(ready / self.down_rate)
        return min(max(math.ceil(average / self.target - 1e-9), down), up)

    def _panic(self, dspc: int, dppc: int, ready: int, now: float) -> int:
        """Panic mode (autoscaler.go): enter / extend when the panic desire is >= threshold x ready;
        leave a stable window after the last such tick; in panic never scale down."""
        if dppc / ready >= self.panic_threshold:
            self.panic_time = now
        elif self.panic_time is not None and now - self.panic_time > self.stable_s:
            self.panic_time, self.max_panic_pods = None, 0
        if self.panic_time is None:
            return dspc
        self.max_panic_pods = max(self.max_panic_pods, dspc, dppc)
        return self.max_panic_pods

    def decide(self, view: ClusterView, now: float) -> int:
        self.concurrency.add(now, float(sum(p.outstanding_now for p in view.ready) + view.router_pending))
        stable = self.concurrency.average(now, self.stable_s) or 0.0
        panic = self.concurrency.average(now, self.panic_s) or 0.0
        ready = max(1, len(view.ready))
        desired = self._panic(self._desired(stable, ready), self._desired(panic, ready), ready, now)
        if self.delay_s > 0:
            self.delay_window.add(now, float(desired))
            desired = int(self.delay_window.maximum(now, self.delay_s) or desired)
        return min(max(desired, self.min_replicas), self.max_replicas)
