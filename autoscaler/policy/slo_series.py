"""The SLO series of a target's ready pods, read once where the observation is built.

`sum_slo_series` runs in the live loop's `build_observation`, the replay's and the simulator's
observation builders, right after the pods are made: it checks every pod's token rates and
histograms once and keeps each family as one `HistogramSum`, so that `decide()` neither checks
them again nor interpolates each pod's histogram. It takes only what it can take without
judging: every pod with all four series, token rates finite and >= 0, histograms of one bucket
layout a family, well formed (`rates_ok`), sample times finite. Anything else (a missing
series, a NaN, a decreasing bucket, another layout) gives no summary, and `decide()` reads the
pods one by one with the pod health rule of `slo_capacity.read_slo` (stale, missing or NaN:
partial, so hold). Freshness depends on the tick: the summary keeps the oldest sample time and
`read_slo` checks it.
"""

from __future__ import annotations

from math import inf, isfinite

from autoscaler.policy.types import HistogramSum, ReadyPod, SloReading, SloSeries


def rates_ok(rates: tuple[float, ...]) -> bool:
    """A histogram's cumulative rates as they must be: from >= 0 to finite (their sum is: no NaN
    or infinity inside), never decreasing. The caller checks the length against the bounds.

    Worked example: (1, 3, 4): yes; (3, 2, 4), (-1, 3, 4), (1, NaN, 4) and (1, Inf, Inf): no.

    One loop over neighbours (a NaN fails its comparison) that also sums the rates, left to
    right from 0 as `sum` adds floats (so the same sum, finite or not): under the compiled build
    this runs in C without a call, where `isfinite(sum(rates))` was two generic calls and a
    boxed float; a month's replay checks two histograms a pod a tick.
    """
    prev = rates[0]
    if not 0.0 <= prev:
        return False
    total = 0.0
    for x in rates:
        if not prev <= x:  # decreasing, or a NaN
            return False
        prev = x
        total += x
    return total < inf  # every rate is >= 0 and not NaN here: finite, unless it is +Inf


def layout_ok(bounds: tuple[float, ...]) -> bool:
    """Bucket bounds a histogram may have: some, strictly ascending, the last +Inf.

    Worked example: (1, 2, +Inf): yes; (2, 1, +Inf), (1, 2) and (): no.

    A loop over neighbours (a NaN fails its comparison): compiled, a few ns a bound, where
    `all(map(lt, bounds, bounds[1:]))` was a slice and a generic call a bound (a fifth of
    `sum_slo_series`, twice a tick).
    """
    if not bounds or bounds[-1] != inf:
        return False
    prev = bounds[0]
    for i in range(1, len(bounds)):
        x = bounds[i]
        if not prev < x:
            return False
        prev = x
    return True


def sum_slo_series(pods: tuple[ReadyPod, ...]) -> SloSeries | None:
    """The pods' SLO series read once (`SloSeries`), or None when some pod's cannot be taken as
    they are: a series missing, a token rate NaN, infinite or negative, a histogram of another
    layout than the first pod's or not `rates_ok`, a sample time not finite. None for no pods.

    Worked example: 2 pods, prompt 1,000 and 2,000, generation 300 and 500 tokens/s, TTFT
    rates (1, 3, 4) at 990 and (2, 2, 2) at 995 on bounds (1, 2, +Inf), TPOT likewise: 3,000
    and 800 tokens/s, TTFT rows ((1, 3, 4), (2, 2, 2)) counting 6 requests/s, 2 pods served,
    oldest 990. The
    second pod's TTFT (3, 2, 4): None.
    """
    if not pods or pods[0].ttft is None or pods[0].tpot is None:
        return None
    ttft_layout, tpot_layout = pods[0].ttft.upper_bounds, pods[0].tpot.upper_bounds
    if not layout_ok(ttft_layout) or not layout_ok(tpot_layout):
        return None
    n_ttft, n_tpot = len(ttft_layout), len(tpot_layout)
    prompt = generation = stamps = 0.0
    oldest = inf
    ttfts: list[tuple[float, ...]] = []
    tpots: list[tuple[float, ...]] = []
    for pod in pods:  # one pass: the checks of `usable_histograms` but the age (known at the tick)
        p, g, a, b = pod.prompt_tokens_per_second, pod.generation_tokens_per_second, pod.ttft, pod.tpot
        if p is None or g is None or a is None or b is None:
            return None
        ra, rb = a.cumulative_per_second, b.cumulative_per_second
        if not (
            0.0 <= p.value < inf and 0.0 <= g.value < inf and len(ra) == n_ttft and len(rb) == n_tpot
            and (a.upper_bounds is ttft_layout or a.upper_bounds == ttft_layout)
            and (b.upper_bounds is tpot_layout or b.upper_bounds == tpot_layout)
            and rates_ok(ra) and rates_ok(rb)
        ):
            return None
        prompt += p.value
        generation += g.value
        t1, t2, t3, t4 = p.timestamp, g.timestamp, a.timestamp, b.timestamp
        stamps += t1 + t2 + t3 + t4
        oldest = _oldest(oldest, t1, t2, t3, t4)
        ttfts.append(ra)
        tpots.append(rb)
    if not isfinite(stamps):  # a NaN or infinite time anywhere (`min` would skip a NaN)
        return None
    ttft, tpot = histogram_sum(ttft_layout, ttfts), histogram_sum(tpot_layout, tpots)
    n = len(pods)
    reading = SloReading(prompt, generation, (ttft,), (tpot,), ttft.count_per_second, tpot.count_per_second, n, False, n)
    return SloSeries(pods, reading, oldest)


def _oldest(a: float, b: float, c: float, d: float, e: float) -> float:
    """`min(a, b, c, d, e)` for floats, as `min` compares (a later value replaces the least so
    far only when it is less), in C when compiled instead of a call on five boxed floats.

    Worked example: (inf, 990, 995, 980, 990): 980; (inf, NaN, 5, 5, 5): 5.
    """
    if b < a:
        a = b
    if c < a:
        a = c
    if d < a:
        a = d
    if e < a:
        a = e
    return a


def histogram_sum(bounds: tuple[float, ...], rows: list[tuple[float, ...]]) -> HistogramSum:
    """`HistogramSum` of rows of one layout; the count summed in row order from 0.0, as
    `usable_histograms` counts (the same float; a plain loop, which compiled needs no list and
    no call of `sum`).

    Worked example: rows (1, 3, 4) and (2, 2, 2): count 6.
    """
    count = 0.0
    for r in rows:
        count += r[-1]
    return HistogramSum(bounds, tuple(rows), count)
