"""The Kubernetes API test server's semantics, exercised through the official client."""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client as k8s_client
from kubernetes import config as _k8s_config
from kubernetes.client.exceptions import ApiException

from tests.conftest_kube import kube_api_client, kube_server, kubeconfig_path  # noqa: F401
from tests.kube_api_server import (
    ApiError,
    KubeApiServer,
    deployment,
    field_selector_matcher,
    hpa,
    json_patch,
    label_selector_matcher,
    merge_patch,
    node,
    pod,
)

MERGE = "application/merge-patch+json"
k8s_config: Any = _k8s_config  # untyped module


def status_body(exc: ApiException) -> dict[str, Any]:
    body: dict[str, Any] = json.loads(exc.body or "")
    assert body["kind"] == "Status" and body["apiVersion"] == "v1" and body["status"] == "Failure"
    assert body["code"] == exc.status
    return body


@pytest.fixture
def apps(kube_api_client: Any) -> Any:
    return k8s_client.AppsV1Api(kube_api_client)


@pytest.fixture
def core(kube_api_client: Any) -> Any:
    return k8s_client.CoreV1Api(kube_api_client)


# --------------------------------------------------------------------------- pure helpers


@pytest.mark.parametrize(
    ("selector", "labels", "expected"),
    [
        ("", {}, True),
        ("app=vllm", {"app": "vllm"}, True),
        ("app==vllm", {"app": "other"}, False),
        ("app!=vllm", {}, True),
        ("app!=vllm", {"app": "vllm"}, False),
        ("tier in (a, b)", {"tier": "b"}, True),
        ("tier in (a,b)", {}, False),
        ("tier notin (a,b)", {}, True),
        ("tier notin (a,b)", {"tier": "a"}, False),
        ("gpu", {"gpu": ""}, True),
        ("!gpu", {"gpu": "x"}, False),
        ("a=b,c!=d,e in (x,y),!f", {"a": "b", "e": "y"}, True),
        ("a=b,c!=d,e in (x,y),!f", {"a": "b", "e": "y", "f": "1"}, False),
    ],
)
def test_label_selector_parser(selector: str, labels: dict[str, str], expected: bool) -> None:
    assert label_selector_matcher(selector)(labels) is expected


def test_bad_label_selector_is_a_400() -> None:
    with pytest.raises(ApiError) as info:
        label_selector_matcher("a in b")
    assert info.value.code == 400


def test_field_selector() -> None:
    running = {"metadata": {"name": "p"}, "status": {"phase": "Running"}, "spec": {}}
    assert field_selector_matcher("status.phase!=Succeeded,status.phase!=Failed")(running)
    assert not field_selector_matcher("spec.nodeName=n1")(running)
    assert field_selector_matcher("spec.nodeName=")(running)
    assert field_selector_matcher("metadata.name==p")(running)


def test_patches() -> None:
    doc: dict[str, Any] = {"spec": {"replicas": 1, "containers": [{"name": "a", "image": "x"}, {"name": "b"}]}, "x": 1}
    assert merge_patch(doc, {"x": None, "spec": {"replicas": 2}}) == {"spec": {**doc["spec"], "replicas": 2}}
    strategic = merge_patch(doc, {"spec": {"containers": [{"name": "b", "image": "y"}]}}, strategic=True)
    assert strategic["spec"]["containers"] == [{"name": "a", "image": "x"}, {"name": "b", "image": "y"}]
    plain = merge_patch(doc, {"spec": {"containers": [{"name": "b"}]}})
    assert plain["spec"]["containers"] == [{"name": "b"}]
    ops = [{"op": "test", "path": "/spec/replicas", "value": 1}, {"op": "replace", "path": "/spec/replicas", "value": 3},
           {"op": "add", "path": "/spec/containers/-", "value": {"name": "c"}}, {"op": "remove", "path": "/x"},
           {"op": "copy", "from": "/spec/replicas", "path": "/y"}, {"op": "move", "from": "/y", "path": "/z"}]
    assert json_patch(doc, ops) == {"spec": {"replicas": 3, "containers": [*doc["spec"]["containers"], {"name": "c"}]},
                                    "z": 3}
    with pytest.raises(ApiError) as info:
        json_patch(doc, [{"op": "test", "path": "/spec/replicas", "value": 9}])
    assert info.value.code == 422


# --------------------------------------------------------------------------- through the client


def test_kubeconfig_loads_with_load_kube_config(kube_server: KubeApiServer, kubeconfig_path: Path) -> None:
    configuration = k8s_client.Configuration()
    k8s_config.load_kube_config(config_file=str(kubeconfig_path), client_configuration=configuration)
    assert configuration.host == kube_server.url
    assert kube_server.url.startswith("http://127.0.0.1:")


