"""`KubeClient`: every call the controller makes to the API server."""

from __future__ import annotations

import json
import os
import socket
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

import structlog
import urllib3
from kubernetes import client as k8s_client
from kubernetes import config as _k8s_config
from kubernetes.client.exceptions import ApiException
from tenacity import (
    RetryCallState,
    Retrying,
    retry_if_exception_type,
    stop_after_attempt,
)

from autoscaler.adapters.kubernetes.errors import (
    RETRYABLE_ERRORS,
    KubeConflict,
    KubeFenced,
    KubeNotFound,
    KubeThrottled,
    _Op,
    translate_error,
)
from autoscaler.adapters.kubernetes.objects import (
    ClusterSnapshot,
    DeploymentInfo,
    HPAInfo,
    NodeInfo,
    PodInfo,
    format_time,
    pod_spec_gpus,
)

COMPONENT = "vllm-queue-autoscaler"
MANAGED_BY_LABEL = "app.kubernetes.io/managed-by"
# Above this many namespaces, Deployments and HPAs are listed cluster-wide (one call each)
# and filtered, instead of one call per namespace.
PER_NAMESPACE_LIST_LIMIT = 3
# Pods are always listed cluster-wide, once: free GPUs on a node depend on every pod bound to
# it, whatever its namespace. Finished pods hold no resources and are left out server-side.
ACTIVE_PODS_FIELD_SELECTOR = "status.phase!=Succeeded,status.phase!=Failed"

T = TypeVar("T")
_LOG = structlog.get_logger("autoscaler.kube")

# kubernetes.config has no annotations; go through Any so that mypy --strict accepts the calls.
k8s_config: Any = _k8s_config

# --------------------------------------------------------------------------- client


