"""Soak of the real `Controller`, two replicas with leader election, through failovers and
restarts, with several seeds; every invariant checked at every tick.

What runs for real: two `Controller`s, each with its own `KubeClient` (the official client, over
HTTP) and `LeaderElector`, against the Kubernetes-API test server, on one simulated clock
(controllers, electors and the server's request log). Prometheus is `FakePrometheus`
(tests/controller/fakes.py, fail closed), answered before each tick from a fluid fleet model.
A small deployment controller in the test creates and deletes the pods the Deployment asks
for (ready 60 s after creation).

Injected at random (seeded): a replica killed and started again (fresh memory, sometimes under
the same name), a replica paused past its lease then resumed, a replica partitioned from the
Lease (it still reaches everything else), an operator scaling the Deployment (a concurrent
writer), Prometheus down, pods absent, stale or NaN.

Checked at every tick, from the API server's side:
* never below min_replicas nor above max_replicas (the controllers' writes);
* never more than `scale_down_max_pods` removed per `scale_down_period_seconds`, whichever
  replica removed them, across failovers and restarts;
* no write (scale, Event, state) by a replica that does not hold the Lease, or whose renewal
  is older than the lease duration;
* no scale-down on a tick whose data was unhealthy.
"""

from __future__ import annotations

import math
import random
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import pytest
import yaml
from structlog.testing import capture_logs

from autoscaler.adapters.kubernetes import KubeClient
from autoscaler.adapters.prometheus import PodMetrics, PrometheusUnavailable
from autoscaler.config import ConfigWatcher
from autoscaler.controller.leader import LeaderElector, LeaseSettings
from autoscaler.controller.loop import Controller
from autoscaler.policy import MetricSample
from tests.controller.fakes import FakePrometheus
from tests.kube_api_server import KubeApiServer, deployment, node, pod

pytestmark = pytest.mark.integration

NS, NAME, CONTROLLER_NS = "llm", "qwen", "autoscaler"
MIN, MAX, STEP, PERIOD = 2, 12, 1, 120.0  # one pod removed per 120 s at most
TICK, LEASE, RENEW, RETRY = 15.0, 15.0, 10.0, 5.0
LOAD_SECONDS = 60.0  # from a pod's creation to ready
BATCH, LATENCY = 32, 20.0  # a replica finishes 1.6 requests/s
START = 1_750_000_000.0
MINUTES = 30
SEEDS = (1, 2, 3)
WRITES = ("POST", "PUT", "PATCH", "DELETE")


class SimClock:
    def __init__(self) -> None:
        self.now = START

    def __call__(self) -> float:
        return self.now


@dataclass
class Replica:
    """One controller process: its client, elector, Prometheus fake and Controller."""

    identity: str
    kube: KubeClient
    elector: LeaderElector
    prometheus: FakePrometheus
    controller: Controller
    phase: float  # its ticks come at phase, phase + 15, ...
    paused_until: float = 0.0

    def close(self) -> None:
        self.controller.close()
        self.kube.close()


