"""autoscaler.adapters.kubernetes.objects (value types and rules, as tables) and autoscaler.adapters.kubernetes (the adapter,
against the in-process API test server, through the official client)."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
import structlog.testing

from autoscaler.adapters.kubernetes import (
    KubeClient,
    KubeConflict,
    KubeError,
    KubeExpired,
    KubeFenced,
    KubeForbidden,
    KubeInvalid,
    KubeNotFound,
    KubeServerError,
    KubeThrottled,
    KubeTimeout,
    KubeUnavailable,
    StoredState,
)
from autoscaler.adapters.kubernetes.objects import (
    ClusterSnapshot,
    DeploymentInfo,
    HPAInfo,
    LabelSelector,
    NodeInfo,
    PodInfo,
    Taint,
    Toleration,
    parse_quantity,
    parse_time,
    rollout_in_progress,
)
from autoscaler.policy.types import PodStage, PodStartup
from autoscaler.adapters.kubernetes import client as client_module
from tests.conftest_kube import kube_client, kube_server, kube_sleeps, kubeconfig_path  # noqa: F401
from tests.controller.fakes import ScriptedFence
from tests.kube_api_server import KubeApiServer, deployment, hpa, node, pod

T0 = 1_700_000_000.0
GPU_TAINT = {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}
GPU_TOLERATION = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}

# =========================================================================== cluster.py


@pytest.mark.parametrize(
    ("selector", "labels", "expected"),
    [
        (LabelSelector(), {"a": "b"}, True),  # empty selects everything (k8s semantics)
        (LabelSelector({"app": "vllm"}), {"app": "vllm", "x": "y"}, True),
        (LabelSelector({"app": "vllm"}), {"app": "other"}, False),
        (LabelSelector({}, (("tier", "In", ("a", "b")),)), {"tier": "a"}, True),
        (LabelSelector({}, (("tier", "In", ("a", "b")),)), {}, False),
        (LabelSelector({}, (("tier", "NotIn", ("a",)),)), {}, True),
        (LabelSelector({}, (("tier", "NotIn", ("a",)),)), {"tier": "a"}, False),
        (LabelSelector({}, (("gpu", "Exists", ()),)), {"gpu": ""}, True),
        (LabelSelector({}, (("gpu", "DoesNotExist", ()),)), {"gpu": ""}, False),
        (LabelSelector({}, (("mem", "Gt", ("40",)),)), {"mem": "80"}, True),
        (LabelSelector({}, (("mem", "Lt", ("40",)),)), {"mem": "80"}, False),
        (LabelSelector({}, (("mem", "Gt", ("40",)),)), {"mem": "lots"}, False),
        (LabelSelector({}, (("x", "Bogus", ()),)), {"x": "1"}, False),
        (LabelSelector({"app": "vllm"}, (("tier", "In", ("gpu",)),)), {"app": "vllm", "tier": "gpu"}, True),
    ],
)
def test_label_selector(selector: LabelSelector, labels: dict[str, str], expected: bool) -> None:
    assert selector.matches(labels) is expected


def test_label_selector_parse_and_string() -> None:
    selector = LabelSelector.from_object({"matchLabels": {"b": "2", "a": "1"},
                                          "matchExpressions": [{"key": "t", "operator": "In", "values": ["y", "x"]},
                                                               {"key": "g", "operator": "DoesNotExist"}]})
    assert selector == LabelSelector({"a": "1", "b": "2"}, (("t", "In", ("y", "x")), ("g", "DoesNotExist", ())))
    assert selector.to_string() == "a=1,b=2,t in (x,y),!g"


@pytest.mark.parametrize(
    ("text", "expected"),
    [("2024-01-01T00:00:00Z", 1704067200.0), ("2024-01-01T00:00:00.5Z", 1704067200.5),
     ("2024-01-01T01:00:00+01:00", 1704067200.0), ("", None), (None, None), ("yesterday", None)],
)
def test_parse_time(text: str | None, expected: float | None) -> None:
    assert parse_time(text) == expected


@pytest.mark.parametrize(("value", "expected"), [("2", 2.0), (4, 4.0), ("500m", 0.5), ("1Ki", 1024.0), ("x", 0.0)])
def test_parse_quantity(value: Any, expected: float) -> None:
    assert parse_quantity(value) == expected


@pytest.mark.parametrize(
    ("spec", "status", "generation", "expected", "why"),
    [
        (3, dict(observedGeneration=1, replicas=3, updatedReplicas=3, availableReplicas=3), 1, False, "settled"),
        (3, dict(observedGeneration=1, replicas=3, updatedReplicas=3, availableReplicas=1), 1, False,
         "plain scale-up: new pods updated but not yet available"),
        (3, dict(observedGeneration=1, replicas=3, updatedReplicas=3), 2, True, "spec change not observed"),
        (3, dict(observedGeneration=2, replicas=3, updatedReplicas=1), 2, True, "new template on 1 of 3"),
        (3, dict(observedGeneration=2, replicas=4, updatedReplicas=3), 2, True, "old pods still there"),
        (0, dict(observedGeneration=2), 2, False, "scaled to zero"),
    ],
)
def test_rollout_rule(spec: int, status: dict[str, int], generation: int, expected: bool, why: str) -> None:
    obj = {"metadata": {"generation": generation}, "spec": {"replicas": spec}, "status": status}
    assert rollout_in_progress(obj) is expected, why


def test_deployment_info_from_object() -> None:
    obj = deployment("vllm", "llm", replicas=3, gpus_per_pod=2, node_selector={"pool": "h100"},
                     tolerations=[GPU_TOLERATION], annotations={"autoscaler/enabled": "true"}, uid="u1")
    pod_spec = obj["spec"]["template"]["spec"]
    pod_spec["containers"].append({"name": "sidecar", "resources": {"requests": {"nvidia.com/gpu": 1}}})
    pod_spec["initContainers"] = [{"name": "download", "resources": {}}]
    pod_spec["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": "gpu.mem", "operator": "Gt", "values": ["40"]}]}]}}}
    info = DeploymentInfo.from_object(obj)
    assert (info.namespace, info.name, info.uid, info.spec_replicas) == ("llm", "vllm", "u1", 3)
    assert info.gpus_per_pod == 3  # 2 (limit) + 1 (request only)
    assert info.selector == LabelSelector({"app": "vllm"})
    assert info.node_selector == {"pool": "h100"}
    assert info.tolerations == (Toleration("nvidia.com/gpu", "Exists", "", "NoSchedule"),)
    assert info.annotations == {"autoscaler/enabled": "true"} and not info.rollout_in_progress
    assert info.node_affinity == (LabelSelector({}, (("gpu.mem", "Gt", ("40",)),)),)


@pytest.mark.parametrize(
    ("state", "kwargs", "stage"),
    [
        ("unschedulable", {}, PodStage.UNSCHEDULABLE),
        ("pending", {}, PodStage.UNSCHEDULABLE),  # not placed yet: still waiting for a node
        ("scheduled", {}, PodStage.SCHEDULED),
        ("loading", {}, PodStage.LOADING),
        ("ready", {}, None),
        ("loading", {"terminating": True}, None),
        ("loading", {"phase": "Failed"}, None),
    ],
)
def test_pod_stage(state: str, kwargs: dict[str, Any], stage: PodStage | None) -> None:
    info = PodInfo.from_object(pod("p", state=state, **kwargs))
    assert info.stage() == stage


def test_pod_startup_timestamps() -> None:
    ready = PodInfo.from_object(pod("p", state="ready", created_at=T0, scheduled_at=T0 + 5, ready_at=T0 + 95, gpus=2))
    assert ready.startup() == PodStartup(created_at=T0, scheduled_at=T0 + 5, ready_at=T0 + 95)
    assert ready.ready and ready.containers_running and ready.gpu_request == 2 and ready.node_name == "gpu-node-1"
    loading = PodInfo.from_object(pod("p", state="loading", created_at=T0, scheduled_at=T0 + 5))
    assert loading.startup() == PodStartup(created_at=T0, scheduled_at=T0 + 5, ready_at=None)
    waiting = PodInfo.from_object(pod("p", state="unschedulable", created_at=T0))
    assert waiting.unschedulable and waiting.node_name is None and waiting.startup() == PodStartup(created_at=T0)


def _node(name: str, gpus: int = 8, **kwargs: Any) -> NodeInfo:
    return NodeInfo.from_object(node(name, gpus=gpus, **kwargs))


def _gpu_pod(name: str, node_name: str, gpus: int, namespace: str = "llm", **kwargs: Any) -> PodInfo:
    return PodInfo.from_object(pod(name, namespace, labels={"app": "x"}, node_name=node_name, gpus=gpus, **kwargs))


@pytest.mark.parametrize(
    ("dep_kwargs", "nodes", "pods", "free"),
    [
        ({}, [_node("a"), _node("b", 4)], [], 12),
        ({}, [_node("a")], [_gpu_pod("p1", "a", 3), _gpu_pod("p2", "a", 2, namespace="other")], 3),
        ({}, [_node("a", 2)], [_gpu_pod("p1", "a", 3)], 0),  # overcommitted node: never negative
        ({}, [_node("a")], [_gpu_pod("p1", "a", 4, phase="Succeeded")], 8),  # finished pods hold nothing
        ({}, [_node("a")], [_gpu_pod("p1", "a", 4, terminating=True)], 4),  # terminating ones still do
        ({}, [_node("a", unschedulable=True), _node("b", ready=False), _node("c", 2)], [], 2),
        ({}, [_node("a", taints=[GPU_TAINT]), _node("b", 1)], [], 1),
        ({"tolerations": [GPU_TOLERATION]}, [_node("a", taints=[GPU_TAINT]), _node("b", 1)], [], 9),
        ({}, [_node("a", taints=[{**GPU_TAINT, "effect": "PreferNoSchedule"}])], [], 8),
        ({"tolerations": [GPU_TOLERATION]}, [_node("a", taints=[{**GPU_TAINT, "effect": "NoExecute"}])], [], 0),
        ({"node_selector": {"pool": "h100"}}, [_node("a", labels={"pool": "h100"}), _node("b", labels={"pool": "a10"})],
         [], 8),
    ],
)
def test_free_gpus(dep_kwargs: dict[str, Any], nodes: list[NodeInfo], pods: list[PodInfo], free: int) -> None:
    dep = DeploymentInfo.from_object(deployment("vllm", "llm", **dep_kwargs))
    snap = ClusterSnapshot(deployments=(dep,), pods=tuple(pods), nodes=tuple(nodes))
    assert snap.free_gpus_for(dep) == free


@pytest.mark.parametrize(
    ("toleration", "taint", "expected"),
    [
        (Toleration("k", "Equal", "v", "NoSchedule"), Taint("k", "v", "NoSchedule"), True),
        (Toleration("k", "Equal", "v", "NoSchedule"), Taint("k", "w", "NoSchedule"), False),
        (Toleration("k", "Exists", "", ""), Taint("k", "w", "NoExecute"), True),
        (Toleration("", "Exists", "", ""), Taint("any", "w", "NoSchedule"), True),
        (Toleration("k", "Exists", "", "NoExecute"), Taint("k", "", "NoSchedule"), False),
    ],
)
def test_tolerations(toleration: Toleration, taint: Taint, expected: bool) -> None:
    assert toleration.tolerates(taint) is expected


def test_pods_of_and_hpa_for() -> None:
    dep = DeploymentInfo.from_object(deployment("vllm", "llm"))
    pods = tuple(PodInfo.from_object(p) for p in (
        pod("vllm-1", "llm", labels={"app": "vllm"}), pod("vllm-2", "other", labels={"app": "vllm"}),
        pod("x-1", "llm", labels={"app": "x"})))
    hpas = (HPAInfo("llm", "h1", "Deployment", "x"), HPAInfo("llm", "h2", "Deployment", "vllm"),
            HPAInfo("other", "h3", "Deployment", "vllm"))
    snap = ClusterSnapshot(deployments=(dep,), pods=pods, hpas=hpas)
    assert [p.name for p in snap.pods_of(dep)] == ["vllm-1"]
    assert snap.hpa_for(dep) == hpas[1]
    assert snap.deployment("llm", "vllm") == dep and snap.deployment("llm", "nope") is None
    empty = DeploymentInfo("llm", "bad", "", 1, LabelSelector(), False, 0)
    assert snap.pods_of(empty) == ()  # an empty selector selects nothing here


# =========================================================================== kube.py


def seed_cluster(server: KubeApiServer) -> None:
    server.seed(
        deployment("vllm", "llm", replicas=4, gpus_per_pod=2, tolerations=[GPU_TOLERATION], uid="dep-uid"),
        deployment("rolling", "llm", replicas=2, generation=3, observed_generation=3, updated_replicas=1,
                   status_replicas=3),
        deployment("elsewhere", "unwatched"),
        pod("vllm-a-1", "llm", labels={"app": "vllm"}, state="ready", node_name="gpu-1", gpus=2, created_at=T0,
            scheduled_at=T0 + 3, ready_at=T0 + 200),
        pod("vllm-a-2", "llm", labels={"app": "vllm"}, state="loading", node_name="gpu-1", gpus=2, created_at=T0,
            scheduled_at=T0 + 4),
        pod("vllm-a-3", "llm", labels={"app": "vllm"}, state="scheduled", node_name="gpu-2", gpus=2, created_at=T0),
        pod("vllm-a-4", "llm", labels={"app": "vllm"}, state="unschedulable", gpus=2, created_at=T0),
        pod("train-1", "research", labels={"app": "train"}, state="ready", node_name="gpu-2", gpus=4),
        pod("web-1", "web", labels={"app": "web"}, state="ready", node_name="cpu-1", gpus=0),
        pod("job-1", "research", labels={"app": "job"}, state="ready", node_name="gpu-2", gpus=4, phase="Succeeded"),
        node("gpu-1", gpus=8, taints=[GPU_TAINT]), node("gpu-2", gpus=8, taints=[GPU_TAINT]),
        node("gpu-3", gpus=8, taints=[GPU_TAINT], unschedulable=True), node("cpu-1", gpus=0),
        hpa("rolling-hpa", "llm", target_name="rolling"),
    )


def test_snapshot_conversion(kube_server: KubeApiServer, kube_client: KubeClient) -> None:
    seed_cluster(kube_server)
    snap = kube_client.snapshot(["llm"])
    assert sorted(d.name for d in snap.deployments) == ["rolling", "vllm"]
    vllm, rolling = snap.deployment("llm", "vllm"), snap.deployment("llm", "rolling")
    assert vllm is not None and rolling is not None
    assert (vllm.uid, vllm.spec_replicas, vllm.gpus_per_pod, vllm.rollout_in_progress) == ("dep-uid", 4, 2, False)
    assert rolling.rollout_in_progress
    stages = {p.name: p.stage() for p in snap.pods_of(vllm)}
    assert stages == {"vllm-a-1": None, "vllm-a-2": PodStage.LOADING, "vllm-a-3": PodStage.SCHEDULED,
                      "vllm-a-4": PodStage.UNSCHEDULABLE}
    by_name = {p.name: p for p in snap.pods}
    assert by_name["vllm-a-1"].startup() == PodStartup(T0, T0 + 3, T0 + 200)
    assert by_name["vllm-a-2"].startup() == PodStartup(T0, T0 + 4, None)
    # GPU pods of other namespaces are kept for accounting; CPU-only and finished ones are not.
    assert set(by_name) == {"vllm-a-1", "vllm-a-2", "vllm-a-3", "vllm-a-4", "train-1"}
    # gpu-1: 8 - 4, gpu-2: 8 - 2 - 4, gpu-3 cordoned, cpu-1 has none
    assert snap.free_gpus_for(vllm) == 6
    assert snap.free_gpus_for(rolling) == 0  # no toleration for the GPU taint
    assert snap.hpa_for(rolling) == HPAInfo("llm", "rolling-hpa", "Deployment", "rolling")
    assert snap.hpa_for(vllm) is None
    assert {n.name for n in snap.nodes} == {"gpu-1", "gpu-2", "gpu-3", "cpu-1"}


def test_snapshot_makes_a_constant_number_of_list_calls(kube_server: KubeApiServer, kube_client: KubeClient) -> None:
    seed_cluster(kube_server)
    kube_client.snapshot(["llm", "research"])
    calls = sorted(r.path for r in kube_server.requests)
    assert calls == ["/api/v1/nodes", "/api/v1/pods",
                     "/apis/apps/v1/namespaces/llm/deployments", "/apis/apps/v1/namespaces/research/deployments",
                     "/apis/autoscaling/v2/namespaces/llm/horizontalpodautoscalers",
                     "/apis/autoscaling/v2/namespaces/research/horizontalpodautoscalers"]
    pods_call = next(r for r in kube_server.requests if r.path == "/api/v1/pods")
    assert pods_call.query["fieldSelector"] == "status.phase!=Succeeded,status.phase!=Failed"
    assert all(r.method == "GET" for r in kube_server.requests)

    kube_server.clear_requests()
    snap = kube_client.snapshot(["llm", "research", "a", "b", "unwatched"])  # many: cluster-wide lists
    assert sorted(r.path for r in kube_server.requests) == [
        "/api/v1/nodes", "/api/v1/pods", "/apis/apps/v1/deployments", "/apis/autoscaling/v2/horizontalpodautoscalers"]
    assert sorted(d.name for d in snap.deployments) == ["elsewhere", "rolling", "vllm"]


def _pod_pages(server: KubeApiServer) -> list[dict[str, str]]:
    return [r.query for r in server.requests if r.path == "/api/v1/pods"]


def test_lists_are_read_in_pages_of_one_snapshot(kube_server: KubeApiServer, kubeconfig_path: Path) -> None:
    seed_cluster(kube_server)  # 7 pods, 6 of them active
    late = pod("late-1", "llm", labels={"app": "vllm"}, state="ready", node_name="gpu-3", gpus=2)
    # a pod created while the list is read: after the first page, before the second
    kube_server.inject_fault("GET", r"^/api/v1/pods$", status=None, after=lambda: kube_server.put(late))
    with KubeClient.from_environment(kubeconfig=str(kubeconfig_path), list_page_size=2) as client:
        snap = client.snapshot(["llm"])
    pages = _pod_pages(kube_server)
    assert [q["limit"] for q in pages] == ["2", "2", "2"]  # 2 + 2 + 2 of the 6 active pods
    assert "continue" not in pages[0] and all(q["continue"] for q in pages[1:])
    assert all(q["fieldSelector"] == "status.phase!=Succeeded,status.phase!=Failed" for q in pages)
    # every page from the first page's snapshot: the pod created meanwhile is not half in it
    assert sorted(p.name for p in snap.pods) == ["train-1", "vllm-a-1", "vllm-a-2", "vllm-a-3", "vllm-a-4"]


def test_an_expired_list_is_read_again_whole(kube_server: KubeApiServer, kubeconfig_path: Path) -> None:
    seed_cluster(kube_server)
    late = pod("late-1", "llm", labels={"app": "vllm"}, state="ready", node_name="gpu-3", gpus=2)

    def compact() -> None:  # etcd compacts past the first page's snapshot while a pod is created
        kube_server.put(late)
        kube_server.expire_continue_tokens()

    kube_server.inject_fault("GET", r"^/api/v1/pods$", status=None, after=compact)
    with structlog.testing.capture_logs() as logs, \
            KubeClient.from_environment(kubeconfig=str(kubeconfig_path), list_page_size=2) as client:
        snap = client.snapshot(["llm"])
    pages = _pod_pages(kube_server)
    # page 1, the expired page 2 (410, not retried), then one whole list: never two snapshots mixed
    assert [("limit" in q, "continue" in q) for q in pages] == [(True, False), (True, True), (False, False)]
    assert [r.status for r in kube_server.requests if r.path == "/api/v1/pods"] == [200, 410, 200]
    assert "late-1" in {p.name for p in snap.pods} and len(snap.pods) == 6
    assert [e["items_read"] for e in logs if e["event"] == "kube_list_expired"] == [2]


def test_a_first_page_that_expires_is_an_error(kube_server: KubeApiServer, kube_client: KubeClient) -> None:
    seed_cluster(kube_server)
    kube_server.inject_fault("GET", r"^/api/v1/nodes$", status=410, reason="Expired")
    with pytest.raises(KubeExpired):  # no snapshot to fall back from: the tick fails, it does not guess
        kube_client.snapshot(["llm"])


@pytest.mark.parametrize("body", [b"[]", b'{"items": {}}', b'{"items": 5}', b'{"items": [], "metadata": [1]}'])
def test_an_answer_that_is_no_list_object_is_a_server_error(kube_server: KubeApiServer, kube_client: KubeClient,
                                                             body: bytes) -> None:
    seed_cluster(kube_server)
    kube_server.inject_fault("GET", r"^/api/v1/nodes$", status=200, body=body, times=None)
    with pytest.raises(KubeServerError, match="not a list object"):  # never a traceback, never a partial view
        kube_client.snapshot(["llm"])


@pytest.mark.parametrize("fresh_tokens", [False, True])
def test_a_list_that_never_ends_is_an_error(kube_server: KubeApiServer, kubeconfig_path: Path,
                                            fresh_tokens: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    seed_cluster(kube_server)
    monkeypatch.setattr(client_module, "MAX_LIST_PAGES", 5)
    tokens = iter(range(10**6))

    def page() -> bytes:  # the same token every time, or a new one with every (empty) page
        token = f"t{next(tokens)}" if fresh_tokens else "same"
        return json.dumps({"kind": "NodeList", "apiVersion": "v1", "items": [],
                           "metadata": {"resourceVersion": "1", "continue": token}}).encode()

    fault = kube_server.inject_fault("GET", r"^/api/v1/nodes$", status=200, body=page(), times=None,
                                     before=lambda: setattr(fault, "body", page()))
    with KubeClient.from_environment(kubeconfig=str(kubeconfig_path), list_page_size=2) as client, \
            pytest.raises(KubeServerError, match="continue token repeated or more than 5 pages"):
        client.snapshot(["llm"])
    assert len(kube_server.requests_matching("GET", r"^/api/v1/nodes$")) <= 6


def test_lists_are_one_call_each_by_default(kube_server: KubeApiServer, kube_client: KubeClient) -> None:
    seed_cluster(kube_server)
    kube_client.snapshot(["llm"])  # ConsistentListFromCache serves a whole list from the watch cache
    assert kube_server.requests and all("limit" not in r.query for r in kube_server.requests)


def test_a_gone_that_is_not_an_expired_snapshot_is_a_plain_error(kube_server: KubeApiServer,
                                                                 kubeconfig_path: Path) -> None:
    seed_cluster(kube_server)
    kube_server.inject_fault("GET", r"^/api/v1/pods$", status=None, after=kube_server.expire_continue_tokens)
    kube_server.inject_fault("GET", r"^/api/v1/pods$", status=410, reason="Gone", times=1)
    with KubeClient.from_environment(kubeconfig=str(kubeconfig_path), list_page_size=2) as client, \
            pytest.raises(KubeError) as raised:
        client.snapshot(["llm"])
    assert type(raised.value) is KubeError and raised.value.status == 410  # client-go reads only reason Expired


def read(client: KubeClient, namespace: str = "llm", name: str = "vllm") -> DeploymentInfo:
    """The Deployment as a tick reads it (from the list)."""
    info = client.snapshot([namespace]).deployment(namespace, name)
    assert info is not None
    return info


def scale_to(client: KubeClient, info: DeploymentInfo, replicas: int, **kwargs: Any) -> None:
    client.set_replicas(info.namespace, info.name, replicas, resource_version=info.resource_version, uid=info.uid,
                        **kwargs)


def stored_replicas(server: KubeApiServer, namespace: str = "llm", name: str = "vllm") -> int:
    dep = server.get("Deployment", namespace, name)
    assert dep is not None
    return int(dep["spec"]["replicas"])


def test_set_replicas_is_conditional_on_the_deployment_read(kube_server: KubeApiServer,
                                                            kube_client: KubeClient) -> None:
    kube_server.put(deployment("vllm", "llm", replicas=2, uid="uid-1"))
    info = read(kube_client)
    assert (info.spec_replicas, info.uid) == (2, "uid-1") and info.resource_version
    kube_server.clear_requests()
    scale_to(kube_client, info, 5)
    (patch,) = kube_server.requests  # one request: no read before the write
    assert (patch.method, patch.path) == ("PATCH", "/apis/apps/v1/namespaces/llm/deployments/vllm/scale")
    assert patch.content_type == "application/merge-patch+json"
    assert patch.body == {"metadata": {"resourceVersion": info.resource_version, "uid": "uid-1"},
                          "spec": {"replicas": 5}}
    assert patch.query["fieldManager"] == "vllm-queue-autoscaler"
    assert patch.user_agent == "vllm-queue-autoscaler/0.1.0 (test-instance)"
    assert stored_replicas(kube_server) == 5
    with pytest.raises(ValueError, match="no blind overwrite"):
        kube_client.set_replicas("llm", "vllm", 3, resource_version="", uid="uid-1")


def test_a_concurrent_write_is_a_conflict_never_retried(kube_server: KubeApiServer, kube_client: KubeClient,
                                                        kube_sleeps: list[float]) -> None:
    """Someone scales 4 -> 10 after the decision read 4: the write of 3 is refused (409), not
    re-read and re-sent (which would remove 7 pods at once)."""
    kube_server.put(deployment("vllm", "llm", replicas=4))
    info = read(kube_client)
    kube_server.update("Deployment", "llm", "vllm", {"spec": {"replicas": 10}})
    with pytest.raises(KubeConflict, match="the object has been modified") as exc:
        scale_to(kube_client, info, 3)
    assert exc.value.maybe_written is False
    assert [(r.method, r.status) for r in kube_server.requests_matching(path_regex="/scale$")] == [("PATCH", 409)]
    assert stored_replicas(kube_server) == 10 and kube_sleeps == []


def test_a_recreated_deployment_is_a_conflict(kube_server: KubeApiServer, kube_client: KubeClient) -> None:
    """Deleted and re-created with 12 replicas between the read and the write: refused on the
    UID (and the resourceVersion), never set to 3."""
    kube_server.put(deployment("vllm", "llm", replicas=4, uid="old-uid"))
    info = read(kube_client)
    kube_server.delete("Deployment", "llm", "vllm")
    kube_server.put(deployment("vllm", "llm", replicas=12, uid="new-uid"))
    stale = DeploymentInfo(**{**info.__dict__, "resource_version": kube_server.get(
        "Deployment", "llm", "vllm")["metadata"]["resourceVersion"]})  # type: ignore[index]
    with pytest.raises(KubeConflict, match="UID in precondition: old-uid"):  # even on a matching resourceVersion
        scale_to(kube_client, stale, 3)
    with pytest.raises(KubeConflict):
        scale_to(kube_client, info, 3)
    assert stored_replicas(kube_server) == 12


def test_a_write_that_may_have_landed_is_never_resent_blindly(kube_server: KubeApiServer, kube_client: KubeClient,
                                                              kube_sleeps: list[float]) -> None:
    """A 5xx answered after the write was applied: the retry carries the same precondition and
    gets 409; the error says the write may have happened."""
    kube_server.put(deployment("vllm", "llm", replicas=4))
    info = read(kube_client)
    # the first try is applied, then answered 503
    kube_server.inject_fault("PATCH", r"/scale$", status=503, times=1,
                             before=lambda: kube_server.update("Deployment", "llm", "vllm", {"spec": {"replicas": 3}}))
    with pytest.raises(KubeConflict) as exc:
        scale_to(kube_client, info, 3)
    assert exc.value.maybe_written is True
    assert [r.status for r in kube_server.requests_matching("PATCH")] == [503, 409]
    assert stored_replicas(kube_server) == 3 and kube_sleeps == [0.5]




def test_the_fence_is_asked_before_every_try(kube_server: KubeApiServer, kube_client: KubeClient,
                                             kube_sleeps: list[float]) -> None:
    """The first try gets a 503; by the second the Lease is lost: no second PATCH goes out."""
    kube_server.put(deployment("vllm", "llm", replicas=4))
    info = read(kube_client)
    kube_server.inject_fault("PATCH", r"/scale$", status=503, times=None)
    fence = ScriptedFence(8.0, 8.0, 0.0)  # the try, the stop check before the wait, the retry
    with pytest.raises(KubeFenced) as exc:
        scale_to(kube_client, info, 3, fence=fence)
    assert exc.value.maybe_written is True  # the 503 may have come after the write
    assert len(kube_server.requests_matching("PATCH")) == 1 and fence.asked == 3
    # no time left at all: nothing is sent
    kube_server.clear_requests()
    with pytest.raises(KubeFenced, match="not sent") as exc:
        scale_to(kube_client, info, 3, fence=ScriptedFence(0.0))
    assert exc.value.maybe_written is False and kube_server.requests == []
    # no waiting for a try the fence will not allow: 0.5 s of backoff with 0.55 s left
    kube_sleeps.clear()
    with pytest.raises(KubeFenced, match="not sent again after: server error 503") as exc:
        scale_to(kube_client, info, 3, fence=ScriptedFence(3.0, 0.55))
    assert exc.value.maybe_written is True
    assert kube_sleeps == [] and len(kube_server.requests_matching("PATCH")) == 1


def test_a_try_never_outlasts_the_fence(kube_server: KubeApiServer, kube_client: KubeClient) -> None:
    """The request timeout is 5 s; with 0.6 s left before another replica could take over, the
    try gives up after 0.6 s, and no retry is started."""
    kube_server.put(deployment("vllm", "llm", replicas=4))
    info = read(kube_client)
    kube_server.inject_fault("PATCH", r"/scale$", status=None, delay_seconds=3.0, times=1)
    started = time.monotonic()
    with pytest.raises(KubeFenced, match="not sent again after: timeout") as exc:
        scale_to(kube_client, info, 3, fence=ScriptedFence(0.6))
    assert time.monotonic() - started < 2.0
    assert exc.value.maybe_written is True
    assert len(kube_server.requests_matching("PATCH")) == 1


def test_throttling_honours_retry_after(kube_server: KubeApiServer, kube_client: KubeClient,
                                        kube_sleeps: list[float]) -> None:
    kube_server.put(deployment("vllm", "llm", replicas=2))
    info = read(kube_client)
    kube_server.inject_fault("PATCH", r"/scale$", status=429, times=1, headers={"Retry-After": "1"})
    kube_server.inject_fault("GET", r"/scale$", status=429, times=1, headers={"Retry-After": "120"})
    with structlog.testing.capture_logs() as logs:
        scale_to(kube_client, info, 3)
        assert kube_client.read_scale("llm", "vllm")[0] == 3
    assert kube_sleeps == [1.0, 10.0]  # as asked; then 120 s capped at max_retry_after_seconds
    # each retry is one JSON event naming the call, even though the call then succeeded
    retries = [(e["verb"], e["resource"], e["namespace"], e["name"], e["attempt"], e["wait_seconds"])
               for e in logs if e["event"] == "kube_retry"]
    assert retries == [("patch", "deployments/scale", "llm", "vllm", 1, 1.0),
                       ("get", "deployments/scale", "llm", "vllm", 1, 10.0)]


def test_server_errors_are_retried_with_backoff(kube_server: KubeApiServer, kube_client: KubeClient,
                                                kube_sleeps: list[float]) -> None:
    kube_server.put(deployment("vllm", "llm", replicas=2))
    kube_server.inject_fault("GET", r"/scale$", status=500, times=2)
    assert kube_client.read_scale("llm", "vllm")[0] == 2
    assert kube_sleeps == [0.5, 1.0]

    kube_sleeps.clear()
    kube_server.inject_fault("GET", r"/scale$", status=503, times=None)
    with pytest.raises(KubeServerError) as info:
        kube_client.read_scale("llm", "vllm")
    assert info.value.status == 503 and kube_sleeps == [0.5, 1.0, 2.0]  # 4 attempts in all
    assert len(kube_server.requests_matching("GET", r"/scale$")) == 3 + 4


@pytest.mark.parametrize(
    ("status", "error"),
    [(403, KubeForbidden), (404, KubeNotFound), (409, KubeConflict), (422, KubeInvalid), (400, KubeInvalid),
     (401, KubeError)],
)
def test_client_errors_are_not_retried(kube_server: KubeApiServer, kube_client: KubeClient,
                                       kube_sleeps: list[float], status: int, error: type[KubeError]) -> None:
    kube_server.put(deployment("vllm", "llm"))
    kube_server.inject_fault("GET", r"/scale$", status=status, times=None)
    with pytest.raises(error) as info:
        kube_client.read_scale("llm", "vllm")
    assert info.value.status == status and kube_sleeps == []
    assert len(kube_server.requests) == 1


def test_forbidden_names_verb_and_resource(kube_server: KubeApiServer, kube_client: KubeClient) -> None:
    kube_server.put(deployment("vllm", "llm"))
    dep = read(kube_client)
    kube_server.inject_fault("PATCH", r"/scale$", status=403)
    with pytest.raises(KubeForbidden) as info:
        scale_to(kube_client, dep, 2)
    assert str(info.value).startswith("forbidden: patch deployments/scale in namespace llm: ")
    assert 'cannot patch resource "deployments/scale"' in str(info.value)
    assert (info.value.verb, info.value.resource, info.value.namespace, info.value.name) == (
        "patch", "deployments/scale", "llm", "vllm")
    kube_server.inject_fault("GET", r"/api/v1/nodes$", status=403)
    with pytest.raises(KubeForbidden, match="forbidden: list nodes at cluster scope"):
        kube_client.snapshot(["llm"])


def test_missing_deployment_is_not_found(kube_client: KubeClient, kube_sleeps: list[float]) -> None:
    with pytest.raises(KubeNotFound, match='deployments.apps "ghost" not found'):
        kube_client.set_replicas("llm", "ghost", 1, resource_version="7", uid="u")
    assert kube_sleeps == []


def test_an_answer_that_is_not_json_is_a_server_error(kube_server: KubeApiServer, kube_client: KubeClient,
                                                      kube_sleeps: list[float]) -> None:
    """A proxy's HTML page with status 200: a KubeError like any bad answer (retried), never
    a ValueError escaping the adapter (it killed the leader-election thread)."""
    kube_server.inject_fault("GET", r"/leases/", status=200, times=None, body=b"<html>proxy</html>")
    with pytest.raises(KubeServerError, match="not JSON"):
        kube_client.read_lease("autoscaler", "vllm-queue-autoscaler")
    assert len(kube_server.requests) == 1  # lease calls are tried once: the elector retries


def test_timeouts_are_retried(kube_server: KubeApiServer, kubeconfig_path: Path) -> None:
    kube_server.put(deployment("vllm", "llm", replicas=2))
    sleeps: list[float] = []
    with KubeClient.from_environment(kubeconfig=str(kubeconfig_path), sleep=sleeps.append,
                                     request_timeout_seconds=0.5, retry_attempts=2) as client:
        kube_server.inject_fault("GET", r"/scale$", status=None, delay_seconds=5.0, times=1)
        assert client.read_scale("llm", "vllm")[0] == 2
        assert sleeps == [0.5]
        kube_server.inject_fault("GET", r"/scale$", status=None, delay_seconds=5.0, times=2)
        with pytest.raises(KubeTimeout):
            client.read_scale("llm", "vllm")


def test_unreachable_server_is_unavailable(tmp_path: Path) -> None:
    with KubeApiServer() as server:
        path = server.write_kubeconfig(tmp_path / "kubeconfig")
    sleeps: list[float] = []  # the server is stopped: its port refuses connections
    with KubeClient.from_environment(kubeconfig=str(path), sleep=sleeps.append, retry_attempts=3) as client:
        with pytest.raises(KubeUnavailable):
            client.read_scale("llm", "vllm")
    assert sleeps == [0.5, 1.0]


def test_emit_event(kube_server: KubeApiServer, kube_client: KubeClient) -> None:
    kube_server.put(deployment("vllm", "llm", uid="dep-uid"))
    info = kube_client.snapshot(["llm"]).deployment("llm", "vllm")
    assert info is not None
    kube_client.emit_event("llm", info, "ScaledUp", "2 -> 3 replicas: queue depth 40 > 10 per replica")
    kube_client.emit_event("llm", ("vllm", "dep-uid"), "MetricsUnhealthy", "holding", type_="Warning")
    events = sorted(kube_server.list("Event", "llm"), key=lambda e: e["reason"])
    assert [(e["reason"], e["type"]) for e in events] == [("MetricsUnhealthy", "Warning"), ("ScaledUp", "Normal")]
    event = events[1]
    assert event["involvedObject"] == {"apiVersion": "apps/v1", "kind": "Deployment", "name": "vllm",
                                       "namespace": "llm", "uid": "dep-uid"}
    assert event["source"] == {"component": "vllm-queue-autoscaler"}
    assert event["reportingComponent"] == "vllm-queue-autoscaler"
    assert event["reportingInstance"] == "test-instance"
    assert event["count"] == 1 and event["firstTimestamp"] == event["lastTimestamp"]
    assert parse_time(event["firstTimestamp"]) is not None
    assert event["metadata"]["name"].startswith("vllm.")


def test_emit_event_timestamps_come_from_the_clock(kube_server: KubeApiServer, kubeconfig_path: Path) -> None:
    with KubeClient.from_environment(kubeconfig=str(kubeconfig_path), clock=lambda: T0) as client:
        created = client.emit_event("llm", ("vllm", "u"), "ScaledDown", "3 -> 2")
        second = client.emit_event("llm", ("vllm", "u"), "ScaledDown", "2 -> 1")  # same instant: no collision
    assert created["metadata"]["name"].startswith("vllm.") and second["metadata"]["name"] != created["metadata"]["name"]
    assert len(kube_server.list("Event", "llm")) == 2
    # The client validates dict bodies into its models: the timestamp comes back as "+00:00".
    assert parse_time(created["firstTimestamp"]) == parse_time(created["lastTimestamp"]) == T0


def test_an_event_whose_create_timed_out_but_landed_is_recorded_once(
        kube_server: KubeApiServer, kubeconfig_path: Path) -> None:
    """The first try's answer comes after the client's timeout, but the server applied it. With
    a server-chosen name (generateName) the retry made a second ScaledDown; the name is now the
    client's, so the retry is a 409 AlreadyExists: the Event recorded (found by a review)."""
    kube_server.inject_fault(method="POST", path_regex=r"/events$", status=None, delay_seconds=1.3, times=1)
    with KubeClient.from_environment(kubeconfig=str(kubeconfig_path), sleep=lambda s: None,
                                     request_timeout_seconds=1.0) as client:
        client.emit_event("llm", ("qwen", "u1"), "ScaledDown", "4 -> 3: scale_down")
    time.sleep(0.5)  # the first try's answer, late
    assert [e["reason"] for e in kube_server.list("Event", "llm")] == ["ScaledDown"]
    assert sorted(r.status for r in kube_server.requests_matching("POST", r"/events$")) == [201, 409]


