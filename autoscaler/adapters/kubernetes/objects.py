"""Pure value types for the autoscaler's view of the cluster, and their parsers.

This module never imports `kubernetes`: it works on the plain JSON objects the API server
returns (`metadata`, `spec`, `status` as dicts, camelCase keys), so that conversions and rules
can be tested with literal dicts. `autoscaler.adapters.kubernetes` does the I/O and calls the `from_object`
parsers below.

All times are Unix seconds (float). RFC 3339 timestamps are parsed with `parse_time`.

Rules implemented here (each mirrors a Kubernetes component, see the docstrings):

* label selectors (`LabelSelector.matches`) - `metav1.LabelSelectorAsSelector`;
* rollout in progress (`rollout_in_progress`) - `kubectl rollout status`, minus the
  "available < updated" clause;
* pod stage (`PodInfo.stage`) - derived from the pod's conditions and container states;
* free GPUs (`ClusterSnapshot.free_gpus_for`) - what the scheduler's NodeResourcesFit and
  TaintToleration filters would allow for one more pod of the Deployment.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timezone
from functools import cached_property
from typing import Any

from autoscaler.policy.types import PodStage, PodStartup

GPU_RESOURCE = "nvidia.com/gpu"

# Operators understood by LabelSelector. Gt/Lt only occur in node-affinity terms.
_SELECTOR_OPERATORS = frozenset({"In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"})
_FINISHED_PHASES = frozenset({"Succeeded", "Failed"})
_BLOCKING_TAINT_EFFECTS = frozenset({"NoSchedule", "NoExecute"})


# --------------------------------------------------------------------------- parsing helpers


def parse_time(value: Any) -> float | None:
    """RFC 3339 timestamp (`2024-05-01T12:00:00Z`, fractions and offsets allowed) -> Unix seconds.

    Returns None for None, "" or anything unparseable (never raises).
    """
    if not isinstance(value, str) or not value:
        return None
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        return None
    if parsed.tzinfo is None:  # the API server always sends UTC; be lenient
        parsed = parsed.replace(tzinfo=timezone.utc)
    return parsed.timestamp()


def format_time(ts: float) -> str:
    """Unix seconds -> RFC 3339 in UTC with a `Z` suffix, second precision (metav1.Time)."""
    return datetime.fromtimestamp(ts, tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


_QUANTITY_SUFFIXES: dict[str, float] = {
    "": 1.0, "m": 1e-3, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15, "E": 1e18,
    "Ki": 2.0**10, "Mi": 2.0**20, "Gi": 2.0**30, "Ti": 2.0**40, "Pi": 2.0**50, "Ei": 2.0**60,
}


def parse_quantity(value: Any) -> float:
    """A Kubernetes resource quantity ("2", 2, "500m", "1Ki", "1e3") -> float; 0.0 when malformed."""
    if isinstance(value, bool) or value is None:
        return 0.0
    if isinstance(value, (int, float)):
        return float(value) if math.isfinite(value) else 0.0
    text = str(value).strip()
    for suffix in sorted(_QUANTITY_SUFFIXES, key=len, reverse=True):
        if suffix and text.endswith(suffix):
            number, multiplier = text[: -len(suffix)], _QUANTITY_SUFFIXES[suffix]
            break
    else:
        number, multiplier = text, 1.0
    try:
        result = float(number) * multiplier
    except ValueError:
        return 0.0
    return result if math.isfinite(result) else 0.0


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _str_dict(value: Any) -> dict[str, str]:
    return {str(k): str(v) for k, v in _mapping(value).items()}


def _int(value: Any, default: int = 0) -> int:
    if isinstance(value, bool):
        return default
    if isinstance(value, int):
        return value
    if isinstance(value, float) and math.isfinite(value):
        return int(value)
    if isinstance(value, str):
        try:
            return int(value)
        except ValueError:
            return default
    return default


def _condition(conditions: Any, type_: str) -> Mapping[str, Any] | None:
    for cond in _list(conditions):
        if isinstance(cond, Mapping) and cond.get("type") == type_:
            return cond
    return None


def _container_gpus(container: Any) -> int:
    """GPUs of one container: its `nvidia.com/gpu` limit, else its request (extended resources
    must have limit == request when both are set, so either is the truth)."""
    resources = _mapping(_mapping(container).get("resources"))
    for part in ("limits", "requests"):
        amount = _mapping(resources.get(part)).get(GPU_RESOURCE)
        if amount is not None:
            return max(0, math.ceil(parse_quantity(amount)))
    return 0


def pod_spec_gpus(pod_spec: Mapping[str, Any]) -> int:
    """GPUs a pod with this spec requests: the sum over its containers; an init container that
    asks for more than that (they run one at a time, before the containers) raises it, like the
    scheduler's effective-request rule."""
    total = sum(_container_gpus(c) for c in _list(pod_spec.get("containers")))
    init_max = max((_container_gpus(c) for c in _list(pod_spec.get("initContainers"))), default=0)
    return max(total, init_max)