@dataclass
class World:
    server: KubeApiServer
    clock: SimClock
    config: Path
    kubeconfig: Path
    rng: random.Random
    in_system: float = 0.0  # requests in the fleet (waiting + running)
    pods: dict[str, tuple[float, bool]] = field(default_factory=dict)  # name -> (created, ready)
    serial: int = 0
    scale_downs: list[tuple[float, int]] = field(default_factory=list)  # by the controllers
    checked: int = 0  # requests of the server's log already checked
    operator_set: int | None = None  # the replicas an operator set last
    stats: dict[str, int] = field(default_factory=dict)

    def count(self, what: str) -> None:
        self.stats[what] = self.stats.get(what, 0) + 1

    # ---- the cluster

    def spec(self) -> int:
        dep = self.server.get("deployments", NS, NAME)
        assert dep is not None
        return int(dep["spec"]["replicas"])

    def reconcile_pods(self) -> None:
        """The deployment controller and the kubelet: as many pods as asked, ready after 60 s."""
        now, want = self.clock.now, self.spec()
        for name, (created, ready) in list(self.pods.items()):
            if not ready and now - created >= LOAD_SECONDS:
                self.pods[name] = (created, True)
                self.server.put(self._pod(name, created, True))
        while len(self.pods) < want:
            self.serial += 1
            name = f"{NAME}-{self.serial}"
            self.pods[name] = (now, False)
            self.server.put(self._pod(name, now, False))
        while len(self.pods) > want:  # not-ready pods go first, then the newest
            name = max(self.pods, key=lambda n: (not self.pods[n][1], self.pods[n][0]))
            del self.pods[name]
            self.server.delete("pods", NS, name)

    def _pod(self, name: str, created: float, ready: bool) -> dict[str, Any]:
        return pod(name, NS, labels={"app": NAME}, state="ready" if ready else "loading", created_at=created,
                   scheduled_at=created + 1, started_at=created + 5, ready_at=created + LOAD_SECONDS)

    def operator_scales(self, replicas: int) -> None:
        """`kubectl scale` (and the deployment controller catching up)."""
        self.operator_set = replicas
        dep = self.server.get("deployments", NS, NAME)
        assert dep is not None
        generation = int(dep["metadata"].get("generation", 1)) + 1
        self.server.update("deployments", NS, NAME, {
            "metadata": {"generation": generation}, "spec": {"replicas": replicas},
            "status": {"observedGeneration": generation, "replicas": replicas, "updatedReplicas": replicas}})

    # ---- the load

    def arrivals(self) -> float:
        t = self.clock.now - START
        return 6.0 + 5.0 * math.sin(2 * math.pi * t / 1800.0)  # 1 to 11 requests/s, a 30 min cycle

    def step_load(self, dt: float) -> None:
        ready = sum(1 for _, r in self.pods.values() if r)
        served = min(self.in_system, ready * BATCH) / LATENCY * dt
        self.in_system = max(0.0, self.in_system + self.arrivals() * dt - served)

    def metrics(self) -> tuple[dict[tuple[str, str], PodMetrics] | Exception, bool]:
        """What Prometheus answers now, and whether that is healthy (fresh, finite, complete)."""
        now = self.clock.now
        ready = [n for n, (_, r) in sorted(self.pods.items()) if r]
        fault = self.rng.random()
        if fault < 0.04:
            return PrometheusUnavailable("Prometheus at http://prometheus:9090 unreachable"), False
        per_pod = self.in_system / len(ready) if ready else 0.0
        out: dict[tuple[str, str], PodMetrics] = {}
        for name in ready:
            running = min(per_pod, BATCH)
            at = now
            out[(NS, name)] = PodMetrics(
                waiting=MetricSample(per_pod - running, at), running=MetricSample(running, at),
                kv_cache_usage=MetricSample(running / BATCH * 0.9, at), kv_metric_name="vllm:kv_cache_usage_perc",
                completed_per_second=MetricSample(running / LATENCY, at))
        if ready and fault < 0.10:
            victim = (NS, self.rng.choice(ready))
            kind = self.rng.choice(["absent", "stale", "nan"])
            if kind == "absent":
                del out[victim]
            elif kind == "stale":
                m = out[victim]
                old = now - 600  # Prometheus lags 10 minutes for this pod
                out[victim] = replace(m, waiting=MetricSample(m.waiting.value, old) if m.waiting else None,
                                      running=MetricSample(m.running.value, old) if m.running else None,
                                      kv_cache_usage=MetricSample(m.kv_cache_usage.value, old)
                                      if m.kv_cache_usage else None)
            else:
                out[victim] = replace(out[victim], waiting=MetricSample(math.nan, now))
            return out, False
        return out, bool(ready)

    # ---- the replicas

    def start(self, identity: str, phase: float) -> Replica:
        kube = KubeClient.from_environment(kubeconfig=str(self.kubeconfig), reporting_instance=identity,
                                           sleep=lambda s: None, request_timeout_seconds=5.0)
        elector = LeaderElector(kube, LeaseSettings(CONTROLLER_NS, identity=identity, lease_duration_seconds=LEASE,
                                                    renew_deadline_seconds=RENEW, retry_period_seconds=RETRY),
                                clock=self.clock, wall_clock=self.clock)
        prometheus = FakePrometheus()
        controller = Controller(watcher=ConfigWatcher(self.config), kube=kube, clock=self.clock, fence=elector,
                                prometheus_factory=lambda settings: prometheus, controller_namespace=CONTROLLER_NS)
        return Replica(identity, kube, elector, prometheus, controller, phase)

    # ---- the invariants, from the server's request log

    def check_writes(self) -> None:
        """Every write the server carried out since the last check came from the holder of
        the Lease, renewed less than a lease duration before."""
        for r in self.server.requests[self.checked:]:
            if r.method not in WRITES or not 200 <= r.status < 300 or "/leases" in r.path:
                continue
            lease = self.lease_at(r.at)
            assert lease is not None, ("a write with no Lease", r.method, r.path)
            holder, renewed = lease
            assert holder and holder in r.user_agent, ("a write by a non-leader", r.method, r.path, r.user_agent, holder)
            assert r.at - renewed < LEASE, ("a write on an expired lease", r.path, r.at - renewed)
            self.count(f"write {r.method}")
        self.checked = len(self.server.requests)

    def lease_at(self, t: float) -> tuple[str, float] | None:
        """(holder, renewTime) of the Lease as last written at or before t."""
        last = None
        for r in self.server.requests:
            if r.at > t:
                break
            if "/leases" in r.path and r.method in ("POST", "PUT") and 200 <= r.status < 300:
                spec = r.body["spec"]
                last = (spec["holderIdentity"], r.at)
        return last


