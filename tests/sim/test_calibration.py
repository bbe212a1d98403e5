"""Calibration: the simulated Qwen3-8B/H100 replica against measured vLLM numbers (docs/calibration.md).

Fit target (tests/fixtures/sim, a copy of simulations/data/vllm-perf table 1): GPUStack, Qwen3-8B
bf16, one H100 SXM, vLLM 0.11.0, `vllm bench serve` ShareGPT, 100 prompts (23,260 input / 22,061
output tokens), closed loop at concurrency 1, 2, 4, 8: output tokens/s, median TTFT and mean TPOT
within 15 %.

Hold-out (never fitted on): every point of `holdout_points()` must be within 15 %; a point the
model honestly cannot match is an xfail row with its reason (one row per point, so a failure
names it).
"""

from __future__ import annotations

import csv
import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest

from autoscaler.sim.calibration import (
    HoldoutPoint,
    accelmark_offline,
    closed_loop,
    holdout_points,
    sharegpt_like,
)
from autoscaler.sim.profile import load_profile

REF = Path(__file__).resolve().parents[1] / "fixtures" / "sim" / "gpustack_qwen3-8b_h100-sxm_vllm0.11.0_sharegpt_concurrency.csv"
P = load_profile("qwen3-8b-h100")

_LAMBDA_TTFT = ("vLLM 0.6 multi-step scheduling (--num-scheduler-steps 10, README table 5) admits new prefills only "
                "every 10 decode steps and V0 without chunked prefill runs prefill-only steps; the simulated V1 "
                "chunked-prefill engine cannot reproduce that setting")
_TRTLLM_CPU = ("TensorRT-LLM (C++ runtime, overlapped scheduling) has a leaner per-sequence CPU path than vLLM; the "
               "model's seq_overhead_s (32.8 us per sequence per step) is vLLM 0.9.2's (fitted on table 2), so at "
               "c >= 32 with 1k prompts, where decode dominates the step, the model is 15-26 % slow for TRT-LLM")
_LAMBDA_TPOT = ("vLLM 0.6 multi-step scheduling (--num-scheduler-steps 10, README table 5) schedules and processes "
                "outputs once per 10 decode steps, amortising the per-sequence CPU cost the model charges every step "
                "(seq_overhead_s, fitted on single-step vLLM 0.9.2 V1): the model is 18-29 % slow, growing with N")
KNOWN_MISSES = {
    "isl1024-osl256-c128/TPOT ms": _TRTLLM_CPU,
    **{f"isl1024-osl512-c{c}/TPOT ms": _TRTLLM_CPU for c in (32, 64, 128)},
    "N80/TTFT median ms": _LAMBDA_TTFT,
    "N160/TTFT median ms": _LAMBDA_TTFT,
    "N320/TTFT median ms": _LAMBDA_TTFT,
    **{f"N{n}/TPOT median ms": _LAMBDA_TPOT for n in (80, 160, 320)},
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
    marks = [pytest.mark.xfail(reason=KNOWN_MISSES[key], strict=False)] if key in KNOWN_MISSES else []
    return pytest.param(h, id=f"{h.point}-{h.metric.replace(' ', '_')}", marks=marks)


@pytest.mark.parametrize("h", [_param(h) for h in holdout_points()])
def test_holdout_point_within_15_percent(h: HoldoutPoint) -> None:
    model = h.simulate(P)
    assert abs(model / h.measured - 1) <= 0.15, (h.source, h.point, h.metric, model, h.measured)


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
    path = Path(__file__).resolve().parents[2] / "simulations" / "tools" / "calibrate.py"
    spec = importlib.util.spec_from_file_location("calibrate", path)
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # its dataclasses look their module up
    spec.loader.exec_module(mod)
    return mod


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