# --------------------------------------------------------------------------- selectors


@dataclass(frozen=True)
class LabelSelector:
    """`metav1.LabelSelector`: all `match_labels` and all `match_expressions` must hold.

    `match_expressions` items are `(key, operator, values)`; operators In, NotIn, Exists,
    DoesNotExist (and Gt/Lt with one integer value, as in node-affinity terms). An unknown
    operator matches nothing. An empty selector matches everything (Kubernetes semantics);
    callers that must not select everything check `is_empty`.
    """

    match_labels: dict[str, str] = field(default_factory=dict)
    match_expressions: tuple[tuple[str, str, tuple[str, ...]], ...] = ()

    @property
    def is_empty(self) -> bool:
        return not self.match_labels and not self.match_expressions

    def matches(self, labels: Mapping[str, str]) -> bool:
        for key, value in self.match_labels.items():
            if labels.get(key) != value:
                return False
        return all(_expression_matches(labels, *expr) for expr in self.match_expressions)

    def to_string(self) -> str:
        """The selector in `labelSelector=` query syntax (what a Scale's status.selector holds)."""
        parts = [f"{k}={v}" for k, v in sorted(self.match_labels.items())]
        for key, op, values in self.match_expressions:
            if op == "In":
                parts.append(f"{key} in ({','.join(sorted(values))})")
            elif op == "NotIn":
                parts.append(f"{key} notin ({','.join(sorted(values))})")
            elif op == "Exists":
                parts.append(key)
            elif op == "DoesNotExist":
                parts.append(f"!{key}")
            elif op in ("Gt", "Lt") and values:
                parts.append(f"{key} {'>' if op == 'Gt' else '<'} {values[0]}")
        return ",".join(parts)

    @classmethod
    def from_object(cls, obj: Any) -> LabelSelector:
        """Parse `{"matchLabels": {...}, "matchExpressions": [{"key", "operator", "values"}]}`."""
        data = _mapping(obj)
        expressions = []
        for expr in _list(data.get("matchExpressions")):
            expr = _mapping(expr)
            values = tuple(str(v) for v in _list(expr.get("values")))
            expressions.append((str(expr.get("key", "")), str(expr.get("operator", "")), values))
        return cls(match_labels=_str_dict(data.get("matchLabels")), match_expressions=tuple(expressions))


def _expression_matches(labels: Mapping[str, str], key: str, operator: str, values: tuple[str, ...]) -> bool:
    if operator not in _SELECTOR_OPERATORS:
        return False
    present = key in labels
    if operator == "Exists":
        return present
    if operator == "DoesNotExist":
        return not present
    if operator == "In":
        return present and labels[key] in values
    if operator == "NotIn":
        return not present or labels[key] not in values
    # Gt / Lt: the label and the single value must both be integers.
    if not present or len(values) != 1:
        return False
    try:
        label_value, bound = int(labels[key]), int(values[0])
    except ValueError:
        return False
    return label_value > bound if operator == "Gt" else label_value < bound