def config_file(path: Path) -> Path:
    path.write_text(yaml.safe_dump({
        "controller": {"tick_seconds": TICK, "namespace": CONTROLLER_NS, "prometheus": {"url": "http://prometheus:9090"}},
        "defaults": {"min_replicas": MIN, "max_replicas": MAX, "scale_down_max_pods": STEP,
                     "scale_down_period_seconds": PERIOD, "scale_down_window_seconds": 60,
                     "scale_down_window_lead_times": 0, "model_load_seconds_default": LOAD_SECONDS},
        "targets": [{"namespace": NS, "deployment": NAME}],
    }))
    return path


@pytest.fixture
def world(request: pytest.FixtureRequest, kube_server: KubeApiServer, kubeconfig_path: Path,
          tmp_path: Path) -> Iterator[World]:
    clock = SimClock()
    kube_server.clock = clock
    kube_server.seed(node("gpu-node-1", gpus=64), deployment(NAME, NS, replicas=MIN, labels={"app": NAME}))
    w = World(kube_server, clock, config_file(tmp_path / "autoscaler.yaml"), kubeconfig_path,
              random.Random(request.param))
    for i in range(MIN):
        w.pods[f"{NAME}-init-{i}"] = (START - 3600, True)
        kube_server.put(w._pod(f"{NAME}-init-{i}", START - 3600, True))
    yield w


