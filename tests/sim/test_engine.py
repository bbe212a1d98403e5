"""The replica model: admission, KV accounting, preemption, timing."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from autoscaler.sim.engine import Engine, Finished
from autoscaler.sim.profile import load_profile

I64 = np.int64


def _profile(**kw: float):  # type: ignore[no-untyped-def]
    return replace(load_profile("qwen3-8b-h100"), **kw)


def _enqueue(e: Engine, n: int, n_in: int, n_out: int, t: float = 0.0, slot: int = 0) -> None:
    e.enqueue(np.full(n, slot, dtype=I64), np.full(n, t), np.full(n, n_in, dtype=I64), np.full(n, n_out, dtype=I64))


def test_fcfs_admission_stops_at_first_request_without_kv_blocks() -> None:
    # 10 blocks of 16 tokens; prompts of 64 tokens need 4 blocks each: 2 fit (8), the third waits
    e = Engine(_profile(kv_cache_tokens=160), 1)
    _enqueue(e, 3, 64, 100)
    e.step(0.0, 0.01)
    assert e.running()[0] == 2 and e.waiting()[0] == 1


def test_max_num_seqs_bounds_the_batch() -> None:
    e = Engine(_profile(max_num_seqs=2), 1)
    _enqueue(e, 5, 10, 100)
    e.step(0.0, 0.01)
    assert e.running()[0] == 2 and e.waiting()[0] == 3


def test_kv_usage_is_used_blocks_over_total() -> None:
    # one 100-token prompt + its first token = 101 tokens = 7 blocks of 16, of 100 blocks
    e = Engine(_profile(kv_cache_tokens=1600), 1)
    _enqueue(e, 1, 100, 1000)
    e.step(0.0, 0.001)
    assert e.kv_usage()[0] == pytest.approx(7 / 100)


def test_preemption_frees_the_newest_request_and_requeues_it_first() -> None:
    # 12 blocks; two requests of 80 prompt tokens (5 blocks + growth). Decoding grows both past
    # 6 blocks each: the newer one is preempted (RECOMPUTE) and goes back to the queue's front.
    e = Engine(_profile(kv_cache_tokens=192), 1)
    _enqueue(e, 2, 80, 500)
    t = 0.0
    while e.preemptions == 0 and t < 5.0:
        e.step(t, 0.01)
        t += 0.01
    assert e.preemptions == 1
    assert e.running()[0] == 1 and e.waiting()[0] == 1
    assert e.r_adm[0] == 0  # the older (first admitted) one kept running
    assert e.w_gen[0] > 0  # the preempted one keeps its generated tokens (recomputed on re-admission)


def test_single_request_timing_matches_the_step_model() -> None:
    p = _profile()
    e = Engine(p, 1)
    _enqueue(e, 1, 200, 101)
    fins = []
    t = 0.0
    while not fins and t < 10:
        f = e.step(t, 0.001)
        if f.arrival.size:
            fins.append(f)
        t += 0.001
    f = fins[0]
    step1 = p.decode_step_s(1, 0)
    prefill = p.prefill_s(200.0) + 200 * step1 / (p.max_num_batched_tokens - 0)
    # TTFT = overhead + prefill + the step that emits the first token (tick rounding: 1 ms)
    assert f.ttft[0] == pytest.approx(p.ttft_overhead_s + prefill + step1, abs=2e-3)
    # TPOT = one decode step with one sequence and ~250 context tokens
    assert f.tpot[0] == pytest.approx(p.decode_step_s(1, 250), rel=0.05)
    assert e.completed[0] == 1 and e.in_system() == 0


def test_kill_slot_fails_everything_on_it() -> None:
    e = Engine(_profile(max_num_seqs=1), 2)
    _enqueue(e, 3, 10, 100, slot=1)
    _enqueue(e, 1, 10, 100, slot=0)
    e.step(0.0, 0.01)
    fin = e.kill_slot(1, 0.01)
    assert fin.arrival.size == 3 and np.isinf(fin.ttft).all()
    assert e.slot_empty(1) and not e.slot_empty(0)


def _twin_engines(max_num_seqs: int, slots: int, kv_tokens: int) -> tuple[Engine, Engine]:
    prof = _profile(max_num_seqs=max_num_seqs, kv_cache_tokens=kv_tokens)
    capped = Engine(prof, slots)
    unbounded = Engine(prof, slots)
    unbounded.head_cap = 10**9  # one long queue per replica: the behaviour before the overflow FIFO
    return capped, unbounded


def _same(a: Finished, b: Finished) -> None:
    for f in ("arrival", "ttft", "tpot", "wait", "out_tokens", "end"):
        np.testing.assert_array_equal(getattr(a, f), getattr(b, f), err_msg=f)


@settings(max_examples=30, deadline=None)
@given(st.integers(1, 3), st.integers(2, 4), st.integers(0, 2**31 - 1), st.booleans())
def test_backlog_overflow_changes_nothing_but_the_cost(max_num_seqs: int, slots: int, seed: int,
                                                       small_kv: bool) -> None:
    # bursts of up to 40 requests per tick on replicas that take 1-3 at a time: the backlog
    # outgrows the head (2 * max_num_seqs) at once; small_kv also forces preemptions (requeued at
    # the front of the head). Every tick, gauges and finished requests must match exactly.
    rng = np.random.default_rng(seed)
    capped, unbounded = _twin_engines(max_num_seqs, slots, 320 if small_kv else 100_000)
    t, dt = 0.0, 0.05
    for tick in range(120):
        if tick < 60:
            k = int(rng.integers(0, 40))
            args = (rng.integers(0, slots, k).astype(I64), np.sort(t + rng.random(k) * dt),
                    rng.integers(1, 120, k).astype(I64), rng.integers(1, 60, k).astype(I64))
            capped.enqueue(*args)
            unbounded.enqueue(*args)
        if tick == 90:  # a drained pod's deadline: everything left on slot 0 fails
            _same(capped.kill_slot(0, t), unbounded.kill_slot(0, t))
        _same(capped.step(t, dt), unbounded.step(t, dt))
        np.testing.assert_array_equal(capped.waiting(), unbounded.waiting())
        np.testing.assert_array_equal(capped.running(), unbounded.running())
        assert capped.in_system() == unbounded.in_system()
        assert [capped.slot_empty(s) for s in range(slots)] == [unbounded.slot_empty(s) for s in range(slots)]
        t += dt
    assert unbounded._ovf_total == 0  # the reference never used the overflow


def test_backlog_beyond_the_head_waits_in_the_overflow_fifo() -> None:
    # max_num_seqs 2 -> head of 4; 10 requests: 4 in the head arrays, 6 in the overflow,
    # and the gauge counts all 10 as waiting
    e = Engine(_profile(max_num_seqs=2), 1)
    _enqueue(e, 10, 10, 1000)
    assert e.w_slot.size == 4 and int(e.ovf_n[0]) == 6
    assert e.waiting()[0] == 10 and e.in_system() == 10
    e.step(0.0, 0.01)  # 2 admitted, the head is refilled before admission: 4 + 4 left = 8
    assert e.running()[0] == 2 and e.waiting()[0] == 8 and e.w_slot.size + int(e.ovf_n[0]) == 8


def test_request_longer_than_max_model_len_is_rejected_at_once() -> None:
    # vLLM: token_num + max_tokens > max_model_len -> HTTP 400 (serving_engine.py); the trace's
    # output length is max_tokens
    p = _profile(max_model_len=4096)
    e = Engine(p, 2)
    slots = np.array([0, 0, 1, 1], dtype=I64)
    n_in = np.array([126_000, 4000, 4000, 100], dtype=I64)
    n_out = np.array([10, 96, 97, 10], dtype=I64)  # 4096 fits exactly, 4097 does not
    e.enqueue(slots, np.array([0.0, 0.1, 0.2, 0.3]), n_in, n_out)
    assert e.rejected == 2 and e.in_system() == 2
    f = e.step(0.0, 0.01)
    bad = np.isinf(f.ttft)
    assert bad.sum() == 2 and f.in_tokens is not None
    assert sorted(f.in_tokens[bad].tolist()) == [4000, 126_000]
    assert np.isinf(f.tpot[bad]).all() and np.isinf(f.wait[bad]).all()
    t, served = 0.01, 0
    while e.in_system() and t < 60:
        f = e.step(t, 0.01)
        assert np.isfinite(f.ttft).all()  # a refusal comes back once, never served later
        served += f.arrival.size
        t += 0.01
    assert served == 2 and e.rejected == 2 and int(e.completed.sum()) == 2


@settings(max_examples=12, deadline=None)
@given(seed=st.integers(0, 10_000), max_num_seqs=st.sampled_from([4, 32, 256]),
       kv_tokens=st.sampled_from([4096, 40_000, 372_096]), dt=st.sampled_from([0.002, 0.02, 0.25]))
def test_gpu_time_used_is_at_least_the_work_lower_bound(seed: int, max_num_seqs: int, kv_tokens: int, dt: float) -> None:
    """Profile.work_lower_bound_s is a lower bound on what the engine spends: random workloads,
    batch limits, prompt lengths up to 3k, small KV caches that force preemption, coarse ticks."""
    p = _profile(max_num_seqs=max_num_seqs, kv_cache_tokens=kv_tokens)
    rng = np.random.default_rng(seed)
    n = 200
    n_in = rng.integers(1, 3000, n).astype(I64)
    n_out = rng.integers(1, 600, n).astype(I64)
    arr = np.sort(rng.uniform(0.0, 5.0, n))
    e = Engine(p, 2)
    slot = rng.integers(0, 2, n).astype(I64)
    t, sent = 0.0, 0
    done_in: list[np.ndarray] = []
    done_out: list[np.ndarray] = []
    while (sent < n or e.in_system()) and t < 600:
        k = int(np.searchsorted(arr, t + dt))
        if k > sent:
            e.enqueue(slot[sent:k], arr[sent:k], n_in[sent:k], n_out[sent:k])
            sent = k
        f = e.step(t, dt)
        ok = np.isfinite(f.ttft)
        if ok.any() and f.in_tokens is not None:
            done_in.append(f.in_tokens[ok])
            done_out.append(f.out_tokens[ok])
        t += dt
    assert done_in, "nothing finished"
    bound = float(p.work_lower_bound_s(np.concatenate(done_in), np.concatenate(done_out)).sum())
    used = float(e.gpu_busy_s.sum())
    assert used >= bound, (used, bound, e.preemptions)
    if max_num_seqs >= 256 and e.preemptions == 0:  # not vacuous (small batches and recompute make it loose)
        assert bound > 0.2 * used, (used, bound)
