"""Graceful scale-down end to end: a real Prometheus scraping vLLM-format pods, the
Kubernetes API test server removing pods the way the ReplicaSet controller ranks them, the
official client, and the Controller in-process (nothing of ours mocked).

Also the test server's side of it through the official client: a pod patch is conditional on
the resourceVersion it carries (409 otherwise), and a scale-down removes the pods with the
lowest `controller.kubernetes.io/pod-deletion-cost` first.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client as k8s_client
from kubernetes.client.exceptions import ApiException
from structlog.testing import capture_logs

from autoscaler.adapters.kubernetes import KubeClient, KubeConflict
from autoscaler.config import ConfigWatcher
from autoscaler.controller.deletion_cost import DELETION_COST, MARKED_AT
from autoscaler.controller.loop import Controller
from tests.kube_api_server import KubeApiServer, deployment, node, pod
from tests.prometheus_server import PrometheusServer
from tests.vllm_exporter import VllmExporter

pytestmark = pytest.mark.integration

NS = "llm"
NAME = "qwen"
# running requests per pod; nothing waits: the fleet is over-provisioned and scales down
WORK = {"qwen-0": 6, "qwen-1": 0, "qwen-2": 3, "qwen-3": 2}


@pytest.fixture
def rs_server() -> Iterator[KubeApiServer]:
    with KubeApiServer(simulate_replicaset_controller=True) as server:
        yield server


def seed(server: KubeApiServer, replicas: int = 4) -> None:
    now = time.time()
    server.seed(node("gpu-node-1", gpus=8), deployment(NAME, NS, replicas=replicas, labels={"app": NAME}))
    for i in range(replicas):
        # qwen-0 is the newest: the ReplicaSet's own order (most recently ready first) would pick it
        server.put(pod(f"{NAME}-{i}", NS, labels={"app": NAME}, state="ready", created_at=now - 900 + 10 * (3 - i),
                       ready_at=now - 600 + 10 * (3 - i)))


def core(kubeconfig: Path) -> KubeClient:
    return KubeClient.from_environment(kubeconfig=str(kubeconfig), sleep=lambda s: None)


# ---- the test server, through the official client


def test_a_pod_patch_is_conditional_on_its_resource_version(rs_server: KubeApiServer, tmp_path: Path) -> None:
    seed(rs_server)
    kube = core(rs_server.write_kubeconfig(tmp_path / "kubeconfig"))
    try:
        listed = rs_server.get("pods", NS, "qwen-1")
        assert listed is not None
        rv = listed["metadata"]["resourceVersion"]
        kube.annotate_pod(NS, "qwen-1", {DELETION_COST: "-1"}, resource_version=rv)
        after = rs_server.get("pods", NS, "qwen-1")
        assert after is not None and after["metadata"]["annotations"][DELETION_COST] == "-1"
        with pytest.raises(KubeConflict):  # the pod changed since rv: refused, nothing written
            kube.annotate_pod(NS, "qwen-1", {DELETION_COST: "-9"}, resource_version=rv)
        assert rs_server.get("pods", NS, "qwen-1")["metadata"]["annotations"][DELETION_COST] == "-1"  # type: ignore[index]
        # one try, no retry after the 409
        assert len(rs_server.requests_matching(method="PATCH", path_regex="/pods/qwen-1$")) == 2
        kube.annotate_pod(NS, "qwen-1", {DELETION_COST: None}, resource_version=after["metadata"]["resourceVersion"])
        assert DELETION_COST not in (rs_server.get("pods", NS, "qwen-1")["metadata"].get("annotations") or {})  # type: ignore[index]
    finally:
        kube.close()


def test_scale_down_removes_the_lowest_deletion_cost_first(rs_server: KubeApiServer, tmp_path: Path) -> None:
    seed(rs_server)
    config = k8s_client.Configuration()
    config.host = rs_server.url
    with k8s_client.ApiClient(config) as api:
        core_api, apps = k8s_client.CoreV1Api(api), k8s_client.AppsV1Api(api)
        core_api.patch_namespaced_pod("qwen-2", NS, {"metadata": {"annotations": {DELETION_COST: "-3"}}})
        core_api.patch_namespaced_pod("qwen-3", NS, {"metadata": {"annotations": {DELETION_COST: "5"}}})
        apps.patch_namespaced_deployment_scale(NAME, NS, {"spec": {"replicas": 2}})
        left = sorted(p.metadata.name for p in core_api.list_namespaced_pod(NS).items)
    # qwen-2 (cost -3) first, then among cost 0 the most recently ready: qwen-0; qwen-3 (5) stays
    assert rs_server.removed_pods == [f"{NS}/qwen-2", f"{NS}/qwen-0"]
    assert left == ["qwen-1", "qwen-3"]


def test_without_costs_the_replicaset_removes_the_most_recently_ready(rs_server: KubeApiServer) -> None:
    seed(rs_server)
    rs_server.put(pod("qwen-loading", NS, labels={"app": NAME}, state="loading"))
    config = k8s_client.Configuration()
    config.host = rs_server.url
    with k8s_client.ApiClient(config) as api:
        with pytest.raises(ApiException) as err:  # the scale write is still conditional when asked
            k8s_client.AppsV1Api(api).patch_namespaced_deployment_scale(
                NAME, NS, {"metadata": {"resourceVersion": "1"}, "spec": {"replicas": 1}})
        assert err.value.status == 409 and rs_server.removed_pods == []
        k8s_client.AppsV1Api(api).patch_namespaced_deployment_scale(NAME, NS, {"spec": {"replicas": 3}})
    # 5 pods, 3 kept: the loading pod first, then the most recently ready
    assert rs_server.removed_pods == [f"{NS}/qwen-loading", f"{NS}/qwen-0"]


# ---- the controller


def write_config(path: Path, prometheus_url: str) -> Path:
    doc = {
        "controller": {
            "tick_seconds": 15,
            "prometheus": {"url": prometheus_url, "timeout_seconds": 5, "rate_window_seconds": 4},
            "state_configmap": "vllm-queue-autoscaler-state",
            "namespace": "autoscaler",
        },
        "defaults": {"scale_down_window_seconds": 0, "scale_down_window_lead_times": 0, "min_replicas": 1,
                     "scale_down_max_pods": 2},
        "targets": [{"namespace": NS, "deployment": NAME, "max_replicas": 8}],
    }
    path.write_text(yaml.safe_dump(doc))
    return path


def scale_down_tick(exporter: VllmExporter, prometheus: PrometheusServer, server: KubeApiServer,
                    tmp_path: Path) -> Any:
    """4 ready pods running 6, 0, 3, 2 requests, scraped by Prometheus; one Controller tick."""
    seed(server)
    for name, running in WORK.items():
        exporter.set(NS, name, waiting=0, running=running, kv=0.05 + running / 100, completed=0.5, engines=1)
    prometheus.reload(exporter.targets())
    prometheus.wait_for_series(f'vllm:num_requests_running{{namespace="{NS}"}}', lambda r: len(r) == len(WORK),
                               timeout=30)
    # and every pod's throughput (a rate needs two scrapes): without it the tick holds
    prometheus.wait_for_series(f'sum by (pod) (rate(vllm:request_success_total{{namespace="{NS}"}}[4s]))',
                               lambda r: len(r) == len(WORK) and all(abs(float(x["value"][1]) - 0.5) < 0.1 for x in r),
                               timeout=30)
    kubeconfig = server.write_kubeconfig(tmp_path / "kubeconfig")
    config = write_config(tmp_path / "autoscaler.yaml", prometheus.url)
    kube = KubeClient.from_environment(kubeconfig=str(kubeconfig), sleep=lambda s: None)
    controller = Controller(watcher=ConfigWatcher(config), kube=kube, clock=time.time)
    try:
        [outcome] = controller.tick()
    finally:
        controller.close()
        kube.close()
    assert outcome.action == "patched" and outcome.decision is not None, outcome
    # 4 -> 2: at most 2 pods per period (scale_down_max_pods)
    assert outcome.decision.desired_replicas == 2, outcome.decision
    return outcome


def test_on_scale_down_the_pods_with_the_least_work_are_the_ones_removed(
    vllm_exporter: VllmExporter, prometheus_server: PrometheusServer, rs_server: KubeApiServer, tmp_path: Path
) -> None:
    scale_down_tick(vllm_exporter, prometheus_server, rs_server, tmp_path)
    # the two with the least work go (qwen-1: 0, qwen-3: 2), not the two most recently ready
    # (qwen-0 with 6 running, qwen-1) the ReplicaSet would have picked on its own
    assert sorted(rs_server.removed_pods) == [f"{NS}/qwen-1", f"{NS}/qwen-3"]
    patches = rs_server.requests_matching(method="PATCH", path_regex="/pods/")
    assert sorted(r.path.rsplit("/", 1)[1] for r in patches) == ["qwen-1", "qwen-3"]
    for r in patches:  # each conditional on the pod as listed, and marked with the time
        assert r.body["metadata"]["resourceVersion"] and MARKED_AT in r.body["metadata"]["annotations"]
    # the marks went out before the scale write
    scale = rs_server.requests_matching(method="PATCH", path_regex="/scale$")
    assert len(scale) == 1 and max(r.at for r in patches) <= scale[0].at


def test_without_rbac_on_pods_the_scale_down_goes_ahead_in_the_replicasets_order(
    vllm_exporter: VllmExporter, prometheus_server: PrometheusServer, rs_server: KubeApiServer, tmp_path: Path
) -> None:
    rs_server.inject_fault(method="PATCH", path_regex="/pods/", status=403, times=None,
                           message='pods "x" is forbidden: User "system:serviceaccount:vllm-queue-autoscaler:'
                                   'vllm-queue-autoscaler" cannot patch resource "pods"')
    with capture_logs() as logs:
        scale_down_tick(vllm_exporter, prometheus_server, rs_server, tmp_path)
    # each pod tried once, refused; the scale went ahead; the ReplicaSet picked the most recently ready
    assert len(rs_server.requests_matching(method="PATCH", path_regex="/pods/")) == 2
    assert sorted(rs_server.removed_pods) == [f"{NS}/qwen-0", f"{NS}/qwen-1"]
    [line] = [x for x in logs if x["event"] == "deletion_cost"]
    assert line["log_level"] == "warning" and sorted(line["failed"]) == ["qwen-1", "qwen-3"]
    assert all("cannot patch" in e for e in line["failed"].values())