# --------------------------------------------------------------------------- taints


@dataclass(frozen=True)
class Taint:
    key: str
    value: str = ""
    effect: str = ""  # NoSchedule, PreferNoSchedule, NoExecute

    @classmethod
    def from_object(cls, obj: Any) -> Taint:
        data = _mapping(obj)
        return cls(key=str(data.get("key", "")), value=str(data.get("value") or ""), effect=str(data.get("effect") or ""))


@dataclass(frozen=True)
class Toleration:
    key: str = ""  # "" with operator Exists tolerates every taint
    operator: str = "Equal"  # Equal or Exists
    value: str = ""
    effect: str = ""  # "" tolerates every effect

    def tolerates(self, taint: Taint) -> bool:
        """`v1.Toleration.ToleratesTaint`."""
        if self.effect and self.effect != taint.effect:
            return False
        if self.key and self.key != taint.key:
            return False
        if self.operator == "Exists":
            return True
        if self.operator in ("", "Equal"):
            return self.value == taint.value
        return False

    @classmethod
    def from_object(cls, obj: Any) -> Toleration:
        data = _mapping(obj)
        return cls(
            key=str(data.get("key") or ""),
            operator=str(data.get("operator") or "Equal"),
            value=str(data.get("value") or ""),
            effect=str(data.get("effect") or ""),
        )


# --------------------------------------------------------------------------- deployments


def rollout_in_progress(deployment: Mapping[str, Any]) -> bool:
    """Whether a Deployment (API object) is rolling out a new template.

    Mirrors `kubectl rollout status` (DeploymentStatusViewer): the rollout is in progress when
      * the controller has not observed the latest spec (status.observedGeneration < metadata.generation), or
      * fewer pods run the new template than wanted (status.updatedReplicas < spec.replicas), or
      * pods of an old template still exist (status.replicas > status.updatedReplicas).
    kubectl also waits while status.availableReplicas < status.updatedReplicas; that clause is
    left out on purpose, because it is true during every plain scale-up (new pods are updated
    but not yet available) and the autoscaler must not freeze itself while its own pods load.
    A rollout stuck on ProgressDeadlineExceeded still counts as in progress.
    """
    metadata, spec, status = (_mapping(deployment.get(k)) for k in ("metadata", "spec", "status"))
    generation = _int(metadata.get("generation"), 0)
    observed = _int(status.get("observedGeneration"), 0)
    spec_replicas = _int(spec.get("replicas"), 1)
    updated = _int(status.get("updatedReplicas"), 0)
    replicas = _int(status.get("replicas"), 0)
    return observed < generation or updated < spec_replicas or replicas > updated