def test_create_get_list_deployments(kube_server: KubeApiServer, apps: Any) -> None:
    created = apps.create_namespaced_deployment("llm", deployment("vllm", "llm", replicas=2))
    assert created.metadata.uid and created.metadata.creation_timestamp is not None
    assert created.metadata.generation == 1
    kube_server.put(deployment("other", "batch"))
    assert apps.read_namespaced_deployment("vllm", "llm").spec.replicas == 2
    assert [d.metadata.name for d in apps.list_namespaced_deployment("llm").items] == ["vllm"]
    assert sorted(d.metadata.name for d in apps.list_deployment_for_all_namespaces().items) == ["other", "vllm"]
    with pytest.raises(ApiException) as info:
        apps.create_namespaced_deployment("llm", deployment("vllm", "llm"))
    assert info.value.status == 409 and status_body(info.value)["reason"] == "AlreadyExists"


def test_generation_and_resource_version(kube_server: KubeApiServer, apps: Any) -> None:
    kube_server.put(deployment("vllm", "llm", replicas=2))
    before = apps.read_namespaced_deployment("vllm", "llm")
    labelled = apps.patch_namespaced_deployment("vllm", "llm", {"metadata": {"labels": {"team": "ml"}}})
    assert labelled.metadata.generation == before.metadata.generation  # metadata only: no bump
    assert int(labelled.metadata.resource_version) > int(before.metadata.resource_version)
    same = apps.patch_namespaced_deployment("vllm", "llm", {"metadata": {"labels": {"team": "ml"}}})
    assert same.metadata.resource_version == labelled.metadata.resource_version  # no-op: no write
    image = {"spec": {"template": {"spec": {"containers": [{"name": "vllm", "image": "vllm:new"}]}}}}
    rolled = apps.patch_namespaced_deployment("vllm", "llm", image)
    assert rolled.metadata.generation == before.metadata.generation + 1
    assert rolled.spec.template.spec.containers[0].resources.limits["nvidia.com/gpu"] == "1"  # strategic merge


def test_scale_subresource_read_and_three_patch_types(kube_server: KubeApiServer, apps: Any) -> None:
    dep = kube_server.put(deployment("vllm", "llm", replicas=2, labels={"app": "vllm", "tier": "gpu"}))
    scale = apps.read_namespaced_deployment_scale("vllm", "llm")
    assert (scale.kind, scale.api_version) == ("Scale", "autoscaling/v1")
    assert scale.spec.replicas == 2 and scale.status.replicas == 2
    assert scale.status.selector == "app=vllm,tier=gpu"
    assert scale.metadata.resource_version == dep["metadata"]["resourceVersion"]

    apps.patch_namespaced_deployment_scale("vllm", "llm", {"spec": {"replicas": 3}})  # client default
    assert kube_server.requests[-1].content_type == "application/strategic-merge-patch+json"
    apps.patch_namespaced_deployment_scale("vllm", "llm", {"spec": {"replicas": 4}}, _content_type=MERGE)
    apps.patch_namespaced_deployment_scale("vllm", "llm", [{"op": "replace", "path": "/spec/replicas", "value": 5}])
    assert kube_server.requests[-1].content_type == "application/json-patch+json"
    stored = kube_server.get("Deployment", "llm", "vllm")
    assert stored is not None and stored["spec"]["replicas"] == 5
    assert stored["metadata"]["generation"] == dep["metadata"]["generation"] + 3  # each scale write bumps it
    # the simulated deployment controller observed it
    assert stored["status"]["observedGeneration"] == stored["metadata"]["generation"]
    assert stored["status"]["updatedReplicas"] == stored["status"]["replicas"] == 5

    replaced = apps.replace_namespaced_deployment_scale(
        "vllm", "llm", {"metadata": {"name": "vllm", "namespace": "llm"}, "spec": {"replicas": 1}})
    assert replaced.spec.replicas == 1


