"""The Kubernetes adapter: the only module that imports `kubernetes`.

Everything the controller does against the API server goes through `KubeClient`:

* `snapshot(namespaces)` - one cluster view per tick, with a constant number of list calls;
* `read_scale` / `set_replicas` - the Deployment's scale subresource, optimistic concurrency;
* `emit_event` - a core/v1 Event on the Deployment;
* `read_state` / `write_state` - a ConfigMap holding learned state across restarts;
* `read_lease` / `create_lease` / `replace_lease` - the coordination.k8s.io/v1 Lease of
  leader election (`autoscaler.controller.leader`).

Responses are read as raw JSON (`_preload_content=False`) and converted by the parsers in
`autoscaler.adapters.kubernetes.objects`, skipping the client's model deserialisation: faster on big pod lists and
tolerant of fields newer than the client.

Errors: every `ApiException` and urllib3 error becomes a `KubeError` subclass. Transient ones
(429, 5xx, timeouts, connection errors) are retried with tenacity, through the injectable
`sleep`; 403/404/409/422 and other 4xx never are.

RBAC this needs: cluster-wide `list` on pods and nodes; `list` on deployments and
horizontalpodautoscalers (autoscaling) in the watched namespaces (cluster-wide when there are
more than PER_NAMESPACE_LIST_LIMIT); `get`, `patch` on deployments/scale (apps); `create` on
events; `get`, `create`, `update` on configmaps in the namespace holding the state; `get`,
`create`, `update` on leases (coordination.k8s.io) in the controller's namespace.
"""

from autoscaler.adapters.kubernetes.client import (
    ACTIVE_PODS_FIELD_SELECTOR,
    COMPONENT,
    MANAGED_BY_LABEL,
    PER_NAMESPACE_LIST_LIMIT,
    KubeClient,
)
from autoscaler.adapters.kubernetes.errors import (
    KubeConflict,
    KubeError,
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
    "KubeClient",
    "KubeConflict",
    "KubeError",
    "KubeFenced",
    "KubeForbidden",
    "KubeInvalid",
    "KubeNotFound",
    "KubeServerError",
    "KubeThrottled",
    "KubeTimeout",
    "KubeUnavailable",
    "translate_error",
]
