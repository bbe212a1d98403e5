"""Lifecycle faults: SIGTERM in the middle of a tick (no half-done patch), a pod flapping
between ready and unready, a Deployment in rollout, and the Lease lost in the middle of a tick.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from structlog.testing import capture_logs

from autoscaler.adapters.kubernetes import KubeClient
from autoscaler.controller.leader import LeaderElector, LeaseSettings
from tests.faults.harness import (
    NAME,
    NS,
    Stack,
    events,
    make_harness,
    replicas,
    seed_cluster,
    write_config,
)
from tests.kube_api_server import KubeApiServer, pod

pytestmark = pytest.mark.integration

SCALE = rf"/namespaces/{NS}/deployments/{NAME}/scale$"


class FakeMonotonic:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def json_lines(text: str) -> list[dict[str, Any]]:
    return [json.loads(x) for x in text.splitlines() if x.startswith("{")]


def sigterm_while_the_patch_is_in_flight(stack: Stack, kube_server: KubeApiServer, kubeconfig_path: Path,
                                         tmp_path: Path, patch_delay_s: float, *args: str) -> tuple[int, str, str]:
    """`autoscaler run` (with `args`) on 4 replicas that it scales to 3; the API server holds the
    scale PATCH `patch_delay_s`; SIGTERM once the PATCH has arrived and is not answered yet.
    (returncode, stdout, stderr)."""
    seed_cluster(kube_server, replicas=4)
    config = write_config(tmp_path / "autoscaler.yaml", stack.proxy.url)
    kube_server.inject_fault("PATCH", SCALE, status=None, delay_seconds=patch_delay_s, times=1)
    env = {k: v for k, v in os.environ.items() if k != "KUBERNETES_SERVICE_HOST"}
    env["POD_NAME"] = "replica-a"
    proc = subprocess.Popen(
        [sys.executable, "-m", "autoscaler.cli", "run", "--config", str(config), "--kubeconfig",
         str(kubeconfig_path), "--metrics-host", "127.0.0.1", "--metrics-port", "0", *args],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
    )
    try:
        deadline = time.monotonic() + 30
        while not kube_server.requests_matching("PATCH", SCALE) and time.monotonic() < deadline:
            assert proc.poll() is None, proc.communicate()
            time.sleep(0.05)
        [in_flight] = kube_server.requests_matching("PATCH", SCALE)
        assert in_flight.status == 0  # received, not answered yet: the signal lands mid-tick
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    return proc.returncode, out, err


def test_sigterm_mid_tick_finishes_the_patch_and_exits_0(
    stack: Stack, kube_server: KubeApiServer, kubeconfig_path: Path, tmp_path: Path
) -> None:
    """The scale PATCH is held 3 s by the API server; SIGTERM arrives while it is in flight.
    The tick finishes (the patch fully happens, its Event too), then the process exits 0."""
    returncode, out, err = sigterm_while_the_patch_is_in_flight(stack, kube_server, kubeconfig_path, tmp_path, 3.0)
    assert returncode == 0, err
    lines = json_lines(out)
    names = [x["event"] for x in lines]
    assert "stopping" in names
    [decision] = [x for x in lines if x["event"] == "decision"]
    assert (decision["action"], decision["current"], decision["desired"]) == ("patched", 4, 3)
    assert names.index("stopping") < names.index("decision")  # the signal came before the tick ended
    # all or nothing: exactly one patch, applied, and its Event recorded
    assert [r.status for r in kube_server.requests_matching("PATCH", SCALE)] == [200]
    assert replicas(kube_server) == 3
    assert [e["reason"] for e in events(kube_server)] == ["ScaledDown"]
    assert "tick_failed" not in names and "Traceback" not in err


def test_sigterm_mid_tick_with_leader_election_keeps_the_lease_until_the_tick_ends(
    stack: Stack, kube_server: KubeApiServer, kubeconfig_path: Path, tmp_path: Path
) -> None:
    """As above, leading by a Lease of 6 s (renew deadline 4 s), the PATCH held 4.5 s. The
    signal stopped the election thread at once while the tick went on: no renewal, so the
    tick's Event was fenced out, and at exit the Lease was not released (no longer leading),
    so the follower waited a whole lease. Now the election runs until the last tick ended,
    then stops, then the Lease is handed back (found by a review)."""
    returncode, out, err = sigterm_while_the_patch_is_in_flight(
        stack, kube_server, kubeconfig_path, tmp_path, 4.5,
        "--leader-elect", "--lease-duration", "6", "--renew-deadline", "4", "--retry-period", "1")
    assert returncode == 0, err
    assert replicas(kube_server) == 3
    assert [e["reason"] for e in events(kube_server)] == ["ScaledDown"]
    lease = kube_server.get("leases", "autoscaler", "vllm-queue-autoscaler")
    assert lease is not None and lease["spec"]["holderIdentity"] == ""  # handed back
    names = [x["event"] for x in json_lines(out)]
    assert "released" in names and "event_failed" not in names and "Traceback" not in err


def test_a_pod_flapping_ready_unready_never_scales_down(
    stack: Stack, kube_server: KubeApiServer, kubeconfig_path: Path, tmp_path: Path
) -> None:
    """qwen-3's readiness probe flaps. While unready it is a pod on its way (loading), not
    capacity and not demand; the replicas never drop, nothing is patched back and forth."""
    stack.reset(waiting=0, running=6, kv=0.7)  # 4 x 0.7 / 0.8 = 3.5 replicas: 4 needed
    seed_cluster(kube_server, replicas=4)
    # ticks 15 s apart on the controller's clock (a load trend needs real spacing), which runs
    # ahead of Prometheus': samples up to 2 minutes old still count as fresh here
    config = write_config(tmp_path / "autoscaler.yaml", stack.proxy.url, scale_down_window_seconds=600,
                          stale_after_seconds=600)
    now = time.time()
    clock = FakeMonotonic()
    clock.now = now
    h = make_harness(config, kubeconfig_path, clock=clock)
    try:
        seen = []
        for i, state in enumerate(["ready", "loading", "ready", "loading", "ready", "loading", "ready"]):
            clock.now = now + 15 * i
            kube_server.put(pod(f"{NAME}-3", NS, labels={"app": NAME}, state=state, created_at=now - 900,
                                scheduled_at=now - 898, started_at=now - 880,
                                ready_at=(now - 700) if i == 0 else clock.now - 1))
            with capture_logs() as logs:
                outcome = h.tick()
            assert outcome.decision is not None
            [line] = [x for x in logs if x["event"] == "decision"]
            seen.append((state, line["ready_replicas"], line["pods_in_flight"], outcome.decision.desired_replicas))
            assert outcome.decision.desired_replicas >= 4, seen  # never a scale-down
            labels = {"namespace": NS, "deployment": NAME}
            if state == "loading":  # visible: one pod less ready, one on its way
                assert (line["ready_replicas"], line["pods_in_flight_by_stage"]) == (3, {"loading": 1})
                assert h.metric("vllm_autoscaler_pods_in_flight", stage="loading", **labels) == 1
                assert h.metric("vllm_autoscaler_ready_replicas", **labels) == 3
            else:
                assert (line["ready_replicas"], line["pods_in_flight"]) == (4, 0)
                assert h.metric("vllm_autoscaler_pods_in_flight", stage="loading", **labels) == 0
        assert kube_server.requests_matching("PATCH") == [], seen
        assert replicas(kube_server) == 4
    finally:
        h.close()


def test_a_deployment_in_rollout_is_not_scaled_down(
    stack: Stack, kube_server: KubeApiServer, kubeconfig_path: Path, tmp_path: Path
) -> None:
    """maxSurge 0 / maxUnavailable 1: one pod of the new revision loads, 1 of 4 updated. The
    idle fleet would scale down; during the rollout it holds, and the new pod is not capacity."""
    seed_cluster(kube_server, replicas=4, generation=2, observed_generation=2, updated_replicas=1)
    now = time.time()
    kube_server.put(pod(f"{NAME}-3", NS, labels={"app": NAME}, state="loading", created_at=now - 30,
                        scheduled_at=now - 29, started_at=now - 20))
    config = write_config(tmp_path / "autoscaler.yaml", stack.proxy.url)
    h = make_harness(config, kubeconfig_path)
    try:
        with capture_logs() as logs:
            during = h.tick()
        assert during.decision is not None
        assert (during.action, during.decision.desired_replicas) == ("hold", 4)
        assert (during.decision.reason.value, during.decision.clamp.value if during.decision.clamp else None) == (
            "hold_rollout", "rollout")
        [line] = [x for x in logs if x["event"] == "decision"]
        assert line["rollout"] is True and line["pods_in_flight"] == 0  # the new revision's pod: not capacity
        assert h.metric("vllm_autoscaler_decision_reason", namespace=NS, deployment=NAME, reason="hold_rollout") == 1
        assert kube_server.requests_matching("PATCH") == []

        # the rollout completes: the next tick scales the idle fleet down
        kube_server.put(pod(f"{NAME}-3", NS, labels={"app": NAME}, state="ready", created_at=now - 30,
                            scheduled_at=now - 29, started_at=now - 20, ready_at=time.time()))
        kube_server.update("deployments", NS, NAME, {"status": {"updatedReplicas": 4}})
        after = h.tick()
        assert after.decision is not None and (after.action, after.decision.desired_replicas) == ("patched", 3)
        assert replicas(kube_server) == 3
    finally:
        h.close()


def test_lease_lost_mid_tick_writes_nothing_and_the_new_leader_acts(
    stack: Stack, kube_server: KubeApiServer, kubeconfig_path: Path, tmp_path: Path
) -> None:
    """Replica A leads when its tick starts. While A lists the cluster (a slow list), A's
    renewals stall past the renew deadline (10 s) and B takes the Lease over after seeing it
    unchanged for 15 s. A's tick goes on, decides, and is fenced before the patch: no write
    (no patch, no Event, no state). B's next tick acts."""
    seed_cluster(kube_server, replicas=4)
    config = write_config(tmp_path / "autoscaler.yaml", stack.proxy.url)
    clock_a, clock_b = FakeMonotonic(), FakeMonotonic()
    kube_b = KubeClient.from_environment(kubeconfig=str(kubeconfig_path), sleep=lambda s: None)
    a_kube_for_lease = KubeClient.from_environment(kubeconfig=str(kubeconfig_path), sleep=lambda s: None)
    elector_a = LeaderElector(a_kube_for_lease, LeaseSettings("autoscaler", identity="replica-a"), clock=clock_a)
    elector_b = LeaderElector(kube_b, LeaseSettings("autoscaler", identity="replica-b"), clock=clock_b)
    a = make_harness(config, kubeconfig_path, fence=elector_a)
    b = make_harness(config, kubeconfig_path, fence=elector_b)
    try:
        assert elector_a.step() and not elector_b.step()  # A leads, B observed the Lease at 1000

        def stall_and_take_over() -> None:
            clock_a.now += 11  # A has not renewed for 11 s: past its renew deadline
            clock_b.now += 16  # B has seen the Lease unchanged for 16 s: expired
            assert elector_b.step()

        kube_server.inject_fault("GET", r"/api/v1/pods$", status=None, before=stall_and_take_over)
        kube_server.clear_requests()
        with capture_logs() as logs:
            outcome = a.tick()
        lease = kube_server.get("leases", "autoscaler", "vllm-queue-autoscaler")
        assert lease is not None and lease["spec"]["holderIdentity"] == "replica-b"
        assert outcome.decision is not None and outcome.decision.desired_replicas == 3  # decided...
        assert outcome.action == "standby"  # ... but fenced: nothing written
        written = [r for r in kube_server.requests if r.method in ("PATCH", "POST", "PUT")]
        assert [(r.method, r.path) for r in written] == [
            ("PUT", "/apis/coordination.k8s.io/v1/namespaces/autoscaler/leases/vllm-queue-autoscaler")]  # B's takeover
        assert replicas(kube_server) == 4 and events(kube_server) == []
        [line] = [x for x in logs if x["event"] == "decision"]
        assert line["action"] == "standby"
        assert a.metric("vllm_autoscaler_leader") == 0
        with capture_logs() as logs:
            assert not elector_a.step()  # A learns it lost
        assert [x["event"] for x in logs] == ["lost_lease"] and logs[0]["holder"] == "replica-b"

        # the new leader acts on its next tick
        after = b.tick()
        assert after.action == "patched" and replicas(kube_server) == 3
        assert b.metric("vllm_autoscaler_leader") == 1
    finally:
        a.close()
        b.close()
        kube_b.close()
        a_kube_for_lease.close()