def run(w: World, replicas: list[Replica], partitioned: dict[str, float]) -> int:
    """The simulated minutes, one second at a time; returns the number of restarts."""
    rng, clock = w.rng, w.clock
    restarts = 0
    try:
        end = START + MINUTES * 60
        while clock.now < end:
            now = clock.now
            second = now - START
            # ---- faults, at most one new one a minute on average
            if rng.random() < 1 / 60:
                kind = rng.choice(["kill", "kill", "pause", "partition", "operator", "operator-mid-tick"])
                victim = rng.choice(replicas)
                w.count(kind)
                if kind == "kill":  # the process dies; a new one starts (new name or the same)
                    victim.close()
                    restarts += 1
                    identity = victim.identity if rng.random() < 0.5 else f"replica-{restarts}-{rng.randrange(10**6)}"
                    replicas[replicas.index(victim)] = w.start(identity, float(rng.randrange(int(TICK))))
                elif kind == "pause":  # stopped past its lease, then resumed with what it had
                    victim.paused_until = now + rng.uniform(LEASE + 1, 3 * LEASE)
                elif kind == "partition":  # reaches everything but the Lease
                    partitioned[victim.identity] = now + rng.uniform(LEASE, 4 * LEASE)
                    w.server.inject_fault(None, r"/leases", status=503, times=None,
                                          user_agent_regex=rf"\({victim.identity}\)")
                elif kind == "operator":  # an operator scales by hand (a concurrent writer)
                    w.operator_scales(rng.randint(MIN, MAX))
                else:  # the same, while a tick runs: between its read and its write
                    n = rng.randint(MIN, MAX)
                    w.server.inject_fault("GET", r"/api/v1/nodes$", status=None, before=lambda: w.operator_scales(n))
            for identity, until in list(partitioned.items()):
                if now >= until:
                    del partitioned[identity]
                    w.server.faults = [f for f in w.server.faults if f.user_agent_regex != rf"\({identity}\)"]

            # ---- elections every retry period, ticks every tick period
            for r in replicas:
                if now < r.paused_until:
                    continue
                if (second + r.phase) % RETRY == 0:
                    r.elector.step()
                if (second + r.phase) % TICK == 0:
                    answer, healthy = w.metrics()
                    w.count("healthy data" if healthy else "unhealthy data")
                    r.prometheus.script("fetch", answer)
                    before = w.spec()
                    w.operator_set = None
                    outcomes = r.controller.tick()
                    after = w.spec()
                    if w.operator_set is not None:  # an operator scaled while the tick ran
                        before = w.operator_set
                    [outcome] = outcomes
                    w.count(f"action {outcome.action}")
                    # -- the invariants of this tick
                    w.check_writes()
                    if outcome.action == "patched":
                        assert MIN <= after <= MAX, (after, outcome)
                    else:
                        assert after == before, ("a write the tick does not own up to", before, after, outcome)
                    if after < before:
                        assert healthy, ("a scale-down on unhealthy data", before, after, outcome)
                        w.scale_downs.append((now, before - after))
                        removed = sum(n for t, n in w.scale_downs if now - t < PERIOD)
                        assert removed <= STEP, ("more than one pod per period", w.scale_downs[-4:], r.identity)
            w.step_load(1.0)
            w.reconcile_pods()
            clock.now += 1.0
        for r in replicas:
            r.prometheus.verify()
    finally:
        for r in replicas:
            r.close()
    return restarts


@pytest.mark.parametrize("world", SEEDS, indirect=True, ids=[f"seed-{s}" for s in SEEDS])
def test_soak_two_replicas_through_failovers_and_restarts(world: World) -> None:
    w = world
    replicas = [w.start("replica-a", 0.0), w.start("replica-b", 7.0)]
    partitioned: dict[str, float] = {}  # identity -> partitioned from the Lease until
    with capture_logs() as logs:  # thousands of lines: kept, not printed
        restarts = run(w, replicas, partitioned)
    assert not [x for x in logs if x["event"] in ("target_crashed", "tick_failed", "leader_election_step_failed")]
    # the run exercised what it claims: failovers, restarts, scaling both ways
    takeovers = {r.body["spec"]["holderIdentity"] for r in w.server.requests
                 if "/leases" in r.path and r.method in ("POST", "PUT") and 200 <= r.status < 300}
    assert len(takeovers) >= 3, (takeovers, w.stats)
    assert restarts >= 1 and w.stats.get("action patched", 0) >= 10, w.stats
    assert len(w.scale_downs) >= 3, w.stats
    assert w.stats.get("action standby", 0) > 0 and w.stats.get("action hold", 0) > 0, w.stats
