"""The pure decision core. Import `decide` and the value types from here."""

from autoscaler.policy.decide import decide
from autoscaler.policy.params import PolicyParams
from autoscaler.policy.types import (
    Clamp,
    Decision,
    DecisionValues,
    LatencyHistogram,
    LeadTimeState,
    MetricSample,
    Observation,
    PodInFlight,
    PodStage,
    PodStartup,
    PolicyState,
    ReadyPod,
    Reason,
    SampleHealth,
    SloState,
)

__all__ = [
    "Clamp",
    "Decision",
    "DecisionValues",
    "LatencyHistogram",
    "LeadTimeState",
    "MetricSample",
    "Observation",
    "PodInFlight",
    "PodStage",
    "PodStartup",
    "PolicyParams",
    "PolicyState",
    "ReadyPod",
    "Reason",
    "SampleHealth",
    "SloState",
    "decide",
]
