"""Calibration: the simulated Qwen3-8B/H100 replica against measured vLLM numbers (docs/calibration.md).

Fit target (tests/fixtures/sim, a copy of simulations/data/vllm-perf table 1): GPUStack, Qwen3-8B
bf16, one H100 SXM, vLLM 0.11.0, `vllm bench serve` ShareGPT, 100 prompts (23,260 input / 22,061
output tokens), closed loop at concurrency 1, 2, 4, 8: output tokens/s, median TTFT and mean TPOT
within 15 %.

Hold-out (never fitted on): every point of `holdout_points()` must be within 15 % when replayed
under the engine profile of its source (autoscaler.sim.engine_profile); a point the model honestly
cannot match is an xfail row with its reason (one row per point, so a failure names it). The
default (vLLM V1) profile must stay bit-identical to the model before engine profiles existed.
"""

from __future__ import annotations

import csv
import multiprocessing
import os
from concurrent.futures import ProcessPoolExecutor
from dataclasses import replace
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest

from autoscaler.sim.calibration import (
    AIPERF_ROUNDS,
    TABLE5_FIT_ROWS,
    HoldoutPoint,
    accelmark_offline,
    burst,
    closed_loop,
    fit_table5_frontend,
    holdout_points,
    sharegpt_like,
    static_batch_s,
    steady_fixed_tpot_ms,
    table5_prefill_step_extra_s,
    table5_rows,
)
from autoscaler.sim.engine_profile import (
    LAMBDA_FRONTEND_S_PER_REQUEST,
    LAMBDA_PREFILL_STEP_EXTRA_S,
    TRTLLM_IFB,
    VLLM_V0,
    VLLM_V0_MULTISTEP,
    VLLM_V1,
    v0_burst,
    v0_prefill_step_s,
    v0_run,
)
from autoscaler.sim.profile import load_profile
from tests.sim.tool_loader import load_tool

REF = Path(__file__).resolve().parents[1] / "fixtures" / "sim" / "gpustack_qwen3-8b_h100-sxm_vllm0.11.0_sharegpt_concurrency.csv"
P = load_profile("qwen3-8b-h100")

# Misses under the source's engine profile (autoscaler.sim.engine_profile; docs/calibration.md). Strict: a
# change that makes one pass fails here until the row moves to the passing ones (and the docs say why).
_LAMBDA_TTFT = ("the N = 80 burst reaches the engine differently from the others: in the source's per-request results "
                "(LambdaLabsML/vllm-benchmark results/prompt_80/1xH100-80GB-SXM/Meta-Llama-3-8B-Instruct_tp1_len2048.json "
                "@ a4f9f437, `ttfts`) the engine's first prefill holds only 5 requests (sent 49th-57th, 267 ms) and the "
                "next plateau comes 170 ms later (a decode run: the rest had not arrived), which a burst that reaches "
                "the engine at once (N x the front-end delay fitted on N = 10-40) does not have; -26 % with the "
                "serving-stack terms, -19 to -33 % under +-20 % of either (docs/calibration.md, \"Table 5's TTFT\")")
KNOWN_MISSES = {
    "N80/TTFT median ms": _LAMBDA_TTFT,
}


def _reference() -> list[dict[str, str]]:
    with REF.open() as f:
        return list(csv.DictReader(f))


@pytest.mark.parametrize("row", _reference(), ids=lambda r: f"c{r['concurrency']}")
def test_closed_loop_sweep_matches_gpustack(row: dict[str, str]) -> None:
    n_in, n_out = sharegpt_like(int(row["num_prompts"]), int(row["total_input_tokens"]), int(row["total_output_tokens"]))
    r = closed_loop(P, n_in, n_out, int(row["concurrency"]))
    assert r.requests == int(row["num_prompts"])
    # median TTFT (README: "TTFT median ~60 ms" is the fit target; the mean at c = 8 carries a
    # 204 ms p99 tail of the HTTP/tokeniser path under concurrency that the model has no term for)
    for got, ref in (
        (r.output_tok_per_s, float(row["output_tok_per_s"])),
        (r.ttft_median_ms, float(row["ttft_median_ms"])),
        (r.tpot_mean_ms, float(row["tpot_mean_ms"])),
    ):
        assert abs(got / ref - 1) <= 0.15, (row["concurrency"], got, ref)


def _param(h: HoldoutPoint) -> object:
    key = f"{h.point}/{h.metric}"
    marks = [pytest.mark.xfail(reason=KNOWN_MISSES[key], strict=True)] if key in KNOWN_MISSES else []
    return pytest.param(h, id=f"{h.point}-{h.metric.replace(' ', '_')}", marks=marks)


def _simulate_holdout(i: int) -> float:
    h = holdout_points()[i]
    return float(h.simulate(P, h.engine))


@pytest.fixture(scope="module")
def holdout_model() -> dict[str, float]:
    """Every hold-out point replayed under its source's engine profile, in one process per core
    (forked: the points are rebuilt by index in the child); keyed by point and metric."""
    points = holdout_points()
    ctx = multiprocessing.get_context("fork")
    with ProcessPoolExecutor(max_workers=max(1, min(os.cpu_count() or 1, 4)), mp_context=ctx) as pool:
        values = list(pool.map(_simulate_holdout, range(len(points))))
    return {f"{h.point}/{h.metric}": v for h, v in zip(points, values)}


