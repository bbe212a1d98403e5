"""Graceful scale-down without I/O: which pods `choose` marks, and what `write` sends, in what
order, and what it does when a mark is refused (the fakes fail closed)."""

from __future__ import annotations

import math
from typing import Any

import pytest
from structlog.testing import capture_logs

from autoscaler.adapters.kubernetes import (
    KubeConflict,
    KubeForbidden,
    KubeServerError,
)
from autoscaler.adapters.kubernetes.objects import PodInfo
from autoscaler.controller.actuation import Outcome, plan, write
from autoscaler.controller.deletion_cost import (
    DELETION_COST,
    MARKED_AT,
    Marking,
    choose,
)
from autoscaler.policy.types import MetricSample, Observation, ReadyPod
from tests.controller.fakes import FakeKube, ScriptedFence
from tests.kube_api_server import pod

NOW = 10_000.0
STALE = 60.0


def info(name: str, *, created: float = NOW - 3600, state: str = "ready", rv: str = "7",
         annotations: dict[str, str] | None = None, terminating: bool = False) -> PodInfo:
    obj = pod(name, "llm", labels={"app": "qwen"}, state=state, created_at=created, terminating=terminating)
    obj["metadata"]["resourceVersion"] = rv
    obj["metadata"]["annotations"] = dict(annotations or {})
    return PodInfo.from_object(obj)


def ready(name: str, running: float | None, waiting: float | None, age: float = 5.0) -> ReadyPod:
    def sample(v: float | None) -> MetricSample | None:
        return None if v is None else MetricSample(v, NOW - age)

    return ReadyPod(name=name, waiting=sample(waiting), running=sample(running),
                    kv_cache_usage=MetricSample(0.1, NOW - age))


def observe(*pods: ReadyPod, rollout: bool = False) -> Observation:
    return Observation(spec_replicas=len(pods), ready_pods=pods, rollout_in_progress=rollout)


def costs(marking: Marking) -> dict[str, int | None]:
    return {m.pod: m.cost for m in marking.writes}


def test_the_least_busy_ready_pods_are_marked_least_work_lowest() -> None:
    pods = [info("a"), info("b"), info("c")]
    obs = observe(ready("a", 4, 1), ready("b", 0, 0), ready("c", 2, 0))
    marking = choose(pods, obs, 1, NOW, STALE)
    assert marking.reason == "marked"
    assert marking.chosen == ("b", "c")
    assert costs(marking) == {"b": -2, "c": -1}  # a keeps 0: it stays


def test_ties_go_to_the_newest_pod_as_the_replicaset_would() -> None:
    pods = [info("old", created=NOW - 7200), info("new", created=NOW - 600), info("busy")]
    obs = observe(ready("old", 1, 0), ready("new", 1, 0), ready("busy", 9, 3))
    assert choose(pods, obs, 2, NOW, STALE).chosen == ("new",)


def test_not_ready_pods_go_first_so_only_ready_minus_desired_are_marked() -> None:
    # spec 4 -> 1 with one pod loading: the ReplicaSet removes the loading pod whatever its cost,
    # then 2 of the 3 ready ones
    pods = [info("a"), info("b"), info("c"), info("loading", state="loading")]
    obs = observe(ready("a", 4, 1), ready("b", 0, 0), ready("c", 2, 0))
    assert choose(pods, obs, 1, NOW, STALE).chosen == ("b", "c")
    # spec 4 -> 3: the loading pod is the one that goes, no ready pod: nothing to write
    nothing = choose(pods, obs, 3, NOW, STALE)
    assert (nothing.reason, nothing.writes) == ("no_ready_pod_removed", ())


@pytest.mark.parametrize("bad", [
    ready("idle", None, 0),  # no running series
    ready("idle", 0, None),  # no waiting series
    ready("idle", 0, 0, age=STALE + 1),  # stale
    ready("idle", math.nan, 0),  # NaN
])
def test_a_pod_without_fresh_samples_is_never_read_as_idle(bad: ReadyPod) -> None:
    pods = [info("idle"), info("a"), info("b")]
    marking = choose(pods, observe(bad, ready("a", 3, 0), ready("b", 5, 0)), 1, NOW, STALE)
    assert "idle" not in marking.chosen and marking.unknown == ("idle",)
    assert marking.chosen == ("a", "b")  # the known ones, least work first


def test_no_fresh_sample_at_all_marks_nothing_and_drops_old_marks() -> None:
    pods = [info("a", annotations={DELETION_COST: "-1", MARKED_AT: "2026-01-01T00:00:00Z"}), info("b")]
    marking = choose(pods, observe(ready("a", None, None), ready("b", None, None)), 1, NOW, STALE)
    assert (marking.reason, marking.chosen, costs(marking)) == ("no_fresh_metrics", (), {"a": None})