class KubeClient:
    """The controller's API-server adapter.

    `retry_attempts` is the total number of attempts of one call (1 = no retry). Waits between
    attempts: the server's Retry-After (capped at `max_retry_after_seconds`) for a 429, else
    exponential backoff from `backoff_initial_seconds`, doubling, capped at
    `backoff_max_seconds`. `conflict_retries` bounds the re-read-and-retry loops on 409.
    """

    def __init__(self, api_client: Any, *, sleep: Callable[[float], None] = time.sleep, retry_attempts: int = 4,
                 request_timeout_seconds: float = 10.0, max_retry_after_seconds: float = 10.0,
                 backoff_initial_seconds: float = 0.5, backoff_max_seconds: float = 5.0, conflict_retries: int = 3,
                 clock: Callable[[], float] = time.time, reporting_instance: str | None = None) -> None:
        self.api_client = api_client
        self._core = k8s_client.CoreV1Api(api_client)
        self._apps = k8s_client.AppsV1Api(api_client)
        self._autoscaling = k8s_client.AutoscalingV2Api(api_client)
        self._coordination = k8s_client.CoordinationV1Api(api_client)
        self._sleep = sleep
        self.retry_attempts = max(1, retry_attempts)
        self.request_timeout_seconds = request_timeout_seconds
        self.max_retry_after_seconds = max_retry_after_seconds
        self.backoff_initial_seconds = backoff_initial_seconds
        self.backoff_max_seconds = backoff_max_seconds
        self.conflict_retries = max(1, conflict_retries)
        self._clock = clock
        self.reporting_instance = reporting_instance or os.environ.get("POD_NAME") or socket.gethostname()

    @classmethod
    def from_environment(cls, kubeconfig: str | None = None, context: str | None = None, **kwargs: Any) -> KubeClient:
        """In-cluster config (service account) when KUBERNETES_SERVICE_HOST is set and no
        kubeconfig is given; else the kubeconfig (None = $KUBECONFIG or ~/.kube/config).
        urllib3's own retries are turned off: retrying is this class's job. `kwargs` go to
        the constructor."""
        configuration = k8s_client.Configuration()
        if kubeconfig is None and os.environ.get("KUBERNETES_SERVICE_HOST"):
            k8s_config.load_incluster_config(client_configuration=configuration)
        else:
            k8s_config.load_kube_config(config_file=kubeconfig, context=context,
                                        client_configuration=configuration, persist_config=False)
        configuration.retries = False
        return cls(k8s_client.ApiClient(configuration), **kwargs)

    def close(self) -> None:
        self.api_client.close()

    def __enter__(self) -> KubeClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---- plumbing

    def _wait(self, state: RetryCallState) -> float:
        exc = state.outcome.exception() if state.outcome is not None else None
        if isinstance(exc, KubeThrottled) and exc.retry_after is not None:
            return min(exc.retry_after, self.max_retry_after_seconds)
        backoff = self.backoff_initial_seconds * 2.0 ** (state.attempt_number - 1)
        return float(min(backoff, self.backoff_max_seconds))

    def _call(self, op: _Op, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """One API call, raw JSON in and out, translated errors, retried when transient."""
        kwargs.update(_preload_content=False, _request_timeout=self.request_timeout_seconds)

        def attempt() -> Any:
            try:
                response = fn(*args, **kwargs)
                try:
                    data = response.data
                finally:
                    response.release_conn()
            except (ApiException, urllib3.exceptions.HTTPError, OSError) as exc:
                raise translate_error(exc, op) from exc
            return json.loads(data) if data else {}

        def log_retry(state: RetryCallState) -> None:
            exc = state.outcome.exception() if state.outcome is not None else None
            wait = state.next_action.sleep if state.next_action is not None else 0.0
            _LOG.warning("kube_retry", verb=op.verb, resource=op.resource, namespace=op.namespace, name=op.name,
                         attempt=state.attempt_number, max_attempts=self.retry_attempts,
                         wait_seconds=round(float(wait), 3), error=str(exc))

        retrying = Retrying(
            stop=stop_after_attempt(self.retry_attempts),
            wait=self._wait,
            retry=retry_if_exception_type(RETRYABLE_ERRORS),
            sleep=self._sleep,
            before_sleep=log_retry,
            reraise=True,
        )
        return retrying(attempt)

    def _with_conflict_retries(self, fn: Callable[[], T], op: _Op) -> T:
        """Run `fn` (a read-modify-write) again on 409, at most `conflict_retries` times in all."""
        for attempt in range(self.conflict_retries):
            try:
                return fn()
            except KubeConflict as exc:
                if attempt == self.conflict_retries - 1:
                    raise
                _LOG.warning("kube_conflict_retry", verb=op.verb, resource=op.resource, namespace=op.namespace,
                             name=op.name, attempt=attempt + 1, max_attempts=self.conflict_retries, error=str(exc))
        raise AssertionError("unreachable")

    def _list(self, resource: str, namespace: str | None, namespaced_fn: Callable[..., Any],
              all_fn: Callable[..., Any], **kwargs: Any) -> list[dict[str, Any]]:
        if namespace is None:
            data = self._call(_Op("list", resource), all_fn, **kwargs)
        else:
            data = self._call(_Op("list", resource, namespace), namespaced_fn, namespace, **kwargs)
        return [item for item in data.get("items") or [] if isinstance(item, dict)]

    # ---- the cluster view

    def snapshot(self, namespaces: Sequence[str]) -> ClusterSnapshot:
        """The cluster as one tick sees it, in a constant number of list calls.

        * nodes: one cluster-wide list;
        * pods: one cluster-wide list of non-finished pods (free GPUs need every pod bound to a
          node); kept: pods of the watched namespaces, plus GPU pods bound to a node elsewhere;
        * Deployments and HPAs: one list per namespace when there are at most
          PER_NAMESPACE_LIST_LIMIT namespaces, else one cluster-wide list each, filtered.
        An empty `namespaces` means every namespace. Any failed list raises (no partial view).
        """
        wanted = set(namespaces)
        scopes: list[str | None] = list(dict.fromkeys(namespaces))
        if not wanted or len(scopes) > PER_NAMESPACE_LIST_LIMIT:
            scopes = [None]

        def in_scope(obj: Mapping[str, Any]) -> bool:
            return not wanted or (obj.get("metadata") or {}).get("namespace") in wanted

        deployments: list[dict[str, Any]] = []
        hpas: list[dict[str, Any]] = []
        for ns in scopes:
            deployments += self._list("deployments", ns, self._apps.list_namespaced_deployment,
                                      self._apps.list_deployment_for_all_namespaces)
            hpas += self._list("horizontalpodautoscalers", ns,
                               self._autoscaling.list_namespaced_horizontal_pod_autoscaler,
                               self._autoscaling.list_horizontal_pod_autoscaler_for_all_namespaces)
        pods = self._list("pods", None, self._core.list_namespaced_pod, self._core.list_pod_for_all_namespaces,
                          field_selector=ACTIVE_PODS_FIELD_SELECTOR)
        nodes = self._list("nodes", None, self._core.list_node, self._core.list_node)

        def keep_pod(obj: Mapping[str, Any]) -> bool:
            if in_scope(obj):
                return True
            spec = obj.get("spec") or {}
            return bool(spec.get("nodeName")) and pod_spec_gpus(spec) > 0

        return ClusterSnapshot(
            deployments=tuple(DeploymentInfo.from_object(d) for d in deployments if in_scope(d)),
            pods=tuple(PodInfo.from_object(p) for p in pods if keep_pod(p)),
            nodes=tuple(NodeInfo.from_object(n) for n in nodes),
            hpas=tuple(HPAInfo.from_object(h) for h in hpas if in_scope(h)),
        )

    # ---- scale

    def read_scale(self, namespace: str, name: str) -> tuple[int, str]:
        """(spec.replicas, resourceVersion) of the Deployment's scale subresource."""
        op = _Op("get", "deployments/scale", namespace, name)
        scale = self._call(op, self._apps.read_namespaced_deployment_scale, name, namespace)
        replicas = (scale.get("spec") or {}).get("replicas", 0)
        return int(replicas or 0), str((scale.get("metadata") or {}).get("resourceVersion", ""))

    def set_replicas(self, namespace: str, name: str, replicas: int,
                     fence: Callable[[], bool] | None = None) -> bool:
        """Set spec.replicas through the scale subresource. Reads the scale first and returns
        False without writing when it already holds `replicas`; else sends a JSON merge patch
        carrying the read resourceVersion as a precondition (never a blind overwrite), and on
        409 re-reads and tries again, `conflict_retries` times in all. Returns True if written.
        `fence` (leader election) is asked right before every PATCH; when it says no, nothing
        is written and KubeFenced is raised."""
        if replicas < 0:
            raise ValueError(f"replicas must be >= 0, got {replicas}")
        op = _Op("patch", "deployments/scale", namespace, name)

        def attempt() -> bool:
            current, resource_version = self.read_scale(namespace, name)
            if current == replicas:
                return False
            if fence is not None and not fence():
                raise KubeFenced(f"not the leader any more: patch deployments/scale {namespace}/{name} not sent",
                                 verb="patch", resource="deployments/scale", namespace=namespace, name=name)
            body = {"metadata": {"resourceVersion": resource_version}, "spec": {"replicas": replicas}}
            self._call(op, self._apps.patch_namespaced_deployment_scale, name, namespace, body,
                       _content_type="application/merge-patch+json", field_manager=COMPONENT)
            return True

        return self._with_conflict_retries(attempt, op)

    # ---- events

    def emit_event(self, namespace: str, deployment: DeploymentInfo | tuple[str, str], reason: str, message: str,
                   type_: str = "Normal") -> dict[str, Any]:
        """Record a core/v1 Event on the Deployment (`deployment` or `(name, uid)`); returns the
        created Event. Events are informational: callers usually log and ignore a KubeError."""
        name, uid = (deployment.name, deployment.uid) if isinstance(deployment, DeploymentInfo) else deployment
        now = self._clock()
        stamp = format_time(now)
        body = {
            # generateName: the server appends a random suffix, so that two events in the same
            # tick (or under a frozen test clock) never collide.
            "metadata": {"generateName": f"{name}.", "namespace": namespace, "labels": {MANAGED_BY_LABEL: COMPONENT}},
            "involvedObject": {"apiVersion": "apps/v1", "kind": "Deployment", "name": name,
                               "namespace": namespace, "uid": uid},
            "reason": reason,
            "message": message[:1024],
            "type": type_,
            "source": {"component": COMPONENT},
            "reportingComponent": COMPONENT,
            "reportingInstance": self.reporting_instance,
            "firstTimestamp": stamp,
            "lastTimestamp": stamp,
            "count": 1,
        }
        created: dict[str, Any] = self._call(_Op("create", "events", namespace), self._core.create_namespaced_event,
                                             namespace, body)
        return created

    # ---- persisted state

    def read_state(self, namespace: str, configmap_name: str) -> dict[str, str]:
        """The data of the state ConfigMap; {} when it does not exist."""
        try:
            cm = self._call(_Op("get", "configmaps", namespace, configmap_name),
                            self._core.read_namespaced_config_map, configmap_name, namespace)
        except KubeNotFound:
            return {}
        return {str(k): str(v) for k, v in (cm.get("data") or {}).items()}

    def write_state(self, namespace: str, configmap_name: str, data: Mapping[str, str]) -> bool:
        """Create the state ConfigMap, or replace its data under the read resourceVersion
        (labels and annotations kept); on 409 (concurrent writer, or created meanwhile) re-read
        and retry. Returns False when the stored data is already `data` (nothing written)."""
        wanted = {str(k): str(v) for k, v in data.items()}
        get_op = _Op("get", "configmaps", namespace, configmap_name)

        def attempt() -> bool:
            try:
                cm = self._call(get_op, self._core.read_namespaced_config_map, configmap_name, namespace)
            except KubeNotFound:
                body = {"metadata": {"name": configmap_name, "namespace": namespace,
                                     "labels": {MANAGED_BY_LABEL: COMPONENT}}, "data": wanted}
                self._call(_Op("create", "configmaps", namespace, configmap_name),
                           self._core.create_namespaced_config_map, namespace, body, field_manager=COMPONENT)
                return True
            if (cm.get("data") or {}) == wanted:
                return False
            meta = cm.get("metadata") or {}
            body = {"apiVersion": "v1", "kind": "ConfigMap", "data": wanted,
                    "metadata": {k: meta[k] for k in ("name", "namespace", "resourceVersion", "labels", "annotations")
                                 if k in meta}}
            self._call(_Op("update", "configmaps", namespace, configmap_name),
                       self._core.replace_namespaced_config_map, configmap_name, namespace, body,
                       field_manager=COMPONENT)
            return True

        return self._with_conflict_retries(attempt, _Op("update", "configmaps", namespace, configmap_name))

    # ---- leases (leader election)

    def read_lease(self, namespace: str, name: str) -> dict[str, Any] | None:
        """The Lease as JSON, or None when it does not exist."""
        try:
            lease: dict[str, Any] = self._call(_Op("get", "leases", namespace, name),
                                               self._coordination.read_namespaced_lease, name, namespace)
        except KubeNotFound:
            return None
        return lease

    def create_lease(self, namespace: str, body: Mapping[str, Any]) -> dict[str, Any]:
        """Create the Lease; KubeConflict when another replica created it first."""
        name = str((body.get("metadata") or {}).get("name", ""))
        created: dict[str, Any] = self._call(_Op("create", "leases", namespace, name),
                                             self._coordination.create_namespaced_lease, namespace, dict(body),
                                             field_manager=COMPONENT)
        return created

    def replace_lease(self, namespace: str, name: str, body: Mapping[str, Any]) -> dict[str, Any]:
        """Replace the Lease under the resourceVersion in `body`; KubeConflict when another
        replica wrote it since it was read (never retried here: the elector re-reads)."""
        replaced: dict[str, Any] = self._call(_Op("update", "leases", namespace, name),
                                              self._coordination.replace_namespaced_lease, name, namespace,
                                              dict(body), field_manager=COMPONENT)
        return replaced
