"""`KubeClient`: every call the controller makes to the API server."""

from __future__ import annotations

import contextlib
import json
import logging
import os
import secrets
import socket
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import structlog
import urllib3
from kubernetes import client as k8s_client
from kubernetes import config as _k8s_config
from kubernetes.client.exceptions import ApiException
from tenacity import RetryCallState, Retrying, retry_if_exception_type

from autoscaler import __version__
from autoscaler.adapters.kubernetes.auth import TokenFile, install, kubeconfig_token_file
from autoscaler.adapters.kubernetes.errors import (
    AMBIGUOUS_ERRORS,
    RETRYABLE_ERRORS,
    KubeConflict,
    KubeError,
    KubeExpired,
    KubeFenced,
    KubeNotFound,
    KubeServerError,
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
# Lists are read in one answer by default (`list_page_size` 0). Pages (`list_page_size` > 0,
# client-go's pager uses 500) keep a cluster of many thousand pods from being one huge answer, but
# where ConsistentListFromCache serves a whole list from the watch cache (Kubernetes 1.31 on) a
# paginated one is read from etcd on the versions whose cacher delegates a limit or a continue
# token to storage: more load on etcd, not less. docs/scale.md.
LIST_PAGE_SIZE = 0
# Pages of one list at most: a server (or proxy) handing out a new continue token with every page
# would otherwise keep the tick reading for ever.
MAX_LIST_PAGES = 10_000

_LOG = structlog.get_logger("autoscaler.kube")
# A try with less time than this left before the Lease could change hands is not started.
MIN_TRY_SECONDS = 0.1

# kubernetes.config has no annotations; go through Any so that mypy --strict accepts the calls.
k8s_config: Any = _k8s_config


class Fence(Protocol):
    """Leader election as a write sees it (`autoscaler.controller.leader.LeaderElector`)."""

    def time_left(self) -> float:
        """Seconds a write started now may last before another replica could have taken the
        Lease over; 0 or less: this replica must not write."""
        ...


@dataclass(frozen=True)
class StoredState:
    """The state ConfigMap as read or written: its data, and what a conditional replace needs
    (resourceVersion None: it does not exist; labels and annotations are kept on a replace)."""

    data: dict[str, str] = field(default_factory=dict)
    resource_version: str | None = None
    labels: dict[str, str] = field(default_factory=dict)
    annotations: dict[str, str] = field(default_factory=dict)

    @classmethod
    def from_object(cls, cm: Mapping[str, Any]) -> StoredState:
        meta = cm.get("metadata") or {}
        rv = meta.get("resourceVersion")
        return cls(data={str(k): str(v) for k, v in (cm.get("data") or {}).items()},
                   resource_version=str(rv) if rv else None,
                   labels={str(k): str(v) for k, v in (meta.get("labels") or {}).items()},
                   annotations={str(k): str(v) for k, v in (meta.get("annotations") or {}).items()})

# --------------------------------------------------------------------------- client


@contextlib.contextmanager
def _library_errors() -> Iterator[list[str]]:
    """The ERROR records the kubernetes library logs instead of raising (its exec plugin: it
    logs the failure and goes on without credentials), kept here instead of printed. Its
    module-level `logging.error` would otherwise configure the root logger and print
    `ERROR:root:...` lines of its own."""
    messages: list[str] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            messages.append(record.getMessage())

    handler = Keep(logging.ERROR)
    root = logging.getLogger()
    root.addHandler(handler)
    try:
        yield messages
    finally:
        root.removeHandler(handler)


class KubeClient:
    """The controller's API-server adapter.

    `retry_attempts` is the total number of attempts of one call (1 = no retry). Waits between
    attempts: the server's Retry-After (capped at `max_retry_after_seconds`) for a 429, else
    exponential backoff from `backoff_initial_seconds`, doubling, capped at
    `backoff_max_seconds`. A 409 is never retried here: every write is conditional on what the
    caller read, and a conflict means "read again, decide again".

    Writes take a `fence` (leader election): it is asked before every try, a try is not
    started when the fence says no, and each try's timeout is cut to the time the fence has
    left, so that no try of a deposed leader can still be running when another replica may
    have taken over.

    `token_file`: the bearer token's file, re-read as client-go does (`auth.TokenFile`); a
    401 is tried once more when the file now holds another token.
    """

    def __init__(self, api_client: Any, *, sleep: Callable[[float], None] = time.sleep, retry_attempts: int = 4,
                 request_timeout_seconds: float = 10.0, max_retry_after_seconds: float = 10.0,
                 backoff_initial_seconds: float = 0.5, backoff_max_seconds: float = 5.0,
                 clock: Callable[[], float] = time.time, reporting_instance: str | None = None,
                 token_file: TokenFile | None = None, list_page_size: int = LIST_PAGE_SIZE) -> None:
        self.api_client = api_client
        self.list_page_size = max(0, list_page_size)
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
        self._clock = clock
        self.reporting_instance = reporting_instance or os.environ.get("POD_NAME") or socket.gethostname()
        # who is calling, in the API server's audit log (and in the test server's request log)
        api_client.user_agent = f"{COMPONENT}/{__version__} ({self.reporting_instance})"
        self.token_file = token_file
        self._credentials_error: str | None = None  # the last failure of the exec plugin, logged once
        if token_file is not None:
            install(api_client.configuration, token_file)

    @classmethod
    def from_environment(cls, kubeconfig: str | None = None, context: str | None = None, *,
                         token_file: str | None = None, **kwargs: Any) -> KubeClient:
        """In-cluster config (service account) when KUBERNETES_SERVICE_HOST is set and no
        kubeconfig is given; else the kubeconfig (None = $KUBECONFIG or ~/.kube/config).
        The bearer token's file (`token_file`, else the service account's, else the
        kubeconfig user's `tokenFile`) is re-read while running (`auth.TokenFile`).
        urllib3's own retries are turned off: retrying is this class's job. `kwargs` go to
        the constructor."""
        configuration = k8s_client.Configuration()
        if kubeconfig is None and os.environ.get("KUBERNETES_SERVICE_HOST"):
            k8s_config.load_incluster_config(client_configuration=configuration)
            token_file = token_file or k8s_config.incluster_config.SERVICE_TOKEN_FILENAME
        else:
            with _library_errors() as errors:
                k8s_config.load_kube_config(config_file=kubeconfig, context=context,
                                            client_configuration=configuration, persist_config=False)
            if errors:  # e.g. an exec plugin that failed: the library logs it and goes on without credentials
                raise ValueError(f"kubeconfig: {' '.join(errors[0].split())[:500]}")
            token_file = token_file or kubeconfig_token_file(kubeconfig, context)
        configuration.retries = False
        tokens = TokenFile(token_file) if token_file else None
        return cls(k8s_client.ApiClient(configuration), token_file=tokens, **kwargs)

    def close(self) -> None:
        self.api_client.close()

    def __enter__(self) -> KubeClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---- plumbing

    def _credentials_refresh(self, errors: list[str], op: _Op) -> None:
        """What the library logged while it sent a request: its exec plugin, run again when the
        token it gave expired, failed, and the request went out with the old token (a 401 follows
        once the server refuses it). One warning with the plugin's words, and not again while the
        words stay the same; nothing printed of the library's own."""
        message = " ".join(errors[0].split())[:500] if errors else None
        if message is not None and message != self._credentials_error:
            _LOG.warning("kube_credentials_refresh_failed", error=message, verb=op.verb, resource=op.resource)
        self._credentials_error = message

    def _wait(self, state: RetryCallState) -> float:
        exc = state.outcome.exception() if state.outcome is not None else None
        if isinstance(exc, KubeThrottled) and exc.retry_after is not None:
            return min(exc.retry_after, self.max_retry_after_seconds)
        backoff = self.backoff_initial_seconds * 2.0 ** (state.attempt_number - 1)
        return float(min(backoff, self.backoff_max_seconds))

    def _call(self, op: _Op, fn: Callable[..., Any], *args: Any, fence: Fence | None = None,
              attempts: int | None = None, timeout: float | None = None, **kwargs: Any) -> Any:
        """One API call, raw JSON in and out, translated errors, retried when transient
        (`attempts` in all, default `retry_attempts`; each try at most `timeout` seconds,
        default `request_timeout_seconds`). With a `fence`, the fence is asked before every
        try and cuts its timeout to what it has left; retrying stops when the fence would be
        closed by the end of the wait. The error raised says whether an earlier try of a write
        may have been applied (`maybe_written`)."""
        kwargs.update(_preload_content=False)
        per_try = self.request_timeout_seconds if timeout is None else timeout
        write = op.verb in ("create", "update", "patch", "delete")
        maybe_written = False

        def fenced_timeout() -> float:
            if fence is None:
                return per_try
            left = fence.time_left()
            if not left >= MIN_TRY_SECONDS:  # also NaN
                raise KubeFenced(f"not the leader (any more): {op.describe()} not sent"
                                 + (f" ({op.name})" if op.name else ""),
                                 verb=op.verb, resource=op.resource, namespace=op.namespace, name=op.name)
            return min(per_try, left)

        def send() -> Any:
            with _library_errors() as errors:  # an exec plugin run again for a token that expired
                response = fn(*args, _request_timeout=fenced_timeout(), **kwargs)
            self._credentials_refresh(errors, op)
            try:
                data = response.data
            finally:
                response.release_conn()
            return data

        def attempt() -> Any:
            nonlocal maybe_written
            try:
                try:
                    data = send()
                except ApiException as exc:
                    # 401: the token may have rotated; once more if the file now holds another
                    if exc.status == 401 and self.token_file is not None and self.token_file.invalidate():
                        _LOG.info("kube_token_reloaded", path=self.token_file.path, verb=op.verb,
                                  resource=op.resource)
                        data = send()
                    else:
                        raise
            except (ApiException, urllib3.exceptions.HTTPError, OSError) as exc:
                error = translate_error(exc, op)
                if write and isinstance(error, AMBIGUOUS_ERRORS):
                    maybe_written = True
                error.maybe_written = write and maybe_written
                raise error from exc
            except KubeError as exc:  # fenced
                exc.maybe_written = write and maybe_written
                raise
            try:
                return json.loads(data) if data else {}
            except ValueError as exc:  # a proxy's error page with status 200
                error = KubeServerError(f"invalid answer to {op.describe()}: not JSON: {data[:200]!r}",
                                        verb=op.verb, resource=op.resource, namespace=op.namespace, name=op.name,
                                        maybe_written=write)
                maybe_written = maybe_written or write
                raise error from exc

        def log_retry(state: RetryCallState) -> None:
            exc = state.outcome.exception() if state.outcome is not None else None
            wait = state.next_action.sleep if state.next_action is not None else 0.0
            _LOG.warning("kube_retry", verb=op.verb, resource=op.resource, namespace=op.namespace, name=op.name,
                         attempt=state.attempt_number, max_attempts=max_attempts,
                         wait_seconds=round(float(wait), 3), error=str(exc))

        max_attempts = max(1, attempts if attempts is not None else self.retry_attempts)
        fenced_out = False

        def stop(state: RetryCallState) -> bool:
            nonlocal fenced_out
            if state.attempt_number >= max_attempts:
                return True
            # no waiting for a try the fence will not allow
            fenced_out = fence is not None and not fence.time_left() - self._wait(state) >= MIN_TRY_SECONDS
            return fenced_out

        retrying = Retrying(
            stop=stop,
            wait=self._wait,
            retry=retry_if_exception_type(RETRYABLE_ERRORS),
            sleep=self._sleep,
            before_sleep=log_retry,
            reraise=True,
        )
        try:
            return retrying(attempt)
        except KubeError as exc:
            if not fenced_out:
                raise
            # still leading, maybe: the wait before the next try (a backoff, a Retry-After) would
            # outlast the time the fence has left, so no try is started
            raise KubeFenced(f"the lease's fence would close before a retry: {op.describe()}"
                             + (f" ({op.name})" if op.name else "") + f" not sent again after: {exc}",
                             verb=op.verb, resource=op.resource, namespace=op.namespace, name=op.name,
                             maybe_written=exc.maybe_written) from exc

    def _list(self, resource: str, namespace: str | None, namespaced_fn: Callable[..., Any],
              all_fn: Callable[..., Any], **kwargs: Any) -> list[dict[str, Any]]:
        """Every object of one list: in one call, or with `list_page_size` > 0 in pages of that
        many from one snapshot (the server keeps the continue token's resourceVersion). When that
        snapshot is gone before the last page (410 Expired), the list is read again whole in one
        call, as client-go's pager does: never pages of two snapshots mixed."""
        op = _Op("list", resource, namespace)
        fn, args = (all_fn, ()) if namespace is None else (namespaced_fn, (namespace,))
        if not self.list_page_size:
            return [item for item in self._page_items(op, self._call(op, fn, *args, **kwargs)) if isinstance(item, dict)]
        items: list[Any] = []
        seen: set[str] = set()
        token = ""
        while True:
            page_kwargs = dict(kwargs, limit=self.list_page_size, **({"_continue": token} if token else {}))
            try:
                data = self._call(op, fn, *args, **page_kwargs)
            except KubeExpired as exc:
                if not token:
                    raise
                _LOG.info("kube_list_expired", resource=resource, namespace=namespace, items_read=len(items),
                          error=str(exc))
                items = self._page_items(op, self._call(op, fn, *args, **kwargs))
                break
            items += self._page_items(op, data)
            seen.add(token)
            token = str((data.get("metadata") or {}).get("continue") or "")
            if not token:
                break
            if token in seen or len(seen) >= MAX_LIST_PAGES:  # a server (or proxy) that never ends the list
                raise KubeServerError(f"invalid answer to {op.describe()}: continue token repeated or more than "
                                      f"{MAX_LIST_PAGES} pages", verb=op.verb, resource=resource, namespace=namespace)
        return [item for item in items if isinstance(item, dict)]

    @staticmethod
    def _page_items(op: _Op, data: Any) -> list[Any]:
        """The `items` of one list answer (null: none); an answer that is no list object is a
        server error (a proxy's page, say): no partial view."""
        if not isinstance(data, dict):
            data = {"items": False}
        items = [] if data.get("items") is None else data["items"]
        if not isinstance(items, list) or not isinstance(data.get("metadata") or {}, dict):
            raise KubeServerError(f"invalid answer to {op.describe()}: not a list object",
                                  verb=op.verb, resource=op.resource, namespace=op.namespace)
        return items

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
        """(spec.replicas, resourceVersion) of the Deployment's scale subresource (for tools and
        tests: the controller decides on the Deployment it listed, and writes conditionally on it)."""
        op = _Op("get", "deployments/scale", namespace, name)
        scale = self._call(op, self._apps.read_namespaced_deployment_scale, name, namespace)
        replicas = (scale.get("spec") or {}).get("replicas", 0)
        return int(replicas or 0), str((scale.get("metadata") or {}).get("resourceVersion", ""))

    def set_replicas(self, namespace: str, name: str, replicas: int, *, resource_version: str, uid: str,
                     fence: Fence | None = None) -> None:
        """Set spec.replicas through the scale subresource, on condition that the Deployment
        is still the one the decision read: a JSON merge patch carrying that `resource_version`
        (and `uid`, when known) as preconditions. Someone else wrote the Deployment since, or it
        was deleted and re-created: 409 (`KubeConflict`), raised and never retried, so the
        caller reads again and decides again next tick, as HPA does. Transient errors are
        retried with the same preconditions, so a try that landed unseen makes the next one a
        409 (`maybe_written` set). `fence`: see the class."""
        if replicas < 0:
            raise ValueError(f"replicas must be >= 0, got {replicas}")
        if not resource_version:
            raise ValueError("a scale write needs the resourceVersion its decision read (no blind overwrite)")
        op = _Op("patch", "deployments/scale", namespace, name)
        metadata = {"resourceVersion": resource_version, **({"uid": uid} if uid else {})}
        body = {"metadata": metadata, "spec": {"replicas": replicas}}
        self._call(op, self._apps.patch_namespaced_deployment_scale, name, namespace, body, fence=fence,
                   _content_type="application/merge-patch+json", field_manager=COMPONENT)

    # ---- pods

    def annotate_pod(self, namespace: str, name: str, annotations: Mapping[str, str | None], *,
                     resource_version: str, fence: Fence | None = None) -> None:
        """Set (a string) or remove (None) annotations of a pod, on condition that the pod is
        still the one the caller listed: a JSON merge patch carrying that `resource_version`.
        The pod changed since (a status update, a re-creation under the same name): 409
        (`KubeConflict`), never retried. One try only (no retry of a 5xx or a timeout either):
        the caller's writes of this kind are best effort and must not hold up the tick; the next
        scale-down writes again from a fresh list. `fence`: see the class."""
        if not resource_version:
            raise ValueError("a pod write needs the resourceVersion the pod was listed at (no blind overwrite)")
        op = _Op("patch", "pods", namespace, name)
        body = {"metadata": {"resourceVersion": resource_version, "annotations": dict(annotations)}}
        self._call(op, self._core.patch_namespaced_pod, name, namespace, body, fence=fence, attempts=1,
                   _content_type="application/merge-patch+json", field_manager=COMPONENT)

    # ---- events

    def emit_event(self, namespace: str, deployment: DeploymentInfo | tuple[str, str], reason: str, message: str,
                   type_: str = "Normal", *, fence: Fence | None = None) -> dict[str, Any]:
        """Record a core/v1 Event on the Deployment (`deployment` or `(name, uid)`); returns the
        created Event. Events are informational: callers usually log and ignore a KubeError.

        Its name is chosen here, once a call (as client-go's recorder does, `<name>.<hex>`), not
        by the server (`generateName`): a try that timed out but was applied makes the next try
        a 409 AlreadyExists, which is the Event recorded, not a second one."""
        name, uid = (deployment.name, deployment.uid) if isinstance(deployment, DeploymentInfo) else deployment
        now = self._clock()
        stamp = format_time(now)
        body = {
            # random, not the time: two events in the same tick (or under a frozen test clock)
            # never collide
            "metadata": {"name": f"{name}.{secrets.token_hex(8)}", "namespace": namespace,
                         "labels": {MANAGED_BY_LABEL: COMPONENT}},
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
        try:
            created: dict[str, Any] = self._call(_Op("create", "events", namespace),
                                                 self._core.create_namespaced_event, namespace, body, fence=fence)
        except KubeConflict as exc:
            if not exc.maybe_written:  # (a random name another Event already has: not ours)
                raise
            return body  # an earlier try was applied: that is the Event
        return created

    # ---- persisted state

    def read_state(self, namespace: str, configmap_name: str) -> StoredState:
        """The state ConfigMap; `StoredState()` (no resourceVersion) when it does not exist."""
        try:
            cm = self._call(_Op("get", "configmaps", namespace, configmap_name),
                            self._core.read_namespaced_config_map, configmap_name, namespace)
        except KubeNotFound:
            return StoredState()
        return StoredState.from_object(cm)

    def write_state(self, namespace: str, configmap_name: str, data: Mapping[str, str], *, previous: StoredState,
                    fence: Fence | None = None) -> StoredState:
        """Replace the state ConfigMap's data with `data`, on condition that it is still
        `previous` (what the caller last read or wrote: its resourceVersion; its labels and
        annotations are kept), or create it when `previous` says it did not exist. Keys not in
        `data` are gone afterwards. Someone else wrote or created it since: 409 (`KubeConflict`),
        never retried here (read again). Returns what is stored now."""
        wanted = {str(k): str(v) for k, v in data.items()}
        if previous.resource_version is None:
            body: dict[str, Any] = {"metadata": {"name": configmap_name, "namespace": namespace,
                                                 "labels": {MANAGED_BY_LABEL: COMPONENT}}, "data": wanted}
            created = self._call(_Op("create", "configmaps", namespace, configmap_name),
                                 self._core.create_namespaced_config_map, namespace, body, fence=fence,
                                 field_manager=COMPONENT)
            return StoredState.from_object(created)
        metadata: dict[str, Any] = {"name": configmap_name, "namespace": namespace,
                                    "resourceVersion": previous.resource_version}
        if previous.labels:
            metadata["labels"] = dict(previous.labels)
        if previous.annotations:
            metadata["annotations"] = dict(previous.annotations)
        body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": metadata, "data": wanted}
        replaced = self._call(_Op("update", "configmaps", namespace, configmap_name),
                              self._core.replace_namespaced_config_map, configmap_name, namespace, body, fence=fence,
                              field_manager=COMPONENT)
        return StoredState.from_object(replaced)

    # ---- leases (leader election)

    # One try each: the elector tries again every retry period, and a renewal must not outlive
    # the renew deadline (`timeout_seconds`, default `request_timeout_seconds`).

    def read_lease(self, namespace: str, name: str, *, timeout_seconds: float | None = None) -> dict[str, Any] | None:
        """The Lease as JSON, or None when it does not exist."""
        try:
            lease: dict[str, Any] = self._call(_Op("get", "leases", namespace, name),
                                               self._coordination.read_namespaced_lease, name, namespace,
                                               attempts=1, timeout=timeout_seconds)
        except KubeNotFound:
            return None
        return lease

    def create_lease(self, namespace: str, body: Mapping[str, Any], *,
                     timeout_seconds: float | None = None) -> dict[str, Any]:
        """Create the Lease; KubeConflict when another replica created it first."""
        name = str((body.get("metadata") or {}).get("name", ""))
        created: dict[str, Any] = self._call(_Op("create", "leases", namespace, name),
                                             self._coordination.create_namespaced_lease, namespace, dict(body),
                                             attempts=1, timeout=timeout_seconds, field_manager=COMPONENT)
        return created

    def replace_lease(self, namespace: str, name: str, body: Mapping[str, Any], *,
                      timeout_seconds: float | None = None) -> dict[str, Any]:
        """Replace the Lease under the resourceVersion in `body`; KubeConflict when another
        replica wrote it since it was read (never retried here: the elector re-reads)."""
        replaced: dict[str, Any] = self._call(_Op("update", "leases", namespace, name),
                                              self._coordination.replace_namespaced_lease, name, namespace,
                                              dict(body), attempts=1, timeout=timeout_seconds,
                                              field_manager=COMPONENT)
        return replaced
