"""`fast_init`: a cheaper `__init__` for frozen dataclasses that must build exactly what the
dataclass's own `__init__` builds (decide() results, replay steps and ticks use it)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

import pytest

from autoscaler.policy.types import Decision, DecisionValues, MetricSample, ReadyPod, Reason, fast_init
from autoscaler.replay.format import RecordedPod, Step
from autoscaler.replay.open_loop import Tick


@dataclass(frozen=True)
class _Plain:
    a: int
    b: str = "x"
    c: list[int] = field(default_factory=list)


@fast_init
@dataclass(frozen=True)
class _Fast:
    a: int
    b: str = "x"
    c: list[int] = field(default_factory=list)


def test_docstring_example() -> None:
    # Decision(3, 2, Reason.SCALE_UP_QUEUE): 3, 2, the reason, clamp None, a fresh DecisionValues()
    d = Decision(3, 2, Reason.SCALE_UP_QUEUE)
    assert (d.desired_replicas, d.current_replicas, d.reason, d.clamp) == (3, 2, Reason.SCALE_UP_QUEUE, None)
    assert d.values == DecisionValues() and d.values is not Decision(3, 2, Reason.SCALE_UP_QUEUE).values
    with pytest.raises(dataclasses.FrozenInstanceError):
        d.desired_replicas = 4  # type: ignore[misc]


@pytest.mark.parametrize("args", [(1,), (1, "y"), (1, "y", [2]), ()])
def test_same_instance_as_the_dataclass_init(args: tuple[object, ...]) -> None:
    if not args:  # a missing required argument fails as the dataclass's would
        with pytest.raises(TypeError):
            _Fast()  # type: ignore[call-arg]
        return
    fast, plain = _Fast(*args), _Plain(*args)
    assert dataclasses.astuple(fast) == dataclasses.astuple(plain)  # type: ignore[arg-type]
    assert repr(fast).replace("_Fast", "_Plain") == repr(plain)
    assert _Fast(*args) == fast
    assert _Fast(1).c is not _Fast(1).c  # the factory runs per instance


def test_replay_types_build_the_same_as_keyword_construction() -> None:
    pods = (RecordedPod("qwen-1", True),)
    step = Step(100.0, 2, 1, True, pods, {"requests_per_second": 1.0})
    assert step == Step(t=100.0, spec=2, ready=1, rollout=True, pods=pods, demand={"requests_per_second": 1.0})
    assert Step(5.0, None).demand == {} and Step(5.0, None).pods == ()
    tick = Tick(100.0, 2, 3, 3, "scale_up_queue", None, 2, 4.0)
    assert dataclasses.replace(tick, desired=2).differs and not tick.differs


def test_observation_builds_the_same_as_keyword_construction() -> None:
    """`Observation` takes `fast_init` (built once a tick): positional, keyword and defaults
    alike, every field in field order, still frozen."""
    from autoscaler.policy import Observation

    pods = (ReadyPod("a", MetricSample(1.0, 2.0), None, None),)
    positional = Observation(3, pods, (), 4, True, None)
    assert positional == Observation(spec_replicas=3, ready_pods=pods, free_gpus=4, rollout_in_progress=True)
    assert list(vars(positional)) == list(Observation.__dataclass_fields__)
    assert vars(Observation(1)) == {"spec_replicas": 1, "ready_pods": (), "pods_in_flight": (), "free_gpus": None,
                                    "rollout_in_progress": False, "slo_series": None}
    with pytest.raises(dataclasses.FrozenInstanceError):
        positional.spec_replicas = 2  # type: ignore[misc]


def test_refuses_what_it_cannot_build_the_same() -> None:
    @dataclass
    class NotFrozen:
        a: int

    @dataclass(frozen=True)
    class WithPostInit:
        a: int

        def __post_init__(self) -> None:
            pass

    for cls in (NotFrozen, WithPostInit):
        with pytest.raises(TypeError, match="fast_init does not support"):
            fast_init(cls)


def test_decision_values_from_fields() -> None:
    # docstring: from_fields(DecisionValues(ready_replicas=2).as_dict()) equals the constructor's
    built = DecisionValues(ready_replicas=2, unhealthy_pods={"a": "nan"}, ttft_attainment=0.5)
    taken = DecisionValues.from_fields(built.as_dict())
    assert taken == built and repr(taken) == repr(built)
    assert list(vars(taken).items()) == list(vars(built).items())  # same fields, same order
    with pytest.raises(dataclasses.FrozenInstanceError):
        taken.ready_replicas = 3  # type: ignore[misc]


@pytest.mark.parametrize("slo", [False, True])
def test_decide_builds_every_value_in_field_order(slo: bool) -> None:
    """decide() builds its values with `from_fields`: every field, in field order, with and
    without the SLO step (a missing key would be an attribute missing, not a default)."""
    from autoscaler.policy import Observation, PolicyParams, PolicyState, decide

    from .builders import hist, slo_pod

    now, h = 1000.0, hist((0.5, 1.0, float("inf")), (1.0, 2.0, 2.0), 1000.0)
    pods = (slo_pod("a", now, 1_000.0, 300.0, ttft=h, tpot=h, done=1.0),) if slo else ()
    d, _ = decide(PolicyParams(), Observation(spec_replicas=1, ready_pods=pods), PolicyState(), now)
    assert list(vars(d.values)) == list(DecisionValues.__dataclass_fields__)
    assert (d.values.slo_replicas > 0) is slo
