"""`fast_init`: a cheaper `__init__` for frozen dataclasses that must build exactly what the
dataclass's own `__init__` builds (decide() results, replay steps and ticks use it)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

import pytest

from autoscaler.policy.types import Decision, DecisionValues, Reason, fast_init
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