def test_stale_resource_version_conflicts_on_scale(kube_server: KubeApiServer, apps: Any) -> None:
    kube_server.put(deployment("vllm", "llm", replicas=2))
    rv = apps.read_namespaced_deployment_scale("vllm", "llm").metadata.resource_version
    kube_server.touch("Deployment", "llm", "vllm")  # a concurrent writer
    body = {"metadata": {"resourceVersion": rv}, "spec": {"replicas": 3}}
    with pytest.raises(ApiException) as info:
        apps.patch_namespaced_deployment_scale("vllm", "llm", body, _content_type=MERGE)
    assert info.value.status == 409 and status_body(info.value)["reason"] == "Conflict"
    with pytest.raises(ApiException) as info:
        apps.replace_namespaced_deployment_scale("vllm", "llm", {**body, "metadata": {"name": "vllm", "resourceVersion": rv}})
    assert info.value.status == 409
    fresh = apps.read_namespaced_deployment_scale("vllm", "llm").metadata.resource_version
    ok = apps.patch_namespaced_deployment_scale("vllm", "llm", {**body, "metadata": {"resourceVersion": fresh}},
                                                _content_type=MERGE)
    assert ok.spec.replicas == 3

    kube_server.inject_conflict("Deployment", "llm", "vllm")  # touch just before the next PATCH
    current = apps.read_namespaced_deployment_scale("vllm", "llm").metadata.resource_version
    with pytest.raises(ApiException) as info:
        apps.patch_namespaced_deployment_scale("vllm", "llm", {"metadata": {"resourceVersion": current},
                                                               "spec": {"replicas": 4}}, _content_type=MERGE)
    assert info.value.status == 409


def test_invalid_scale_is_422(kube_server: KubeApiServer, apps: Any) -> None:
    kube_server.put(deployment("vllm", "llm"))
    with pytest.raises(ApiException) as info:
        apps.patch_namespaced_deployment_scale("vllm", "llm", {"spec": {"replicas": -1}}, _content_type=MERGE)
    assert info.value.status == 422 and status_body(info.value)["reason"] == "Invalid"


def test_pods_selectors_nodes_hpas(kube_server: KubeApiServer, core: Any) -> None:
    kube_server.seed(
        pod("vllm-a-1", "llm", labels={"app": "vllm", "tier": "gpu"}, state="ready"),
        pod("vllm-a-2", "llm", labels={"app": "vllm", "tier": "cpu"}, state="loading"),
        pod("other-1", "llm", labels={"app": "other"}, state="unschedulable"),
        pod("done-1", "batch", labels={"app": "job"}, state="ready", phase="Succeeded"),
        node("gpu-1", gpus=8), node("cpu-1", gpus=0),
        hpa("vllm", "llm", target_name="vllm"),
    )

    def names(items: list[Any]) -> list[str]:
        return sorted(i.metadata.name for i in items)

    assert names(core.list_namespaced_pod("llm", label_selector="app=vllm").items) == ["vllm-a-1", "vllm-a-2"]
    assert names(core.list_namespaced_pod("llm", label_selector="app in (vllm,other),tier!=cpu").items) == [
        "other-1", "vllm-a-1"]
    assert names(core.list_namespaced_pod("llm", label_selector="!tier").items) == ["other-1"]
    assert len(core.list_pod_for_all_namespaces().items) == 4
    active = core.list_pod_for_all_namespaces(field_selector="status.phase!=Succeeded,status.phase!=Failed")
    assert "done-1" not in names(active.items)
    ready = core.read_namespaced_pod("vllm-a-1", "llm")
    assert {c.type: c.status for c in ready.status.conditions}["Ready"] == "True"
    unschedulable = core.read_namespaced_pod("other-1", "llm")
    assert unschedulable.status.conditions[0].reason == "Unschedulable" and unschedulable.spec.node_name is None
    nodes = core.list_node().items
    assert {n.metadata.name: n.status.allocatable.get("nvidia.com/gpu") for n in nodes} == {"cpu-1": None, "gpu-1": "8"}
    autoscaling = k8s_client.AutoscalingV2Api(core.api_client)
    assert autoscaling.list_namespaced_horizontal_pod_autoscaler("llm").items[0].spec.scale_target_ref.name == "vllm"
    assert len(autoscaling.list_horizontal_pod_autoscaler_for_all_namespaces().items) == 1
    with pytest.raises(ApiException) as info:
        core.list_namespaced_pod("llm", label_selector="a in b")
    assert info.value.status == 400


