"""The SLO series summed where the observation is built (`policy/slo_series.py`): its table
rows, and `decide()` giving the very same decision and state with the summary as without it
(then it reads the pods one by one), whatever the pods' health."""

from __future__ import annotations

import dataclasses
import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from autoscaler.policy import (
    MetricSample,
    Observation,
    PolicyParams,
    PolicyState,
    decide,
)
from autoscaler.policy.slo_capacity import read_slo
from autoscaler.policy.slo_series import (
    _oldest,
    histogram_sum,
    layout_ok,
    rates_ok,
    sum_slo_series,
)
from autoscaler.policy.types import ReadyPod

from .builders import hist, slo_pod

INF = math.inf
NOW = 1000.0
LE = (1.0, 2.0, INF)


def two_pods(second_ttft: tuple[float, ...] = (2.0, 2.0, 2.0), **second: object) -> tuple[ReadyPod, ...]:
    a = slo_pod("a", 990.0, 1_000.0, 300.0, hist(LE, (1.0, 3.0, 4.0), 990.0), hist(LE, (1.0, 3.0, 4.0), 990.0))
    b = slo_pod("b", 995.0, 2_000.0, 500.0, hist(LE, second_ttft, 995.0), hist(LE, (2.0, 2.0, 2.0), 995.0))
    return (a, dataclasses.replace(b, **second))  # type: ignore[arg-type]


def test_sum_slo_series_docstring() -> None:
    pods = two_pods()
    s = sum_slo_series(pods)
    assert s is not None and s.pods is pods
    r = s.reading
    assert (r.prompt_tokens_per_second, r.generation_tokens_per_second, s.oldest) == (3_000.0, 800.0, 990.0)
    assert (r.ttft[0].rows, r.ttft_count, r.served, r.ttft_pods, r.partial) == (
        ((1.0, 3.0, 4.0), (2.0, 2.0, 2.0)), 6.0, 2, 2, False)
    # the very reading `read_slo` makes of these pods
    assert read_slo(pods, 2, NOW, 60.0) == r
    assert sum_slo_series(two_pods((3.0, 2.0, 4.0))) is None  # docstring: a decreasing bucket


@pytest.mark.parametrize(
    "second",
    [
        {"prompt_tokens_per_second": None},  # a series missing
        {"tpot": None},
        {"prompt_tokens_per_second": MetricSample(math.nan, 995.0)},  # a token rate NaN
        {"generation_tokens_per_second": MetricSample(INF, 995.0)},  # infinite
        {"prompt_tokens_per_second": MetricSample(-1.0, 995.0)},  # negative
        {"ttft": hist((1.0, 4.0, INF), (2.0, 2.0, 2.0), 995.0)},  # another layout
        {"ttft": hist(LE, (2.0, math.nan, 2.0), 995.0)},  # a NaN bucket
        {"ttft": hist(LE, (-1.0, 2.0, 2.0), 995.0)},  # a negative one
        {"ttft": hist(LE, (2.0, 2.0), 995.0)},  # lengths differ
        {"ttft": hist(LE, (2.0, 2.0, 2.0), math.nan)},  # a sample time not finite
    ],
)
def test_sum_slo_series_takes_nothing_it_would_have_to_judge(second: dict[str, object]) -> None:
    assert sum_slo_series(two_pods(**second)) is None


def test_sum_slo_series_edges() -> None:
    assert sum_slo_series(()) is None
    first_bad = (dataclasses.replace(two_pods()[0], ttft=hist((2.0, 1.0, INF), (1.0, 3.0, 4.0), 990.0)),)
    assert sum_slo_series(first_bad) is None  # the first pod's layout is checked too
    copy = two_pods()[1]
    equal_layout = dataclasses.replace(copy, ttft=hist((1.0, 2.0, INF), (2.0, 2.0, 2.0), 995.0))  # equal, not the same tuple
    assert equal_layout.ttft is not None and equal_layout.ttft.upper_bounds is not LE
    assert sum_slo_series((two_pods()[0], equal_layout)) is not None  # equal bounds, other tuple


