"""The value types that `decide()` and the replay build with positional arguments (from compiled
code a keyword call costs about twice a positional one: docs/scale.md, "Under the budget") must
keep their fields in the order those calls pass them. A field inserted or moved silently shifts
every argument after it whenever two neighbours share a type (mypy cannot see that), so the order
is pinned here: change a class, then every call of its constructor in autoscaler/ with it,
then this list."""

from __future__ import annotations

from dataclasses import fields

import pytest

from autoscaler.policy.demand import Demand
from autoscaler.policy.forecast import Forecast
from autoscaler.policy.in_flight import InFlight
from autoscaler.policy.limits import Limited
from autoscaler.policy.stabilize import Stabilized
from autoscaler.policy.types import Decision, Observation, PolicyState

ORDER = {
    Demand: ("waiting_total", "running_total", "kv_usage_total", "saturated_pods", "completed_per_second",
             "arrivals_per_second", "replica_throughput_per_second", "queue_model", "queue_replicas",
             "kv_replicas", "batch_replicas", "window_completed_per_second"),
    PolicyState: ("recommendations", "scale_up_events", "scale_down_events", "load_history",
                  "throughput_history", "arrival_history", "planned_replicas", "lead", "slo"),
    Decision: ("desired_replicas", "current_replicas", "reason", "clamp", "values"),
    Forecast: ("slope_per_second", "load", "replicas"),
    InFlight: ("counted", "overdue", "by_stage", "latest_eta_seconds"),
    Limited: ("replicas", "clamp"),
    Stabilized: ("replicas", "recommendations", "down_window_seconds"),
    Observation: ("spec_replicas", "ready_pods", "pods_in_flight", "free_gpus", "rollout_in_progress",
                  "slo_series"),
}


@pytest.mark.parametrize("cls", list(ORDER), ids=lambda c: c.__name__)
def test_positionally_built_types_keep_their_field_order(cls: type) -> None:
    assert tuple(f.name for f in fields(cls)) == ORDER[cls]
