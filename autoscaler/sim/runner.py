"""One simulation: a trace slice through the fleet model under one policy -> `RunResult`.

Loop, every `dt` (1 s by default): the cluster advances (nodes, pod lifecycle, drains), the
tick's arrivals are routed, every replica steps; Prometheus scrapes every 15 s; the policy
decides every `interval_s`, from `warmup_s` (120 s) on: the slice starts with a ready fleet
holding no requests yet, and nobody should act on those empty first seconds' metrics. A policy
that reads no metrics (the oracle: it knows the trace) plans from t = 0; optional policy hooks
(`PolicyHooks`) also set a node floor and a per-pod concurrency limit. After the slice ends,
the fleet gets up to 10 minutes without new arrivals to finish what it holds (not billed, no
decisions); what is left then counts as failed.

GPU time, up to the end of the slice, two ways: `gpu_hours_pods` bills each pod's GPUs from
scheduling to removal; `gpu_hours_nodes` bills each node's GPUs from the cluster-autoscaler's
request to the node's removal (provisioning and the idle time before removal included), what a
cloud bills. `gpu_hours` is `gpu_hours_pods` (kept for the readers of the old field).

Randomness: `RunConfig.seed` seeds the fleet's one generator (`Cluster.rng`): start-up times
(`RunConfig.startup`, autoscaler.sim.startup) are drawn from it; the trace has its own seed.
Besides the totals, every run records the SLO misses per minute of arrival
(`series["slo_missed"]`).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from autoscaler.baselines.interface import Policy
from autoscaler.sim.cluster import Cluster, Routing
from autoscaler.sim.profile import Profile
from autoscaler.sim.startup import StartupMode
from autoscaler.sim.stats import RequestStats, Slo
from autoscaler.sim.traces import Trace

SERIES_S = 60.0


@dataclass
class RunResult:
    policy: str
    knob: float | None
    requests: int
    slo_attainment: float
    failed: int
    ttft_p50_s: float
    ttft_p99_s: float
    tpot_p50_s: float
    tpot_p99_s: float
    queue_wait_p99_s: float
    gpu_hours: float
    short_lived_gpu_hours: float
    scale_actions: int
    direction_flips_10min: int
    peak_replicas: int
    preemptions: int
    wall_s: float = 0.0
    # None in results recorded before these fields existed
    gpu_hours_pods: float | None = None  # = gpu_hours: pods from scheduling to removal
    gpu_hours_nodes: float | None = None  # nodes from request to removal (idle time included)
    seed: int | None = None  # RunConfig.seed
    startup: str | None = None  # RunConfig.startup
    series: dict[str, list[float]] = field(default_factory=dict)

    def summary(self) -> dict[str, Any]:
        d = asdict(self)
        d.pop("series")
        return d


@dataclass(frozen=True)
class RunConfig:
    dt: float = 1.0
    scrape_s: float = 15.0
    min_replicas: int = 1
    max_replicas: int = 100
    initial_replicas: int = 1
    max_nodes: int = 1000
    min_nodes: int = 0
    slo: Slo = Slo()
    tail_s: float = 600.0
    warmup_s: float = 120.0  # no decisions while the fleet fills from empty (policies that read metrics)
    seed: int = 0  # the fleet's random draws (start-up times); same seed, same run
    startup: StartupMode = "random"  # "fixed": the profile's model_load_s / node_provision_s exactly
    routing: Routing = "least_outstanding"  # "random": a Kubernetes Service's pick (autoscaler.sim.cluster)


@dataclass(frozen=True)
class PolicyHooks:
    """What the runner takes from a policy besides `name`, `interval_s` and `decide`, each an
    optional attribute (duck-typed):

    * `node_floor(now) -> int`: nodes to keep (an offline planner that provisions ahead);
    * `reads_metrics: bool`: False for a policy that plans from the trace, which decides from
      t = 0 instead of after the warm-up; default True, except that a policy with a
      `node_floor` and no `reads_metrics` is taken as such a planner (the oracle);
    * `pod_concurrency_limit: int | None`: requests a pod may hold before the router queues
      them (Knative containerConcurrency, Ray Serve max_ongoing_requests);
    * `reads_slo_signals: bool`: whether it reads the pods' token rates and latency histograms
      (`PodMetrics.ttft` ...); default True; False spares the fleet recording them
      (`Cluster.set_slo_signals`): the registry's baselines declare False."""

    node_floor: Callable[[float], int] | None
    reads_metrics: bool
    pod_concurrency_limit: int | None
    reads_slo_signals: bool = True


