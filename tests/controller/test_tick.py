"""`Controller.tick()` against the fail-closed fakes of the two adapters: every call a tick
makes is scripted, every write it sends is checked. Milliseconds per test; the same paths
through the real client, the API test server and a real Prometheus are in tests/test_loop.py
and tests/faults/."""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest
import yaml
from structlog.testing import capture_logs

from autoscaler.adapters.kubernetes import (
    KubeConflict,
    KubeForbidden,
    KubeNotFound,
    KubeTimeout,
    KubeUnavailable,
)
from autoscaler.adapters.kubernetes.objects import (
    ClusterSnapshot,
    snapshot_from_objects,
)
from autoscaler.adapters.prometheus import PodMetrics, PrometheusUnavailable
from autoscaler.config import ConfigWatcher
from autoscaler.controller.loop import Controller, TargetOutcome
from autoscaler.policy import MetricSample, PolicyState
from tests.controller.fakes import FakeKube, FakePrometheus, ScriptedFence, stored
from tests.kube_api_server import deployment, hpa, node, pod

NS, NAME = "llm", "qwen"
NOW = 1_700_000_000.0
STATE_CM = "vllm-queue-autoscaler-state"
BUSY = {"waiting": 15.0, "running": 8.0, "kv": 0.95, "completed": 1.6}  # 2 pods of it: 4 replicas
IDLE = {"waiting": 0.0, "running": 1.0, "kv": 0.05, "completed": 0.2}  # 4 pods of it: too many
STEADY = {"waiting": 0.0, "running": 6.0, "kv": 0.75, "completed": 1.2}  # 3 pods of it: 3 replicas


@pytest.fixture
def config(tmp_path: Path) -> Path:
    """One target; the scale-down window off, so that one tick can scale down (one pod per 120 s)."""
    path = tmp_path / "autoscaler.yaml"
    path.write_text(yaml.safe_dump({"targets": [{
        "namespace": NS, "deployment": NAME, "max_replicas": 8,
        "scale_down_window_seconds": 0, "scale_down_window_lead_times": 0,
    }]}))
    return path


def cluster(replicas: int, *, with_hpa: bool = False, spec_replicas: int | None = None, rv: str = "41",
            uid: str = "uid-1") -> ClusterSnapshot:
    """`replicas` ready pods on one 8-GPU node; the Deployment asks for `spec_replicas`
    (default `replicas`) and was read at resourceVersion `rv`."""
    pods = [pod(f"{NAME}-{i}", NS, labels={"app": NAME}, state="ready", created_at=NOW - 900,
                scheduled_at=NOW - 898, started_at=NOW - 880, ready_at=NOW - 700) for i in range(replicas)]
    dep = deployment(NAME, NS, replicas=replicas if spec_replicas is None else spec_replicas,
                     labels={"app": NAME}, uid=uid)
    dep["metadata"]["resourceVersion"] = rv
    return snapshot_from_objects(
        deployments=[dep],
        pods=pods,
        nodes=[node("gpu-node-1", gpus=8)],
        hpas=[hpa("qwen-cpu", NS, target_name=NAME)] if with_hpa else [],
    )


def pod_metrics(load: dict[str, float], at: float = NOW - 2) -> PodMetrics:
    return PodMetrics(
        waiting=MetricSample(load["waiting"], at),
        running=MetricSample(load["running"], at),
        kv_cache_usage=MetricSample(load["kv"], at),
        kv_metric_name="vllm:kv_cache_usage_perc",
        completed_per_second=MetricSample(load["completed"], at),
    )


def fleet(replicas: int, load: dict[str, float]) -> dict[tuple[str, str], PodMetrics]:
    return {(NS, f"{NAME}-{i}"): pod_metrics(load) for i in range(replicas)}


class Clock:
    def __init__(self) -> None:
        self.now = NOW

    def __call__(self) -> float:
        return self.now




FOLLOWER = ScriptedFence(0.0)


def controller(config: Path, kube: FakeKube, prometheus: FakePrometheus, *, dry_run: bool = False,
               fence: ScriptedFence | None = None, clock: Clock | None = None) -> Controller:
    return Controller(watcher=ConfigWatcher(config), kube=kube, prometheus_factory=lambda settings: prometheus,
                      dry_run=dry_run, clock=clock or Clock(), fence=fence)


def reads(kube: FakeKube, prometheus: FakePrometheus, snapshot: ClusterSnapshot,
          metrics: dict[tuple[str, str], PodMetrics] | Exception, *, first: bool = True) -> None:
    """Script the reads of one tick: the cluster, Prometheus, and on the first tick the state
    (no state ConfigMap yet)."""
    kube.script("snapshot", snapshot)
    prometheus.script("fetch", metrics)
    if first:
        kube.script("read_state", stored(resource_version=None))


