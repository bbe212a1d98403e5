"""Closed-loop counterfactual: record the simulator's own metrics while a policy scales the
fleet model, rebuild the demand from that recording, re-run the policy: the rebuilt run must
land close to the recording (the fidelity figure)."""

from __future__ import annotations

import math
from collections.abc import Iterator

import numpy as np
import pytest

from autoscaler.baselines.hpa import HpaParams, HpaQueue
from autoscaler.baselines.queue_lead import QueueLead
from autoscaler.policy import PolicyParams
from autoscaler.sim.counterfactual import (
    RebuiltTrace,
    RecordingPolicy,
    arrival_rates,
    counterfactual,
    sim_policy,
)
from autoscaler.sim.profile import load_profile
from autoscaler.sim.runner import RunConfig, run
from autoscaler.sim.traces import Chunk, Trace


# x2 since the calibrated replica model (docs/calibration.md) serves about twice the requests of the
# old one: at 30 + 25 sin(...) requests/s the HPA recording hardly left its first two replicas
LOAD = 2.0


class SineTrace(Trace):
    """Poisson arrivals at 30 + 25 sin(2 pi t / 30 min) requests/s, exponential lengths."""

    def __init__(self, minutes: int, seed: int = 1) -> None:
        self.name, self.start, self.duration, self.scale, self.seed = "sine", 0.0, minutes * 60.0, 1.0, seed

    def chunks(self) -> Iterator[Chunk]:
        rng = np.random.default_rng(self.seed)
        parts = []
        for k in range(int(self.duration)):
            n = rng.poisson(LOAD * (30 + 25 * math.sin(2 * math.pi * k / 1800)))
            parts.append(np.sort(rng.uniform(k, k + 1, n)))
        arr = np.concatenate(parts)
        yield Chunk(arr, np.maximum(1, np.rint(rng.exponential(230, arr.size))).astype(np.int64),
                    np.maximum(1, np.rint(rng.exponential(220, arr.size))).astype(np.int64))

    def peak_rate(self) -> float:
        return 55.0 * LOAD

    def mean_lengths(self) -> tuple[float, float]:
        return 230.0, 220.0


@pytest.fixture(scope="module")
def simulated() -> tuple[object, object]:
    profile = load_profile("qwen3-8b-h100")
    recorder = RecordingPolicy(HpaQueue(HpaParams(5.0, 1, 20)), (230.0, 220.0))
    run(SineTrace(40), profile, recorder, RunConfig(warmup_s=0.0, max_replicas=20, initial_replicas=2, startup="fixed"))
    return recorder.recording("llm", "qwen"), profile


def test_rebuilt_demand_matches_the_offered_load(simulated: tuple[object, object]) -> None:
    recording, _ = simulated
    rates = arrival_rates(recording)  # type: ignore[arg-type]
    mean = sum(rates) / len(rates)
    offered = sum(LOAD * (30 + 25 * math.sin(2 * math.pi * k / 1800)) for k in range(2400)) / 2400  # 69/s
    assert mean == pytest.approx(offered, rel=0.1)
    trace = RebuiltTrace(recording)  # type: ignore[arg-type]
    assert trace.how["prompt_lengths"] == "mean 230 tokens"


def test_counterfactual_fidelity_on_a_simulated_recording(simulated: tuple[object, object]) -> None:
    recording, profile = simulated
    assert len({s.spec for s in recording.steps}) > 3  # type: ignore[attr-defined]
    out = counterfactual(recording, HpaQueue(HpaParams(max_replicas=20)),  # type: ignore[arg-type]
                         [QueueLead(PolicyParams(max_replicas=20))], profile)
    fid = out["fidelity"]
    # measured: replicas MAE ~0.1-0.3 per minute, replica-hours within a few %, queue within ~10 %
    assert fid["replicas_mae"] < 1.0, fid
    assert abs(fid["replica_hours_error"]) < 0.1, fid
    assert fid["waiting_mae"] <= 0.25 * max(fid["recorded_waiting_mean"], 10.0), fid
    board = out["scoreboard"]
    assert [b["policy"] for b in board] == ["hpa-queue", "queue-lead"]
    assert set(board[0]) >= {"slo_attainment", "ttft_p99_s", "gpu_hours", "scale_actions"}


def test_the_fleet_model_runs_the_recorded_hpa_with_every_parameter_it_was_given() -> None:
    # `--closed-loop hpa-queue:target=3,down_window=60,gpus_per_replica=2`: the simulator's copy keeps
    # the scale-down window and GPUs per replica too, not only the target and bounds.
    given = HpaParams(target_average_value=3.0, min_replicas=2, max_replicas=9, scale_down_window_seconds=60,
                      gpus_per_replica=2)
    copy = sim_policy(HpaQueue(given))
    assert isinstance(copy, HpaQueue)
    assert copy.params == given
    queue_lead = sim_policy(QueueLead(PolicyParams(max_replicas=7)))
    assert isinstance(queue_lead, QueueLead) and queue_lead.params.max_replicas == 7
