"""Kubernetes-API faults, injected for real into the API test server the official client talks
to: 409 on the scale patch, 429 with Retry-After, 5xx, timeouts, the Deployment deleted
mid-tick, 403 (RBAC). For each: no scale-down caused by the fault, replicas within bounds, the
fault in the logs, the metrics and (where one can be recorded) a Warning Event, and the next
tick after it clears acts normally.

The fleet is idle on 4 replicas with no scale-down window: the healthy decision is 4 -> 3.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest
from structlog.testing import capture_logs

from tests.faults.harness import (
    NAME,
    NS,
    Harness,
    Stack,
    events,
    log_events,
    make_harness,
    operator_scales,
    replicas,
    seed_cluster,
    write_config,
)
from tests.kube_api_server import KubeApiServer, deployment

pytestmark = pytest.mark.integration

SCALE = rf"/namespaces/{NS}/deployments/{NAME}/scale$"


@pytest.fixture
def harness(stack: Stack, kube_server: KubeApiServer, kubeconfig_path: Path, tmp_path: Path) -> Iterator[Harness]:
    seed_cluster(kube_server, replicas=4)
    # a short scale-down step period, so that recovery after an ambiguous failure is seen
    config = write_config(tmp_path / "autoscaler.yaml", stack.proxy.url, scale_down_period_seconds=3)
    h = make_harness(config, kubeconfig_path, request_timeout=1.0)
    yield h
    h.close()


def assert_recovers(h: Harness, server: KubeApiServer, expect: int = 3) -> None:
    """The fault is gone: the next tick carries out the healthy decision."""
    server.clear_faults()
    with capture_logs() as logs:
        after = h.tick()
    assert after.decision is not None
    assert (after.action, after.decision.desired_replicas) == ("patched", expect), (after, logs)
    assert replicas(server) == expect
    assert "target_failed" not in log_events(logs) and "cluster_unreadable" not in log_events(logs)


def failed_line(logs: Sequence[Mapping[str, Any]]) -> Mapping[str, Any]:
    [line] = [x for x in logs if x["event"] == "target_failed"]
    assert line["log_level"] == "error" and line["namespace"] == NS and line["deployment"] == NAME
    return line


def test_409_on_the_patch_is_never_resent_and_the_next_tick_decides_again(
    harness: Harness, kube_server: KubeApiServer
) -> None:
    """Someone else wrote the Deployment between the tick's read and its patch: the write,
    conditional on what the decision read, gets 409. Nothing is re-read and re-sent; the next
    tick reads and decides again (HPA's way)."""
    kube_server.inject_conflict("deployments", NS, NAME, method="PATCH", path_regex=SCALE, times=1)
    with capture_logs() as logs:
        outcome = harness.tick()
    assert outcome.action == "conflict" and replicas(kube_server) == 4
    assert [p.status for p in kube_server.requests_matching("PATCH", SCALE)] == [409]
    [line] = [x for x in logs if x["event"] == "decision"]
    assert (line["log_level"], line["action"], line["desired"]) == ("warning", "conflict", 3)
    assert "the object has been modified" in line["error"]
    assert events(kube_server) == []  # no Warning: a concurrent writer is not a failure
    assert harness.errors("conflict") == 1 and harness.errors("kubernetes") == 0
    assert_recovers(harness, kube_server)


def test_a_concurrent_scale_mid_tick_is_never_overwritten(harness: Harness, kube_server: KubeApiServer) -> None:
    """The issue's case: the decision read 4 (idle fleet: 4 -> 3, one pod per period); an
    operator scales to 7 while the tick runs. Re-reading the scale and patching 3 would remove
    4 pods at once. The write carries what the decision read: 409, nothing written; the next
    tick decides from 7 and removes one pod."""
    kube_server.inject_fault("GET", r"/api/v1/nodes$", status=None,  # the tick's last read
                             before=lambda: operator_scales(kube_server, 7))
    outcome = harness.tick()
    assert outcome.decision is not None and outcome.decision.desired_replicas == 3  # decided on 4...
    assert outcome.action == "conflict" and replicas(kube_server) == 7  # ... never applied to 7
    after = harness.tick()
    assert after.decision is not None
    assert (after.action, after.decision.current_replicas, after.decision.desired_replicas) == ("patched", 7, 6)
    assert replicas(kube_server) == 6


def test_a_deployment_recreated_mid_tick_is_never_scaled_on_the_old_reading(
    harness: Harness, kube_server: KubeApiServer
) -> None:
    """Deleted and re-created (6 replicas, new UID) between the tick's read and its patch: the
    write is refused on the UID and resourceVersion it carries."""

    def recreate() -> None:
        kube_server.delete("deployments", NS, NAME)
        kube_server.put(deployment(NAME, NS, replicas=6, labels={"app": NAME}, uid="re-created"))

    kube_server.inject_fault("GET", r"/api/v1/nodes$", status=None, before=recreate)
    outcome = harness.tick()
    assert outcome.action == "conflict" and replicas(kube_server) == 6
    [patch] = kube_server.requests_matching("PATCH", SCALE)
    assert patch.status == 409 and patch.body["metadata"]["uid"] != "re-created"
    after = harness.tick()
    assert after.action == "patched" and replicas(kube_server) == 5
    assert kube_server.requests_matching("PATCH", SCALE)[-1].body["metadata"]["uid"] == "re-created"


def test_429_waits_the_retry_after_then_succeeds(harness: Harness, kube_server: KubeApiServer) -> None:
    kube_server.inject_fault("PATCH", SCALE, status=429, times=2, headers={"Retry-After": "2"})
    outcome = harness.tick()
    assert outcome.action == "patched" and replicas(kube_server) == 3
    assert harness.sleeps == [2.0, 2.0]  # the server's Retry-After, not our backoff
    assert [p.status for p in kube_server.requests_matching("PATCH", SCALE)] == [429, 429, 200]


def test_429_that_persists_fails_the_target_for_this_tick(harness: Harness, kube_server: KubeApiServer) -> None:
    kube_server.inject_fault("PATCH", SCALE, status=429, times=None, headers={"Retry-After": "3"})
    with capture_logs() as logs:
        outcome = harness.tick()
    assert outcome.action == "error" and replicas(kube_server) == 4
    assert harness.sleeps == [3.0, 3.0, 3.0]  # 4 attempts in all
    assert failed_line(logs)["error_type"] == "KubeThrottled"
    assert harness.errors("kubernetes") == 1
    assert len(events(kube_server, "FailedRescale")) == 1
    assert_recovers(harness, kube_server)


def test_5xx_on_the_cluster_list_decides_nothing(harness: Harness, kube_server: KubeApiServer) -> None:
    kube_server.inject_fault("GET", r"/api/v1/pods$", status=500, times=None)
    with capture_logs() as logs:
        outcome = harness.tick()
    assert (outcome.action, outcome.decision) == ("error", None)
    assert harness.sleeps == [0.5, 1.0, 2.0]  # backoff between the 4 attempts
    [line] = [x for x in logs if x["event"] == "cluster_unreadable"]
    assert line["error_type"] == "KubeServerError" and "list pods" in str(line["error"])
    assert "decision" not in log_events(logs)
    assert harness.errors("kubernetes") == 1
    assert kube_server.requests_matching("PATCH") == [] and replicas(kube_server) == 4
    assert_recovers(harness, kube_server)


def test_5xx_on_the_patch_fails_the_target_and_records_a_warning(harness: Harness, kube_server: KubeApiServer) -> None:
    kube_server.inject_fault("PATCH", SCALE, status=503, times=None)
    with capture_logs() as logs:
        outcome = harness.tick()
    assert outcome.action == "error" and replicas(kube_server) == 4
    assert failed_line(logs)["error_type"] == "KubeServerError"
    [warning] = events(kube_server, "FailedRescale")
    assert "server error 503" in warning["message"]
    # a 5xx may come after the write was applied: the scale-down counts for the step period
    # (3 s here), so the next tick inside it holds rather than risk a second step
    kube_server.clear_faults()
    held = harness.tick()
    assert held.decision is not None and held.decision.desired_replicas == 4
    assert held.decision.reason.value == "hold_scale_down_rate" and replicas(kube_server) == 4
    time.sleep(3.1)
    assert_recovers(harness, kube_server)
    assert len(events(kube_server, "FailedRescale")) == 1  # once, not every tick


def test_a_failing_patch_records_its_warning_once(harness: Harness, kube_server: KubeApiServer) -> None:
    kube_server.inject_fault("PATCH", SCALE, status=403, times=None)
    for _ in range(3):
        assert harness.tick().action == "error"
    assert len(events(kube_server, "FailedRescale")) == 1 and harness.errors("kubernetes") == 3


def test_timeout_on_the_patch_that_lands_late_never_gives_two_scale_downs(
    stack: Stack, kube_server: KubeApiServer, kubeconfig_path: Path, tmp_path: Path
) -> None:
    """Every attempt times out on the client side (1 s), but the server applies the first one
    after 2 s: the patch happened although the controller saw a failure. The next tick must
    not scale down again inside the step period (120 s)."""
    seed_cluster(kube_server, replicas=4)
    config = write_config(tmp_path / "autoscaler.yaml", stack.proxy.url)  # step period 120 s
    h = make_harness(config, kubeconfig_path, request_timeout=1.0)
    try:
        kube_server.inject_fault("PATCH", SCALE, status=None, delay_seconds=2.0, times=None)
        with capture_logs() as logs:
            outcome = h.tick()
        assert outcome.action == "error"
        assert failed_line(logs)["error_type"] == "KubeTimeout"
        assert h.errors("kubernetes") == 1
        deadline = time.monotonic() + 10
        while replicas(kube_server) != 3 and time.monotonic() < deadline:
            time.sleep(0.1)
        assert replicas(kube_server) == 3  # the late patch landed (the later ones got 409)
        time.sleep(2.5)
        kube_server.clear_faults()
        with capture_logs() as logs:
            after = h.tick()
        assert after.decision is not None
        assert after.decision.desired_replicas == 3, after.decision  # not 2: one step per period
        assert after.decision.reason.value == "hold_scale_down_rate"
        assert replicas(kube_server) == 3
    finally:
        h.close()


def test_timeout_on_the_cluster_list(harness: Harness, kube_server: KubeApiServer) -> None:
    kube_server.inject_fault("GET", r"/deployments$", status=None, delay_seconds=1.5, times=None)
    with capture_logs() as logs:
        outcome = harness.tick()
    assert (outcome.action, outcome.decision) == ("error", None)
    [line] = [x for x in logs if x["event"] == "cluster_unreadable"]
    assert line["error_type"] == "KubeTimeout" and "list deployments" in str(line["error"])
    assert harness.errors("kubernetes") == 1 and replicas(kube_server) == 4
    time.sleep(1.5)  # let the server's delayed handlers finish
    assert_recovers(harness, kube_server)


def test_deployment_deleted_mid_tick(harness: Harness, kube_server: KubeApiServer) -> None:
    """Listed at the start of the tick, gone when the patch arrives."""
    kube_server.inject_fault("PATCH", SCALE, status=None,
                             before=lambda: kube_server.delete("deployments", NS, NAME))
    with capture_logs() as logs:
        outcome = harness.tick()
    assert outcome.action == "error"
    line = failed_line(logs)
    assert line["error_type"] == "KubeNotFound" and "not found" in str(line["error"])
    assert kube_server.get("deployments", NS, NAME) is None  # nothing re-created it
    assert [r.status for r in kube_server.requests_matching("PATCH", SCALE)] == [404]
    assert events(kube_server) == []  # no Event about an object that is gone
    # the next tick: still gone, said plainly, no crash
    with capture_logs() as logs:
        gone = harness.tick()
    assert gone.action == "error" and f"Deployment {NS}/{NAME} not found" in str(failed_line(logs)["error"])
    assert harness.metric("vllm_autoscaler_errors_total", namespace=NS, deployment=NAME, kind="target") == 1
    # re-created: acted on again
    kube_server.put(deployment(NAME, NS, replicas=4, labels={"app": NAME}))
    assert_recovers(harness, kube_server)


def test_403_on_the_patch_names_verb_and_resource_and_records_a_warning(
    harness: Harness, kube_server: KubeApiServer
) -> None:
    kube_server.inject_fault("PATCH", SCALE, status=403, times=None)
    with capture_logs() as logs:
        outcome = harness.tick()
    assert outcome.action == "error" and replicas(kube_server) == 4
    line = failed_line(logs)
    assert line["error_type"] == "KubeForbidden"
    assert "patch deployments/scale in namespace llm" in str(line["error"])
    assert 'cannot patch resource "deployments/scale" in API group "apps"' in str(line["error"])
    assert len(kube_server.requests_matching("PATCH", SCALE)) == 1  # never retried
    assert harness.errors("kubernetes") == 1
    [warning] = events(kube_server, "FailedRescale")
    assert warning["type"] == "Warning" and "cannot patch" in warning["message"]
    assert_recovers(harness, kube_server)


def test_403_on_the_patch_and_on_events(harness: Harness, kube_server: KubeApiServer) -> None:
    """RBAC misses both: the Warning cannot be recorded either; the log says so, naming it."""
    kube_server.inject_fault("PATCH", SCALE, status=403, times=None)
    kube_server.inject_fault("POST", r"/events$", status=403, times=None)
    with capture_logs() as logs:
        outcome = harness.tick()
    assert outcome.action == "error"
    assert "cannot patch" in str(failed_line(logs)["error"])
    [ev] = [x for x in logs if x["event"] == "event_failed"]
    assert "create events in namespace llm" in str(ev["error"]) and ev["reason"] == "FailedRescale"
    assert events(kube_server) == []
    assert_recovers(harness, kube_server)


def test_403_on_listing_pods_names_verb_and_resource(harness: Harness, kube_server: KubeApiServer) -> None:
    kube_server.inject_fault("GET", r"/api/v1/pods$", status=403, times=None)
    with capture_logs() as logs:
        outcome = harness.tick()
    assert (outcome.action, outcome.decision) == ("error", None)
    [line] = [x for x in logs if x["event"] == "cluster_unreadable"]
    assert line["error_type"] == "KubeForbidden"
    assert "list pods at cluster scope" in str(line["error"])
    assert 'cannot list resource "pods"' in str(line["error"])
    assert harness.sleeps == []  # 403 is never retried
    assert harness.errors("kubernetes") == 1
    assert_recovers(harness, kube_server)