def test_lists_paginate_from_one_snapshot_like_the_real_server(kube_server: KubeApiServer, core: Any) -> None:
    kube_server.seed(*(pod(f"p-{i}", "llm", labels={"app": "vllm"}) for i in range(5)))
    first = core.list_namespaced_pod("llm", limit=2)
    assert [p.metadata.name for p in first.items] == ["p-0", "p-1"]
    assert first.metadata.remaining_item_count == 3 and first.metadata._continue
    kube_server.put(pod("p-5", "llm", labels={"app": "vllm"}))  # after the first page: not in this list
    token = first.metadata._continue
    second = core.list_namespaced_pod("llm", limit=2, _continue=token)
    again = core.list_namespaced_pod("llm", limit=2, _continue=token)  # a retried page: the same answer
    assert [p.metadata.name for p in second.items] == [p.metadata.name for p in again.items] == ["p-2", "p-3"]
    assert second.metadata.resource_version == first.metadata.resource_version
    last = core.list_namespaced_pod("llm", limit=2, _continue=second.metadata._continue)
    assert [p.metadata.name for p in last.items] == ["p-4"] and not last.metadata._continue
    # with a selector the real server leaves remainingItemCount unset
    selected = core.list_namespaced_pod("llm", limit=2, label_selector="app=vllm")
    assert selected.metadata._continue and selected.metadata.remaining_item_count is None
    kube_server.expire_continue_tokens()  # etcd compacted past the snapshot
    with pytest.raises(ApiException) as info:
        core.list_namespaced_pod("llm", limit=2, _continue=token)
    assert info.value.status == 410 and status_body(info.value)["reason"] == "Expired"


def test_not_found_and_unknown_paths(kube_server: KubeApiServer, apps: Any) -> None:
    with pytest.raises(ApiException) as info:
        apps.read_namespaced_deployment_scale("nope", "llm")
    body = status_body(info.value)
    assert info.value.status == 404 and body["reason"] == "NotFound"
    assert body["message"] == 'deployments.apps "nope" not found'
    for path in ("/apis/apps/v1/namespaces/llm/statefulsets", "/api/v1/namespaces/llm/nodes", "/healthz",
                 "/apis/apps/v1/namespaces/llm/deployments/x/status"):
        with pytest.raises(urllib.error.HTTPError) as raw:
            urllib.request.urlopen(kube_server.url + path, timeout=5)
        assert raw.value.code == 404 and json.loads(raw.value.read())["reason"] == "NotFound"
        raw.value.close()


def test_delete_mid_test(kube_server: KubeApiServer, apps: Any) -> None:
    kube_server.put(deployment("vllm", "llm"))
    assert kube_server.delete("Deployment", "llm", "vllm")
    with pytest.raises(ApiException) as info:
        apps.read_namespaced_deployment("vllm", "llm")
    assert info.value.status == 404
    assert not kube_server.delete("Deployment", "llm", "vllm")


def test_configmaps(kube_server: KubeApiServer, core: Any) -> None:
    created = core.create_namespaced_config_map("llm", {"metadata": {"name": "state"}, "data": {"a": "1"}})
    with pytest.raises(ApiException) as info:
        core.create_namespaced_config_map("llm", {"metadata": {"name": "state"}, "data": {}})
    assert info.value.status == 409 and status_body(info.value)["reason"] == "AlreadyExists"
    rv = created.metadata.resource_version
    replaced = core.replace_namespaced_config_map("state", "llm", {"metadata": {"name": "state", "resourceVersion": rv},
                                                                   "data": {"a": "2"}})
    assert replaced.data == {"a": "2"} and replaced.metadata.uid == created.metadata.uid
    with pytest.raises(ApiException) as info:  # rv is stale now
        core.replace_namespaced_config_map("state", "llm", {"metadata": {"name": "state", "resourceVersion": rv},
                                                            "data": {"a": "3"}})
    assert info.value.status == 409 and status_body(info.value)["reason"] == "Conflict"
    patched = core.patch_namespaced_config_map("state", "llm", {"data": {"b": "x"}}, _content_type=MERGE)
    assert patched.data == {"a": "2", "b": "x"}
    assert [c.metadata.name for c in core.list_namespaced_config_map("llm").items] == ["state"]
    core.delete_namespaced_config_map("state", "llm")
    assert kube_server.get("ConfigMap", "llm", "state") is None


def test_leases(kube_api_client: Any) -> None:
    coordination: Any = k8s_client.CoordinationV1Api(kube_api_client)
    body = {"metadata": {"name": "leader"}, "spec": {"holderIdentity": "a", "leaseDurationSeconds": 15}}
    lease = coordination.create_namespaced_lease("llm", body)
    with pytest.raises(ApiException) as info:
        coordination.create_namespaced_lease("llm", body)
    assert info.value.status == 409
    rv = lease.metadata.resource_version
    renewed = coordination.replace_namespaced_lease(
        "leader", "llm", {"metadata": {"name": "leader", "resourceVersion": rv}, "spec": {"holderIdentity": "a"}})
    assert renewed.metadata.resource_version != rv
    with pytest.raises(ApiException) as info:  # b lost the race
        coordination.replace_namespaced_lease(
            "leader", "llm", {"metadata": {"name": "leader", "resourceVersion": rv}, "spec": {"holderIdentity": "b"}})
    assert info.value.status == 409
    assert coordination.read_namespaced_lease("leader", "llm").spec.holder_identity == "a"