def test_state_configmap_round_trip(kube_server: KubeApiServer, kube_client: KubeClient) -> None:
    empty = kube_client.read_state("llm", "autoscaler-state")
    assert empty == StoredState()
    first = kube_client.write_state("llm", "autoscaler-state", {"vllm": '{"version": 1}'}, previous=empty)
    assert first.data == {"vllm": '{"version": 1}'} and first.resource_version
    assert kube_client.read_state("llm", "autoscaler-state") == first
    stored = kube_server.get("ConfigMap", "llm", "autoscaler-state")
    assert stored is not None and stored["metadata"]["labels"] == {"app.kubernetes.io/managed-by": "vllm-queue-autoscaler"}
    kube_server.update("ConfigMap", "llm", "autoscaler-state", {"metadata": {"annotations": {"note": "kept"}}})
    current = kube_client.read_state("llm", "autoscaler-state")
    second = kube_client.write_state("llm", "autoscaler-state", {"other": "3"}, previous=current)  # "vllm" pruned
    assert kube_client.read_state("llm", "autoscaler-state") == second
    assert second.data == {"other": "3"} and second.annotations == {"note": "kept"}
    assert second.labels == {"app.kubernetes.io/managed-by": "vllm-queue-autoscaler"}


def test_state_configmap_writes_are_conditional(kube_server: KubeApiServer, kube_client: KubeClient) -> None:
    """Last writer does not win: a write on a stale read, or a create of one that exists, is a
    409, never retried here (the controller reads again)."""
    first = kube_client.write_state("llm", "st", {"x": "1"}, previous=StoredState())
    kube_server.update("ConfigMap", "llm", "st", {"data": {"x": "from another replica"}})
    with pytest.raises(KubeConflict):
        kube_client.write_state("llm", "st", {"x": "2"}, previous=first)
    with pytest.raises(KubeConflict):
        kube_client.write_state("llm", "st", {"x": "2"}, previous=StoredState())
    assert kube_client.read_state("llm", "st").data == {"x": "from another replica"}
    assert [(r.method, r.status) for r in kube_server.requests if r.method != "GET"] == [
        ("POST", 201), ("PUT", 409), ("POST", 409)]


