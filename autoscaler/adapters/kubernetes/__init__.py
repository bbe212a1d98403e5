"""The Kubernetes adapter: the only module that imports `kubernetes`.

Everything the controller does against the API server goes through `KubeClient`:

* `snapshot(namespaces)` - one cluster view per tick, with a constant number of list calls;
* `set_replicas` - the Deployment's scale subresource, conditional on the resourceVersion and
  UID the decision read;
* `annotate_pod` - a pod's annotations (the pod-deletion-cost of a graceful scale-down,
  `autoscaler.controller.deletion_cost`), conditional on the resourceVersion listed;
* `emit_event` - a core/v1 Event on the Deployment;
* `read_state` / `write_state` - a ConfigMap holding what must survive a restart or a
  failover, written conditionally on what was read;
* `read_lease` / `create_lease` / `replace_lease` - the coordination.k8s.io/v1 Lease of
  leader election (`autoscaler.controller.leader`).

Every write takes a `Fence` (leader election), asked before every try; see `KubeClient`.

Responses are read as raw JSON (`_preload_content=False`) and converted by the parsers in
`autoscaler.adapters.kubernetes.objects`, skipping the client's model deserialisation: faster on big pod lists and
tolerant of fields newer than the client.

Lists are read in one answer, or in pages of `list_page_size` from one snapshot (docs/scale.md); when
the snapshot expires before the last page (410 Expired), the list is read again whole, never two
snapshots mixed.

Errors: every `ApiException` and urllib3 error becomes a `KubeError` subclass. Transient ones
(429, 5xx, timeouts, connection errors) are retried with tenacity, through the injectable
`sleep`; 403/404/409/422 and other 4xx never are (a 401 is tried once more when the token
file was rotated: `autoscaler.adapters.kubernetes.auth`).

RBAC this needs: cluster-wide `list` on pods and nodes; `list` on deployments and
horizontalpodautoscalers (autoscaling) in the watched namespaces (cluster-wide when there are
more than PER_NAMESPACE_LIST_LIMIT); `get`, `patch` on deployments/scale (apps); `patch` on
pods in the targets' namespaces (optional: without it a scale-down is not graceful); `create` on
events; `get`, `create`, `update` on configmaps in the namespace holding the state; `get`,
`create`, `update` on leases (coordination.k8s.io) in the controller's namespace.
"""

from autoscaler.adapters.kubernetes.auth import TokenFile, TokenFileError
from autoscaler.adapters.kubernetes.client import (
    ACTIVE_PODS_FIELD_SELECTOR,
    COMPONENT,
    MANAGED_BY_LABEL,
    PER_NAMESPACE_LIST_LIMIT,
    Fence,
    KubeClient,
    StoredState,
)
from autoscaler.adapters.kubernetes.errors import (
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
    translate_error,
)

__all__ = [
    "ACTIVE_PODS_FIELD_SELECTOR",
    "COMPONENT",
    "MANAGED_BY_LABEL",
    "PER_NAMESPACE_LIST_LIMIT",
    "Fence",
    "KubeClient",
    "KubeConflict",
    "KubeError",
    "KubeExpired",
    "KubeFenced",
    "KubeForbidden",
    "KubeInvalid",
    "KubeNotFound",
    "KubeServerError",
    "KubeThrottled",
    "KubeTimeout",
    "KubeUnavailable",
    "StoredState",
    "TokenFile",
    "TokenFileError",
    "translate_error",
]
