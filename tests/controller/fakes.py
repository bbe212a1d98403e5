"""Small fakes of the two adapters that fail closed, in the spirit of kopf's `k8s_mocked`.

`FakeKube` and `FakePrometheus` have exactly the methods the controller calls on `KubeClient`
and `PrometheusSource`, with the same signatures (tests/controller/test_fakes.py checks both).
A test scripts the answers of each method, in call order: a value is returned, an exception
raised. A call with no answer left raises `UnscriptedCall` and is remembered, so that it fails
the test even where the loop isolates errors (`verify()`, run by the fixtures at teardown, also
fails on answers left unused). `PrometheusSource.close` is the one unscripted method: it is
neither a read nor a write.

Every call is in `calls`; every write that went out (a scale patch, an Event, the state
ConfigMap, a Lease) is in `writes`. Like the real adapter, a write given a `fence` asks it
before going out and raises `KubeFenced` when it has no time left; nothing is written then
(a scripted exception is raised before the fence is asked: the write failed on the way).
"""

from __future__ import annotations

import inspect
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from autoscaler.adapters.kubernetes import Fence, KubeFenced, StoredState
from autoscaler.adapters.kubernetes.objects import ClusterSnapshot, DeploymentInfo
from autoscaler.adapters.prometheus import PodMetrics


class UnscriptedCall(AssertionError):
    """A call the test did not script: the fake refuses it (fail closed)."""


@dataclass(frozen=True)
class Call:
    """One call to a fake: the method and its arguments by name."""

    method: str
    args: Mapping[str, Any]


class _Scripted:
    """Answers per method, in order; records every call."""

    def __init__(self) -> None:
        self.calls: list[Call] = []
        self.writes: list[Call] = []
        self.unscripted: list[Call] = []
        self._answers: dict[str, deque[Any]] = {}

    def script(self, method: str, *answers: Any) -> _Scripted:
        """Queue the answers of the next calls of `method` (values returned, exceptions raised)."""
        if not callable(getattr(type(self), method, None)) or method.startswith("_"):
            raise AttributeError(f"{type(self).__name__} has no method {method!r} to script")
        self._answers.setdefault(method, deque()).extend(answers)
        return self

    def verify(self) -> None:
        """Fail on any unscripted call, and on any scripted answer no call used."""
        left = {m: list(q) for m, q in self._answers.items() if q}
        assert not self.unscripted, f"unscripted calls: {self.unscripted}"
        assert not left, f"scripted but never called: {left}"

    def _answer(self, method: str, args: dict[str, Any]) -> Any:
        call = Call(method, args)
        self.calls.append(call)
        queue = self._answers.get(method)
        if not queue:
            self.unscripted.append(call)
            raise UnscriptedCall(f"{type(self).__name__}.{method}({args}) was not scripted")
        answer = queue.popleft()
        if isinstance(answer, BaseException):
            raise answer
        return answer

    def _write(self, method: str, args: dict[str, Any], fence: Fence | None = None) -> Any:
        answer = self._answer(method, args)
        if fence is not None and not fence.time_left() > 0:
            raise KubeFenced(f"not the leader (any more): {method} not sent", verb=method)
        self.writes.append(self.calls[-1])
        return answer

    def called(self, method: str) -> list[Call]:
        return [c for c in self.calls if c.method == method]