STORED = "100"  # the resourceVersion the server answers to a state write


def written(kube: FakeKube) -> list[tuple[str, Any]]:
    """The writes sent: (method, the replicas / the Event's reason / the state's keys)."""
    detail = {"set_replicas": "replicas", "emit_event": "reason", "write_state": "data"}
    return [(w.method, sorted(w.args["data"]) if w.method == "write_state" else w.args[detail[w.method]])
            for w in kube.writes]


def one(outcomes: Sequence[TargetOutcome]) -> TargetOutcome:
    [outcome] = outcomes
    assert outcome.decision is not None
    return outcome


def test_scale_up_patches_the_scale_records_an_event_and_the_state(
    config: Path, kube: FakeKube, prometheus: FakePrometheus
) -> None:
    reads(kube, prometheus, cluster(2), fleet(2, BUSY))
    kube.script("write_state", STORED).script("set_replicas", True).script("emit_event", {})
    c = controller(config, kube, prometheus)
    outcome = one(c.tick())
    assert (outcome.action, outcome.decision.reason.value, outcome.decision.desired_replicas) == (
        "patched", "scale_up_queue", 4)
    # the scale event is recorded before the scale write it stands for
    assert written(kube) == [("write_state", ["llm.qwen"]), ("set_replicas", 4), ("emit_event", "ScaledUp")]
    assert json.loads(kube.writes[0].args["data"]["llm.qwen"])["scale_up_events"] == [[NOW, 2]]
    # the write is conditional on the Deployment the decision read
    assert kube.writes[1].args | {"replicas": 4} == {"namespace": NS, "name": NAME, "replicas": 4,
                                                      "resource_version": "41", "uid": "uid-1"}
    assert "2 -> 4: scale_up_queue" in kube.writes[2].args["message"]
    assert c.states[(NS, NAME)].scale_up_events != PolicyState().scale_up_events
    assert kube.called("snapshot")[0].args == {"namespaces": [NS]}
    assert prometheus.called("fetch")[0].args == {"namespaces": [NS], "now": NOW}


def test_scale_down_removes_one_pod_then_waits_out_the_period(
    config: Path, kube: FakeKube, prometheus: FakePrometheus
) -> None:
    clock = Clock()
    c = controller(config, kube, prometheus, clock=clock)
    reads(kube, prometheus, cluster(4), fleet(4, IDLE))
    kube.script("write_state", STORED).script("set_replicas", True).script("emit_event", {})
    first = one(c.tick())
    assert (first.action, first.decision.reason.value, first.decision.desired_replicas) == (
        "patched", "scale_down", 3)
    assert first.decision.clamp is not None and first.decision.clamp.value == "scale_down_rate"

    clock.now += 15  # well inside the 120 s period of one pod: no second step
    reads(kube, prometheus, cluster(3), fleet(3, IDLE), first=False)
    second = one(c.tick())
    assert (second.action, second.decision.reason.value, second.decision.desired_replicas) == (
        "hold", "hold_scale_down_rate", 3)
    assert written(kube) == [("write_state", ["llm.qwen"]), ("set_replicas", 3), ("emit_event", "ScaledDown")]


def _absent(metrics: dict[tuple[str, str], PodMetrics]) -> None:
    del metrics[(NS, f"{NAME}-1")]


def _stale(metrics: dict[tuple[str, str], PodMetrics]) -> None:
    metrics[(NS, f"{NAME}-1")] = pod_metrics(IDLE, at=NOW - 3600)


def _nan(metrics: dict[tuple[str, str], PodMetrics]) -> None:
    metrics[(NS, f"{NAME}-1")] = pod_metrics({**IDLE, "waiting": math.nan})


@pytest.mark.parametrize(("fault", "health"), [(_absent, "absent"), (_stale, "stale"), (_nan, "nan")])
def test_missing_stale_or_nan_data_holds(
    config: Path, kube: FakeKube, prometheus: FakePrometheus, fault: Callable[[dict[Any, Any]], None], health: str
) -> None:
    """The fleet that scales down 4 -> 3 on clean data (the test above) holds at 4."""
    metrics = fleet(4, IDLE)
    fault(metrics)
    reads(kube, prometheus, cluster(4), metrics)
    kube.script("write_state", STORED)  # the learned lead times; no set_replicas is scripted
    outcome = one(controller(config, kube, prometheus).tick())
    assert (outcome.action, outcome.decision.reason.value, outcome.decision.desired_replicas) == (
        "hold", "hold_metrics_unhealthy", 4)
    assert outcome.decision.values.unhealthy_pods == {f"{NAME}-1": health}
    assert written(kube) == [("write_state", ["llm.qwen"])]