def test_an_old_mark_on_a_pod_not_chosen_again_is_removed_and_a_right_one_is_not_rewritten() -> None:
    marked = {DELETION_COST: "-1", MARKED_AT: "2026-01-01T00:00:00Z"}
    pods = [info("was-idle", annotations=marked), info("idle-now"), info("c")]
    obs = observe(ready("was-idle", 8, 2), ready("idle-now", 0, 0), ready("c", 3, 0))
    marking = choose(pods, obs, 2, NOW, STALE)
    assert marking.chosen == ("idle-now",)
    assert [(m.pod, m.cost) for m in marking.writes] == [("was-idle", None), ("idle-now", -1)]
    # the same scale-down decided again from a list showing the marks: nothing to write
    again = [info("was-idle"), info("idle-now", annotations=marked), info("c")]
    assert choose(again, obs, 2, NOW, STALE).writes == ()


def test_a_cost_someone_else_set_is_left_alone_unless_the_pod_is_chosen() -> None:
    pods = [info("user", annotations={DELETION_COST: "-5"}), info("idle"), info("c")]
    obs = observe(ready("user", 8, 0), ready("idle", 0, 0), ready("c", 3, 0))
    assert costs(choose(pods, obs, 2, NOW, STALE)) == {"idle": -1}


def test_during_a_rollout_nothing_is_marked() -> None:
    marking = choose([info("a"), info("b")], observe(ready("a", 0, 0), ready("b", 3, 0), rollout=True), 1, NOW, STALE)
    assert (marking.reason, marking.chosen) == ("rollout_in_progress", ())


def test_pods_listed_without_resource_version_or_terminating_are_never_chosen() -> None:
    pods = [info("no-rv", rv=""), info("gone", terminating=True), info("a"), info("b")]
    obs = observe(ready("no-rv", 0, 0), ready("a", 1, 0), ready("b", 2, 0))
    assert choose(pods, obs, 2, NOW, STALE).chosen == ("a",)  # 3 ready (not "gone"), 1 goes


# ---- write: marks before the scale, best effort, fenced


def scale_down(marking: Marking) -> Any:
    return plan("llm", "qwen", current=3, desired=1, dry_run=False, leading=True, hpa=None,
                resource_version="41", uid="u-1", marking=marking)


MARKING = choose([info("a", rv="11"), info("b", rv="12"), info("c", rv="13")],
                 observe(ready("a", 4, 1), ready("b", 0, 0), ready("c", 2, 0)), 1, NOW, STALE)


def test_write_marks_each_pod_conditionally_then_scales() -> None:
    kube = FakeKube().script("annotate_pod", None, None).script("set_replicas", True)
    written = write(kube, scale_down(MARKING), fence=None)  # type: ignore[arg-type]
    assert written.outcome is Outcome.PATCHED and written.marked is not None
    assert written.marked.written == ["b", "c"] and not written.marked.failed
    assert [c.method for c in kube.calls] == ["annotate_pod", "annotate_pod", "set_replicas"]
    first = kube.called("annotate_pod")[0].args
    assert first == {"namespace": "llm", "name": "b", "resource_version": "12",
                     "annotations": {DELETION_COST: "-2", MARKED_AT: "1970-01-01T02:46:40Z"}}
    kube.verify()


@pytest.mark.parametrize("error", [KubeForbidden("403: patch pods not granted"), KubeConflict("409"),
                                   KubeServerError("503")])
def test_a_refused_mark_is_logged_and_the_scale_down_goes_ahead(error: Exception) -> None:
    kube = FakeKube().script("annotate_pod", error, None).script("set_replicas", True)
    with capture_logs() as logs:
        written = write(kube, scale_down(MARKING), fence=None)  # type: ignore[arg-type]
    assert written.outcome is Outcome.PATCHED and written.marked is not None
    assert written.marked.written == ["c"] and list(written.marked.failed) == ["b"]
    [line] = [x for x in logs if x["event"] == "deletion_cost"]
    assert line["log_level"] == "warning" and line["failed"] == {"b": str(error)}
    kube.verify()


def test_a_mark_fenced_out_stops_the_marks_and_the_scale_write() -> None:
    kube = FakeKube().script("annotate_pod", None).script("set_replicas", True)
    fence = ScriptedFence(0.0)
    written = write(kube, scale_down(MARKING), fence=fence)  # type: ignore[arg-type]
    assert written.marked is not None and written.marked.fenced and written.marked.written == []
    assert written.outcome is Outcome.FENCED
    assert kube.writes == []  # nothing went out
    assert len(kube.called("annotate_pod")) == 1  # the second pod was not even tried
    kube.verify()


@pytest.mark.parametrize(("current", "desired", "dry_run", "leading", "hpa"), [
    (3, 4, False, True, None),  # a scale-up
    (3, 1, True, True, None),  # a dry run
    (3, 1, False, False, None),  # a follower
    (3, 1, False, True, "cpu"),  # an HPA in charge
])
def test_no_mark_without_a_scale_down_to_write(current: int, desired: int, dry_run: bool, leading: bool,
                                               hpa: str | None) -> None:
    planned = plan("llm", "qwen", current=current, desired=desired, dry_run=dry_run, leading=leading, hpa=hpa,
                   resource_version="41", marking=MARKING)
    assert planned.marking is None
