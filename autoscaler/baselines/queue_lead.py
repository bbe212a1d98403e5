"""Ours, as the others are driven: `queue-lead`, the pure decision core
`autoscaler.policy.decide()` behind the same interface as the baselines
(`autoscaler.baselines.interface`), for the simulator and the replay alike."""

from __future__ import annotations

from autoscaler.baselines.interface import ObservationAdapter, Outcome
from autoscaler.policy import Decision, Observation, PolicyParams, PolicyState, decide


class QueueLead(ObservationAdapter[PolicyParams, PolicyState, Decision]):
    """`decide()` with one target's `PolicyParams`, driven exactly as the live loop drives it
    (autoscaler/controller/loop.py, observe.py): every `tick_seconds` (15) an `Observation` of
    the Prometheus-scraped `vllm:num_requests_waiting`, `vllm:num_requests_running`,
    `vllm:kv_cache_usage_perc` and rate(vllm:request_success_total[1m]) per ready pod, the pods
    in flight with their stage and timestamps, and the free GPUs of the node pool. Keeps the
    `PolicyState` across ticks and the last `Decision`."""

    needs: tuple[str, ...] = ("waiting", "running", "kv")

    def __init__(self, params: PolicyParams, name: str = "queue-lead", interval_s: float = 15.0) -> None:
        super().__init__(name, params, PolicyState(), interval_s, params.gpus_per_replica)

    def __call__(self, observation: Observation, now: float) -> Outcome:
        decision, self.state = decide(self.params, observation, self.state, now)
        self.last = decision
        # `_value_`, the member's value as a plain attribute: `.value` is a descriptor call (~0.4 us
        # a tick over a month's replay; the same string)
        return decision.desired_replicas, decision.reason._value_, decision.clamp._value_ if decision.clamp else None