def test_prometheus_down_holds(config: Path, kube: FakeKube, prometheus: FakePrometheus) -> None:
    reads(kube, prometheus, cluster(4), PrometheusUnavailable("Prometheus at http://p:9090 unreachable"))
    kube.script("write_state", STORED)
    with capture_logs() as logs:
        outcome = one(controller(config, kube, prometheus).tick())
    assert (outcome.action, outcome.decision.reason.value, outcome.decision.desired_replicas) == (
        "hold", "hold_metrics_unhealthy", 4)
    assert outcome.decision.values.unhealthy_pods == {f"{NAME}-{i}": "absent" for i in range(4)}
    assert [x["event"] for x in logs if x["log_level"] == "error"] == ["metrics_unreadable"]
    assert written(kube) == [("write_state", ["llm.qwen"])]


def test_cluster_unreadable_decides_nothing(config: Path, kube: FakeKube, prometheus: FakePrometheus) -> None:
    kube.script("snapshot", KubeUnavailable("connection refused"))
    [outcome] = controller(config, kube, prometheus).tick()
    assert (outcome.action, outcome.decision, outcome.error) == ("error", None, "connection refused")
    assert kube.writes == [] and prometheus.calls == []


def test_dry_run_writes_nothing(config: Path, kube: FakeKube, prometheus: FakePrometheus) -> None:
    reads(kube, prometheus, cluster(2), fleet(2, BUSY))
    c = controller(config, kube, prometheus, dry_run=True)
    outcome = one(c.tick())
    assert (outcome.action, outcome.decision.desired_replicas) == ("dry_run", 4)
    assert kube.writes == []
    state = c.states[(NS, NAME)]
    assert state.scale_up_events == PolicyState().scale_up_events  # the scale-up did not happen
    assert state.load_history != PolicyState().load_history  # the reading is kept


def _dry_run_state(config: Path, snapshot: ClusterSnapshot, metrics: dict[tuple[str, str], PodMetrics]) -> PolicyState:
    kube, prometheus = FakeKube(), FakePrometheus()
    reads(kube, prometheus, snapshot, metrics)
    c = controller(config, kube, prometheus, dry_run=True)
    c.tick()
    kube.verify()
    prometheus.verify()
    return c.states[(NS, NAME)]


@pytest.mark.parametrize("error", [
    KubeForbidden("403: cannot patch deployments/scale", verb="patch", resource="deployments/scale"),
    KubeTimeout("no answer within 10 s", verb="patch", resource="deployments/scale"),
])
def test_a_failed_write_leaves_the_state_as_if_nothing_was_written(
    config: Path, kube: FakeKube, prometheus: FakePrometheus, error: Exception
) -> None:
    reads(kube, prometheus, cluster(2), fleet(2, BUSY))
    kube.script("write_state", "100").script("set_replicas", error).script("emit_event", {})
    kube.script("write_state", "101")  # the event recorded ahead is taken back: it did not happen
    clock = Clock()
    c = controller(config, kube, prometheus, clock=clock)
    [outcome] = c.tick()
    assert (outcome.action, outcome.error) == ("error", str(error))
    assert outcome.decision is not None and outcome.decision.desired_replicas == 4
    assert written(kube) == [("write_state", ["llm.qwen"]), ("emit_event", "FailedRescale"),
                             ("write_state", ["llm.qwen"])]
    assert kube.writes[1].args["message"] == f"2 -> 4 failed: {error}"
    assert c.states[(NS, NAME)] == _dry_run_state(config, cluster(2), fleet(2, BUSY))

    # the same error on the next tick: no second Warning (and the learned state is unchanged)
    reads(kube, prometheus, cluster(2), fleet(2, BUSY), first=False)
    kube.script("write_state", "102").script("set_replicas", error).script("write_state", "103")
    clock.now += 15
    assert c.tick()[0].action == "error"
    assert [w.method for w in kube.writes].count("emit_event") == 1


def test_a_timeout_on_a_scale_down_counts_it_as_done(config: Path, kube: FakeKube, prometheus: FakePrometheus) -> None:
    """The patch may have landed: a second scale-down waits the period, as after a success."""
    reads(kube, prometheus, cluster(4), fleet(4, IDLE))
    kube.script("write_state", STORED).script("set_replicas", KubeTimeout("no answer within 10 s"))
    kube.script("emit_event", {})
    c = controller(config, kube, prometheus)
    assert c.tick()[0].action == "error"
    assert c.states[(NS, NAME)].scale_down_events != PolicyState().scale_down_events