def test_events(kube_server: KubeApiServer, core: Any) -> None:
    event = {"metadata": {"name": "vllm.1"}, "involvedObject": {"kind": "Deployment", "name": "vllm", "namespace": "llm"},
             "reason": "Scaled", "message": "2 -> 3", "type": "Normal"}
    core.create_namespaced_event("llm", event)
    assert [e.reason for e in core.list_namespaced_event("llm").items] == ["Scaled"]
    assert kube_server.list("Event", "llm")[0]["message"] == "2 -> 3"


def test_injected_faults_and_request_log(kube_server: KubeApiServer, apps: Any) -> None:
    kube_server.put(deployment("vllm", "llm"))
    kube_server.inject_fault(method="PATCH", path_regex=r"/scale$", status=429, times=1, headers={"Retry-After": "1"})
    with pytest.raises(ApiException) as info:
        apps.patch_namespaced_deployment_scale("vllm", "llm", {"spec": {"replicas": 2}}, _content_type=MERGE)
    assert info.value.status == 429 and info.value.headers is not None and info.value.headers["Retry-After"] == "1"
    body = status_body(info.value)
    assert body["reason"] == "TooManyRequests" and body["details"]["retryAfterSeconds"] == 1
    apps.patch_namespaced_deployment_scale("vllm", "llm", {"spec": {"replicas": 2}}, _content_type=MERGE)  # once only

    fault = kube_server.inject_fault(method="GET", path_regex=r"/deployments/vllm$", status=500, times=2)
    for _ in range(2):
        with pytest.raises(ApiException) as info:
            apps.read_namespaced_deployment("vllm", "llm")
        assert info.value.status == 500 and status_body(info.value)["reason"] == "InternalError"
    assert apps.read_namespaced_deployment("vllm", "llm").spec.replicas == 2
    assert fault.hits == 2

    kube_server.inject_fault(method="GET", path_regex=r"/scale$", status=403)
    with pytest.raises(ApiException) as info:
        apps.read_namespaced_deployment_scale("vllm", "llm")
    assert 'cannot get resource "deployments/scale" in API group "apps" in the namespace "llm"' in status_body(
        info.value)["message"]

    patches = kube_server.requests_matching("PATCH", r"/scale$")
    assert [(r.status, r.body, r.content_type) for r in patches] == [(429, {"spec": {"replicas": 2}}, MERGE),
                                                                     (200, {"spec": {"replicas": 2}}, MERGE)]
    assert kube_server.requests[0].method == "PATCH" and kube_server.requests[0].query == {}


def test_delay_fault_is_interrupted_when_the_server_stops(tmp_path: Path) -> None:
    server = KubeApiServer().start()
    server.inject_fault(path_regex=".*", status=None, delay_seconds=30)
    error: list[BaseException] = []

    def call() -> None:
        try:
            urllib.request.urlopen(server.url + "/api/v1/nodes", timeout=10).close()
        except BaseException as exc:  # noqa: BLE001 - recorded for the assertion
            error.append(exc)

    import threading

    thread = threading.Thread(target=call)
    thread.start()
    deadline = time.monotonic() + 5
    while not server.requests and time.monotonic() < deadline:
        time.sleep(0.01)
    started = time.monotonic()
    server.stop()
    thread.join(timeout=10)
    assert not thread.is_alive() and time.monotonic() - started < 5
    assert error and getattr(error[0], "code", None) == 503
    getattr(error[0], "close")()


def test_seeded_objects_keep_their_metadata(kube_server: KubeApiServer) -> None:
    obj = deployment("vllm", "llm", uid="fixed-uid", generation=7, observed_generation=6)
    obj["metadata"]["creationTimestamp"] = "2024-01-01T00:00:00Z"
    stored = kube_server.put(obj)
    assert stored["metadata"]["uid"] == "fixed-uid" and stored["metadata"]["generation"] == 7
    assert stored["metadata"]["creationTimestamp"] == "2024-01-01T00:00:00Z"
    updated = kube_server.update("Deployment", "llm", "vllm", {"status": {"observedGeneration": 7}})
    assert updated["status"]["observedGeneration"] == 7 and updated["metadata"]["uid"] == "fixed-uid"
    assert int(updated["metadata"]["resourceVersion"]) > int(stored["metadata"]["resourceVersion"])