def policy_hooks(policy: object) -> PolicyHooks:
    """The optional hooks of `policy` (see PolicyHooks), checked."""
    floor = getattr(policy, "node_floor", None)
    if floor is not None and not callable(floor):
        raise TypeError(f"{getattr(policy, 'name', policy)!r}: node_floor must be callable")
    reads = getattr(policy, "reads_metrics", floor is None)
    limit = getattr(policy, "pod_concurrency_limit", None)
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 1):
        raise ValueError(f"{getattr(policy, 'name', policy)!r}: pod_concurrency_limit must be an int >= 1 or None, got {limit!r}")
    slo = getattr(policy, "reads_slo_signals", True)
    if not isinstance(slo, bool):
        raise TypeError(f"{getattr(policy, 'name', policy)!r}: reads_slo_signals must be a bool, got {slo!r}")
    return PolicyHooks(floor, bool(reads), limit, slo)


def run(trace: Trace, profile: Profile, policy: Policy, cfg: RunConfig, knob: float | None = None,
        progress: Callable[[float], None] | None = None) -> RunResult:
    import time as _time

    wall0 = _time.perf_counter()
    cl = Cluster(profile, cfg.initial_replicas, max_pods=cfg.max_replicas + 8, min_nodes=cfg.min_nodes,
                 max_nodes=cfg.max_nodes, scrape_s=cfg.scrape_s, seed=cfg.seed, startup=cfg.startup,
                 routing=cfg.routing)
    hooks = policy_hooks(policy)
    cl.pod_concurrency_limit = hooks.pod_concurrency_limit
    cl.set_slo_signals(hooks.reads_slo_signals)
    stats = RequestStats(cfg.slo, bin_s=SERIES_S, idle_ttft=profile.idle_ttft_s)
    dt = cfg.dt
    n_ticks = int(math.ceil(trace.duration / dt))
    n_series = int(math.ceil(trace.duration / SERIES_S))
    s_arr = np.zeros(n_series)
    s_wait = np.zeros(n_series)
    s_ready = np.zeros(n_series)
    s_spec = np.zeros(n_series)
    s_run = np.zeros(n_series)
    chunks = trace.chunks()
    cur_t = np.zeros(0)
    cur_in = np.zeros(0, dtype=np.int64)
    cur_out = np.zeros(0, dtype=np.int64)
    pos = 0
    exhausted = False
    next_scrape = 0.0
    next_decide = 0.0
    peak = cl.spec
    gpu_s = 0.0
    last_series = -1
    for i in range(n_ticks):
        t = i * dt
        t_end = t + dt
        if hooks.node_floor is not None:
            cl.min_nodes = max(cfg.min_nodes, hooks.node_floor(t))
        cl.advance(t)
        # arrivals of [t, t_end)
        while not exhausted and (pos >= cur_t.size or cur_t[-1] < t_end):
            try:
                ch = next(chunks)
            except StopIteration:
                exhausted = True
                break
            cur_t = np.concatenate((cur_t[pos:], ch.arrival))
            cur_in = np.concatenate((cur_in[pos:], ch.n_in))
            cur_out = np.concatenate((cur_out[pos:], ch.n_out))
            pos = 0
        hi = int(np.searchsorted(cur_t, t_end, side="left"))
        if hi > pos or cl.pending_t.size:
            cl.route(cur_t[pos:hi], cur_in[pos:hi], cur_out[pos:hi])
        k = i * dt // SERIES_S
        si = int(k)
        s_arr[si] += hi - pos
        pos = hi
        fin = cl.engine.step(t, dt)
        stats.add(fin)
        if t >= next_scrape:
            cl.scrape(t)
            next_scrape += cfg.scrape_s
        if t >= next_decide and (t >= cfg.warmup_s or not hooks.reads_metrics):
            desired = policy.decide(cl.view(t), t)
            if desired != cl.spec:
                cl.set_replicas(desired, t)
                peak = max(peak, desired)
            # the policy's own cadence in seconds whatever dt: at dt 2 a 15 s interval stays 15 s on
            # average (t + interval would drift to 16 s)
            next_decide = max(next_decide, t - dt) + policy.interval_s
        if si != last_series:
            last_series = si
            w = cl.engine.waiting()
            s_wait[si] = float(w.sum()) + cl.pending_t.size
            s_run[si] = float(cl.engine.running().sum())
            s_ready[si] = len(cl.ready_pods())
            s_spec[si] = cl.spec
        gpu_s += sum(1 for p in cl.pods if p.scheduled is not None) * profile.gpus_per_replica * dt
        if progress is not None and i % 600 == 0:
            progress(t_end / trace.duration)
    if cl.failed.arrival.size:
        stats.add(cl.failed)
        cl.failed = cl.failed.empty()
    # tail: finish what is in the system (no arrivals, no decisions, not billed)
    t = n_ticks * dt
    end = t + cfg.tail_s
    while (cl.engine.in_system() or cl.pending_t.size) and t < end:
        cl.advance(t)
        if cl.pending_t.size:
            cl.route(np.zeros(0), np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64))
        stats.add(cl.engine.step(t, dt))
        t += dt
    stats.add(cl.failed)
    stats.add_unfinished(cl.engine.in_system() + int(cl.pending_t.size))
    # pods: short-lived GPU time (lived shorter than their own lead time, or never served)
    short = 0.0
    for p in cl.gone:
        if p.scheduled is None or p.gone is None or p.scheduled >= trace.duration:
            continue
        billed = min(p.gone, trace.duration) - max(p.scheduled, 0.0)
        lead = (p.ready - p.created) if p.ready is not None else None
        if p.ready is None or lead is None or (p.gone - p.ready) < lead:
            short += max(billed, 0.0) * profile.gpus_per_replica
    missed = np.zeros(n_series)  # SLO misses per minute of arrival (see RequestStats)
    m = stats.missed_by_arrival[:n_series]
    missed[: m.size] = m
    actions = len(cl.scale_events)
    flips = 0
    for (t0, a0, b0), (t1, a1, b1) in zip(cl.scale_events[:-1], cl.scale_events[1:]):
        if (b0 - a0) * (b1 - a1) < 0 and t1 - t0 < 600.0:
            flips += 1
    return RunResult(
        policy=policy.name,
        knob=knob,
        requests=stats.total,
        slo_attainment=stats.attainment,
        failed=stats.failed,
        ttft_p50_s=stats.ttft.quantile(0.5),
        ttft_p99_s=stats.ttft.quantile(0.99),
        tpot_p50_s=stats.tpot.quantile(0.5),
        tpot_p99_s=stats.tpot.quantile(0.99),
        queue_wait_p99_s=stats.wait.quantile(0.99),
        gpu_hours=gpu_s / 3600.0,
        short_lived_gpu_hours=short / 3600.0,
        scale_actions=actions,
        direction_flips_10min=flips,
        peak_replicas=int(max(peak, s_spec.max() if s_spec.size else 0)),
        preemptions=cl.engine.preemptions,
        wall_s=_time.perf_counter() - wall0,
        gpu_hours_pods=gpu_s / 3600.0,
        gpu_hours_nodes=cl.node_gpu_seconds(0.0, trace.duration) / 3600.0,
        seed=cfg.seed,
        startup=cfg.startup,
        series={"t_s": [i * SERIES_S for i in range(n_series)], "arrivals_per_s": list(s_arr / SERIES_S),
                "waiting": list(s_wait), "running": list(s_run), "ready": list(s_ready), "spec": list(s_spec),
                "slo_missed": [float(x) for x in missed]},
    )
