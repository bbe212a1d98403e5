"""Step 3, lead time: how long until a replica asked for now serves traffic.

lead time = model load time (scheduled -> ready), plus node provisioning time
(unschedulable -> scheduled) when the free GPUs cannot hold the replicas to add.

Both are learned from pods this controller watched, as a robust high percentile
(`lead_time_percentile`, linear interpolation) of the newest samples inside
`lead_time_window_seconds`; until `lead_time_min_samples` exist, the configured default is used.
The samples live in `LeadTimeState`, which the controller persists in the cluster so they
survive a restart.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from autoscaler.policy.params import PolicyParams
from autoscaler.policy.time_window import Entries, TimeWindow
from autoscaler.policy.types import LeadTimeState, Observation, PodStage

MAX_REMEMBERED_PODS = 500
MAX_SAMPLE_SECONDS = 86_400.0  # a "load time" longer than a day is a flapping pod, not a sample


@dataclass(frozen=True)
class LeadTimeEstimate:
    model_load_seconds: float
    node_provision_seconds: float
    model_load_learned: bool
    node_provision_learned: bool

    def total(self, node_needed: bool) -> float:
        return self.model_load_seconds + (self.node_provision_seconds if node_needed else 0.0)


def percentile(values: list[float], q: float) -> float:
    """Linear-interpolation percentile (numpy's default), q in [0, 1].

    Worked example: [100, 120, 130, 140, 400] at q = 0.9: position 0.9 * 4 = 3.6, so
    140 + 0.6 * (400 - 140) = 296.
    """
    if not values:
        raise ValueError("percentile of no values")
    ordered = sorted(values)
    pos = q * (len(ordered) - 1)
    lo = math.floor(pos)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (pos - lo) * (ordered[hi] - ordered[lo])


def _prune(samples: Entries[float], now: float, params: PolicyParams) -> TimeWindow[float]:
    window = TimeWindow.of(samples).within(now, params.lead_time_window_seconds)
    return window.newest(params.lead_time_max_samples)


def _remember(names: tuple[str, ...], new: list[str]) -> tuple[str, ...]:
    return (names + tuple(new))[-MAX_REMEMBERED_PODS:]


def _anything_new(state: LeadTimeState, obs: Observation, now: float, params: PolicyParams) -> bool:
    """Fast path: would `learn_lead_times` change the state? (Most ticks it would not.)"""
    for samples in (state.model_load_samples, state.node_provision_samples):
        if samples and (now - samples[0][0] >= params.lead_time_window_seconds
                        or len(samples) > params.lead_time_max_samples):
            return True
    seen = state.seen_unschedulable_set
    recorded_node = state.recorded_node_set
    for pod in obs.pods_in_flight:
        if pod.stage is PodStage.UNSCHEDULABLE and pod.name not in seen:
            return True
        if pod.startup.scheduled_at is not None and pod.name in seen and pod.name not in recorded_node:
            return True
    recorded = state.recorded_set
    for ready in obs.ready_pods:
        name = ready.name
        if name in recorded and name not in seen:  # the usual pod: taken, never waited for a node
            continue
        st = ready.startup
        if st is None or st.scheduled_at is None:
            continue
        if name in seen and name not in recorded_node:
            return True
        if st.ready_at is not None and name not in recorded:
            return True
    return False


def learn_lead_times(state: LeadTimeState, obs: Observation, now: float, params: PolicyParams) -> LeadTimeState:
    """Add samples from pods seen this tick; forget old ones.

    Worked example: a ready pod `p1` with scheduled_at = 1000 and ready_at = 1240, not seen
    before, adds a model-load sample (now, 240). A pod `p2` seen UNSCHEDULABLE on an earlier
    tick, created at 500 and now scheduled at 800, adds a node-provisioning sample (now, 300).
    Each pod counts once.
    """
    if not _anything_new(state, obs, now, params):
        return state
    seen, unschedulable = _newly_unschedulable(obs, state.seen_unschedulable_set)
    node_pods, node_samples = _node_provision_samples(obs, seen, state.recorded_node_set, now)
    load_pods, load_samples = _model_load_samples(obs, state.recorded_set, now, params)
    return replace(
        state,
        model_load_samples=_prune(state.model_load_samples + load_samples, now, params),
        node_provision_samples=_prune(state.node_provision_samples + node_samples, now, params),
        recorded_pods=_remember(state.recorded_pods, load_pods),
        recorded_node_pods=_remember(state.recorded_node_pods, node_pods),
        seen_unschedulable=_remember(state.seen_unschedulable, unschedulable),
    )


def _newly_unschedulable(obs: Observation, seen: frozenset[str]) -> tuple[set[str], list[str]]:
    """(every pod seen waiting for a node, those seen for the first time this tick)."""
    now_seen = set(seen)
    new: list[str] = []
    for pod in obs.pods_in_flight:
        if pod.stage is PodStage.UNSCHEDULABLE and pod.name not in now_seen:
            now_seen.add(pod.name)
            new.append(pod.name)
    return now_seen, new


def _node_provision_samples(
    obs: Observation, seen: set[str], recorded: frozenset[str], now: float
) -> tuple[list[str], tuple[tuple[float, float], ...]]:
    """(pods taken, their samples (now, created -> scheduled)): once scheduled, each pod that
    was seen waiting for a node."""
    taken: set[str] = set()  # this tick's (not a copy of `recorded`: up to 500 names, for a few)
    names: list[str] = []
    samples: list[tuple[float, float]] = []
    startups = [(p.name, p.startup) for p in obs.pods_in_flight] + [
        (p.name, p.startup) for p in obs.ready_pods if p.startup is not None
    ]
    for name, startup in startups:
        if startup is None or startup.scheduled_at is None or name not in seen or name in recorded or name in taken:
            continue
        wait = startup.scheduled_at - startup.created_at
        if 0.0 <= wait <= MAX_SAMPLE_SECONDS:
            samples.append((now, wait))
        taken.add(name)
        names.append(name)
    return names, tuple(samples)


def _model_load_samples(
    obs: Observation, recorded: frozenset[str], now: float, params: PolicyParams
) -> tuple[list[str], tuple[tuple[float, float], ...]]:
    """(pods taken, their samples (now, scheduled -> ready)): each ready pod not taken before;
    one that became ready longer than the window ago is taken without a sample."""
    taken: set[str] = set()  # this tick's (not a copy of `recorded`: up to 500 names, for a few)
    names: list[str] = []
    samples: list[tuple[float, float]] = []
    for ready in obs.ready_pods:
        st, name = ready.startup, ready.name
        if st is None or st.scheduled_at is None or st.ready_at is None or name in recorded or name in taken:
            continue
        load = st.ready_at - st.scheduled_at
        if 0.0 <= load <= MAX_SAMPLE_SECONDS and now - st.ready_at < params.lead_time_window_seconds:
            samples.append((now, load))
        taken.add(name)
        names.append(name)
    return names, tuple(samples)


def estimate_lead_time(state: LeadTimeState, params: PolicyParams) -> LeadTimeEstimate:
    """Learned percentile once there are enough samples, else the configured defaults.

    Worked example: defaults 300 s / 300 s, min 3 samples, p90. Load samples 100, 120, 130,
    140, 400 give 296 s (learned); one node sample is too few, so node provisioning stays 300 s.

    The state rarely changes from one tick to the next (see `learn_lead_times`), so the
    estimate is kept on it, like its membership sets, for the parameters it was made with.
    """
    key = (
        params.lead_time_min_samples,
        params.lead_time_percentile,
        params.model_load_seconds_default,
        params.node_provision_seconds_default,
    )
    cached = state.__dict__.get(_ESTIMATE_ATTR)
    if cached is not None and cached[0] == key:
        estimate: LeadTimeEstimate = cached[1]
        return estimate
    estimate = _estimate(state, params)
    state.__dict__[_ESTIMATE_ATTR] = (key, estimate)  # a cache, as functools.cached_property keeps one
    return estimate


_ESTIMATE_ATTR = "_lead_time_estimate"


def _estimate(state: LeadTimeState, params: PolicyParams) -> LeadTimeEstimate:
    loads = [s for _, s in state.model_load_samples]
    nodes = [s for _, s in state.node_provision_samples]
    load_learned = len(loads) >= params.lead_time_min_samples
    node_learned = len(nodes) >= params.lead_time_min_samples
    return LeadTimeEstimate(
        model_load_seconds=percentile(loads, params.lead_time_percentile)
        if load_learned
        else params.model_load_seconds_default,
        node_provision_seconds=percentile(nodes, params.lead_time_percentile)
        if node_learned
        else params.node_provision_seconds_default,
        model_load_learned=load_learned,
        node_provision_learned=node_learned,
    )


def node_needed(free_gpus: int | None, replicas_to_add: int, gpus_per_replica: int) -> bool:
    """Does adding `replicas_to_add` replicas wait for a new node?

    Worked example: 3 free GPUs, 2 replicas of 2 GPUs each need 4 > 3: yes. Unknown free GPUs
    (None) count as yes: a longer lead time asks for capacity earlier, the safe side.
    """
    if replicas_to_add <= 0:
        return False
    if free_gpus is None:
        return True
    return free_gpus < replicas_to_add * gpus_per_replica
