"""Step 4, forecast: the demand when a replica asked for now would start serving.

The load (waiting + running, summed over ready pods) is kept for `forecast_window_seconds`;
so are the arrivals per second when the rate model is on (see `demand`): while replicas
queue, the load grows by the backlog, not by demand, so the arrival rate is what is projected
then. A least-squares line through the history gives the trend; the value at now + lead time
is the value now plus the rising part of the trend times the lead time, never more than
`forecast_max_growth_ratio` times the value now, and the demand grows in proportion. The
forecast only ever raises the demand: a falling trend is left to the slow scale-down windows.
"""

from __future__ import annotations

from dataclasses import dataclass

from autoscaler.policy.params import PolicyParams
from autoscaler.policy.time_window import Entries, TimeWindow
from autoscaler.policy.types import fast_init


@fast_init
@dataclass(frozen=True)
class Forecast:
    slope_per_second: float
    load: float  # projected load at now + lead time
    replicas: float


def update_load_history(
    history: Entries[float], now: float, load: float, window_seconds: float
) -> TimeWindow[float]:
    """Record the reading (now, load), keeping those less than the window old (the edge itself
    drops out); a reading taken again at the same tick replaces the earlier one. A window of 0
    keeps nothing.

    Worked example: window 120, now 1120: a sample at t = 1000 is exactly 120 s old and
    drops; one at 1001 (119 s old) stays.
    """
    return TimeWindow.of(history).record_reading(now, load, window_seconds)


def trend(history: tuple[tuple[float, float], ...]) -> float:
    """Least-squares slope of load over time, per second (0 when time does not vary).

    Worked example: (0, 40), (15, 45), (30, 50): slope = 1/3 per second.
    """
    n = len(history)
    if n < 2:
        return 0.0
    sum_t = sum_y = 0.0
    for t, y in history:  # two passes in plain loops (the sums as `sum` adds them: the same floats)
        sum_t += t
        sum_y += y
    mean_t, mean_y = sum_t / n, sum_y / n
    var_t = covariance = 0.0
    for t, y in history:
        var_t += (t - mean_t) ** 2
        covariance += (t - mean_t) * (y - mean_y)
    if var_t <= 0:
        return 0.0
    return covariance / var_t


def forecast(
    history: tuple[tuple[float, float], ...],
    load_now: float,
    demand_replicas: float,
    lead_time_seconds: float,
    params: PolicyParams,
) -> Forecast:
    """Demand at now + lead time, in replicas, scaled from the demand now by the growth of
    `load_now` (the load, or the arrival rate) along its trend.

    Worked example: history (0, 40), (15, 45), (30, 50), demand now 5 replicas, lead 300 s,
    growth bound 2. Slope 1/3 /s gives 50 + 100 = 150, bounded to 2 * 50 = 100; the forecast
    is 5 * 100 / 50 = 10 replicas.
    """
    if len(history) < params.forecast_min_samples or load_now <= 0:
        return Forecast(0.0, load_now, demand_replicas)  # slope, load, replicas
    slope = trend(history)
    projected = load_now + max(0.0, slope) * lead_time_seconds
    projected = min(projected, load_now * params.forecast_max_growth_ratio)
    return Forecast(slope, projected, demand_replicas * projected / load_now)