def test_rates_ok_and_layout_ok_docstrings() -> None:
    assert rates_ok((1.0, 3.0, 4.0))
    for bad in ((3.0, 2.0, 4.0), (-1.0, 3.0, 4.0), (1.0, math.nan, 4.0), (1.0, INF, INF), (math.nan, 1.0, 2.0),
                (1.0, 1e308, 1.7e308)):  # the last: each finite, the sum not
        assert not rates_ok(bad), bad
    assert layout_ok((1.0, 2.0, INF))
    for bad in ((2.0, 1.0, INF), (1.0, 2.0), ()):
        assert not layout_ok(bad), bad
    assert histogram_sum(LE, [(1.0, 3.0, 4.0), (2.0, 2.0, 2.0)]).count_per_second == 6.0
    assert _oldest(INF, 990.0, 995.0, 980.0, 990.0) == 980.0
    assert _oldest(INF, math.nan, 5.0, 5.0, 5.0) == 5.0


@given(st.lists(st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.sampled_from([0.0, 1.0, 2.0, INF])),
                max_size=12))
def test_layout_ok_is_the_pairwise_rule(bounds: list[float]) -> None:
    """The loop `layout_ok` runs says what the pairwise comparison it replaced said (2026-12)."""
    b = tuple(bounds)
    assert layout_ok(b) == (len(b) > 0 and b[-1] == INF and all(x < y for x, y in zip(b, b[1:])))


@given(st.lists(st.floats(allow_nan=True, allow_infinity=True), min_size=5, max_size=5))
def test_oldest_is_min(times: list[float]) -> None:
    """`_oldest` gives what `min` gives, NaN and infinities included (the same object's value)."""
    got, want = _oldest(*times), min(times)
    assert got == want or (math.isnan(got) and math.isnan(want))


@given(st.lists(st.lists(st.floats(allow_nan=False, allow_infinity=False, min_value=0.0), min_size=1, max_size=4),
                min_size=1, max_size=6))
def test_histogram_sum_counts_as_usable_histograms(rows: list[list[float]]) -> None:
    """The count is the last buckets added from 0.0 in row order, bit for bit: what
    `usable_histograms` adds (`count += rates[-1]`), not `math.fsum`."""
    count = 0.0
    for r in rows:
        count += r[-1]
    assert histogram_sum(LE, [tuple(r) for r in rows]).count_per_second == count


# --- decide() with and without the summary -------------------------------------------------------
PARAMS = PolicyParams(capacity_profile="llama-3-8b/h100", slo={"ttft_seconds": 2.0, "tpot_seconds": 0.1},
                      capacity_learning_min_requests_per_second=0.0)
TTFT_LE = (0.1, 0.5, 1.0, 1.5, 2.0, 3.0, INF)
TPOT_LE = (0.02, 0.05, 0.1, 0.2, INF)


def fleet(n: int, at: float, prompt: float, ttft: tuple[float, ...], **kw: object) -> tuple[ReadyPod, ...]:
    return tuple(
        slo_pod(f"p{i}", at, prompt * (1 + 0.1 * i), prompt / 8, hist(TTFT_LE, tuple(r * (1 + i) for r in ttft), at),
                hist(TPOT_LE, (0.5, 2.0, 2.9 + i, 3.0 + i, 3.0 + i), at), **kw)  # type: ignore[arg-type]
        for i in range(n)
    )


SLOW = (0.1, 0.5, 1.0, 1.5, 1.7, 1.9, 2.0)  # 85 % within 2 s: broken
FAST = (1.0, 1.8, 2.0, 2.0, 2.0, 2.0, 2.0)  # all within 1 s