def test_a_deployment_gone_before_the_patch_fails_without_a_warning(
    config: Path, kube: FakeKube, prometheus: FakePrometheus
) -> None:
    reads(kube, prometheus, cluster(2), fleet(2, BUSY))
    kube.script("write_state", "100").script("set_replicas", KubeNotFound("deployments/scale llm/qwen not found"))
    kube.script("write_state", "101")
    assert controller(config, kube, prometheus).tick()[0].action == "error"
    assert written(kube) == [("write_state", ["llm.qwen"]), ("write_state", ["llm.qwen"])]


def test_a_follower_decides_and_writes_nothing(config: Path, kube: FakeKube, prometheus: FakePrometheus) -> None:
    reads(kube, prometheus, cluster(2), fleet(2, BUSY))
    outcome = one(controller(config, kube, prometheus, fence=FOLLOWER).tick())
    assert (outcome.action, outcome.decision.desired_replicas) == ("standby", 4)
    assert kube.writes == []


def test_the_lease_lost_between_the_plan_and_the_patch_writes_nothing(
    config: Path, kube: FakeKube, prometheus: FakePrometheus
) -> None:
    reads(kube, prometheus, cluster(2), fleet(2, BUSY))
    kube.script("write_state", "100").script("set_replicas", True)
    # leading at the tick's start and at the plan; the event is recorded (the state write's
    # fence says yes); lost at the patch's fence; still lost when the state would be written
    fence = ScriptedFence(5.0, 5.0, 5.0, 0.0)
    c = controller(config, kube, prometheus, fence=fence)
    with capture_logs() as logs:
        outcome = one(c.tick())
    assert outcome.action == "standby"
    assert written(kube) == [("write_state", ["llm.qwen"])]  # the event ahead of the patch, no patch
    assert fence.asked == 5  # tick, plan, state, patch, the state at the end: not written
    assert [x.get("fenced") for x in logs if x["event"] == "decision"] == [True]
    assert c.states[(NS, NAME)].scale_up_events == PolicyState().scale_up_events


def test_an_hpa_in_charge_gets_no_write_but_one_warning(
    config: Path, kube: FakeKube, prometheus: FakePrometheus
) -> None:
    reads(kube, prometheus, cluster(2, with_hpa=True), fleet(2, BUSY))
    kube.script("emit_event", {}).script("write_state", STORED)
    clock = Clock()
    c = controller(config, kube, prometheus, clock=clock)
    outcome = one(c.tick())
    assert (outcome.action, outcome.decision.desired_replicas) == ("skipped_hpa", 4)
    assert written(kube) == [("emit_event", "HPAConflict"), ("write_state", ["llm.qwen"])]
    assert "qwen-cpu" in kube.writes[0].args["message"]

    reads(kube, prometheus, cluster(2, with_hpa=True), fleet(2, BUSY), first=False)
    clock.now += 15
    assert one(c.tick()).action == "skipped_hpa"
    assert len(kube.writes) == 2  # no second warning; the state did not change


def test_the_write_is_conditional_and_a_conflict_is_decided_again_next_tick(
    config: Path, kube: FakeKube, prometheus: FakePrometheus
) -> None:
    """The decision read 4 replicas at resourceVersion 41; an operator scaled to 8 meanwhile,
    so the conditional write gets 409: nothing is re-sent, no Warning, no scale event kept. The
    next tick reads 8 and takes one step down from there (7), conditional on what it read."""
    clock = Clock()
    c = controller(config, kube, prometheus, clock=clock)
    reads(kube, prometheus, cluster(4), fleet(4, IDLE))
    conflict = KubeConflict("409: the object has been modified", verb="patch", resource="deployments/scale")
    kube.script("write_state", "100").script("set_replicas", conflict).script("write_state", "101")
    with capture_logs() as logs:
        first = one(c.tick())
    assert (first.action, first.decision.desired_replicas, first.error) == ("conflict", 3, str(conflict))
    assert [(x["event"], x["log_level"], x["action"]) for x in logs if x["event"] == "decision"] == [
        ("decision", "warning", "conflict")]
    assert len(kube.called("set_replicas")) == 1  # never re-sent
    # no FailedRescale: a conflict is not a failure; the event recorded ahead is taken back
    assert written(kube) == [("write_state", ["llm.qwen"]), ("write_state", ["llm.qwen"])]
    assert c.states[(NS, NAME)].scale_down_events == PolicyState().scale_down_events
    assert c.metrics.errors.labels(NS, NAME, "conflict")._value.get() == 1

    clock.now += 15
    reads(kube, prometheus, cluster(8, rv="57"), fleet(8, IDLE), first=False)
    kube.script("write_state", "102").script("set_replicas", True).script("emit_event", {})
    second = one(c.tick())
    assert (second.action, second.decision.current_replicas, second.decision.desired_replicas) == ("patched", 8, 7)
    last = kube.called("set_replicas")[-1].args
    assert (last["replicas"], last["resource_version"], last["uid"]) == (7, "57", "uid-1")


