"""RequestStats: SLO attainment, the misses per minute of arrival, the length-aware TTFT bound."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from autoscaler.sim.engine import Finished
from autoscaler.sim.profile import load_profile
from autoscaler.sim.stats import RequestStats, Slo


def _fin(arrival: list[float], ttft: list[float], tpot: list[float] | None = None) -> Finished:
    a = np.array(arrival, dtype=np.float64)
    return Finished(a, np.array(ttft, dtype=np.float64),
                    np.array(tpot if tpot is not None else [0.05] * len(arrival), dtype=np.float64),
                    np.zeros(a.size), np.full(a.size, 10, dtype=np.int64), a + 1.0)


@pytest.mark.parametrize(
    ("batches", "missed", "attainment"),
    [
        # docstring example: 10 s ok; 70 s and 130 s have TTFT 3 s > 2 s -> [0, 1, 1], 1/3 met
        ([([10.0, 70.0, 130.0], [0.5, 3.0, 3.0], None)], [0, 1, 1], 1 / 3),
        # TPOT 0.2 s > 0.1 s misses too; a failed request (TTFT inf) misses; two batches add up
        ([([5.0], [0.1], [0.2]), ([6.0, 200.0], [np.inf, 0.1], None)], [2], 1 / 3),
        # nothing missed: no bins at all
        ([([1.0, 61.0], [0.1, 0.1], None)], [], 1.0),
        # a later batch with an earlier bin adds into the existing array
        ([([190.0], [9.0], None), ([20.0], [9.0], None)], [1, 0, 0, 1], 0.0),
    ],
)
def test_misses_are_counted_by_minute_of_arrival(batches: list[tuple[list[float], list[float], list[float] | None]],
                                                 missed: list[int], attainment: float) -> None:
    st = RequestStats(Slo(2.0, 0.1), bin_s=60.0)
    for arrival, ttft, tpot in batches:
        st.add(_fin(arrival, ttft, tpot))
    assert st.missed_by_arrival.tolist() == missed
    assert st.attainment == pytest.approx(attainment)
    assert int(st.missed_by_arrival.sum()) == st.total - st.ok


def _idle(n_in: np.ndarray) -> np.ndarray:
    """A made-up idle TTFT: 0.05 s + 0.1 ms per prompt token (1,000 tokens -> 0.15 s)."""
    return 0.05 + 1e-4 * n_in.astype(np.float64)


@pytest.mark.parametrize(
    ("slo", "in_tokens", "bound"),
    [
        # flat SLO: 2 s whatever the prompt, no idle TTFT function needed
        (Slo(2.0, 0.1), [10, 1_000, 100_000], [2.0, 2.0, 2.0]),
        # factor 5: 1,000 tokens -> max(2, 5 x 0.15) = 2; 10,000 -> max(2, 5 x 1.05) = 5.25;
        # 3,900 -> 5 x 0.44 = 2.2; 0 tokens -> max(2, 0.25) = 2
        (Slo(2.0, 0.1, 5.0), [1_000, 10_000, 3_900, 0], [2.0, 5.25, 2.2, 2.0]),
        # factor 1 with a 0.5 s target: 10,000 tokens -> 1.05 s, 1,000 -> 0.5 s
        (Slo(0.5, 0.1, 1.0), [10_000, 1_000], [1.05, 0.5]),
    ],
)
def test_ttft_bound_per_request(slo: Slo, in_tokens: list[int], bound: list[float]) -> None:
    got = slo.ttft_bound_s(np.array(in_tokens, dtype=np.int64), _idle)
    assert got.tolist() == pytest.approx(bound)


def test_ttft_bound_with_the_profile_idle_ttft() -> None:
    # Qwen3-8B/H100: a 1,000-token prompt keeps the flat 2 s; a 20,000-token one gets 5 x its idle
    # TTFT (overhead + prefill with its attention term + the first decode step)
    p = load_profile("qwen3-8b-h100")
    got = Slo(2.0, 0.1, 5.0).ttft_bound_s(np.array([1_000, 20_000]), p.idle_ttft_s)
    assert got.tolist() == pytest.approx([2.0, 5.0 * float(p.idle_ttft_s(np.array([20_000]))[0])])
    assert 5.0 * float(p.idle_ttft_s(np.array([20_000]))[0]) > 2.0


def _fin_in(ttft: list[float], in_tokens: list[int] | None, tpot: float = 0.05) -> Finished:
    f = _fin([1.0] * len(ttft), ttft, [tpot] * len(ttft))
    return replace(f, in_tokens=None if in_tokens is None else np.array(in_tokens, dtype=np.int64))


def test_length_aware_slo_counts_long_prompts_by_their_own_bound_and_failures_as_misses() -> None:
    st = RequestStats(Slo(2.0, 0.1, 5.0), idle_ttft=_idle)
    # 10,000 tokens in 3 s: within 5.25 s, met (a miss under the flat 2 s);
    # 10,000 tokens in 6 s: missed; 1,000 tokens in 2.5 s: missed (bound 2 s);
    # a rejected 200,000-token prompt (TTFT inf, bound 100 s): missed; TPOT 0.2 s: missed
    st.add(_fin_in([3.0, 6.0, 2.5, np.inf], [10_000, 10_000, 1_000, 200_000]))
    st.add(_fin_in([0.1], [100], tpot=0.2))
    assert (st.total, st.ok, st.failed) == (5, 1, 1)
    flat = RequestStats(Slo(2.0, 0.1))
    flat.add(_fin_in([3.0, np.inf], [10_000, 200_000]))
    assert (flat.total, flat.ok, flat.failed) == (2, 0, 1)


def test_length_aware_slo_needs_the_idle_ttft_and_the_prompt_lengths() -> None:
    with pytest.raises(ValueError, match="needs idle_ttft"):
        RequestStats(Slo(2.0, 0.1, 5.0))
    with pytest.raises(ValueError, match="no idle TTFT function"):
        Slo(2.0, 0.1, 5.0).ttft_bound_s(np.array([1]), None)
    st = RequestStats(Slo(2.0, 0.1, 5.0), idle_ttft=_idle)
    with pytest.raises(ValueError, match="Finished.in_tokens"):
        st.add(_fin_in([1.0], None))
    for bad in (0.0, -1.0, float("nan"), float("inf")):
        with pytest.raises(ValueError, match="ttft_idle_factor must be a positive number"):
            Slo(2.0, 0.1, bad)
