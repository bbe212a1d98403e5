"""The fakes cannot drift from the adapters: same methods as the controller calls, same
signatures as the real ones; and they fail closed."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import pytest

import autoscaler.controller
from autoscaler.adapters.kubernetes import KubeClient, KubeConflict, KubeFenced
from autoscaler.adapters.prometheus import PrometheusSource
from tests.controller.fakes import (
    FakeKube,
    FakePrometheus,
    ScriptedFence,
    UnscriptedCall,
    public_methods,
    stored,
)

CONTROLLER = Path(autoscaler.controller.__file__).parent


def _called_on(receivers: set[str]) -> set[str]:
    """Methods the controller's modules call on an object named one of `receivers` (`kube.x()`,
    `self.kube.x()`, `self._prometheus.x()`...)."""
    found = set()
    for path in CONTROLLER.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
                continue
            owner = node.func.value
            name = owner.id if isinstance(owner, ast.Name) else owner.attr if isinstance(owner, ast.Attribute) else None
            if name in receivers:
                found.add(node.func.attr)
    return found


@pytest.mark.parametrize(("fake", "real", "receivers"), [
    (FakeKube, KubeClient, {"kube"}),
    (FakePrometheus, PrometheusSource, {"source", "_prometheus"}),
])
def test_a_fake_has_exactly_the_methods_the_controller_calls_with_the_real_signatures(
    fake: type, real: type, receivers: set[str]
) -> None:
    methods = public_methods(fake)
    assert set(methods) == _called_on(receivers)
    for name, signature in methods.items():
        assert signature == inspect.signature(getattr(real, name)), name


def test_the_signature_check_sees_a_difference() -> None:
    class Drifted(FakeKube):
        def set_replicas(self, namespace: str, name: str, replicas: int) -> None:  # type: ignore[override]
            return None

    assert public_methods(Drifted)["set_replicas"] != inspect.signature(KubeClient.set_replicas)


def test_an_unscripted_call_raises_and_fails_verify() -> None:
    kube = FakeKube()
    with pytest.raises(UnscriptedCall, match="set_replicas"):
        kube.set_replicas("llm", "qwen", 3, resource_version="7", uid="u")
    assert kube.writes == []
    with pytest.raises(AssertionError, match="unscripted calls"):
        kube.verify()


def test_a_scripted_answer_left_unused_fails_verify() -> None:
    prometheus = FakePrometheus().script("fetch", {})
    with pytest.raises(AssertionError, match="never called"):
        prometheus.verify()


def test_answers_come_in_order_and_exceptions_are_raised() -> None:
    kube = FakeKube().script("read_state", stored({"a": "1"}), OSError("gone"))
    assert kube.read_state("ns", "cm").data == {"a": "1"}
    with pytest.raises(OSError, match="gone"):
        kube.read_state("ns", "cm")
    kube.verify()
    with pytest.raises(AttributeError):
        kube.script("delete_everything", None)




def test_a_write_asks_the_fence_and_a_failed_write_does_not() -> None:
    kube = FakeKube().script("set_replicas", KubeConflict("409"), True, True)
    fence = ScriptedFence(5.0, 0.0)
    with pytest.raises(KubeConflict):  # refused on the way: the fence was not even asked
        kube.set_replicas("llm", "qwen", 3, resource_version="7", uid="u", fence=fence)
    assert fence.asked == 0
    kube.set_replicas("llm", "qwen", 3, resource_version="8", uid="u", fence=fence)
    with pytest.raises(KubeFenced):
        kube.set_replicas("llm", "qwen", 4, resource_version="9", uid="u", fence=fence)
    assert fence.asked == 2
    assert [w.args["resource_version"] for w in kube.writes] == ["8"]
    assert [c.args["replicas"] for c in kube.called("set_replicas")] == [3, 3, 4]