def test_a_deployment_scaled_to_zero_is_left_alone(config: Path, kube: FakeKube, prometheus: FakePrometheus) -> None:
    """HPA's rule: an operator parked the Deployment at 0 (min_replicas is 1): autoscaling is
    disabled for it, nothing is decided nor written, until someone scales it up again."""
    reads(kube, prometheus, cluster(0), {})
    with capture_logs() as logs:
        [outcome] = controller(config, kube, prometheus).tick()
    assert (outcome.action, outcome.decision) == ("disabled", None)
    assert kube.writes == []
    [line] = [x for x in logs if x["event"] == "decision"]
    assert (line["action"], line["current"], line["desired"]) == ("disabled", 0, 0)


def test_the_state_write_is_conditional_prunes_removed_targets_and_rereads_after_a_conflict(
    config: Path, kube: FakeKube, prometheus: FakePrometheus
) -> None:
    clock = Clock()
    c = controller(config, kube, prometheus, clock=clock)
    kube.script("snapshot", cluster(3))
    prometheus.script("fetch", fleet(3, STEADY))
    kube.script("read_state", stored({"llm.qwen": "{}", "llm.removed-model": "{}"}, "7"))
    kube.script("write_state", KubeConflict("409: the object has been modified"))
    assert one(c.tick()).action == "hold"
    [first] = kube.called("write_state")
    assert first.args["previous"].resource_version == "7"  # conditional on what was read
    assert sorted(first.args["data"]) == ["llm.qwen"]  # the target no longer configured is dropped

    # the conflict: read again before writing again, on the new resourceVersion
    clock.now += 15
    kube.script("snapshot", cluster(3))
    prometheus.script("fetch", fleet(3, STEADY))
    kube.script("read_state", stored({"llm.qwen": "{}"}, "9")).script("write_state", "10")
    assert one(c.tick()).action == "hold"
    second = kube.called("write_state")[-1]
    assert second.args["previous"].resource_version == "9" and sorted(second.args["data"]) == ["llm.qwen"]
    assert [w.method for w in kube.writes] == ["write_state"]


# ---- what survives a restart or a failover (issue 13, defect 5)


def test_a_restart_keeps_the_scale_down_period(config: Path, kube: FakeKube, prometheus: FakePrometheus) -> None:
    """4 -> 3, then the process dies. The new process reads the state ConfigMap: the removal
    15 s ago is in it, so 3 -> 2 waits out the period (it used to happen at once: the scale
    events lived in memory only)."""
    first = controller(config, kube, prometheus)
    reads(kube, prometheus, cluster(4), fleet(4, IDLE))
    kube.script("write_state", "100").script("set_replicas", True).script("emit_event", {})
    assert one(first.tick()).action == "patched"
    kept = kube.writes[0].args["data"]  # recorded before the patch: a crash right after it keeps it

    clock = Clock()
    clock.now += 15
    restarted = controller(config, kube, prometheus, clock=clock)
    kube.script("snapshot", cluster(3, rv="42"))
    prometheus.script("fetch", fleet(3, IDLE))
    kube.script("read_state", stored(kept, "100"))
    outcome = one(restarted.tick())
    assert (outcome.action, outcome.decision.desired_replicas, outcome.decision.reason.value) == (
        "hold", 3, "hold_scale_down_rate")
    assert [w.method for w in kube.writes].count("set_replicas") == 1


def test_a_new_leader_reads_what_the_old_one_recorded(config: Path, kube: FakeKube, prometheus: FakePrometheus) -> None:
    """B follows while A scales 4 -> 3 (and records it). When B takes over it reads the state
    ConfigMap again before acting: it holds for the rest of the period instead of removing a
    second pod."""
    fence = ScriptedFence(0.0)
    clock = Clock()
    b = controller(config, kube, prometheus, fence=fence, clock=clock)
    reads(kube, prometheus, cluster(4), fleet(4, IDLE))
    assert one(b.tick()).action == "standby"

    # meanwhile A scaled 4 -> 3 at NOW + 5 and recorded it; B takes over at NOW + 15
    a_recorded = {"llm.qwen": json.dumps({"version": 2, "lead": {"version": 1}, "scale_up_events": [],
                                          "scale_down_events": [[NOW + 5, 1]]})}
    fence.left = [10.0]
    clock.now += 15
    kube.script("snapshot", cluster(3, rv="50"))
    prometheus.script("fetch", fleet(3, IDLE))
    kube.script("read_state", stored(a_recorded, "77"))
    kube.script("write_state", "78")  # B's own state (its learning), on A's resourceVersion
    outcome = one(b.tick())
    assert (outcome.action, outcome.decision.reason.value) == ("hold", "hold_scale_down_rate")
    assert kube.called("write_state")[-1].args["previous"].resource_version == "77"
    assert kube.called("set_replicas") == []


