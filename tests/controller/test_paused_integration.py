"""Teams own their targets, end to end: a real Prometheus scraping a vLLM-format exporter, the
Kubernetes-API test server spoken to by the official client, and the Controller in-process.
Nothing of ours is mocked."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
import yaml
from structlog.testing import capture_logs

from tests.kube_api_server import KubeApiServer, deployment
from tests.prometheus_server import PrometheusServer
from tests.test_loop import NAME, NS, Clock, busy_fleet, make_controller, seed_cluster, write_config  # noqa: F401

pytestmark = pytest.mark.integration

PAUSED = "vllm-queue-autoscaler.io/paused"


def writes(server: KubeApiServer) -> list[str]:
    return [f"{r.method} {r.path}" for r in server.requests if r.method not in ("GET", "HEAD")]


def test_a_paused_deployment_receives_no_write_within_one_tick(
    busy_fleet: PrometheusServer, kube_server: KubeApiServer, kubeconfig_path: Path, tmp_path: Path  # noqa: F811
) -> None:
    """The busy fleet scales 2 -> 4 unpaused (tests/test_loop.py). Annotated paused between two
    ticks, as `kubectl annotate` does, the next tick sends nothing at all; unpaused, it scales."""
    seed_cluster(kube_server)
    config = write_config(tmp_path / "autoscaler.yaml", busy_fleet.url)
    clock = Clock(time.time())
    controller = make_controller(config, kubeconfig_path, clock)
    try:
        kube_server.update("deployments", NS, NAME, {"metadata": {"annotations": {PAUSED: "true"}}})
        kube_server.clear_requests()
        with capture_logs() as logs:
            [outcome] = controller.tick()
        assert outcome.action == "paused"
        assert writes(kube_server) == []  # no scale patch, no Event, no state ConfigMap
        assert kube_server.requests_matching(method="GET", path_regex="/deployments$")  # it did read
        assert kube_server.get("deployments", NS, NAME)["spec"]["replicas"] == 2  # type: ignore[index]
        [line] = [entry for entry in logs if entry["event"] == "decision"]
        assert (line["action"], line["reason"]) == ("paused", "paused")

        kube_server.update("deployments", NS, NAME, {"metadata": {"annotations": {PAUSED: None}}})
        clock.now += 15
        [outcome] = controller.tick()
        assert outcome.action == "patched"
        assert kube_server.get("deployments", NS, NAME)["spec"]["replicas"] == 4  # type: ignore[index]
    finally:
        controller.close()
        controller.kube.close()


def test_a_selected_deployment_is_bounded_by_its_annotation_and_a_bad_one_is_an_event(
    busy_fleet: PrometheusServer, kube_server: KubeApiServer, kubeconfig_path: Path, tmp_path: Path  # noqa: F811
) -> None:
    """No `targets` entry: the label selector finds the Deployment through a cluster-wide list,
    its annotation bounds it at 3 (4 otherwise); a second selected Deployment with an invalid
    annotation keeps the ConfigMap's policy and gets a Warning Event."""
    seed_cluster(kube_server)
    kube_server.update("deployments", NS, NAME, {"metadata": {
        "labels": {"team": "a"}, "annotations": {"vllm-queue-autoscaler.io/max_replicas": "3"}}})
    kube_server.put(deployment("other", "team-a", replicas=1, labels={"app": "other"},
                               annotations={"vllm-queue-autoscaler.io/min_replicas": "-1"}))
    kube_server.update("deployments", "team-a", "other", {"metadata": {"labels": {"team": "a"}}})
    doc = yaml.safe_load(write_config(tmp_path / "autoscaler.yaml", busy_fleet.url).read_text())
    doc["targets"] = []
    doc["target_selector"] = {"match_labels": {"team": "a"}}
    config = tmp_path / "selector.yaml"
    config.write_text(yaml.safe_dump(doc))
    controller = make_controller(config, kubeconfig_path, Clock(time.time()))
    try:
        outcomes = {o.deployment: o for o in controller.tick()}
    finally:
        controller.close()
        controller.kube.close()
    assert kube_server.requests_matching(method="GET", path_regex=r"^/apis/apps/v1/deployments$")  # cluster-wide
    assert outcomes[NAME].action == "patched" and outcomes[NAME].sources == {
        "max_replicas": "annotation", "scale_down_window_seconds": "configmap-defaults"}
    assert kube_server.get("deployments", NS, NAME)["spec"]["replicas"] == 3  # type: ignore[index]
    [event] = [e for e in kube_server.list("events", "team-a") if e["reason"] == "InvalidAnnotations"]
    assert event["type"] == "Warning" and event["involvedObject"]["name"] == "other"
    assert "vllm-queue-autoscaler.io/min_replicas = -1, must be >= 1" in event["message"]
