"""Leader election under faults that split a replica from the Lease but not from the rest:
a network partition that only cuts the Lease, a process paused (SIGSTOP) past its lease.
In both, the old leader must stop writing before the other replica can take over, and write
nothing afterwards. Writes are told apart by the client's User-Agent, which names the replica.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from autoscaler.adapters.kubernetes import KubeClient
from autoscaler.controller.leader import LeaderElector, LeaseSettings
from tests.faults.harness import NS, Stack, make_harness, replicas, seed_cluster, write_config
from tests.kube_api_server import KubeApiServer, RecordedRequest

pytestmark = pytest.mark.integration

CONTROLLER_NS = "autoscaler"
LEASE = "vllm-queue-autoscaler"
LEASE_PATH = r"/leases"


def successful_writes(server: KubeApiServer, replica: str, *, lease: bool = False) -> list[RecordedRequest]:
    """The writes of `replica` the server carried out: Lease writes, or everything else (the
    scale, Events, the state ConfigMap)."""
    return [r for r in server.requests_matching(user_agent_regex=rf"\({replica}\)")
            if r.method in ("POST", "PUT", "PATCH", "DELETE") and 200 <= r.status < 300
            and (re.search(LEASE_PATH, r.path) is not None) == lease]


def takeover_at(server: KubeApiServer, replica: str) -> float:
    """When `replica` first wrote the Lease as its holder (the server's clock)."""
    return min(r.at for r in successful_writes(server, replica, lease=True)
               if r.body["spec"]["holderIdentity"] == replica)


class SimClock:
    """One clock for the whole simulated world (both electors, both controllers, the server)."""

    def __init__(self, start: float) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now


def test_a_leader_partitioned_from_the_lease_stops_writing_before_anyone_can_take_over(
    stack: Stack, kube_server: KubeApiServer, kubeconfig_path: Path, tmp_path: Path
) -> None:
    """A reaches the Deployments, Events and ConfigMaps but every Lease request of A fails (a
    network policy, a partitioned API server path). A keeps ticking every 2 s with an idle
    fleet to scale down one pod per 5 s; B reaches everything. A's last write must come before B's
    first Lease write as holder, and A writes nothing past its renew deadline."""
    seed_cluster(kube_server, replicas=4)
    # the simulated clock runs up to 40 s ahead of Prometheus': a rate window that reaches back
    # to real samples, else every token rate is missing and the SLO data partial (a hold)
    config = write_config(tmp_path / "autoscaler.yaml", stack.proxy.url, scale_down_period_seconds=5,
                          stale_after_seconds=600, controller={"prometheus": {
                              "url": stack.proxy.url, "timeout_seconds": 1, "rate_window_seconds": 60}})
    clock = SimClock(time.time())
    kube_server.clock = clock
    settings = dict(namespace=CONTROLLER_NS, lease_duration_seconds=15, renew_deadline_seconds=10,
                    retry_period_seconds=2)
    lease_a = KubeClient.from_environment(kubeconfig=str(kubeconfig_path), reporting_instance="replica-a",
                                          sleep=lambda s: None)
    lease_b = KubeClient.from_environment(kubeconfig=str(kubeconfig_path), reporting_instance="replica-b",
                                          sleep=lambda s: None)
    elector_a = LeaderElector(lease_a, LeaseSettings(identity="replica-a", **settings), clock=clock, wall_clock=clock)
    elector_b = LeaderElector(lease_b, LeaseSettings(identity="replica-b", **settings), clock=clock, wall_clock=clock)
    a = make_harness(config, kubeconfig_path, clock=clock, reporting_instance="replica-a", fence=elector_a)
    b = make_harness(config, kubeconfig_path, clock=clock, reporting_instance="replica-b", fence=elector_b)
    try:
        assert elector_a.step() and not elector_b.step()
        start = last_renew_a = clock.now  # A's last renewal: every Lease request of A fails from now on
        kube_server.inject_fault(None, LEASE_PATH, status=503, times=None, user_agent_regex=r"\(replica-a\)")
        actions_a: list[tuple[float, str]] = []
        actions_b: list[tuple[float, Any]] = []
        while clock.now < start + 40:
            elector_a.step()
            elector_b.step()
            if round(clock.now - start) % 2 == 0:
                actions_a.append((clock.now - start, a.tick().action))
                if elector_b.is_leader():
                    actions_b.append((clock.now - start, b.tick()))
            clock.now += 1
        took_over = takeover_at(kube_server, "replica-b")
        writes_a = successful_writes(kube_server, "replica-a")
        assert writes_a, actions_a  # A did write while it led (the test shows something)
        assert max(w.at for w in writes_a) < took_over, (actions_a, took_over - start)
        # A stops at its renew deadline, B takes over one lease duration after it last saw A renew
        assert max(w.at for w in writes_a) < last_renew_a + 10
        assert took_over >= last_renew_a + 15
        assert all(action in ("standby", "hold") for t, action in actions_a if t >= 10), actions_a
        assert successful_writes(kube_server, "replica-b"), actions_b  # B acts once it leads
        assert replicas(kube_server) <= 2  # B scaled down too (how far in 40 s depends on the scrapes: a late one holds)
    finally:
        a.close()
        b.close()
        lease_a.close()
        lease_b.close()


# --------------------------------------------------------------------------- a paused process


def json_lines(text: str) -> list[dict[str, Any]]:
    return [json.loads(x) for x in text.splitlines() if x.startswith("{")]


@pytest.fixture
def controller_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "KUBERNETES_SERVICE_HOST"}
    env["POD_NAME"] = "replica-a"
    env["POD_NAMESPACE"] = CONTROLLER_NS
    return env