def test_a_scale_down_is_not_sent_unless_its_event_was_recorded(
    config: Path, kube: FakeKube, prometheus: FakePrometheus
) -> None:
    reads(kube, prometheus, cluster(4), fleet(4, IDLE))
    forbidden = KubeForbidden("403: cannot update configmaps", verb="update", resource="configmaps")
    kube.script("write_state", forbidden, forbidden).script("emit_event", {})
    outcome = one(controller(config, kube, prometheus).tick())
    assert (outcome.action, outcome.error) == ("error", str(forbidden))
    assert kube.called("set_replicas") == []  # holding is safe; a forgotten removal is not
    assert written(kube) == [("emit_event", "FailedRescale")]


def test_a_scale_up_goes_ahead_when_its_event_cannot_be_recorded(
    config: Path, kube: FakeKube, prometheus: FakePrometheus
) -> None:
    reads(kube, prometheus, cluster(2), fleet(2, BUSY))
    forbidden = KubeForbidden("403: cannot update configmaps", verb="update", resource="configmaps")
    kube.script("write_state", forbidden, forbidden).script("set_replicas", True).script("emit_event", {})
    with capture_logs() as logs:
        outcome = one(controller(config, kube, prometheus).tick())
    assert outcome.action == "patched"
    assert "scale_event_unrecorded" in [x["event"] for x in logs]


def test_nothing_scales_down_before_the_state_could_be_read(
    config: Path, kube: FakeKube, prometheus: FakePrometheus
) -> None:
    kube.script("snapshot", cluster(4))
    prometheus.script("fetch", fleet(4, IDLE))
    kube.script("read_state", KubeUnavailable("connection refused")).script("emit_event", {})
    outcome = one(controller(config, kube, prometheus).tick())
    assert outcome.action == "error" and "could not be read" in (outcome.error or "")
    assert kube.called("set_replicas") == [] and kube.called("write_state") == []


def test_a_state_conflict_holds_every_later_scale_write_of_the_tick(
    tmp_path: Path, kube: FakeKube, prometheus: FakePrometheus
) -> None:
    """Another replica wrote the state ConfigMap meanwhile: what this tick counted may be stale,
    for every target. No scale write goes out this tick; the next one reads it again."""
    path = tmp_path / "two.yaml"
    path.write_text(yaml.safe_dump({"targets": [
        {"namespace": NS, "deployment": name, "max_replicas": 8, "scale_down_window_seconds": 0,
         "scale_down_window_lead_times": 0} for name in (NAME, "other")]}))
    one_cluster = cluster(4)
    dep = deployment("other", NS, replicas=4, labels={"app": "other"})
    dep["metadata"]["resourceVersion"] = "43"
    pods = [pod(f"other-{i}", NS, labels={"app": "other"}, state="ready", created_at=NOW - 900,
                scheduled_at=NOW - 898, started_at=NOW - 880, ready_at=NOW - 700) for i in range(4)]
    both = ClusterSnapshot(deployments=one_cluster.deployments + snapshot_from_objects([dep], pods, [], []).deployments,
                           pods=one_cluster.pods + snapshot_from_objects([], pods, [], []).pods,
                           nodes=one_cluster.nodes)
    metrics = fleet(4, IDLE) | {(NS, f"other-{i}"): pod_metrics(IDLE) for i in range(4)}
    kube.script("snapshot", both).script("read_state", stored(resource_version=None))
    prometheus.script("fetch", metrics)
    kube.script("write_state", KubeConflict("409: the object has been modified"))
    outcomes = controller(path, kube, prometheus).tick()
    assert [(o.deployment, o.action) for o in outcomes] == [(NAME, "conflict"), ("other", "conflict")]
    assert kube.called("set_replicas") == [] and len(kube.called("write_state")) == 1


def fresh(replicas: int, load: dict[str, float], clock: Clock) -> dict[tuple[str, str], PodMetrics]:
    """`fleet`, its samples 2 s old at the clock's time."""
    return {(NS, f"{NAME}-{i}"): pod_metrics(load, clock.now - 2) for i in range(replicas)}


