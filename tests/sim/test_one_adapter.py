"""The replay and the simulator drive the same adapter: one sequence of observations gives the
same decisions, reason for reason, whether it comes from a recording (`open_loop.replay`, the
policy `load_policy` builds) or from the fleet's views (`Policy.decide`, as `sim.runner` drives
the policy `make_policy` builds)."""

from __future__ import annotations

from typing import Any

import pytest

from autoscaler.baselines.hpa import HpaParams, HpaQueue
from autoscaler.baselines.queue_lead import QueueLead
from autoscaler.baselines.view import (
    ClusterView,
    InFlightPod,
    PodMetrics,
    view_observation,
)
from autoscaler.policy import PolicyParams
from autoscaler.replay.format import Recording, Step
from autoscaler.replay.open_loop import load_policy, observation_of, replay
from autoscaler.replay.synthetic import diurnal_load, generate
from autoscaler.sim.policies import make_policy

FREE_GPUS = 3


def view_of(step: Step) -> ClusterView:
    """The fleet view whose observation is the recorded step's (the toy fleet samples every
    gauge of a pod at one instant)."""
    ready, flight = [], []
    for p in step.pods:
        if p.ready:
            assert p.waiting and p.running and p.kv and p.created is not None and p.ready_at is not None
            ready.append(PodMetrics(p.name, p.waiting.value, p.running.value, p.kv.value, p.waiting.timestamp,
                                    p.completed.value if p.completed else None, 0, p.created, p.scheduled,
                                    p.ready_at))
        else:
            assert p.stage is not None and p.created is not None
            flight.append(InFlightPod(p.name, p.stage, p.created, p.scheduled))
    assert step.spec is not None
    return ClusterView(step.spec, tuple(ready), tuple(flight), FREE_GPUS, 0)


def _reason(last: Any) -> str:
    return last.reason if isinstance(last.reason, str) else last.reason.value


@pytest.fixture(scope="module")
def recording() -> Recording:
    # the toy fleet scaled by an HPA over a bursty load: pods come, load and go
    header, steps = generate(HpaQueue(HpaParams(target_average_value=3.0, max_replicas=6)), steps=1500,
                             arrivals=diurnal_load(mean=8, amplitude=6, period=6 * 3600, seed=4), service_rate=2.0)
    return Recording(header, tuple(steps))


@pytest.mark.parametrize(("replay_spec", "sim_name", "knob"), [
    ("queue-lead", "queue-lead", None),
    ("hpa:target=4,min=1,max=6", "hpa", 4.0),  # the HPA on waiting + running, by either name
    ("hpa:target=4,min=1,max=6", "hpa-queue", 4.0),  # the simulator's old name resolves to `hpa`
])
def test_replay_and_simulator_decide_alike(recording: Recording, replay_spec: str, sim_name: str,
                                           knob: float | None) -> None:
    if replay_spec == "queue-lead":  # what load_policy builds from a config whose target has max 6
        replayed: Any = QueueLead(PolicyParams(max_replicas=6), name="config.yaml")
    else:
        replayed = load_policy(replay_spec, "llm", "qwen")
    # (queue-lead at the KV target's default: the config's PolicyParams, no batch target set)
    simulated: Any = make_policy(sim_name, knob, 1, 6, queue_lead_knob="target_kv_cache_usage_ratio")
    assert type(simulated) is type(replayed) and simulated.params == replayed.params

    ticks = replay(recording, replayed, free_gpus=FREE_GPUS).ticks
    through_sim = []
    for step in recording.steps:
        view = view_of(step)
        assert view_observation(view) == observation_of(step, FREE_GPUS)  # the same observation either way
        through_sim.append((simulated.decide(view, step.t), _reason(simulated.last)))

    assert [(t.desired, t.reason) for t in ticks] == through_sim
    assert len({d for d, _ in through_sim}) >= 3 and len({r for _, r in through_sim}) >= 3  # it did decide