class FakeKube(_Scripted):
    """The `KubeClient` methods the controller calls (the tick and leader election)."""

    def snapshot(self, namespaces: Sequence[str]) -> ClusterSnapshot:
        answer: ClusterSnapshot = self._answer("snapshot", {"namespaces": list(namespaces)})
        return answer

    def set_replicas(self, namespace: str, name: str, replicas: int, *, resource_version: str, uid: str,
                     fence: Fence | None = None) -> None:
        """Script `True` (written) or an exception (a 409, a timeout...)."""
        self._write("set_replicas", {"namespace": namespace, "name": name, "replicas": replicas,
                                     "resource_version": resource_version, "uid": uid}, fence)

    def annotate_pod(self, namespace: str, name: str, annotations: Mapping[str, str | None], *,
                     resource_version: str, fence: Fence | None = None) -> None:
        """Script `None` (written) or an exception (a 403, a 409...)."""
        self._write("annotate_pod", {"namespace": namespace, "name": name, "annotations": dict(annotations),
                                     "resource_version": resource_version}, fence)

    def emit_event(self, namespace: str, deployment: DeploymentInfo | tuple[str, str], reason: str, message: str,
                   type_: str = "Normal", *, fence: Fence | None = None) -> dict[str, Any]:
        name = deployment.name if isinstance(deployment, DeploymentInfo) else deployment[0]
        answer: dict[str, Any] = self._write("emit_event", {"namespace": namespace, "deployment": name,
                                                            "reason": reason, "message": message, "type_": type_},
                                             fence)
        return answer

    def read_state(self, namespace: str, configmap_name: str) -> StoredState:
        answer: StoredState = self._answer("read_state", {"namespace": namespace, "configmap_name": configmap_name})
        return answer

    def write_state(self, namespace: str, configmap_name: str, data: Mapping[str, str], *, previous: StoredState,
                    fence: Fence | None = None) -> StoredState:
        """Script the new resourceVersion (the data stored is what was sent), or an exception."""
        answer: str = self._write("write_state", {"namespace": namespace, "configmap_name": configmap_name,
                                                  "data": dict(data), "previous": previous}, fence)
        return StoredState(data=dict(data), resource_version=answer)

    def read_lease(self, namespace: str, name: str, *, timeout_seconds: float | None = None) -> dict[str, Any] | None:
        answer: dict[str, Any] | None = self._answer("read_lease", {"namespace": namespace, "name": name})
        return answer

    def create_lease(self, namespace: str, body: Mapping[str, Any], *,
                     timeout_seconds: float | None = None) -> dict[str, Any]:
        answer: dict[str, Any] = self._write("create_lease", {"namespace": namespace, "body": dict(body)})
        return answer

    def replace_lease(self, namespace: str, name: str, body: Mapping[str, Any], *,
                      timeout_seconds: float | None = None) -> dict[str, Any]:
        answer: dict[str, Any] = self._write("replace_lease", {"namespace": namespace, "name": name,
                                                               "body": dict(body)})
        return answer


def stored(data: Mapping[str, str] | None = None, resource_version: str | None = "1") -> StoredState:
    """What `read_state` / `write_state` answer: the ConfigMap's data at `resource_version`
    (None: the ConfigMap does not exist)."""
    return StoredState(data=dict(data or {}), resource_version=resource_version)


class FakePrometheus(_Scripted):
    """The `PrometheusSource` methods the controller calls."""

    def __init__(self) -> None:
        super().__init__()
        self.closed = False

    def fetch(self, namespaces: Sequence[str], now: float | None = None,
              budget_seconds: float | None = None) -> dict[tuple[str, str], PodMetrics]:
        answer: dict[tuple[str, str], PodMetrics] = self._answer("fetch", {"namespaces": list(namespaces),
                                                                           "now": now})
        return answer

    def close(self) -> None:
        self.closed = True


def public_methods(cls: type) -> dict[str, inspect.Signature]:
    """The public methods a class defines itself (not inherited from a helper base), by name."""
    return {name: inspect.signature(fn) for name, fn in vars(cls).items()
            if callable(fn) and not name.startswith("_")}


class ScriptedFence:
    """Leader election as a write sees it: the seconds left, one scripted answer per question
    (the last one repeats); every question is counted in `asked`."""

    def __init__(self, *left: float) -> None:
        self.left = list(left)
        self.asked = 0

    def time_left(self) -> float:
        self.asked += 1
        return self.left.pop(0) if len(self.left) > 1 else self.left[0]