def test_a_state_configmap_deleted_under_the_controller_is_read_again_and_recreated(
    config: Path, kube: FakeKube, prometheus: FakePrometheus
) -> None:
    """4 -> 3 recorded at resourceVersion 100; then someone deletes the ConfigMap. The next
    scale-down's record is refused (404): that tick holds, and the next reads it again (gone),
    creates it and scales down. It used to replace on the deleted resourceVersion for ever, so no
    scale-down went out again until a restart."""
    clock = Clock()
    c = controller(config, kube, prometheus, clock=clock)
    reads(kube, prometheus, cluster(4), fleet(4, IDLE))
    kube.script("write_state", "100").script("set_replicas", True).script("emit_event", {})
    assert one(c.tick()).action == "patched"

    clock.now += 300
    kube.script("snapshot", cluster(3, rv="42"))
    prometheus.script("fetch", fresh(3, IDLE, clock))
    gone = KubeNotFound('404: configmaps "vllm-queue-autoscaler-state" not found', verb="update",
                        resource="configmaps")
    kube.script("write_state", gone)
    outcome = one(c.tick())
    assert outcome.action == "error" and kube.called("write_state")[-1].args["previous"].resource_version == "100"
    assert [w.method for w in kube.writes].count("set_replicas") == 1  # not sent unrecorded
    # (no FailedRescale Event for a 404: the next tick mends it)

    clock.now += 15
    kube.script("snapshot", cluster(3, rv="42"))
    prometheus.script("fetch", fresh(3, IDLE, clock))
    kube.script("read_state", stored(resource_version=None))  # read again: it does not exist
    kube.script("write_state", "200").script("set_replicas", True).script("emit_event", {})
    assert one(c.tick()).action == "patched"
    recreate = kube.called("write_state")[-1]
    assert recreate.args["previous"].resource_version is None  # a create, not a replace
    assert kube.called("set_replicas")[-1].args["replicas"] == 2
    kube.verify()


def _scaled_down_with_state_a_then_renamed(tmp_path: Path, kube: FakeKube,
                                           prometheus: FakePrometheus) -> tuple[Controller, Clock]:
    """A tick that scales 4 -> 3 and records it in the state ConfigMap `state-a` (resourceVersion
    100); then a live reload renames it `state-b` (the next tick reads the new file)."""
    path = tmp_path / "autoscaler.yaml"

    def write(name: str) -> None:
        path.write_text(yaml.safe_dump({"controller": {"state_configmap": name}, "targets": [{
            "namespace": NS, "deployment": NAME, "max_replicas": 8,
            "scale_down_window_seconds": 0, "scale_down_window_lead_times": 0}]}))

    write("state-a")
    clock = Clock()
    c = controller(path, kube, prometheus, clock=clock)
    reads(kube, prometheus, cluster(4), fleet(4, IDLE))
    kube.script("write_state", "100").script("set_replicas", True).script("emit_event", {})
    assert one(c.tick()).action == "patched"
    assert kube.called("read_state")[-1].args["configmap_name"] == "state-a"
    write("state-b")
    return c, clock


def test_a_renamed_state_configmap_is_read_before_it_is_written(
    tmp_path: Path, kube: FakeKube, prometheus: FakePrometheus
) -> None:
    """A live reload that renames `controller.state_configmap`: the next tick reads the new
    ConfigMap and writes it on its own resourceVersion, never on the old one's (a 404 for ever)."""
    c, clock = _scaled_down_with_state_a_then_renamed(tmp_path, kube, prometheus)
    clock.now += 300
    kube.script("snapshot", cluster(3, rv="42"))
    prometheus.script("fetch", fresh(3, IDLE, clock))
    kube.script("read_state", stored({}, "7"))
    kube.script("write_state", "8").script("set_replicas", True).script("emit_event", {})
    assert one(c.tick()).action == "patched"
    assert kube.called("read_state")[-1].args["configmap_name"] == "state-b"
    last = kube.called("write_state")[-1]
    assert (last.args["configmap_name"], last.args["previous"].resource_version) == ("state-b", "7")
    kube.verify()