def test_lease_lost_between_two_tries_of_the_patch_sends_no_second_try(
    stack: Stack, kube_server: KubeApiServer, kubeconfig_path: Path, tmp_path: Path
) -> None:
    """A's patch gets a 503, and by then A's renewals have stalled past the renew deadline and
    B took over. The client would retry the 503: the fence is asked again before that try and
    says no, so a deposed leader sends nothing more (it used to retry up to 3 more times)."""
    seed_cluster(kube_server, replicas=4)
    config = write_config(tmp_path / "autoscaler.yaml", stack.proxy.url)
    clock_a, clock_b = FakeMonotonic(), FakeMonotonic()
    kube_a = KubeClient.from_environment(kubeconfig=str(kubeconfig_path), sleep=lambda s: None)
    kube_b = KubeClient.from_environment(kubeconfig=str(kubeconfig_path), sleep=lambda s: None)
    elector_a = LeaderElector(kube_a, LeaseSettings("autoscaler", identity="replica-a"), clock=clock_a)
    elector_b = LeaderElector(kube_b, LeaseSettings("autoscaler", identity="replica-b"), clock=clock_b)
    a = make_harness(config, kubeconfig_path, fence=elector_a)
    try:
        assert elector_a.step() and not elector_b.step()

        def stall_and_take_over() -> None:
            clock_a.now += 11
            clock_b.now += 16
            assert elector_b.step()

        kube_server.inject_fault("PATCH", SCALE, status=503, before=stall_and_take_over)
        with capture_logs() as logs:
            outcome = a.tick()
        assert not elector_a.is_leader()
        assert [r.status for r in kube_server.requests_matching("PATCH", SCALE)] == [503]  # no second try
        assert replicas(kube_server) == 4
        # the 503 may have come after the patch was applied: it counts as maybe written
        assert outcome.action == "error"
        [line] = [x for x in logs if x["event"] == "target_failed"]
        assert line["error_type"] == "KubeFenced" and "not sent" in line["error"]
        assert a.sleeps == []  # no backoff waited for a try that could not happen
        assert events(kube_server) == []  # nor a Warning from a replica that no longer leads
    finally:
        a.close()
        kube_a.close()
        kube_b.close()
