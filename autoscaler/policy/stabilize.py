"""Step 6, stabilisation: scale up at once, scale down slowly.

Mirrors HPA's `stabilizeRecommendationWithBehaviors` (kubernetes/kubernetes,
pkg/controller/podautoscaler/horizontal.go): keep every recommendation with its time; a
scale-down goes only as low as the *highest* recommendation within
`scale_down_window_seconds`, a scale-up only as high as the *lowest* one within
`scale_up_window_seconds` (0 by default: at once). A recommendation is inside a window when
`now - t < window`, as HPA's `timestamp.After(cutoff)`: one exactly `window` old is out.

Unlike HPA, the scale-down window is by default never shorter than the Deployment's lead time
with a new node (`min_down_window_seconds` = `scale_down_window_lead_times` x that lead time,
from the lead-time step): a replica given back may need a new node and a model load to come
back, so the capacity that the last lead time's demand needed is kept (HPA's 300 s is the
floor; Qwen3-8B on H100 with a new node: 390 s; a 70B model that loads in 15 min: 20 min).
"""

from __future__ import annotations

from dataclasses import dataclass

from autoscaler.policy.params import PolicyParams
from autoscaler.policy.time_window import Entries, TimeWindow
from autoscaler.policy.types import fast_init


@fast_init
@dataclass(frozen=True)
class Stabilized:
    replicas: int
    recommendations: TimeWindow[int]  # history to keep, incl. this tick
    down_window_seconds: float  # the scale-down window in force: the configured one or the floor


def stabilize(
    history: Entries[int],
    recommendation: int,
    current: int,
    now: float,
    params: PolicyParams,
    min_down_window_seconds: float = 0.0,
) -> Stabilized:
    """Apply both windows to this tick's recommendation.

    Worked example: window 600 s, current 6, recommendations 6 at t = 400 and 4 at t = 700,
    now = 1000 and the recommendation now is 3. The 6 is exactly 600 s old: outside. The
    highest inside is 4, so scale down to 4, not 3. At now = 999 the 6 (599 s old) is inside
    and the replicas stay 6. With a window of 300 s and a lead time of 390 s the window is
    390 s: at now = 1000 the 4 (300 s old) is inside, so 4 rather than 3.
    """
    up_window = params.scale_up_window_seconds
    down_window = max(params.scale_down_window_seconds, min_down_window_seconds)
    kept = TimeWindow.of(history).within(now, max(down_window, up_window))
    up = kept.lowest(now, up_window, recommendation)
    down = kept.highest(now, down_window, recommendation)
    stabilized = min(max(current, up), down)
    if up_window <= 0:
        # Only the down window is in use (the default): the history is read for its maximum
        # alone, so it keeps only what may still be the maximum (short, and the same result).
        kept = kept.record_peak(now, recommendation)
    else:
        kept = kept.record(now, recommendation)
    return Stabilized(stabilized, kept, down_window)