@dataclass(frozen=True)
class DeploymentInfo:
    namespace: str
    name: str
    uid: str
    spec_replicas: int
    selector: LabelSelector
    rollout_in_progress: bool
    gpus_per_pod: int  # sum of containers' nvidia.com/gpu limits (else requests)
    node_selector: dict[str, str] = field(default_factory=dict)
    tolerations: tuple[Toleration, ...] = ()
    annotations: dict[str, str] = field(default_factory=dict)
    # Required node affinity of the pod template: ORed terms, each a selector over node labels.
    node_affinity: tuple[LabelSelector, ...] = ()
    ready_replicas: int = 0
    labels: dict[str, str] = field(default_factory=dict)
    # What a write decided on this reading is conditional on (the scale subresource shares the
    # Deployment's resourceVersion): any change since, or a re-created Deployment, is a 409.
    resource_version: str = ""

    @property
    def key(self) -> tuple[str, str]:
        return (self.namespace, self.name)

    def can_land_on(self, node: NodeInfo) -> bool:
        """Whether a pod of this Deployment passes the node's cordon, readiness, nodeSelector,
        required node affinity and NoSchedule/NoExecute taints (resources aside)."""
        if not node.ready or node.unschedulable:
            return False
        if any(node.labels.get(k) != v for k, v in self.node_selector.items()):
            return False
        if self.node_affinity and not any(term.matches(node.labels) for term in self.node_affinity):
            return False
        return all(
            any(t.tolerates(taint) for t in self.tolerations)
            for taint in node.taints
            if taint.effect in _BLOCKING_TAINT_EFFECTS
        )

    @classmethod
    def from_object(cls, obj: Mapping[str, Any]) -> DeploymentInfo:
        metadata, spec, status = (_mapping(obj.get(k)) for k in ("metadata", "spec", "status"))
        pod_spec = _mapping(_mapping(spec.get("template")).get("spec"))
        affinity = _mapping(_mapping(pod_spec.get("affinity")).get("nodeAffinity"))
        required = _mapping(affinity.get("requiredDuringSchedulingIgnoredDuringExecution"))
        terms = tuple(
            LabelSelector.from_object({"matchExpressions": _mapping(term).get("matchExpressions")})
            for term in _list(required.get("nodeSelectorTerms"))
        )
        return cls(
            namespace=str(metadata.get("namespace", "")),
            name=str(metadata.get("name", "")),
            uid=str(metadata.get("uid", "")),
            spec_replicas=_int(spec.get("replicas"), 1),
            selector=LabelSelector.from_object(spec.get("selector")),
            rollout_in_progress=rollout_in_progress(obj),
            gpus_per_pod=pod_spec_gpus(pod_spec),
            node_selector=_str_dict(pod_spec.get("nodeSelector")),
            tolerations=tuple(Toleration.from_object(t) for t in _list(pod_spec.get("tolerations"))),
            annotations=_str_dict(metadata.get("annotations")),
            node_affinity=terms,
            ready_replicas=_int(status.get("readyReplicas"), 0),
            labels=_str_dict(metadata.get("labels")),
            resource_version=str(metadata.get("resourceVersion") or ""),
        )


# --------------------------------------------------------------------------- pods


@dataclass(frozen=True)
class PodInfo:
    namespace: str
    name: str
    labels: dict[str, str]
    node_name: str | None
    phase: str
    ready: bool
    terminating: bool  # metadata.deletionTimestamp is set
    created_at: float
    scheduled_at: float | None  # PodScheduled=True lastTransitionTime
    ready_at: float | None  # Ready=True lastTransitionTime
    unschedulable: bool  # PodScheduled=False with reason Unschedulable
    containers_running: bool  # every container has a status and is in state running
    gpu_request: int
    # a pod write's precondition (`KubeClient.annotate_pod`) and what its annotations say
    resource_version: str = ""
    annotations: Mapping[str, str] = field(default_factory=dict)

    @property
    def finished(self) -> bool:
        return self.phase in _FINISHED_PHASES

    def stage(self) -> PodStage | None:
        """Where a pod on its way is; None when it serves (ready) or is going away.

        * terminating or finished (Succeeded/Failed) -> None
        * ready -> None
        * not bound to a node (unschedulable, or not yet placed by the scheduler) -> UNSCHEDULABLE
        * bound, every container running -> LOADING (vLLM loads the model until Ready)
        * bound otherwise (image pull, container creation, crash loop) -> SCHEDULED
        """
        if self.terminating or self.finished or self.ready:
            return None
        if self.unschedulable or not self.node_name:
            return PodStage.UNSCHEDULABLE
        if self.containers_running:
            return PodStage.LOADING
        return PodStage.SCHEDULED

    def startup(self) -> PodStartup:
        return PodStartup(created_at=self.created_at, scheduled_at=self.scheduled_at, ready_at=self.ready_at)

    @classmethod
    def from_object(cls, obj: Mapping[str, Any]) -> PodInfo:
        metadata, spec, status = (_mapping(obj.get(k)) for k in ("metadata", "spec", "status"))
        conditions = status.get("conditions")
        scheduled = _condition(conditions, "PodScheduled")
        ready = _condition(conditions, "Ready")
        is_scheduled = scheduled is not None and scheduled.get("status") == "True"
        is_ready = ready is not None and ready.get("status") == "True"
        statuses = [_mapping(s) for s in _list(status.get("containerStatuses"))]
        n_containers = len(_list(spec.get("containers")))
        running = bool(statuses) and len(statuses) >= n_containers and all(
            "running" in _mapping(s.get("state")) for s in statuses
        )
        node_name = spec.get("nodeName")
        return cls(
            namespace=str(metadata.get("namespace", "")),
            name=str(metadata.get("name", "")),
            labels=_str_dict(metadata.get("labels")),
            node_name=str(node_name) if node_name else None,
            phase=str(status.get("phase") or "Pending"),
            ready=is_ready,
            terminating=metadata.get("deletionTimestamp") is not None,
            created_at=parse_time(metadata.get("creationTimestamp")) or 0.0,
            scheduled_at=parse_time(scheduled.get("lastTransitionTime")) if scheduled and is_scheduled else None,
            ready_at=parse_time(ready.get("lastTransitionTime")) if ready and is_ready else None,
            unschedulable=scheduled is not None
            and scheduled.get("status") == "False"
            and scheduled.get("reason") == "Unschedulable",
            containers_running=running,
            gpu_request=pod_spec_gpus(spec),
            resource_version=str(metadata.get("resourceVersion") or ""),
            annotations=_str_dict(metadata.get("annotations")),
        )


