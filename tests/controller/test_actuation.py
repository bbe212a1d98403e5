"""Actuation without I/O: what a decision writes (`plan`), and the policy state a write's
outcome leaves (`settle`)."""

from __future__ import annotations

import pytest

from autoscaler.adapters.kubernetes import (
    KubeConflict,
    KubeError,
    KubeFenced,
    KubeForbidden,
    KubeNotFound,
    KubeServerError,
    KubeTimeout,
)
from autoscaler.controller.actuation import Outcome, plan, settle, write
from autoscaler.policy import PolicyState
from tests.controller.fakes import FakeKube

# leading, hpa, dry_run, current, desired -> the outcome that stands without a write (None: write)
PLANS = [
    (True, None, False, 2, 4, None),
    (True, None, False, 4, 3, None),
    (True, None, False, 3, 3, Outcome.HOLD),
    (True, None, True, 2, 4, Outcome.DRY_RUN),
    (True, None, True, 3, 3, Outcome.DRY_RUN),
    (True, "cpu", True, 2, 4, Outcome.DRY_RUN),  # a dry run shadows an HPA
    (True, "cpu", False, 2, 4, Outcome.SKIPPED_HPA),
    (True, "cpu", False, 3, 3, Outcome.SKIPPED_HPA),
    (False, None, False, 2, 4, Outcome.STANDBY),
    (False, None, False, 3, 3, Outcome.STANDBY),
    (False, "cpu", False, 2, 4, Outcome.STANDBY),  # a follower does not even warn about the HPA
    (False, None, True, 2, 4, Outcome.DRY_RUN),
]


@pytest.mark.parametrize(("leading", "hpa", "dry_run", "current", "desired", "skip"), PLANS)
def test_plan(leading: bool, hpa: str | None, dry_run: bool, current: int, desired: int, skip: Outcome | None) -> None:
    planned = plan("llm", "qwen", current=current, desired=desired, dry_run=dry_run, leading=leading, hpa=hpa)
    assert planned.skip is skip
    assert (planned.namespace, planned.deployment, planned.current, planned.desired) == ("llm", "qwen", current, desired)


def test_plan_direction() -> None:
    up = plan("llm", "qwen", current=2, desired=4, dry_run=False, leading=True, hpa=None)
    down = plan("llm", "qwen", current=4, desired=3, dry_run=False, leading=True, hpa=None)
    assert (up.direction, down.direction) == ("up", "down")


OLD = PolicyState(
    recommendations=((0.0, 3),),
    scale_up_events=((0.0, 1),),
    scale_down_events=((-200.0, 1),),
    load_history=((0.0, 30.0),),
    planned_replicas=3,
)
NEW = PolicyState(
    recommendations=((0.0, 3), (15.0, 5)),
    scale_up_events=((0.0, 1), (15.0, 2)),
    scale_down_events=((-200.0, 1), (15.0, 1)),
    load_history=((0.0, 30.0), (15.0, 45.0)),
    planned_replicas=5,
)

# outcome -> where scale_up_events, scale_down_events, planned_replicas come from
SETTLED = [
    (Outcome.HOLD, NEW, NEW, NEW),
    (Outcome.PATCHED, NEW, NEW, NEW),
    (Outcome.CONFLICT, OLD, OLD, OLD),  # the Deployment changed since it was read: nothing written
    (Outcome.DRY_RUN, OLD, OLD, OLD),
    (Outcome.STANDBY, OLD, OLD, OLD),
    (Outcome.SKIPPED_HPA, OLD, OLD, OLD),
    (Outcome.FENCED, OLD, OLD, OLD),
    (Outcome.FAILED, OLD, OLD, OLD),
    (Outcome.FAILED_MAYBE_SENT, OLD, NEW, OLD),  # a scale-down that may have landed counts as done
]


@pytest.mark.parametrize(("outcome", "up", "down", "planned"), SETTLED)
def test_settle(outcome: Outcome, up: PolicyState, down: PolicyState, planned: PolicyState) -> None:
    settled = settle(NEW, OLD, outcome)
    assert settled.scale_up_events == up.scale_up_events
    assert settled.scale_down_events == down.scale_down_events
    assert settled.planned_replicas == planned.planned_replicas
    # the readings and the learning are kept whatever became of the write
    assert (settled.recommendations, settled.load_history, settled.lead) == (
        NEW.recommendations, NEW.load_history, NEW.lead)


def test_every_outcome_is_settled_and_has_an_action() -> None:
    assert {row[0] for row in SETTLED} == set(Outcome)
    assert {o.action for o in Outcome} == {
        "hold", "dry_run", "standby", "skipped_hpa", "patched", "conflict", "error"}


# what the adapter raised -> the outcome: a write that may have landed counts as such, whatever
# the last try said (after a timeout, a 409 may be the server answering our own earlier try)
FAILURES = [
    (KubeConflict("409"), Outcome.CONFLICT),
    (KubeConflict("409", maybe_written=True), Outcome.FAILED_MAYBE_SENT),
    (KubeFenced("not the leader"), Outcome.FENCED),
    (KubeFenced("not the leader", maybe_written=True), Outcome.FAILED_MAYBE_SENT),
    (KubeForbidden("403"), Outcome.FAILED),
    (KubeNotFound("404"), Outcome.FAILED),
    (KubeTimeout("no answer"), Outcome.FAILED_MAYBE_SENT),
    (KubeServerError("503"), Outcome.FAILED_MAYBE_SENT),
]


@pytest.mark.parametrize(("error", "outcome"), FAILURES)
def test_write_classifies_what_the_adapter_raised(error: KubeError, outcome: Outcome) -> None:
    kube = FakeKube().script("set_replicas", error)
    planned = plan("llm", "qwen", current=4, desired=3, dry_run=False, leading=True, hpa=None,
                   resource_version="41", uid="u-1")
    written = write(kube, planned, fence=None)  # type: ignore[arg-type]
    assert (written.outcome, written.error) == (outcome, error)
    [call] = kube.called("set_replicas")
    assert call.args == {"namespace": "llm", "name": "qwen", "replicas": 3, "resource_version": "41", "uid": "u-1"}
    kube.verify()


def test_write_sends_nothing_for_a_plan_that_skips() -> None:
    kube = FakeKube()
    planned = plan("llm", "qwen", current=3, desired=3, dry_run=False, leading=True, hpa=None)
    assert write(kube, planned, fence=None).outcome is Outcome.HOLD  # type: ignore[arg-type]
    assert kube.calls == []
