"""The profile: capacity estimate with the TPOT cost of prefill, scenario overrides, initial fleet."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from autoscaler.sim.experiment import REPO, Scenario, build, prepare
from autoscaler.sim.profile import apply_overrides, load_profile

P = load_profile("qwen3-8b-h100")


def _tpot(mean_in: float, mean_out: float, b: int) -> float:
    """TPOT at batch b with the prefill sharing the steps: step(b) + b * prefill(in) / out."""
    step = P.decode_step_s(float(b), b * (mean_in + mean_out / 2))
    return step + b * P.prefill_s(mean_in) / mean_out


@pytest.mark.parametrize(("mean_in", "mean_out", "batch", "rps"), [
    # the docstring's worked examples (Profile.capacity_rps)
    (233.0, 221.0, 506, 45.86),  # ShareGPT (GPUStack table): step 40.1 ms + 9.8 ms prefill share, TPOT-bound
    (2047.8, 27.9, 27, 19.80),  # Azure code 2023 (azure2023-code.csv means): step 11.1 + 37.8 ms
])
def test_capacity_counts_the_tpot_cost_of_prefill(mean_in: float, mean_out: float, batch: int, rps: float) -> None:
    got = P.capacity_rps(mean_in, mean_out)
    assert abs(got - rps) < 0.01
    # the best batch is the largest whose TPOT (prefill included) is within the 50 ms budget and
    # whose KV fits in 90 % of the cache (ShareGPT: the TPOT bound binds at 507; Azure code: at 28)
    assert _tpot(mean_in, mean_out, batch) <= 0.05
    assert _tpot(mean_in, mean_out, batch + 1) > 0.05 or (batch + 1) * (mean_in + mean_out) > 0.9 * P.kv_cache_tokens
    expected = 1.0 / (P.prefill_s(mean_in)
                      + mean_out * P.decode_step_s(float(batch), batch * (mean_in + mean_out / 2)) / batch)
    assert abs(got - expected) < 1e-9


def _decode_only(mean_in: float, mean_out: float) -> float:
    """The estimate without the prefill term: the best batch with step(B) <= 50 ms and KV <= 90 %."""
    best = 0.0
    for b in range(1, P.max_num_seqs + 1):
        step = P.decode_step_s(float(b), b * (mean_in + mean_out / 2))
        if b * (mean_in + mean_out) > 0.9 * P.kv_cache_tokens or step > 0.05:
            break
        best = max(best, 1.0 / (P.prefill_s(mean_in) + mean_out * step / b))
    return best


def test_capacity_without_prefill_term_is_optimistic_for_prefill_heavy_mixes() -> None:
    # the decode-only batch for Azure code would have a TPOT, prefill sharing the steps, far above 50 ms
    assert P.capacity_rps(2047.8, 27.9) / _decode_only(2047.8, 27.9) < 0.9
    assert 0.8 < P.capacity_rps(233.0, 221.0) / _decode_only(233.0, 221.0) <= 1.0
    for mi, mo in ((100.0, 1000.0), (650.0, 143.0), (156.0, 28.0), (1155.0, 211.0)):
        assert P.capacity_rps(mi, mo) <= _decode_only(mi, mo)


def test_overrides_change_a_field_and_the_name() -> None:
    p = load_profile("qwen3-8b-h100", {"scheduler": {"max_num_batched_tokens": 2048}})
    assert p.max_num_batched_tokens == 2048 and P.max_num_batched_tokens == 8192
    assert p.name == "qwen3-8b-h100+scheduler.max_num_batched_tokens=2048"
    assert replace(p, max_num_batched_tokens=8192, name=P.name) == P  # nothing else changed


@pytest.mark.parametrize(("overrides", "message"), [
    ({"scheduler": {"max_num_batched_token": 2048}}, "unknown key 'max_num_batched_token'"),
    ({"schedular": {"max_num_batched_tokens": 2048}}, "unknown profile key 'schedular'"),
    ({"scheduler": 2048}, "expected a mapping"),
    ({"gpu": {"x": 1}}, "single value, not a section"),
    ({"scheduler": {"max_num_batched_tokens": "2k"}}, "expected a number"),
    ({"gpus_per_replica": 2}, r"lifecycle.gpus_per_node = 1: must be >= gpus_per_replica \(2\)"),
])
def test_unknown_or_malformed_overrides_are_rejected(overrides: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        load_profile("qwen3-8b-h100", overrides)


def test_apply_overrides_names_the_known_keys() -> None:
    with pytest.raises(ValueError, match="known: max_model_len, max_num_batched_tokens, max_num_seqs"):
        apply_overrides({"scheduler": {"max_num_seqs": 1, "max_num_batched_tokens": 2, "max_model_len": 3}},
                        {"scheduler": {"chunk": 4}})


def test_scenario_load_rejects_a_bad_override_and_unknown_scenario_keys(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("trace: x.csv\nprofile_overrides:\n  scheduler:\n    max_num_batched_tokenz: 2048\n")
    with pytest.raises(ValueError, match="max_num_batched_tokenz"):
        Scenario.load(bad)
    typo = tmp_path / "typo.yaml"
    typo.write_text("trace: x.csv\nprofile_override: {}\n")
    with pytest.raises(ValueError, match="unknown scenario key"):
        Scenario.load(typo)


def test_azure_code_scenario_runs_vllm_with_2048_batched_tokens() -> None:
    sc = Scenario.load(REPO / "simulations" / "scenarios" / "azure-code.yaml")
    assert sc.profile_overrides == {"scheduler": {"max_num_batched_tokens": 2048}}


def test_initial_fleet_is_the_oracle_need_over_the_lead_time(tmp_path: Path) -> None:
    trace = tmp_path / "t.csv"
    trace.write_text("arrival_s,input_tokens,output_tokens\n0.0,100,10\n599.0,100,10\n")
    prep = prepare(Scenario(name="i", trace=str(trace), duration=600.0, rate_scale=1.0, max_replicas=50))
    assert prep.cfg.initial_replicas == 1
    # lead time = node 300 s + model load 90 s = 390 s -> bins 0..6 (60 s). 600 GPU-s of work in
    # bin 5 = 10 busy replicas, at u = 0.85 -> 12 (bins 4-6 by the neighbour rule): already needed
    work = np.zeros(10)
    work[5] = 600.0
    assert replace(prep, work=work).initial_need(0.85) == 12
    # the same work in bin 8 (its neighbour bin 7 starts after the lead time): not yet
    work8 = np.zeros(10)
    work8[8] = 600.0
    assert replace(prep, work=work8).initial_need(0.85) == 1
    # every policy starts from the need at u = 0.85, the oracle too at any knob (at u = 0.5 its
    # own need would be 20: a head start nobody else gets); static-peak from its size
    p2 = replace(prep, work=work)
    p2.cfg = replace(p2.cfg, initial_replicas=p2.initial_need(0.85))
    assert p2.initial_need(0.5) == 20
    assert build(p2, "queue-lead", None)[1].initial_replicas == 12
    assert build(p2, "oracle", 0.5)[1].initial_replicas == 12
    assert build(p2, "oracle", 0.85)[1].initial_replicas == 12
    assert build(p2, "static-peak", 3.0)[1].initial_replicas == 3