def cases() -> list[tuple[str, tuple[ReadyPod, ...]]]:
    ok = fleet(4, NOW - 5, 9_000.0, FAST)
    stale_hist = tuple(dataclasses.replace(p, ttft=dataclasses.replace(p.ttft, timestamp=NOW - 90)) if i == 1 else p
                       for i, p in enumerate(ok))  # type: ignore[arg-type]
    unhealthy = tuple(dataclasses.replace(p, waiting=None) if i == 2 else p for i, p in enumerate(ok))
    return [
        ("met", ok),
        ("broken", fleet(3, NOW - 5, 9_000.0, SLOW)),
        ("broken, low load", fleet(2, NOW - 5, 1_000.0, SLOW)),
        ("queued", fleet(3, NOW - 5, 12_000.0, SLOW, waiting=4.0)),
        ("met, high load", fleet(5, NOW - 5, 20_000.0, FAST, running=12.0)),
        ("a stale histogram", stale_hist),
        ("all stale", fleet(3, NOW - 61, 9_000.0, FAST)),
        ("an unhealthy pod", unhealthy),
        ("one pod", fleet(1, NOW, 9_000.0, SLOW)),
    ]


@pytest.mark.parametrize(("name", "ready"), cases())
def test_decide_is_the_same_with_the_summary(name: str, ready: tuple[ReadyPod, ...]) -> None:
    """Every decision value and the next state, to the last bit, over a few ticks."""
    state_a = state_b = PolicyState(recommendations=((NOW - 600, len(ready) + 1),))
    for k in range(4):
        now = NOW + 15 * k
        moved = tuple(dataclasses.replace(p) for p in ready)  # new pods each tick, as the builder makes
        plain = Observation(spec_replicas=len(ready) + 1, ready_pods=moved)
        summed = dataclasses.replace(plain, slo_series=sum_slo_series(moved))
        da, state_a = decide(PARAMS, plain, state_a, now)
        db, state_b = decide(PARAMS, summed, state_b, now)
        assert repr((da, state_a)) == repr((db, state_b)), (name, k)
    if name in ("met", "broken", "queued"):
        assert summed.slo_series is not None and da.values.ttft_attainment is not None  # the summary was used


def test_a_summary_of_other_pods_is_not_read() -> None:
    ready = fleet(3, NOW - 5, 9_000.0, SLOW)
    other = sum_slo_series(fleet(3, NOW - 5, 9_000.0, FAST))
    a, _ = decide(PARAMS, Observation(spec_replicas=3, ready_pods=ready), PolicyState(), NOW)
    b, _ = decide(PARAMS, Observation(spec_replicas=3, ready_pods=ready, slo_series=other), PolicyState(), NOW)
    assert a == b and a.values.ttft_attainment is not None and a.values.ttft_attainment < 0.9


def test_a_stale_summary_holds_like_the_stale_pods() -> None:
    """The summary's oldest sample is stale: the pods are read, the SLO data is partial, and
    a recommendation below the current replicas is held (never down on partial data)."""
    fresh = fleet(2, NOW - 5, 100.0, FAST)
    state = PolicyState(recommendations=((NOW - 600, 4),))
    down, _ = decide(PARAMS, Observation(spec_replicas=4, ready_pods=fresh, slo_series=sum_slo_series(fresh)), state, NOW)
    assert down.desired_replicas < 4  # fresh: down
    ready = tuple(dataclasses.replace(p, ttft=dataclasses.replace(p.ttft, timestamp=NOW - 61)) for p in fresh)  # type: ignore[arg-type]
    o = Observation(spec_replicas=4, ready_pods=ready, slo_series=sum_slo_series(ready))
    d, _ = decide(PARAMS, o, state, NOW)
    assert (d.desired_replicas, d.reason.value) == (4, "hold_metrics_unhealthy")


@given(st.lists(st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.sampled_from([0.0, 1.0, 2.0])),
                min_size=1, max_size=12))
def test_rates_ok_is_the_sorted_rates_rule(rates: list[float]) -> None:
    """The loop `rates_ok` runs says what its rule says: from >= 0, the sum finite, equal to the
    rates sorted (the comparison it replaced, 2026-12)."""
    r = tuple(rates)
    assert rates_ok(r) == (0.0 <= r[0] and math.isfinite(sum(r)) and list(r) == sorted(r))
