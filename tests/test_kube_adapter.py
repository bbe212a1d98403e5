"""autoscaler.adapters.kubernetes.objects (value types and rules, as tables) and autoscaler.adapters.kubernetes (the adapter,
against the in-process API test server, through the official client)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import structlog.testing

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
from autoscaler.adapters.kubernetes import (
    KubeClient,
    KubeConflict,
    KubeError,
    KubeForbidden,
    KubeInvalid,
    KubeNotFound,
    KubeServerError,
    KubeThrottled,
    KubeTimeout,
    KubeUnavailable,
)
from autoscaler.policy.types import PodStage, PodStartup
from tests.conftest_kube import kube_client, kube_server, kube_sleeps, kubeconfig_path  # noqa: F401
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


def test_set_replicas_patches_only_when_different(kube_server: KubeApiServer, kube_client: KubeClient) -> None:
    kube_server.put(deployment("vllm", "llm", replicas=2))
    assert kube_client.read_scale("llm", "vllm")[0] == 2
    assert kube_client.set_replicas("llm", "vllm", 2) is False
    assert kube_server.requests_matching("PATCH") == []

    rv = kube_client.read_scale("llm", "vllm")[1]
    assert kube_client.set_replicas("llm", "vllm", 5) is True
    (patch,) = kube_server.requests_matching("PATCH")
    assert patch.path == "/apis/apps/v1/namespaces/llm/deployments/vllm/scale"
    assert patch.content_type == "application/merge-patch+json"
    assert patch.body == {"metadata": {"resourceVersion": rv}, "spec": {"replicas": 5}}
    assert patch.query["fieldManager"] == "vllm-queue-autoscaler"
    assert kube_client.read_scale("llm", "vllm")[0] == 5
    stored = kube_server.get("Deployment", "llm", "vllm")
    assert stored is not None and stored["spec"]["replicas"] == 5


def test_set_replicas_conflict_rereads_and_retries(kube_server: KubeApiServer, kube_client: KubeClient,
                                                   kube_sleeps: list[float]) -> None:
    kube_server.put(deployment("vllm", "llm", replicas=2))
    kube_server.inject_conflict("Deployment", "llm", "vllm")  # a concurrent writer before our PATCH
    assert kube_client.set_replicas("llm", "vllm", 3) is True
    assert [(r.method, r.status) for r in kube_server.requests] == [("GET", 200), ("PATCH", 409), ("GET", 200),
                                                                    ("PATCH", 200)]
    first, second = kube_server.requests_matching("PATCH")
    assert first.body["metadata"]["resourceVersion"] != second.body["metadata"]["resourceVersion"]
    assert kube_sleeps == []  # conflicts are not transient errors: no backoff

    kube_server.inject_conflict("Deployment", "llm", "vllm", times=None)  # somebody always wins
    with pytest.raises(KubeConflict):
        kube_client.set_replicas("llm", "vllm", 4)
    assert len(kube_server.requests_matching("PATCH")) == 2 + 3
    stored = kube_server.get("Deployment", "llm", "vllm")
    assert stored is not None and stored["spec"]["replicas"] == 3  # never overwritten blindly


def test_set_replicas_after_a_concurrent_change_to_the_target(kube_server: KubeApiServer,
                                                             kube_client: KubeClient) -> None:
    kube_server.put(deployment("vllm", "llm", replicas=2))
    # The other writer sets the value we want: the re-read sees it and nothing more is written.
    kube_server.inject_fault("PATCH", r"/scale$", status=None,
                             before=lambda: kube_server.update("Deployment", "llm", "vllm", {"spec": {"replicas": 3}}))
    with structlog.testing.capture_logs() as logs:
        assert kube_client.set_replicas("llm", "vllm", 3) is False
    assert [r.status for r in kube_server.requests_matching("PATCH")] == [409]
    conflicts = [e for e in logs if e["event"] == "kube_conflict_retry"]  # the re-read is logged
    assert [(e["verb"], e["resource"], e["name"], e["attempt"], e["max_attempts"]) for e in conflicts] == [
        ("patch", "deployments/scale", "vllm", 1, 3)]


def test_throttling_honours_retry_after(kube_server: KubeApiServer, kube_client: KubeClient,
                                        kube_sleeps: list[float]) -> None:
    kube_server.put(deployment("vllm", "llm", replicas=2))
    kube_server.inject_fault("PATCH", r"/scale$", status=429, times=1, headers={"Retry-After": "1"})
    kube_server.inject_fault("GET", r"/scale$", status=429, times=1, headers={"Retry-After": "120"})
    with structlog.testing.capture_logs() as logs:
        assert kube_client.set_replicas("llm", "vllm", 3) is True
    assert kube_sleeps == [10.0, 1.0]  # 120 s capped at max_retry_after_seconds; then as asked
    # each retry is one JSON event naming the call, even though the patch then succeeded
    retries = [(e["verb"], e["resource"], e["namespace"], e["name"], e["attempt"], e["wait_seconds"])
               for e in logs if e["event"] == "kube_retry"]
    assert retries == [("get", "deployments/scale", "llm", "vllm", 1, 10.0),
                       ("patch", "deployments/scale", "llm", "vllm", 1, 1.0)]


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
    kube_server.inject_fault("PATCH", r"/scale$", status=403)
    with pytest.raises(KubeForbidden) as info:
        kube_client.set_replicas("llm", "vllm", 2)
    assert str(info.value).startswith("forbidden: patch deployments/scale in namespace llm: ")
    assert 'cannot patch resource "deployments/scale"' in str(info.value)
    assert (info.value.verb, info.value.resource, info.value.namespace, info.value.name) == (
        "patch", "deployments/scale", "llm", "vllm")
    kube_server.inject_fault("GET", r"/api/v1/nodes$", status=403)
    with pytest.raises(KubeForbidden, match="forbidden: list nodes at cluster scope"):
        kube_client.snapshot(["llm"])


def test_missing_deployment_is_not_found(kube_client: KubeClient, kube_sleeps: list[float]) -> None:
    with pytest.raises(KubeNotFound, match='deployments.apps "ghost" not found'):
        kube_client.set_replicas("llm", "ghost", 1)
    assert kube_sleeps == []


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


def test_state_configmap_round_trip(kube_server: KubeApiServer, kube_client: KubeClient) -> None:
    assert kube_client.read_state("llm", "autoscaler-state") == {}
    assert kube_client.write_state("llm", "autoscaler-state", {"vllm": '{"version": 1}'}) is True
    assert kube_client.read_state("llm", "autoscaler-state") == {"vllm": '{"version": 1}'}
    stored = kube_server.get("ConfigMap", "llm", "autoscaler-state")
    assert stored is not None and stored["metadata"]["labels"] == {"app.kubernetes.io/managed-by": "vllm-queue-autoscaler"}
    assert kube_client.write_state("llm", "autoscaler-state", {"vllm": '{"version": 1}'}) is False  # unchanged
    kube_server.inject_conflict("ConfigMap", "llm", "autoscaler-state", method="PUT")
    assert kube_client.write_state("llm", "autoscaler-state", {"vllm": "2", "other": "3"}) is True
    assert [r.status for r in kube_server.requests_matching("PUT")] == [409, 200]
    assert kube_client.read_state("llm", "autoscaler-state") == {"vllm": "2", "other": "3"}
    after = kube_server.get("ConfigMap", "llm", "autoscaler-state")
    assert after is not None and after["metadata"]["labels"] == stored["metadata"]["labels"]


def test_state_configmap_created_concurrently(kube_server: KubeApiServer, kube_client: KubeClient) -> None:
    other = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "st", "namespace": "llm"},
             "data": {"x": "1"}}
    kube_server.inject_fault("POST", r"/configmaps$", status=None, before=lambda: kube_server.put(other))
    assert kube_client.write_state("llm", "st", {"x": "2"}) is True
    assert [(r.method, r.status) for r in kube_server.requests] == [("GET", 404), ("POST", 409), ("GET", 200),
                                                                    ("PUT", 200)]
    assert kube_client.read_state("llm", "st") == {"x": "2"}


def test_throttled_error_carries_retry_after(kube_server: KubeApiServer, kubeconfig_path: Path) -> None:
    with KubeClient.from_environment(kubeconfig=str(kubeconfig_path), retry_attempts=1) as client:
        kube_server.inject_fault("GET", r"/configmaps/st$", status=429, headers={"Retry-After": "7"})
        with pytest.raises(KubeThrottled) as info:
            client.read_state("llm", "st")
    assert info.value.retry_after == 7.0 and info.value.status == 429