# --------------------------------------------------------------------------- nodes, HPAs


@dataclass(frozen=True)
class NodeInfo:
    name: str
    labels: dict[str, str]
    taints: tuple[Taint, ...]
    unschedulable: bool  # cordoned (spec.unschedulable)
    allocatable_gpus: int
    ready: bool  # Ready condition is True

    @classmethod
    def from_object(cls, obj: Mapping[str, Any]) -> NodeInfo:
        metadata, spec, status = (_mapping(obj.get(k)) for k in ("metadata", "spec", "status"))
        ready = _condition(status.get("conditions"), "Ready")
        gpus = _mapping(status.get("allocatable")).get(GPU_RESOURCE)
        return cls(
            name=str(metadata.get("name", "")),
            labels=_str_dict(metadata.get("labels")),
            taints=tuple(Taint.from_object(t) for t in _list(spec.get("taints"))),
            unschedulable=bool(spec.get("unschedulable", False)),
            allocatable_gpus=max(0, int(parse_quantity(gpus))) if gpus is not None else 0,
            ready=ready is not None and ready.get("status") == "True",
        )


@dataclass(frozen=True)
class HPAInfo:
    namespace: str
    name: str
    target_kind: str
    target_name: str

    @classmethod
    def from_object(cls, obj: Mapping[str, Any]) -> HPAInfo:
        metadata, spec = _mapping(obj.get("metadata")), _mapping(obj.get("spec"))
        target = _mapping(spec.get("scaleTargetRef"))
        return cls(
            namespace=str(metadata.get("namespace", "")),
            name=str(metadata.get("name", "")),
            target_kind=str(target.get("kind", "")),
            target_name=str(target.get("name", "")),
        )


# --------------------------------------------------------------------------- snapshot


