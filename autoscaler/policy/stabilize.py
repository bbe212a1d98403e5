"""Step 6, stabilisation: scale up at once, scale down slowly.

Mirrors HPA's `stabilizeRecommendationWithBehaviors` (kubernetes/kubernetes,
pkg/controller/podautoscaler/horizontal.go): keep every recommendation with its time; a
scale-down goes only as low as the *highest* recommendation within
`scale_down_window_seconds`, a scale-up only as high as the *lowest* one within
`scale_up_window_seconds` (0 by default: at once). A recommendation is inside a window when
`now - t < window`, as HPA's `timestamp.After(cutoff)`: one exactly `window` old is out.
"""

from __future__ import annotations

from dataclasses import dataclass

from autoscaler.policy.params import PolicyParams


@dataclass(frozen=True)
class Stabilized:
    replicas: int
    recommendations: tuple[tuple[float, int], ...]  # history to keep, incl. this tick


def stabilize(
    history: tuple[tuple[float, int], ...],
    recommendation: int,
    current: int,
    now: float,
    params: PolicyParams,
) -> Stabilized:
    """Apply both windows to this tick's recommendation.

    Worked example: window 600 s, current 6, recommendations 6 at t = 400 and 4 at t = 700,
    now = 1000 and the recommendation now is 3. The 6 is exactly 600 s old: outside. The
    highest inside is 4, so scale down to 4, not 3. At now = 999 the 6 (599 s old) is inside
    and the replicas stay 6.
    """
    up = recommendation
    down = recommendation
    for t, rec in history:
        age = now - t
        if age < params.scale_up_window_seconds:
            up = min(up, rec)
        if age < params.scale_down_window_seconds:
            down = max(down, rec)
    stabilized = current
    if stabilized < up:
        stabilized = up
    if stabilized > down:
        stabilized = down
    keep_for = max(params.scale_down_window_seconds, params.scale_up_window_seconds)
    kept = tuple((t, r) for t, r in history if now - t < keep_for)
    return Stabilized(replicas=stabilized, recommendations=kept + ((now, recommendation),))
