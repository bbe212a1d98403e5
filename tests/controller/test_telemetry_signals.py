"""The per-signal replica estimates and the SLO step's values, exported as gauges (issue 16's
"per-signal estimates as gauges" and issue 15's explainability)."""

from __future__ import annotations

import math

import pytest
from prometheus_client.parser import text_string_to_metric_families

from autoscaler.cli.run import print_outcomes
from autoscaler.controller.loop import TargetOutcome
from autoscaler.controller.telemetry import ControllerMetrics
from autoscaler.policy.types import Decision, DecisionValues, Reason


def _samples(metrics: ControllerMetrics, name: str) -> dict[tuple[tuple[str, str], ...], float]:
    families = {f.name: f for f in text_string_to_metric_families(metrics.render().decode())}
    return {tuple(sorted((k, v) for k, v in s.labels.items() if k not in ("namespace", "deployment"))): s.value
            for s in families[name].samples}


def test_signals_and_slo_values_are_gauges() -> None:
    values = DecisionValues(queue_replicas=3.5, kv_replicas=2.0, batch_replicas=0.0, forecast_replicas=4.2,
                            slo_replicas=5.1, slo_ttft_seconds=2.0, slo_tpot_seconds=0.1, ttft_attainment=0.97,
                            tpot_attainment=None, capacity_prompt_tokens_per_second=15_000.0,
                            capacity_generation_tokens_per_second=3_000.0, headroom_ratio=1.4,
                            headroom_horizon_seconds=390.0)
    m = ControllerMetrics()
    m.record_decision("llm", "qwen", Decision(6, 4, Reason.SCALE_UP_SLO, values=values))
    signals = _samples(m, "vllm_autoscaler_signal_replicas")
    assert signals == {(("signal", "queue"),): 3.5, (("signal", "kv_cache"),): 2.0, (("signal", "batch"),): 0.0,
                       (("signal", "forecast"),): 4.2, (("signal", "slo"),): 5.1}
    assert _samples(m, "vllm_autoscaler_slo_objective_seconds") == {(("latency", "ttft"),): 2.0,
                                                                     (("latency", "tpot"),): 0.1}
    attained = _samples(m, "vllm_autoscaler_slo_attainment_ratio")
    assert attained[(("latency", "ttft"),)] == 0.97 and math.isnan(attained[(("latency", "tpot"),)])  # unknown
    assert _samples(m, "vllm_autoscaler_slo_capacity_tokens_per_second") == {
        (("kind", "prompt"),): 15_000.0, (("kind", "generation"),): 3_000.0}
    assert _samples(m, "vllm_autoscaler_slo_headroom_ratio") == {(): 1.4}
    assert _samples(m, "vllm_autoscaler_slo_headroom_horizon_seconds") == {(): 390.0}


def test_run_once_table_shows_the_slo(capsys: pytest.CaptureFixture[str]) -> None:
    values = DecisionValues(ttft_attainment=0.974, tpot_attainment=None, slo_replicas=5.06, bound_signal="slo")
    print_outcomes([TargetOutcome("llm", "qwen", "dry_run", Decision(6, 4, Reason.SCALE_UP_SLO, values=values)),
                    TargetOutcome("llm", "gone", "error", error="boom")], dry_run=True)
    out = capsys.readouterr().out
    assert "SLO ttft/tpot" in out and "0.97/- (5.1)" in out and "scale_up_slo" in out
    assert "error: boom" in out
