"""Pods, the GPU node pool, the router and the Prometheus scrape around the engine.

Pod lifecycle: created -> UNSCHEDULABLE while no ready node has a free GPU -> SCHEDULED
(bound; container start, `container_start_s`) -> LOADING (model load) -> ready at
`scheduled + load_s` -> draining when deleted (no new requests; it finishes its running
and waiting requests within `drain_grace_s`, what is left then fails) -> gone. Each new pod
draws its `load_s` when created (autoscaler.sim.startup: measured spread around the profile's
`model_load_s`; `startup="fixed"`: exactly `model_load_s`).

Node pool (cluster-autoscaler): nodes of `gpus_per_node` GPUs, between `min_nodes` and
`max_nodes`. Unschedulable pods that no node being provisioned will take ask for new nodes,
each ready after its own drawn provisioning time (around `node_provision_s`; fixed: exactly
it); a node without pods for `node_idle_remove_s` (cluster-autoscaler's
--scale-down-unneeded-time, 10 min, counted from when the node is ready) is removed, so a
later scale-up waits again. Removed nodes stay in `removed_nodes` for billing.

Randomness: `rng` (seeded) is the single source of every random draw of the fleet.

Deletion order on scale-down is the ReplicaSet controller's (kubernetes pkg/controller/
replicaset, `ActivePodsWithRanks`): unscheduled before scheduled, not ready before ready, and
among ready pods (`scale_down_choice`, docs/scale-down.md):
* "replicaset" (the default, what every published run used): the most recently ready first,
  the order of a ReplicaSet when no pod carries a pod-deletion-cost (HPA, KEDA, KPA);
* "random": ready pods in random order (the ReplicaSet with LogarithmicScaleDown, 1.22+, when
  the pods' ready times fall in the same power-of-two bucket), drawn from a generator of its own
  so that every other draw of the fleet stays the same;
* "least_work": what the controller's pod-deletion-cost marks make the ReplicaSet do
  (autoscaler.controller.deletion_cost): of the ready pods to remove, the ones with the fewest
  running + waiting requests in their last scrape (what Prometheus shows, not the engine's
  present state) go first, ties newest first; a pod never scraped is never chosen;
* "least_work_now": the same from the engine's present counts (no controller can read them:
  a bound on what marking could gain with fresher metrics).
Every removal of a ready pod is counted (`removals`): the requests it held when deleted
(SIGTERM: no new requests from then on) and those still unfinished at `drain_grace_s` (killed).

Billing, two ways: a pod's GPUs from scheduling to removal, loading and draining included
(the runner's `gpu_hours_pods`); a node's GPUs (`gpus_per_node`) from the cluster-autoscaler's
request to the node's removal, provisioning and the idle time before removal included
(`node_gpu_seconds`, the runner's `gpu_hours_nodes`: what the cloud bills). The warm nodes of
t = 0 were requested before the slice.

Router: least outstanding requests (waiting + running) over ready, non-draining pods, as a
water-fill per tick; requests wait at the router while no pod is ready. `routing = "random"`
(the routing-sensitivity runs, docs/benchmark.md; docs/scale-down.md) sends each request to a
ready pod drawn at random, from a generator of its own: a Kubernetes Service at its best
(kube-proxy picks an endpoint per connection, and a client that reuses connections sends many
requests to one pod).

Scrape: every `scrape_s` each ready pod's gauges (waiting, running, KV usage), its
request_success_total and vLLM's token counters and latency histograms (`Engine.counters()`)
are sampled; the view gives each pod what `sum by (pod[, le]) (rate(x[rate_window_s]))` returns
for the counters and histograms (`_window`): the increase between the first and the last sample
inside the window over their time apart (Prometheus's extrapolation to the window's edges gives
the same with regular scrapes), none before a pod has two samples in the window.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass, field
from typing import Literal, NamedTuple

import numpy as np
import numpy.typing as npt

from autoscaler.baselines.view import ClusterView, InFlightPod, PodMetrics
from autoscaler.policy.types import LatencyHistogram, PodStage
from autoscaler.sim.engine import COUNTER_COLUMNS, QUEUE_BOUNDS, TPOT_BOUNDS, TTFT_BOUNDS, Engine, Finished
from autoscaler.sim.profile import Profile
from autoscaler.sim.startup import StartupMode, StartupTimes

F = npt.NDArray[np.float64]
I = npt.NDArray[np.int64]

ScaleDownChoice = Literal["replicaset", "random", "least_work", "least_work_now"]
Routing = Literal["least_outstanding", "random"]
SCALE_DOWN_CHOICES: tuple[ScaleDownChoice, ...] = ("replicaset", "random", "least_work", "least_work_now")


@dataclass
class Pod:
    name: str
    created: float
    scheduled: float | None = None
    ready: float | None = None
    deleted: float | None = None
    gone: float | None = None
    slot: int | None = None
    node: int | None = None
    load_s: float = 0.0  # scheduled -> ready, drawn when the pod is created
    samples: deque[tuple[float, float]] = field(default_factory=lambda: deque(maxlen=64))  # (t, success counter)
    scraped: tuple[float, float, float, float] | None = None  # (t, waiting, running, kv)
    # (t, the pod's row of Engine.counters(): token counters, cumulative histogram buckets)
    counters: deque[tuple[float, F]] = field(default_factory=lambda: deque(maxlen=64))

    def stage(self, now: float, container_start_s: float) -> PodStage:
        if self.scheduled is None:
            return PodStage.UNSCHEDULABLE
        if now - self.scheduled < container_start_s:
            return PodStage.SCHEDULED
        return PodStage.LOADING


@dataclass
class Removal:
    """One ready pod removed by a scale-down: when (`t`, the scale write), the requests it held
    then (`in_flight`: running + waiting on the engine, the requests a SIGTERM reaches) and,
    once it is gone, how many were still unfinished at `drain_grace_s` and failed (`killed`,
    None while it drains)."""

    t: float
    pod: str
    in_flight: int
    killed: int | None = None


@dataclass
class Node:
    """A GPU node: asked for at `requested_at`, ready at `ready_at`, removed at `removed_at`
    (None while it exists)."""

    ready_at: float
    requested_at: float
    pods: int = 0
    idle_since: float | None = None
    removed_at: float | None = None

    def billed_s(self, t0: float, t1: float) -> float:
        """Seconds of [t0, t1] this node existed (requested, not yet removed)."""
        end = t1 if self.removed_at is None else min(self.removed_at, t1)
        return max(0.0, end - max(self.requested_at, t0))


WARM = -1e9  # request and ready time of the nodes and pods present before the slice

# the histograms' `le` bounds as Prometheus returns them: vLLM's, then +Inf
_TTFT_LE = (*TTFT_BOUNDS, math.inf)
_TPOT_LE = (*TPOT_BOUNDS, math.inf)
_QUEUE_LE = (*QUEUE_BOUNDS, math.inf)


class SloSignals(NamedTuple):
    """One pod's rates over the window of vLLM's token counters and latency histograms (a
    NamedTuple: built for every ready pod at every decision)."""

    prompt_tokens_per_second: float | None = None
    generation_tokens_per_second: float | None = None
    ttft: LatencyHistogram | None = None
    tpot: LatencyHistogram | None = None
    queue_time: LatencyHistogram | None = None


_NO_SIGNALS = SloSignals()


class Cluster:
    def __init__(self, profile: Profile, initial_replicas: int, max_pods: int, min_nodes: int = 0,
                 max_nodes: int = 1000, scrape_s: float = 15.0, rate_window_s: float = 60.0,
                 warm_nodes: int | None = None, seed: int = 0, startup: StartupMode = "random",
                 scale_down_choice: ScaleDownChoice = "replicaset", routing: Routing = "least_outstanding") -> None:
        self.p = profile
        self.rng = np.random.default_rng(seed)  # every random draw of the fleet (start-up times, routing ties)
        if scale_down_choice not in SCALE_DOWN_CHOICES:
            raise ValueError(f"scale_down_choice must be one of {', '.join(SCALE_DOWN_CHOICES)}, got {scale_down_choice!r}")
        self.scale_down_choice: ScaleDownChoice = scale_down_choice
        self._choice_rng = np.random.default_rng([seed, 0x5CA1ED])  # "random" only: not the fleet's draws
        if routing not in ("least_outstanding", "random"):
            raise ValueError(f"routing must be least_outstanding or random, got {routing!r}")
        self.routing: Routing = routing
        self._route_rng = np.random.default_rng([seed, 0x20C7E])  # routing = "random" only
        self.removals: list[Removal] = []  # every ready pod a scale-down removed (see `Removal`)
        self._removal_of: dict[str, Removal] = {}  # the removals of pods still draining
        self.startup = StartupTimes(profile, startup, self.rng)
        # requests a pod may hold (running + waiting at the pod); beyond it they wait at the router, as
        # behind Knative's activator (containerConcurrency) or Ray Serve's handle (max_ongoing_requests)
        self.pod_concurrency_limit: int | None = None
        self.engine = Engine(profile, max_pods)
        self.free_slots = list(range(max_pods - 1, -1, -1))
        self.pods: list[Pod] = []  # alive (not gone)
        self.gone: list[Pod] = []
        self.nodes: list[Node] = []
        self.removed_nodes: list[Node] = []
        self.min_nodes = min_nodes
        self.max_nodes = max_nodes
        self.scrape_s = scrape_s
        self.rate_window_s = rate_window_s
        self.slo_signals = True  # scrape and show vLLM's token counters and histograms (`set_slo_signals`)
        self._counter = 0
        self.spec = initial_replicas
        self.failed = Finished.empty()
        self.pending_t = np.zeros(0)
        self.pending_in = np.zeros(0, dtype=np.int64)
        self.pending_out = np.zeros(0, dtype=np.int64)
        self.scale_events: list[tuple[float, int, int]] = []  # (t, from, to)
        self._routable: I | None = None
        gpn = profile.gpus_per_node
        need = math.ceil(initial_replicas * profile.gpus_per_replica / gpn)
        for _ in range(max(need, min_nodes, warm_nodes or 0)):
            self.nodes.append(Node(ready_at=WARM, requested_at=WARM))
        for _ in range(initial_replicas):  # warm start: ready at t = 0, no draw
            pod = self._new_pod(-profile.model_load_s, profile.model_load_s)
            self._bind(pod, -profile.model_load_s)
            self._make_ready(pod, 0.0)

    # ---------------------------------------------------------------- helpers
    def _new_pod(self, now: float, load_s: float) -> Pod:
        self._counter += 1
        pod = Pod(name=f"vllm-{self._counter}", created=now, load_s=load_s)
        self.pods.append(pod)
        return pod

    def _free_gpus_on(self, node: Node) -> int:
        return self.p.gpus_per_node - node.pods * self.p.gpus_per_replica

    def free_gpus(self, now: float) -> int:
        return sum(max(0, self._free_gpus_on(n)) for n in self.nodes if n.ready_at <= now)

    def _bind(self, pod: Pod, now: float) -> bool:
        for i, n in enumerate(self.nodes):
            if n.ready_at <= now and self._free_gpus_on(n) >= self.p.gpus_per_replica:
                n.pods += 1
                n.idle_since = None
                pod.node = i
                pod.scheduled = now
                return True
        return False

    def _make_ready(self, pod: Pod, now: float) -> None:
        self._routable = None
        pod.ready = now
        pod.slot = self.free_slots.pop()
        self.engine.reset_slot(pod.slot)
        self.engine.completed[pod.slot] = 0

    def active(self) -> list[Pod]:
        return [p for p in self.pods if p.deleted is None]

    def ready_pods(self) -> list[Pod]:
        return [p for p in self.pods if p.deleted is None and p.ready is not None]

    # ---------------------------------------------------------------- scaling
    def set_replicas(self, n: int, now: float) -> None:
        active = self.active()
        if n != self.spec:
            self.scale_events.append((now, self.spec, n))
        self.spec = n
        if n > len(active):
            for _ in range(n - len(active)):
                pod = self._new_pod(now, self.startup.pod_load_s())
                self._bind(pod, now)
        elif n < len(active):
            cost = self._deletion_costs(active, n)

            def rank(p: Pod) -> tuple[int, float, float]:
                if p.scheduled is None:
                    return (0, 0.0, -p.created)
                if p.ready is None:
                    return (1, 0.0, -p.created)
                return (2, cost.get(p.name, 0.0), -p.ready)
            for pod in sorted(active, key=rank)[: len(active) - n]:
                self._delete(pod, now)

    def _deletion_costs(self, active: list[Pod], n: int) -> dict[str, float]:
        """The ready pods' pod-deletion-cost under `scale_down_choice` (absent: 0). "least_work":
        the k = ready - n pods to go, least work in their last scrape first, get -k ... -1 (as
        `autoscaler.controller.deletion_cost.choose`); "random": a random cost each."""
        ready = [p for p in active if p.ready is not None and p.slot is not None]
        if self.scale_down_choice == "random":
            return {p.name: float(u) for p, u in zip(ready, self._choice_rng.random(len(ready)))}
        k = len(ready) - n
        if self.scale_down_choice not in ("least_work", "least_work_now") or k <= 0:
            return {}
        if self.scale_down_choice == "least_work_now":
            out = self.engine.outstanding()
            work = {p.name: float(out[p.slot]) for p in ready if p.slot is not None}
        else:
            work = {p.name: p.scraped[1] + p.scraped[2] for p in ready if p.scraped is not None}
        known = sorted((p for p in ready if p.name in work), key=lambda p: (work[p.name], -p.created, p.name))
        chosen = known[:k]
        return {p.name: float(i - len(chosen)) for i, p in enumerate(chosen)}

    def _delete(self, pod: Pod, now: float) -> None:
        self._routable = None
        pod.deleted = now
        if pod.ready is None:
            self._remove(pod, now)
        elif pod.slot is not None:
            removal = Removal(now, pod.name, int(self.engine.outstanding()[pod.slot]))
            self.removals.append(removal)
            self._removal_of[pod.name] = removal

    def _remove(self, pod: Pod, now: float) -> None:
        self._routable = None
        self._removal_of.pop(pod.name, None)
        pod.gone = now
        if pod.node is not None:
            node = self.nodes[pod.node]
            node.pods -= 1
            if node.pods == 0:
                node.idle_since = now
        if pod.slot is not None:
            self.free_slots.append(pod.slot)
        self.pods.remove(pod)
        self.gone.append(pod)

    def node_gpu_seconds(self, t0: float, t1: float) -> float:
        """GPU-seconds of every node, present or removed, over [t0, t1]: `gpus_per_node` from its
        request to its removal. Example: a node asked for at 100 s (ready at 400 s) whose only pod
        goes at 1000 s is removed 600 s later: 1,500 s x gpus_per_node."""
        nodes = self.nodes + self.removed_nodes
        return sum(n.billed_s(t0, t1) for n in nodes) * self.p.gpus_per_node

    def _remove_idle_nodes(self, now: float) -> None:
        """cluster-autoscaler scale-down: nodes idle for `node_idle_remove_s` go (keep min_nodes)."""
        for i in range(len(self.nodes) - 1, -1, -1):
            n = self.nodes[i]
            if (n.pods == 0 and n.idle_since is not None and now - n.idle_since >= self.p.node_idle_remove_s
                    and len(self.nodes) > self.min_nodes):
                n.removed_at = now
                self.removed_nodes.append(self.nodes.pop(i))
                for pod in self.pods:
                    if pod.node is not None and pod.node > i:
                        pod.node -= 1

    def _request_node(self, now: float) -> None:
        """cluster-autoscaler scale-up: one node, ready after its drawn provisioning time; its
        idle clock starts when it is ready."""
        ready = now + self.startup.node_provision_s()
        self.nodes.append(Node(ready_at=ready, requested_at=now, idle_since=ready))

    # ---------------------------------------------------------------- time
    def advance(self, now: float) -> None:
        p = self.p
        self._remove_idle_nodes(now)
        unsched = [pod for pod in self.pods if pod.scheduled is None]
        for pod in unsched:
            self._bind(pod, now)
        unsched = [pod for pod in unsched if pod.scheduled is None]
        if unsched:  # cluster-autoscaler: new nodes for pods that no coming node will take
            coming = sum(self._free_gpus_on(n) for n in self.nodes if n.ready_at > now)
            short = len(unsched) * p.gpus_per_replica - coming
            while short > 0 and len(self.nodes) < self.max_nodes:
                self._request_node(now)
                short -= p.gpus_per_node
        for pod in list(self.pods):
            if pod.ready is None and pod.scheduled is not None and now >= pod.scheduled + pod.load_s:
                self._make_ready(pod, pod.scheduled + pod.load_s)
            if pod.deleted is not None and pod.ready is not None and pod.slot is not None:
                removal = self._removal_of.get(pod.name)
                if self.engine.slot_empty(pod.slot):
                    if removal is not None:
                        removal.killed = 0
                    self._remove(pod, now)
                elif now - pod.deleted >= p.drain_grace_s:
                    fin = self.engine.kill_slot(pod.slot, now)
                    self.failed = _cat(self.failed, fin)
                    if removal is not None:
                        removal.killed = int(fin.arrival.size)
                    self._remove(pod, now)

    def route(self, arrival: F, n_in: I, n_out: I) -> None:
        """Route the tick's arrivals after the requests already waiting at the router (FIFO):
        least outstanding first (`autoscaler.sim.router.water_fill`, ties broken with `self.rng`);
        with `pod_concurrency_limit` set, no ready pod gets above it and the rest keep waiting
        here (`router.admit`), to go out as pods free up on later ticks."""
        from autoscaler.sim.router import admit  # (imported here: this method is the router's seam)

        if self.pending_t.size:
            arrival = np.concatenate((self.pending_t, arrival))
            n_in = np.concatenate((self.pending_in, n_in))
            n_out = np.concatenate((self.pending_out, n_out))
        if arrival.size == 0:
            return
        if self._routable is None:  # ready, non-draining slots; rebuilt when a pod changes state
            self._routable = np.array([p.slot for p in self.ready_pods() if p.slot is not None], dtype=np.int64)
        slots = self._routable
        load = self.engine.outstanding()[slots]
        go = admit(load, arrival.size, self.pod_concurrency_limit) if slots.size else 0
        self.pending_t, self.pending_in, self.pending_out = arrival[go:], n_in[go:], n_out[go:]
        if go == 0:
            return
        if self.routing == "random" and self.pod_concurrency_limit is None:
            counts = self._route_rng.multinomial(go, np.full(slots.size, 1.0 / slots.size)).astype(np.int64)
        else:
            counts = water_fill(load, go, self.rng, self.pod_concurrency_limit)
        # interleave: the k-th request of each replica in arrival order
        target = np.repeat(slots, counts)
        key = np.arange(target.size, dtype=np.int64) - np.repeat(np.cumsum(counts) - counts, counts)
        order = np.lexsort((target, key))
        self.engine.enqueue(target[order], arrival[:go], n_in[:go], n_out[:go])

    # ---------------------------------------------------------------- metrics
    def scrape(self, now: float) -> None:
        eng = self.engine
        w, r, kv = eng.waiting(), eng.running(), eng.kv_usage()
        counters = eng.counters() if self.slo_signals else None
        for pod in self.pods:
            if pod.ready is None or pod.slot is None or pod.deleted is not None:
                continue
            s = pod.slot
            pod.scraped = (now, float(w[s]), float(r[s]), float(kv[s]))
            pod.samples.append((now, float(eng.completed[s])))
            if counters is not None:
                pod.counters.append((now, counters[s].copy()))

    def _rate(self, pod: Pod) -> float | None:
        """rate(vllm:request_success_total[window]): (last - first) / (t_last - t_first) over the
        samples inside the window, None with fewer than two (a pod younger than two scrapes)."""
        if not pod.samples:
            return None
        t_last = pod.samples[-1][0]
        inside = [s for s in pod.samples if t_last - s[0] <= self.rate_window_s - 1e-9]
        if len(inside) < 2:
            return None
        (t0, c0), (t1, c1) = inside[0], inside[-1]
        return (c1 - c0) / (t1 - t0) if t1 > t0 else None

    def set_slo_signals(self, on: bool) -> None:
        """Whether the engine records vLLM's token counters and latency histograms and the view
        shows their rates; off for a policy that never reads them (the baselines: their results
        are the same either way, tests/sim/test_slo_signals.py). On, they cost ~40 ns per
        observation at each scrape and ~6 us per ready pod per decision: 10-20 % of a run's CPU
        (more on a busy fleet: 1,100 requests/s, 47 pods, +17 %)."""
        self.slo_signals = on
        self.engine.export_counters = on

    def _window(self, pod: Pod) -> SloSignals:
        """rate(x[window]) of each of the pod's vLLM counters and histogram buckets, as `_rate`
        (the same samples): the token rates and the three latency histograms; all None with
        fewer than two samples in the window."""
        if not pod.counters:
            return _NO_SIGNALS
        t_last, last = pod.counters[-1]
        first = pod.counters[-1]
        for sample in reversed(pod.counters):  # the oldest sample inside the window, from the newest
            if t_last - sample[0] > self.rate_window_s - 1e-9:
                break
            first = sample
        if first[0] >= t_last:
            return _NO_SIGNALS
        rate: list[float] = ((last - first[1]) * (1.0 / (t_last - first[0]))).tolist()
        c = COUNTER_COLUMNS
        return SloSignals(rate[c.prompt], rate[c.generation], LatencyHistogram(_TTFT_LE, tuple(rate[c.ttft]), t_last),
                          LatencyHistogram(_TPOT_LE, tuple(rate[c.tpot]), t_last),
                          LatencyHistogram(_QUEUE_LE, tuple(rate[c.queue]), t_last))

    def view(self, now: float) -> ClusterView:
        out = self.engine.outstanding()
        ready: list[PodMetrics] = []
        flight: list[InFlightPod] = []
        for pod in self.pods:
            if pod.deleted is not None:
                continue
            if pod.ready is not None and pod.slot is not None:
                sc = pod.scraped
                slo = self._window(pod)
                ready.append(PodMetrics(
                    name=pod.name,
                    waiting=sc[1] if sc else None, running=sc[2] if sc else None, kv=sc[3] if sc else None,
                    sample_t=sc[0] if sc else None, completed_per_second=self._rate(pod),
                    outstanding_now=int(out[pod.slot]), created=pod.created, scheduled=pod.scheduled,
                    ready=pod.ready, prompt_tokens_per_second=slo.prompt_tokens_per_second,
                    generation_tokens_per_second=slo.generation_tokens_per_second, ttft=slo.ttft, tpot=slo.tpot,
                    queue_time=slo.queue_time,
                ))
            else:
                flight.append(InFlightPod(pod.name, pod.stage(now, self.p.container_start_s), pod.created, pod.scheduled))
        return ClusterView(self.spec, tuple(ready), tuple(flight), self.free_gpus(now), int(self.pending_t.size))


def water_fill(load: I, n: int, rng: np.random.Generator | None = None, limit: int | None = None) -> I:
    """How many of n new requests each replica gets, least outstanding first: see
    `autoscaler.sim.router.water_fill` (worked example there: loads [5, 2, 3], 4 new -> [0, 3, 1])."""
    from autoscaler.sim import router

    return router.water_fill(load, n, rng, limit)


def _cat(a: Finished, b: Finished) -> Finished:
    ins = None if a.in_tokens is None or b.in_tokens is None else np.concatenate((a.in_tokens, b.in_tokens))
    def cat(f: str) -> F:
        out: F = np.concatenate((getattr(a, f), getattr(b, f)))
        return out

    return Finished(arrival=cat("arrival"), ttft=cat("ttft"), tpot=cat("tpot"), wait=cat("wait"),
                    out_tokens=cat("out_tokens").astype(np.int64), end=cat("end"), in_tokens=ins)