@pytest.mark.parametrize("h", [_param(h) for h in holdout_points()])
def test_holdout_point_within_15_percent(h: HoldoutPoint, holdout_model: dict[str, float]) -> None:
    # under the engine profile of the point's source (the V1-profile errors are in the report too)
    model = holdout_model[f"{h.point}/{h.metric}"]
    assert abs(model / h.measured - 1) <= 0.15, (h.source, h.point, h.metric, h.engine.name, model, h.measured)


def test_holdout_engine_profiles_name_their_source() -> None:
    engines = {h.source.split(" (")[0]: h.engine for h in holdout_points()}
    assert engines == {"table 9": TRTLLM_IFB, "table 5": VLLM_V0_MULTISTEP, "table 6": VLLM_V0}


def test_default_engine_profile_is_bit_identical() -> None:
    # values computed before engine profiles existed (commit 848f847): the default (vLLM V1) profile, which every
    # published simulation uses, must reproduce them exactly
    assert VLLM_V1.step_profile(P) is P
    steps = {(1, 0): 0.007168251699999999, (64, 65536): 0.01334193488, (256, 262144): 0.03200863952,
             (1024, 4194304): 0.26057009712}
    for (b, k), value in steps.items():
        assert float(P.decode_step_s(float(b), float(k))) == value
    assert float(P.prefill_s(1024.0)) == 0.0191193815072
    assert float(P.prefill_s(8192.0)) == 0.1765423896608
    # the table-9 harness as it was then (3 measured rounds; now aiperf's 50, see test_table9_harness_...)
    assert steady_fixed_tpot_ms(VLLM_V1.step_profile(P), 1024, 512, 64, rounds=3) == 15.657495890944423
    r = burst(VLLM_V1.step_profile(P), 80, 19504, 14134)
    assert (r.tpot_median_ms, r.ttft_median_ms) == (11.716184685964592, 175.42654988367522)
    assert static_batch_s(VLLM_V1.step_profile(P), 64, 128) == 1.5358039744042988


def test_engine_profiles_leave_the_kernel_model_alone() -> None:
    kernel = ("lin_floor_s", "lin_slope_s", "lin_compute_s", "head_floor_s", "head_slope_s", "head_compute_s", "attn0_s",
              "attn_seq_s", "attn_kv_s", "pf0_s", "pf1_s", "pf2_s", "overhead_s", "ttft_overhead_s")
    for e in (TRTLLM_IFB, VLLM_V0, VLLM_V0_MULTISTEP):
        q = e.step_profile(P)
        assert all(getattr(q, k) == getattr(P, k) for k in kernel), e.name
    assert TRTLLM_IFB.step_profile(P).seq_overhead_s == 0.0
    assert VLLM_V0.step_profile(P).seq_overhead_s == P.seq_overhead_s
    assert VLLM_V0_MULTISTEP.step_profile(P).seq_overhead_s == pytest.approx(P.seq_overhead_s / 10)


def test_table9_harness_measures_what_aiperf_measures() -> None:
    # aiconfigurator's benchmark template: --num-requests 50c after --warmup-request-count 2c. With 3 measured
    # rounds a third of the measured requests finished while the loop drained (no new prompts, no prefill
    # interference), which made the most prefill-heavy row look 17 % fast; with 50 rounds it is a 1/50 share
    assert AIPERF_ROUNDS == 50
    q = TRTLLM_IFB.step_profile(P)
    short, full, measured = steady_fixed_tpot_ms(q, 4096, 128, 64, rounds=3), steady_fixed_tpot_ms(q, 4096, 128, 64), 64.32067165
    assert short / measured - 1 < -0.15 < full / measured - 1 < 0.15, (short, full)


def test_v0_prefill_first_stalls_decodes_until_the_queue_is_empty() -> None:
    # V0 _schedule_default: while a waiting request fits, steps are prefill-only; a 3-request burst whose prompts
    # fit one 2,048-token step gets one prefill step, then decode runs of 10 steps (outputs at the run's end)
    n_in = np.array([500, 500, 500], dtype=np.int64)
    n_out = np.array([11, 11, 21], dtype=np.int64)
    ttft, tpot = v0_burst(P, VLLM_V0_MULTISTEP, n_in, n_out)
    assert np.all(ttft == ttft[0])
    assert tpot[0] == tpot[1] and tpot[2] == pytest.approx(tpot[0], rel=0.1)