def test_a_rotated_token_file_is_used_without_a_restart(kube_server: KubeApiServer, tmp_path: Path) -> None:
    """A kubeconfig whose user has a `tokenFile` (as the in-cluster service account): the file
    is re-read after a 401 and the call tried once more with the new token."""
    token = tmp_path / "token"
    token.write_text("token-one\n")
    kubeconfig = kube_server.write_kubeconfig(tmp_path / "kubeconfig")
    config = json.loads(kubeconfig.read_text())
    config["users"][0]["user"] = {"tokenFile": "token"}  # relative to the kubeconfig
    kubeconfig.write_text(json.dumps(config))
    kube_server.put(deployment("vllm", "llm", replicas=2))
    kube_server.bearer_tokens = {"token-one"}
    with KubeClient.from_environment(kubeconfig=str(kubeconfig), sleep=lambda s: None) as client:
        assert client.read_scale("llm", "vllm")[0] == 2
        token.write_text("token-two")  # the kubelet rotates the token; the old one is revoked
        kube_server.bearer_tokens = {"token-two"}
        with structlog.testing.capture_logs() as logs:
            assert client.read_scale("llm", "vllm")[0] == 2
        assert [r.status for r in kube_server.requests][-2:] == [401, 200]
        assert [x["event"] for x in logs] == ["kube_token_reloaded"]
        kube_server.bearer_tokens = {"token-three"}  # revoked, and no new token in the file: 401 stays
        with pytest.raises(KubeError) as exc:
            client.read_scale("llm", "vllm")
        assert exc.value.status == 401 and "token-" not in str(exc.value)


