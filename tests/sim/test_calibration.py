"""Calibration: the simulated Qwen3-8B/H100 replica against measured vLLM numbers.

Reference (copied into tests/fixtures/sim from shared/vllm-perf, the table its README
recommends): GPUStack, Qwen3-8B bf16, one H100 SXM, vLLM 0.11.0, `vllm bench serve` ShareGPT,
100 prompts (23,260 input / 22,061 output tokens), closed loop at concurrency 1, 2, 4, 8.
Each point must match output tokens/s, mean TTFT and mean TPOT within 15 %.

Saturation (shared/vllm-perf/README.md, "saturated output throughput"): 1,000 ShareGPT prompts
released at once on Qwen3-8B/H100 give 13,305 total tok/s (GPUStack, vLLM 0.9.2); 8B-class
H100 saturated output throughput is 5.1k (AccelMark offline) to 6.0k (Lambda N=320) tok/s.
The simulated burst must be within 25 % of each.
"""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from autoscaler.sim.calibration import closed_loop, sharegpt_like
from autoscaler.sim.profile import load_profile

REF = Path(__file__).resolve().parents[1] / "fixtures" / "sim" / "gpustack_qwen3-8b_h100-sxm_vllm0.11.0_sharegpt_concurrency.csv"


def _reference() -> list[dict[str, str]]:
    with REF.open() as f:
        return list(csv.DictReader(f))


@pytest.mark.parametrize("row", _reference(), ids=lambda r: f"c{r['concurrency']}")
def test_closed_loop_sweep_matches_gpustack(row: dict[str, str]) -> None:
    profile = load_profile("qwen3-8b-h100")
    n_in, n_out = sharegpt_like(int(row["num_prompts"]), int(row["total_input_tokens"]), int(row["total_output_tokens"]))
    r = closed_loop(profile, n_in, n_out, int(row["concurrency"]))
    assert r.requests == int(row["num_prompts"])
    for got, ref in (
        (r.output_tok_per_s, float(row["output_tok_per_s"])),
        (r.ttft_mean_ms, float(row["ttft_mean_ms"])),
        (r.tpot_mean_ms, float(row["tpot_mean_ms"])),
    ):
        assert abs(got / ref - 1) <= 0.15, (row["concurrency"], got, ref)


def test_saturation_ceiling() -> None:
    profile = load_profile("qwen3-8b-h100")
    n_in, n_out = sharegpt_like(1000, 232_600, 220_610, seed=1)
    r = closed_loop(profile, n_in, n_out, 1000, dt=0.01)
    assert abs(r.total_tok_per_s / 13_305.38 - 1) <= 0.25, r
    for ref in (5_128.0, 6_027.0):  # AccelMark offline batch, Lambda burst N=320 (output tok/s)
        assert abs(r.output_tok_per_s / ref - 1) <= 0.25, (r.output_tok_per_s, ref)