def test_table5_serving_terms_come_from_the_fit_rows_only() -> None:
    # the prefill-step cost is the N = 40 burst's measured prefill cadence minus the model's steps; the front-end
    # delay is least squares on the N = 10 / 20 / 40 medians; both must be what engine_profile.py holds, and no
    # row the data README holds out (N >= 80) may enter the fit
    assert set(TABLE5_FIT_ROWS) == {10, 20, 40} and all(n < 80 for n in TABLE5_FIT_ROWS)
    assert {n for n, *_ in table5_rows()} >= {10, 20, 40, 80, 160, 320}
    extra = table5_prefill_step_extra_s(P)
    assert extra == pytest.approx(LAMBDA_PREFILL_STEP_EXTRA_S, abs=1e-5)
    frontend, residuals = fit_table5_frontend(P, extra)
    assert frontend == pytest.approx(LAMBDA_FRONTEND_S_PER_REQUEST, abs=2e-5)
    assert set(residuals) == {10, 20, 40} and all(abs(r) <= 0.15 for r in residuals.values()), residuals


def test_v0_request_arriving_during_a_decode_run_waits_for_its_end() -> None:
    # vllm/engine/llm_engine.py (multi-step): the scheduler runs only when the cached run has no remaining steps,
    # so a request that reaches the engine during a 10-step decode run is prefilled only after the run ends
    e = replace(VLLM_V0_MULTISTEP, prefill_step_extra_s=0.0)
    q = e.step_profile(P)
    n_in, n_out = np.array([100, 100], dtype=np.int64), np.array([50, 5], dtype=np.int64)
    prefill = v0_prefill_step_s(q, n_in[:1], P.seq_overhead_s)
    arrival = np.array([0.0, prefill + 0.001])  # the second one comes 1 ms into the first's decode run
    first, _ = v0_run(P, e, n_in, n_out, arrival)
    run = sum(float(q.decode_step_s(1.0, float(100 + g))) for g in range(1, 11))
    assert first[0] == pytest.approx(prefill)
    assert first[1] == pytest.approx(prefill + run + v0_prefill_step_s(q, n_in[1:], P.seq_overhead_s))
    # the prefill-step cost is added to every prefill step, and table 6's engine (vLLM 0.5 offline) has neither term
    f2, _ = v0_run(P, replace(e, prefill_step_extra_s=0.01), n_in, n_out, arrival + np.array([0.0, 0.01]))
    assert f2[0] == pytest.approx(first[0] + 0.01) and f2[1] == pytest.approx(first[1] + 0.02)
    assert VLLM_V0.prefill_step_extra_s == 0.0 and VLLM_V0.frontend_s_per_request == 0.0


def test_holdout_covers_every_required_point() -> None:
    ids = {(h.source.split(" (")[0], h.point, h.metric) for h in holdout_points()}
    assert sum(s == "table 9" for s, _, _ in ids) == 33  # c = 16-128 (4k rows stop at 64)
    assert {p for s, p, _ in ids if s == "table 5"} == {"N80", "N160", "N320"}
    assert {p for s, p, _ in ids if s == "table 6"} == {f"B64-L{n}" for n in (128, 256, 512, 1024, 2048)}


@pytest.mark.parametrize(("n_in", "ref_s"), [(8192, 0.18), (16384, 0.43), (32768, 1.05)])
def test_idle_long_prompt_ttft_stays_near_the_kernel_sums(n_in: int, ref_s: float) -> None:
    # vllm-perf README derived idle prefill (kernel sums; 32k extrapolated), without the HTTP overhead
    gpu = float(P.idle_ttft_s(np.array([n_in]))[0]) - P.ttft_overhead_s
    assert abs(gpu / ref_s - 1) <= 0.10, (n_in, gpu)


def test_table2_total_throughput_is_reproduced() -> None:
    # the fit target of seq_overhead_s (README table 2: 1,000 ShareGPT prompts at once, vLLM 0.9.2)
    tool = _calibrate_tool()
    r = tool.table2_run(P)
    assert abs(r.total_tok_per_s / 13_305.38 - 1) <= 0.01, r


def test_saturation_ceiling() -> None:
    # checks, not fitted: the same 1,000-prompt run against Lambda's N = 320 burst (6,027 output tok/s;
    # README "saturated output throughput: ~5-6.5k"), and AccelMark's offline batch in its own setting
    # (100 prompts, max_tokens 512, vLLM 0.7.3: 5,128 output tok/s)
    n_in, n_out = sharegpt_like(1000, 232_600, 220_610, seed=1)
    r = closed_loop(P, n_in, n_out, 1000, dt=0.01)
    assert abs(r.output_tok_per_s / 6_027.0 - 1) <= 0.25, r
    assert abs(accelmark_offline(P).output_tok_per_s / 5_128.31 - 1) <= 0.15


def _calibrate_tool() -> ModuleType:
    return load_tool("calibrate")


def test_profile_holds_the_values_fitted_from_the_csvs() -> None:
    tool = _calibrate_tool()
    fitted = tool.fit(P).params
    stored = tool.profile_values()
    assert set(fitted) == set(stored)
    for key, value in fitted.items():
        assert stored[key] == pytest.approx(value, rel=0.005), key


def test_linear_and_head_time_per_token_never_rise_with_the_batch() -> None:
    m = np.arange(1, 40_000, dtype=np.float64)
    for f in (P.linear_s, P.head_s):
        per = f(m) / m
        assert (np.diff(per) <= 1e-18).all()
