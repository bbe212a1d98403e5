"""Time windows over samples, in seconds whatever the simulator's tick (`--dt`).

`TimeWindow.average(now, length)` weighs each sample by how long it held (from its time to the
next sample's, the last one up to `now`), so a load that changes only at sample times averages
the same whether it was sampled every second or every two: the window of Knative's stable and
panic averages, Ray Serve's `look_back_period_s`.
`TimeWindow.mean` is the plain mean of the samples inside the window (AIBrix's metric window).
`TimeWindow.maximum(now, length)` is the largest sample inside the window (Knative's
scale-down-delay window keeps the highest recommendation, knative/serving
pkg/autoscaler/aggregation/max/window.go).
"""

from __future__ import annotations

from collections import deque


class TimeWindow:
    """(time, value) samples, oldest first, kept for `keep_s` seconds."""

    def __init__(self, keep_s: float) -> None:
        self.keep_s = keep_s
        self.samples: deque[tuple[float, float]] = deque()

    def add(self, t: float, value: float) -> None:
        self.samples.append((t, value))
        # keep one sample older than the horizon: it holds into the window
        while len(self.samples) > 1 and self.samples[1][0] <= t - self.keep_s:
            self.samples.popleft()

    def average(self, now: float, length: float) -> float | None:
        """Time-weighted mean over [now - length, now): each sample holds until the next one.
        None without a sample that held inside the window. Worked example: samples 0 at t = 0,
        10 at t = 4, window [0, 6) at now = 6: (0 x 4 + 10 x 2) / 6 = 3.33."""
        start = now - length
        total = weight = 0.0
        items = list(self.samples)
        for i, (t, v) in enumerate(items):
            end = items[i + 1][0] if i + 1 < len(items) else now
            lo, hi = max(t, start), min(end, now)
            if hi > lo:
                total += v * (hi - lo)
                weight += hi - lo
        if weight > 0:
            return total / weight
        return items[-1][1] if items and items[-1][0] >= start else None

    def mean(self, now: float, length: float) -> float | None:
        """The plain mean of the samples taken within (now - length, now] (a metric window that
        averages its scrapes, as AIBrix's); None if there is none."""
        inside = [v for t, v in self.samples if now - length < t <= now]
        return sum(inside) / len(inside) if inside else None

    def maximum(self, now: float, length: float) -> float | None:
        """The largest sample taken within (now - length, now]; None if there is none."""
        inside = [v for t, v in self.samples if now - length < t <= now]
        return max(inside) if inside else None
