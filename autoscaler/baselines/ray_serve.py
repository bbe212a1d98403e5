"""Ray Serve autoscaling of an LLM deployment: target_ongoing_requests, max_ongoing_requests, delays.

Sources: ray-project/ray (master, 2025) python/ray/serve/autoscaling_policy.py
(`_core_replica_queue_length_policy`, `_apply_scaling_factors`, `_apply_delay_logic`),
python/ray/serve/config.py `AutoscalingConfig` (upscale_delay_s 30, downscale_delay_s 600,
look_back_period_s 30, metrics_interval_s 10, upscaling/downscaling factors 1 = smoothing 1),
python/ray/serve/_private/constants.py (CONTROL_LOOP_INTERVAL_S 0.1; core defaults
target_ongoing_requests 2, max_ongoing_requests 5); ray.serve.llm: python/ray/llm/_internal/serve/
core/server/builder.py `DEFAULT_DEPLOYMENT_OPTIONS` (today max_ongoing_requests and
target_ongoing_requests both 1e9, i.e. "set them yourself"), and the earlier ray.serve.llm
(Ray 2.43-2.44) `LLMConfig.deployment_config` defaults: `AutoscalingConfig` target_ongoing_requests
16 (`_DEFAULT_TARGET_ONGOING_REQUESTS`), `DeploymentConfig` max_ongoing_requests 64
(`_FALLBACK_MAX_ONGOING_REQUESTS`).

As run here (the knob is target_ongoing_requests):

* total requests = requests at the replicas (vLLM's waiting + running, what a replica reports as
  ongoing) + requests queued at the handle (the router); the controller sees its average over
  `look_back_period_s` (30 s, time-weighted), as pushed every `metrics_interval_s` (10 s);
* desired = total / target_ongoing_requests (= running replicas x error ratio), then
  ceil(current + factor x (desired - current)) with factor 1, at least one fewer on a scale-down
  that the ceiling would cancel, within [min, max];
* the delay: a decision to go up (down) applies once the controller has wanted to go up (down)
  without a break for upscale_delay_s 30 s (downscale_delay_s 600 s), counted in SECONDS of
  simulated time. Ray counts control-loop ticks of 0.1 s (`decision_counter >
  int(delay / CONTROL_LOOP_INTERVAL_S)`), i.e. the same 30 s; counting the simulator's ticks
  instead would double the delays at `--dt 2`.
* `pod_concurrency_limit` = max_ongoing_requests = 4 x target_ongoing_requests (the ratio of
  ray.serve.llm's own LLM defaults, 64 / 16; core Serve's is 5 / 2 = 2.5): a replica never holds
  more, the rest wait at the handle (the simulator's router, FIFO).

Not modelled: the router's power-of-two-choices (the simulator routes least outstanding over all
replicas), max_queued_requests (-1 = unlimited by default), the 0 <-> 1 cold-start path (min >= 1).

Example: target 64, 4 running replicas, 512 requests on average: desired 512 / 64 = 8, applied
once the wish to scale up has lasted 30 s.
"""

from __future__ import annotations

import math

from autoscaler.baselines.view import ClusterView
from autoscaler.baselines.window import TimeWindow

MAX_ONGOING_PER_TARGET = 4.0  # ray.serve.llm: max_ongoing_requests 64 for target_ongoing_requests 16


def scaled_replicas(desired: float, current: int, upscaling_factor: float = 1.0,
                    downscaling_factor: float = 1.0) -> int:
    """`_apply_scaling_factors`: ceil(current + factor x (desired - current)); a scale-down the
    ceiling would cancel still removes one. Worked example: desired 2.5 from 4 with factor 0.5:
    ceil(4 - 0.75) = 4 -> 3."""
    delta = desired - current
    factor = upscaling_factor if delta > 0 else downscaling_factor
    scaled = math.ceil(current + factor * delta - 1e-9)
    if math.ceil(desired - 1e-9) < current and scaled == current:
        scaled -= 1
    return scaled


class RayServe:
    """Ray Serve's default (replica queue length) autoscaling policy, delays in seconds."""

    name = "ray"
    interval_s = 1.0  # Ray decides every 0.1 s; the simulator lets a policy act at most once per tick

    def __init__(self, target: float = 16.0, min_replicas: int = 1, max_replicas: int = 100,
                 max_ongoing_requests: int | None = None, upscale_delay_s: float = 30.0,
                 downscale_delay_s: float = 600.0, look_back_period_s: float = 30.0,
                 metrics_interval_s: float = 10.0, upscaling_factor: float = 1.0,
                 downscaling_factor: float = 1.0) -> None:
        self.target = target
        self.min_replicas, self.max_replicas = min_replicas, max_replicas
        limit = max_ongoing_requests if max_ongoing_requests is not None else math.ceil(MAX_ONGOING_PER_TARGET * target)
        self.pod_concurrency_limit: int | None = max(1, int(limit))
        self.up_delay, self.down_delay = upscale_delay_s, downscale_delay_s
        self.look_back = look_back_period_s
        self.metrics_interval = metrics_interval_s
        self.factors = (upscaling_factor, downscaling_factor)
        self.samples = TimeWindow(look_back_period_s)
        self.reported: float | None = None  # the average the controller last received
        self.next_push: float | None = None
        self.streak: tuple[int, float] | None = None  # (direction, since when)

    def _observe(self, view: ClusterView, now: float) -> float | None:
        self.samples.add(now, float(sum(p.outstanding_now for p in view.ready) + view.router_pending))
        if self.next_push is None or now >= self.next_push - 1e-9:
            self.reported = self.samples.average(now, self.look_back)
            push = self.next_push if self.next_push is not None else now
            while push <= now + 1e-9:
                push += self.metrics_interval
            self.next_push = push
        return self.reported

    def _delay(self, desired: int, target_replicas: int, now: float) -> int:
        """`_apply_delay_logic` in seconds: apply once the same direction was wanted for the delay."""
        direction = (desired > target_replicas) - (desired < target_replicas)
        if direction == 0:
            self.streak = None
            return target_replicas
        if self.streak is None or self.streak[0] != direction:
            self.streak = (direction, now)
        delay = self.up_delay if direction > 0 else self.down_delay
        if now - self.streak[1] >= delay - 1e-9:
            self.streak = (direction, now)  # Ray resets its counter: a further step waits a full delay again
            return desired
        return target_replicas

    def decide(self, view: ClusterView, now: float) -> int:
        total = self._observe(view, now)
        running = len(view.ready)
        if running == 0 or total is None:
            return view.spec_replicas
        desired = scaled_replicas(total / self.target, running, *self.factors)
        desired = min(max(desired, self.min_replicas), self.max_replicas)
        return self._delay(desired, view.spec_replicas, now)