def wait_until(predicate: Any, timeout: float, proc: subprocess.Popen[str] | None = None) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        assert proc is None or proc.poll() is None, proc.communicate() if proc else None
        time.sleep(0.05)


@pytest.fixture
def renewing_b(kubeconfig_path: Path) -> Iterator[tuple[LeaderElector, threading.Event]]:
    """Replica B, in this process: an elector with the same timings as A's, stepping every
    retry period in its own thread once started."""
    kube_b = KubeClient.from_environment(kubeconfig=str(kubeconfig_path), reporting_instance="replica-b")
    elector = LeaderElector(kube_b, LeaseSettings(CONTROLLER_NS, identity="replica-b", lease_duration_seconds=3,
                                                  renew_deadline_seconds=2, retry_period_seconds=0.25))
    stop = threading.Event()
    yield elector, stop
    stop.set()
    kube_b.close()


def test_a_paused_leader_writes_nothing_after_it_resumes(
    stack: Stack, kube_server: KubeApiServer, kubeconfig_path: Path, tmp_path: Path,
    controller_env: dict[str, str], renewing_b: tuple[LeaderElector, threading.Event],
) -> None:
    """`autoscaler run --leader-elect` (A) leads and scales down. It is stopped (SIGSTOP) in the
    middle of a tick, while its pod list is on the wire; B takes the Lease over once it has
    seen it unchanged for the lease duration (3 s here); A is resumed (SIGCONT) and finishes
    its tick. A must write nothing at all from then on: no patch, no Event, no state, no
    Lease; B stays the leader."""
    seed_cluster(kube_server, replicas=4)
    # ticks every second, one pod removed per 4 s: after the pause A would still scale down
    config = write_config(tmp_path / "autoscaler.yaml", stack.proxy.url, controller={"tick_seconds": 1},
                          scale_down_period_seconds=4)
    proc = subprocess.Popen(
        [sys.executable, "-m", "autoscaler.cli", "run", "--config", str(config), "--kubeconfig", str(kubeconfig_path),
         "--leader-elect", "--lease-duration", "3", "--renew-deadline", "2", "--retry-period", "0.25",
         "--metrics-host", "127.0.0.1", "--metrics-port", "0"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=controller_env,
    )
    elector_b, stop_b = renewing_b
    try:
        # A leads and writes
        wait_until(lambda: successful_writes(kube_server, "replica-a"), 60, proc)
        assert not elector_b.step()
        elector_b.start(stop_b)

        # the next pod list of A is held 1 s by the server: A is stopped while it is on the wire
        kube_server.inject_fault("GET", r"/api/v1/pods$", status=None, delay_seconds=1.0,
                                 user_agent_regex=r"\(replica-a\)")
        kube_server.clear_requests()
        wait_until(lambda: kube_server.requests_matching("GET", r"/api/v1/pods$", r"\(replica-a\)"), 30, proc)
        proc.send_signal(signal.SIGSTOP)
        held = replicas(kube_server)
        assert held > 1  # A would still scale down when it resumes, were it allowed to
        wait_until(elector_b.is_leader, 30)  # >= 3 s after B last saw A renew
        # A is stopped from before this moment until SIGCONT, so nothing it sends can reach the server
        # in between; a renewal A sent just before the stop can still be logged after the stop (seen
        # once in CI): that is not a write after the pause. Any write of A once B leads counts.
        led_at = time.time()
        time.sleep(0.5)
        resumed_at = time.time()
        proc.send_signal(signal.SIGCONT)
        time.sleep(4)  # A finishes its tick and runs 3 more; its elector sees B renewing
        assert proc.poll() is None
        lease = kube_server.get("leases", CONTROLLER_NS, LEASE)
        assert lease is not None and lease["spec"]["holderIdentity"] == "replica-b"
        assert elector_b.is_leader()
        late = [(r.method, r.path, r.status) for r in successful_writes(kube_server, "replica-a")
                + successful_writes(kube_server, "replica-a", lease=True) if r.at >= led_at]
        assert late == []  # nothing written after the pause
        assert replicas(kube_server) == held
        assert any(r.at >= resumed_at for r in kube_server.requests_matching(user_agent_regex=r"\(replica-a\)"))
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGCONT)
            proc.send_signal(signal.SIGTERM)
        try:
            out, err = proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, err = proc.communicate()
    assert proc.returncode == 0, err
    lines = json_lines(out)
    assert any(x["event"] in ("fenced_out", "lost_lease") for x in lines)
    assert "standby" in [x.get("action") for x in lines if x["event"] == "decision"]
    assert "Traceback" not in err