@dataclass(frozen=True)
class ClusterSnapshot:
    """What one tick saw. `pods` holds the pods of the watched namespaces plus, from other
    namespaces, the GPU pods bound to nodes (they only matter for `free_gpus_for`)."""

    deployments: tuple[DeploymentInfo, ...] = ()
    pods: tuple[PodInfo, ...] = ()
    nodes: tuple[NodeInfo, ...] = ()
    hpas: tuple[HPAInfo, ...] = ()

    # Indexes, built once per snapshot (it is immutable): per-target lookups must not scan the
    # whole cluster, or a tick grows with targets x pods.
    @cached_property
    def _deployments_by_key(self) -> dict[tuple[str, str], DeploymentInfo]:
        index: dict[tuple[str, str], DeploymentInfo] = {}
        for dep in self.deployments:
            index.setdefault((dep.namespace, dep.name), dep)
        return index

    @cached_property
    def _pods_by_namespace(self) -> dict[str, list[PodInfo]]:
        index: dict[str, list[PodInfo]] = {}
        for pod in self.pods:
            index.setdefault(pod.namespace, []).append(pod)
        return index

    @cached_property
    def _hpas_by_target(self) -> dict[tuple[str, str], HPAInfo]:
        index: dict[tuple[str, str], HPAInfo] = {}
        for hpa in self.hpas:
            if hpa.target_kind == "Deployment":
                index.setdefault((hpa.namespace, hpa.target_name), hpa)
        return index

    @cached_property
    def _gpus_used(self) -> dict[str, int]:
        return self.gpus_in_use()

    @cached_property
    def _free_gpus_by_placement(self) -> dict[str, int]:
        return {}

    def deployment(self, namespace: str, name: str) -> DeploymentInfo | None:
        return self._deployments_by_key.get((namespace, name))

    def pods_of(self, deployment: DeploymentInfo) -> tuple[PodInfo, ...]:
        """Pods in the Deployment's namespace matched by its selector (pods of old ReplicaSets
        included). An empty selector selects nothing: the deployment controller refuses those."""
        if deployment.selector.is_empty:
            return ()
        return tuple(
            p for p in self._pods_by_namespace.get(deployment.namespace, ()) if deployment.selector.matches(p.labels)
        )

    def gpus_in_use(self) -> dict[str, int]:
        """node name -> GPUs requested by the non-finished pods bound to it. Terminating pods
        still count: they hold their GPUs until their containers are gone."""
        used: dict[str, int] = {}
        for pod in self.pods:
            if pod.node_name and not pod.finished and pod.gpu_request > 0:
                used[pod.node_name] = used.get(pod.node_name, 0) + pod.gpu_request
        return used

    def free_gpus_for(self, deployment: DeploymentInfo) -> int:
        """Free GPUs on the nodes a new pod of `deployment` could be scheduled on: ready,
        uncordoned nodes matching its nodeSelector and required node affinity, whose NoSchedule
        and NoExecute taints it tolerates; per node, allocatable minus requested (never < 0).
        A sum, so fragmentation (3 nodes with 1 free GPU each vs. a 2-GPU pod) is not seen."""
        # Deployments with the same placement constraints see the same nodes: compute once.
        key = repr((sorted(deployment.node_selector.items()), deployment.tolerations, deployment.node_affinity))
        cache = self._free_gpus_by_placement
        if key not in cache:
            used = self._gpus_used
            cache[key] = sum(
                max(0, node.allocatable_gpus - used.get(node.name, 0))
                for node in self.nodes
                if deployment.can_land_on(node)
            )
        return cache[key]

    def hpa_for(self, deployment: DeploymentInfo) -> HPAInfo | None:
        """The HorizontalPodAutoscaler whose scaleTargetRef is this Deployment, if any."""
        return self._hpas_by_target.get((deployment.namespace, deployment.name))


def snapshot_from_objects(
    deployments: Iterable[Mapping[str, Any]],
    pods: Iterable[Mapping[str, Any]],
    nodes: Iterable[Mapping[str, Any]],
    hpas: Iterable[Mapping[str, Any]],
) -> ClusterSnapshot:
    """Build a snapshot from API objects (as listed), without filtering."""
    return ClusterSnapshot(
        deployments=tuple(DeploymentInfo.from_object(d) for d in deployments),
        pods=tuple(PodInfo.from_object(p) for p in pods),
        nodes=tuple(NodeInfo.from_object(n) for n in nodes),
        hpas=tuple(HPAInfo.from_object(h) for h in hpas),
    )