def test_a_renamed_state_configmap_that_cannot_be_read_is_never_written_on_the_old_ones_version(
    tmp_path: Path, kube: FakeKube, prometheus: FakePrometheus
) -> None:
    """As above, but the new ConfigMap cannot be read (RBAC names the old one only: a 403). The
    replica must not write `state-b` on `state-a`'s resourceVersion 100, nor count `state-a`'s
    events as the new one's: it holds its scale-down, as any replica that cannot read its state."""
    c, clock = _scaled_down_with_state_a_then_renamed(tmp_path, kube, prometheus)

    clock.now += 300
    kube.script("snapshot", cluster(3, rv="42"))
    prometheus.script("fetch", fresh(3, IDLE, clock))
    kube.script("read_state", KubeForbidden('403: configmaps "state-b" is forbidden', verb="get",
                                            resource="configmaps"))
    kube.script("emit_event", {})  # FailedRescale: "the state ConfigMap ... state-b could not be read"
    outcome = one(c.tick())
    assert outcome.action == "error" and outcome.decision.desired_replicas == 2
    assert "state-b could not be read" in kube.called("emit_event")[-1].args["message"]
    assert [w.args.get("configmap_name") for w in kube.called("write_state")] == ["state-a"]  # no write to state-b
    assert [w.method for w in kube.writes].count("set_replicas") == 1  # the scale-down was not sent
    kube.verify()


def test_a_deployment_above_its_maximum_goes_to_it_even_without_metrics(
    tmp_path: Path, kube: FakeKube, prometheus: FakePrometheus
) -> None:
    """The bounds are the operator's, not a reading: 6 replicas under max_replicas 4 go to 4 with
    Prometheus down, as HPA does (kubernetes pkg/controller/podautoscaler/horizontal.go,
    reconcileAutoscaler: "Current number of replicas above Spec.MaxReplicas" before any metric
    is computed). The one scale-down on missing data, named for what it is."""
    path = tmp_path / "autoscaler.yaml"
    path.write_text(yaml.safe_dump({"targets": [{"namespace": NS, "deployment": NAME, "max_replicas": 4}]}))
    reads(kube, prometheus, cluster(6), PrometheusUnavailable("connection refused"))
    kube.script("write_state", STORED).script("set_replicas", True).script("emit_event", {})
    outcome = one(controller(path, kube, prometheus).tick())
    assert (outcome.action, outcome.decision.desired_replicas, outcome.decision.reason.value) == (
        "patched", 4, "scale_down_max_replicas")
    kube.verify()


def test_a_target_removed_and_added_again_starts_as_after_a_restart(
    config: Path, kube: FakeKube, prometheus: FakePrometheus
) -> None:
    """4 -> 3; the target is taken out of the ConfigMap (another stays listed), so the tick's
    state write drops its entry; put back 30 s later. A restarted replica would scale 3 -> 2
    then; the running one held on the forgotten scale event (hold_scale_down_rate) and wrote the
    old state back (found by a review). It forgets a released target as the ConfigMap does."""
    clock = Clock()
    c = controller(config, kube, prometheus, clock=clock)
    reads(kube, prometheus, cluster(4), fleet(4, IDLE))
    kube.script("write_state", "100").script("set_replicas", True).script("emit_event", {})
    assert one(c.tick()).action == "patched"
    text = config.read_text()
    config.write_text(yaml.safe_dump({"targets": [{"namespace": NS, "deployment": "other"}]}))
    clock.now += 15
    kube.script("snapshot", cluster(3, rv="42"))
    prometheus.script("fetch", fleet(3, IDLE))
    kube.script("write_state", "101")
    c.tick()
    assert sorted(kube.called("write_state")[-1].args["data"]) == []  # the released entry is dropped
    config.write_text(text)
    clock.now += 15
    kube.script("snapshot", cluster(3, rv="42"))
    prometheus.script("fetch", fleet(3, IDLE))
    kube.script("write_state", "102").script("set_replicas", True).script("emit_event", {})
    outcome = one(c.tick())
    assert (outcome.action, outcome.decision.reason.value) == ("patched", "scale_down"), outcome


def test_a_reload_of_a_start_only_key_says_it_waits_for_a_restart(
    config: Path, kube: FakeKube, prometheus: FakePrometheus
) -> None:
    """The port /metrics is served on and the controller's namespace are read at start; a
    reload that changed them was logged as applied and silently not (found by a review)."""
    c = controller(config, kube, prometheus)
    doc = yaml.safe_load(config.read_text())
    config.write_text(yaml.safe_dump({**doc, "controller": {"metrics_port": 9200, "namespace": "other"}}))
    kube.script("snapshot", cluster(3))
    prometheus.script("fetch", fleet(3, STEADY))
    kube.script("read_state", stored(resource_version=None)).script("write_state", "100")
    with capture_logs() as logs:
        c.tick()
    [warning] = [x for x in logs if x["event"] == "config_restart_required"]
    assert warning["keys"] == ["controller.metrics_port", "controller.namespace"]
    assert [x["event"] for x in logs].count("config_reloaded") == 1