def test_throttled_error_carries_retry_after(kube_server: KubeApiServer, kubeconfig_path: Path) -> None:
    with KubeClient.from_environment(kubeconfig=str(kubeconfig_path), retry_attempts=1) as client:
        kube_server.inject_fault("GET", r"/configmaps/st$", status=429, headers={"Retry-After": "7"})
        with pytest.raises(KubeThrottled) as info:
            client.read_state("llm", "st")
    assert info.value.retry_after == 7.0 and info.value.status == 429


def test_a_failing_exec_plugin_is_one_error_with_its_reason(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The kubernetes library logs a failed exec plugin (`ERROR:root:...`, its stderr, many
    lines) and goes on without credentials; the first request then fails with no reason. It is
    one error at start, with the plugin's words, and nothing printed (found by a fuzzer)."""
    config = tmp_path / "kubeconfig"
    config.write_text(json.dumps({
        "apiVersion": "v1", "kind": "Config", "current-context": "x",
        "clusters": [{"name": "c", "cluster": {"server": "http://127.0.0.1:1"}}],
        "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
        "users": [{"name": "u", "user": {"exec": {
            "apiVersion": "client.authentication.k8s.io/v1beta1", "command": "sh",
            "args": ["-c", "echo 'auth plugin: credentials expired' >&2; echo second line >&2; exit 1"]}}}],
    }))
    with pytest.raises(ValueError, match="kubeconfig: exec: process returned 1. auth plugin: credentials expired"):
        KubeClient.from_environment(kubeconfig=str(config))
    captured = capsys.readouterr()
    assert "ERROR:root" not in captured.err and "credentials expired" not in captured.err


def test_an_exec_plugin_failing_mid_run_is_one_warning_not_library_lines(
        kube_server: KubeApiServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The token an exec plugin gave expires; the library runs the plugin again before each
    request, and when that fails it logs `ERROR:root:...` on stderr and sends the old token. One
    structured warning with the plugin's words instead, not repeated while they stay the same."""
    marker = tmp_path / "ran"
    script = (f"if [ -e {marker} ]; then echo 'auth plugin: refresh token revoked' >&2; exit 1; fi; touch {marker}; "
              'echo \'{"apiVersion": "client.authentication.k8s.io/v1beta1", "kind": "ExecCredential", '
              '"status": {"token": "tok-1", "expirationTimestamp": "2000-01-01T00:00:00Z"}}\'')
    kubeconfig = kube_server.write_kubeconfig(tmp_path / "kubeconfig")
    config = json.loads(kubeconfig.read_text())
    config["users"][0]["user"] = {"exec": {"apiVersion": "client.authentication.k8s.io/v1beta1", "command": "sh",
                                           "args": ["-c", script]}}
    kubeconfig.write_text(json.dumps(config))
    kube_server.put(deployment("vllm", "llm", replicas=2))
    kube_server.bearer_tokens = {"tok-1"}  # the server still takes the old token
    with KubeClient.from_environment(kubeconfig=str(kubeconfig), sleep=lambda s: None) as client:
        with structlog.testing.capture_logs() as logs:
            assert client.read_scale("llm", "vllm")[0] == 2
            assert client.read_scale("llm", "vllm")[0] == 2
    assert [(x["event"], x["error"]) for x in logs] == [
        ("kube_credentials_refresh_failed", "exec: process returned 1. auth plugin: refresh token revoked")]
    captured = capsys.readouterr()
    assert "ERROR:root" not in captured.err and "revoked" not in captured.err
