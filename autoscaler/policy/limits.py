"""Step 7, rate limits and bounds.

Rate limits mirror HPA's `calculateScaleUpLimitWithScalingRules` and
`calculateScaleDownLimitWithBehaviors` (kubernetes/kubernetes,
pkg/controller/podautoscaler/horizontal.go) with HPA's default scale-up behaviour: per
`scale_up_period_seconds` (15) add at most the larger of +`scale_up_max_percent`% (100) and
+`scale_up_max_pods` (4), counted from the replicas at the start of the period. Scale-down
removes at most `scale_down_max_pods` per `scale_down_period_seconds`, counting the pods
removed inside the period (unlike HPA, which counts from the replicas before the period's
scale-ups and so, right after 5 -> 8, would allow 8 -> 4 at once). An event is inside a
period when `now - t < period`.

Bounds come last and always win: min/max replicas and the GPU budget
(max_gpus // gpus_per_replica).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from autoscaler.policy.params import PolicyParams
from autoscaler.policy.time_window import Entries, TimeWindow
from autoscaler.policy.types import Clamp, fast_init


@fast_init
@dataclass(frozen=True)
class Limited:
    replicas: int
    clamp: Clamp | None


def _changed_in_period(events: Entries[int], now: float, period: float) -> int:
    return TimeWindow.of(events).within(now, period).total()


def _period_start(
    current: int,
    up_events: Entries[int],
    down_events: Entries[int],
    now: float,
    period: float,
) -> int:
    """Replicas at the start of the period: undo the changes made inside it."""
    return current - _changed_in_period(up_events, now, period) + _changed_in_period(down_events, now, period)


def scale_up_limit(
    current: int,
    up_events: Entries[int],
    down_events: Entries[int],
    now: float,
    params: PolicyParams,
) -> int:
    """Highest replicas allowed now.

    Worked example: current 6, of which 4 were added 10 s ago (period 15 s): the period began
    at 2, so the limit is max(2 * 2, 2 + 4) = 6 (hold). 15 s after those 4 were added they
    leave the period and the limit is max(6 * 2, 6 + 4) = 12.
    """
    start = _period_start(current, up_events, down_events, now, params.scale_up_period_seconds)
    by_percent = math.ceil(start * (1 + params.scale_up_max_percent / 100.0))
    by_pods = start + params.scale_up_max_pods
    return max(by_percent, by_pods)


def scale_down_limit(
    current: int,
    up_events: Entries[int],
    down_events: Entries[int],
    now: float,
    params: PolicyParams,
) -> int:
    """Lowest replicas allowed now: at most `scale_down_max_pods` removed per period.

    Worked example: current 5, 1 pod removed 119 s ago, max 1 pod per 120 s: that pod used up
    the period, so the limit is 5 (hold). At 120 s the removal leaves the period: 5 - 1 = 4.
    Scale-ups inside the period do not raise the allowance: 3 pods added 10 s ago (5 -> 8)
    still allow only 8 - 1 = 7.
    """
    removed = _changed_in_period(down_events, now, params.scale_down_period_seconds)
    return current - max(0, params.scale_down_max_pods - removed)


def bounds(params: PolicyParams) -> tuple[int, int, Clamp]:
    """(min, max, which clamp the max is) for this target.

    Worked example: max_replicas 10, max_gpus 12, 2 GPUs per replica: 12 // 2 = 6 < 10, so
    the upper bound is 6 and it is the GPU budget.
    """
    upper, upper_clamp = params.max_replicas, Clamp.MAX_REPLICAS
    if params.max_gpus is not None:
        by_gpus = params.max_gpus // params.gpus_per_replica
        if by_gpus < upper:
            upper, upper_clamp = by_gpus, Clamp.GPU_BUDGET
    return params.min_replicas, upper, upper_clamp


def apply_limits(
    desired: int,
    current: int,
    up_events: Entries[int],
    down_events: Entries[int],
    now: float,
    params: PolicyParams,
) -> Limited:
    """Rate limits first, then the bounds (which win).

    Worked example: current 2, desired 20, no recent events, max 10: the scale-up limit is
    max(4, 6) = 6, so 6 (clamp scale_up_rate). Desired 0 with min 1 and current 1: 1 (clamp
    min_replicas).
    """
    result, clamp = desired, None
    if desired > current:
        limit = scale_up_limit(current, up_events, down_events, now, params)
        if desired > limit:
            result, clamp = max(limit, current), Clamp.SCALE_UP_RATE
    elif desired < current:
        limit = scale_down_limit(current, up_events, down_events, now, params)
        if desired < limit:
            result, clamp = min(limit, current), Clamp.SCALE_DOWN_RATE
    lower, upper, upper_clamp = bounds(params)
    if result > upper:
        result, clamp = upper, upper_clamp
    elif result < lower:
        result, clamp = lower, Clamp.MIN_REPLICAS
    return Limited(result, clamp)


def record_event(
    up_events: Entries[int],
    down_events: Entries[int],
    current: int,
    desired: int,
    now: float,
    params: PolicyParams,
) -> tuple[TimeWindow[int], TimeWindow[int]]:
    """Remember this tick's change and forget events older than their period.

    Worked example: scale-ups of 2 at t = 900 and 1 at t = 990, a scale-down at t = 800;
    4 -> 6 at now = 1000 (periods 15 s up, 120 s down): the 2 (100 s old) and the
    scale-down (200 s old) are forgotten; the ups are (990, 1), (1000, 2).
    """
    ups = TimeWindow.of(up_events).within(now, params.scale_up_period_seconds)
    downs = TimeWindow.of(down_events).within(now, params.scale_down_period_seconds)
    if desired > current:
        ups = ups.record(now, desired - current)
    elif desired < current:
        downs = downs.record(now, current - desired)
    return ups, downs
