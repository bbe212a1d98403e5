"""Teams own their targets, through `Controller.tick()` against the fail-closed fakes: the
Deployment's annotations (pause, bounds, SLO and policy keys) merged over the ConfigMap, invalid
ones reported and ignored, targets found by `target_selector`, a managed Deployment no target."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest
import yaml
from structlog.testing import capture_logs

from autoscaler.adapters.kubernetes.objects import ClusterSnapshot, snapshot_from_objects
from tests.controller.fakes import FakeKube, FakePrometheus
from tests.controller.test_tick import (
    BUSY,
    NAME,
    NOW,
    NS,
    STORED,
    Clock,
    controller,
    fleet,
    pod_metrics,
    reads,
    written,
)
from tests.kube_api_server import deployment, node, pod

P = "vllm-queue-autoscaler.io/"


@pytest.fixture
def config(tmp_path: Path) -> Path:
    path = tmp_path / "autoscaler.yaml"
    path.write_text(yaml.safe_dump({"targets": [{"namespace": NS, "deployment": NAME, "max_replicas": 8}]}))
    return path


def annotated(annotations: dict[str, str], replicas: int = 2, *, name: str = NAME, namespace: str = NS,
              labels: dict[str, str] | None = None, extra: list[dict[str, Any]] | None = None) -> ClusterSnapshot:
    """`replicas` ready pods of a Deployment carrying `annotations` (and `extra` Deployments)."""
    pods = [pod(f"{name}-{i}", namespace, labels={"app": name}, state="ready", created_at=NOW - 900,
                scheduled_at=NOW - 898, started_at=NOW - 880, ready_at=NOW - 700) for i in range(replicas)]
    dep = deployment(name, namespace, replicas=replicas, labels={"app": name}, annotations=annotations,
                     uid="uid-1")
    dep["metadata"]["labels"].update(labels or {})
    dep["metadata"]["resourceVersion"] = "41"
    return snapshot_from_objects(deployments=[dep, *(extra or [])], pods=pods,
                                 nodes=[node("gpu-node-1", gpus=8)], hpas=[])


def decisions(logs: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    return [line for line in logs if line["event"] == "decision"]


def test_a_paused_deployment_gets_no_write_and_says_why(
    config: Path, kube: FakeKube, prometheus: FakePrometheus
) -> None:
    """The busy fleet that scales 2 -> 4 unpaused (test_tick) is left alone: nothing scripted
    but the reads, so any write fails the test."""
    reads(kube, prometheus, annotated({P + "paused": "true"}), fleet(2, BUSY))
    with capture_logs() as logs:
        [outcome] = controller(config, kube, prometheus).tick()
    assert (outcome.action, outcome.decision) == ("paused", None)
    assert kube.writes == []
    [line] = decisions(logs)
    assert (line["action"], line["reason"], line["current"], line["desired"]) == ("paused", "paused", 2, 2)
    assert line["sources"] == {"max_replicas": "configmap-target"}


def test_a_paused_target_carries_no_prometheus_error(config: Path, kube: FakeKube, prometheus: FakePrometheus) -> None:
    """Prometheus unreadable: a target that decided on the missing data says so (run --once exits
    1); a paused one read nothing from it, so its row carries no error."""
    from autoscaler.adapters.prometheus import PrometheusError

    c = controller(config, kube, prometheus)
    reads(kube, prometheus, annotated({P + "paused": "true"}), PrometheusError("connection refused"))
    [outcome] = c.tick()
    assert (outcome.action, outcome.metrics_error) == ("paused", None)
    reads(kube, prometheus, annotated({}), PrometheusError("connection refused"), first=False)
    kube.script("write_state", STORED)  # the lead times learned from the pods seen (a hold writes no scale)
    [outcome] = c.tick()
    assert outcome.action == "hold" and "set_replicas" not in [m for m, _ in written(kube)]
    assert outcome.decision is not None and outcome.metrics_error == "Prometheus unreadable: connection refused"


def test_pausing_and_unpausing_take_effect_on_the_next_tick(
    config: Path, kube: FakeKube, prometheus: FakePrometheus
) -> None:
    clock = Clock()
    c = controller(config, kube, prometheus, clock=clock)
    reads(kube, prometheus, annotated({P + "paused": "true"}), fleet(2, BUSY))
    assert [o.action for o in c.tick()] == ["paused"]
    gauge = c.metrics.registry.get_sample_value
    labels = {"namespace": NS, "deployment": NAME}
    assert gauge("vllm_autoscaler_paused", labels) == 1.0
    assert (gauge("vllm_autoscaler_min_replicas", labels), gauge("vllm_autoscaler_max_replicas", labels)) == (1.0, 8.0)
    clock.now += 15
    reads(kube, prometheus, annotated({P + "paused": "false"}), fleet(2, BUSY), first=False)
    kube.script("write_state", STORED).script("set_replicas", True).script("emit_event", {})
    [outcome] = c.tick()
    assert outcome.action == "patched" and outcome.decision is not None and outcome.decision.desired_replicas == 4
    assert written(kube) == [("write_state", ["llm.qwen"]), ("set_replicas", 4), ("emit_event", "ScaledUp")]
    assert gauge("vllm_autoscaler_paused", labels) == 0.0


def test_annotated_bounds_and_slo_win_and_the_log_says_so(
    config: Path, kube: FakeKube, prometheus: FakePrometheus
) -> None:
    reads(kube, prometheus, annotated({P + "max_replicas": "3", P + "slo.ttft_seconds": "1"}), fleet(2, BUSY))
    kube.script("write_state", STORED).script("set_replicas", True).script("emit_event", {})
    with capture_logs() as logs:
        [outcome] = controller(config, kube, prometheus).tick()
    assert outcome.decision is not None and outcome.decision.desired_replicas == 3  # 4 without the annotation
    assert outcome.decision.clamp is not None and outcome.decision.clamp.value == "max_replicas"
    assert outcome.sources == {"max_replicas": "annotation", "slo.ttft_seconds": "annotation"}
    [line] = decisions(logs)
    assert line["sources"] == outcome.sources and line["clamp"] == "max_replicas"


def test_an_invalid_annotation_keeps_the_configmap_policy_and_is_reported_once(
    config: Path, kube: FakeKube, prometheus: FakePrometheus
) -> None:
    clock = Clock()
    c = controller(config, kube, prometheus, clock=clock)
    bad = {P + "max_replicas": "0", P + "min_replicas": "3"}
    reads(kube, prometheus, annotated(bad), fleet(2, BUSY))
    kube.script("emit_event", {}).script("write_state", STORED).script("set_replicas", True).script("emit_event", {})
    with capture_logs() as logs:
        [outcome] = c.tick()
    # the ConfigMap's max_replicas 8 and min_replicas 1: 2 -> 4 as without annotations
    assert outcome.action == "patched" and outcome.decision is not None and outcome.decision.desired_replicas == 4
    assert outcome.sources == {"max_replicas": "configmap-target"}
    assert written(kube)[0] == ("emit_event", "InvalidAnnotations")
    event = kube.writes[0].args
    assert event["type_"] == "Warning" and "vllm-queue-autoscaler.io/max_replicas = 0, must be >= 1" in event["message"]
    [warning] = [line for line in logs if line["event"] == "annotations_invalid"]
    assert warning["problems"] == ["vllm-queue-autoscaler.io/max_replicas = 0, must be >= 1"]

    clock.now += 15  # the same problems: neither logged nor reported again
    reads(kube, prometheus, annotated(bad, replicas=4), fleet(4, BUSY), first=False)
    kube.script("write_state", STORED).script("set_replicas", True).script("emit_event", {})
    with capture_logs() as logs:
        c.tick()
    assert [line for line in logs if line["event"] == "annotations_invalid"] == []
    assert [w for w in written(kube) if w == ("emit_event", "InvalidAnnotations")] == [
        ("emit_event", "InvalidAnnotations")]


def test_invalid_annotations_in_a_dry_run_are_logged_not_written(
    config: Path, kube: FakeKube, prometheus: FakePrometheus
) -> None:
    reads(kube, prometheus, annotated({P + "paused": "yes"}), fleet(2, BUSY))
    with capture_logs() as logs:
        [outcome] = controller(config, kube, prometheus, dry_run=True).tick()
    assert outcome.action == "dry_run" and kube.writes == []  # "yes" is no pause: decided, not written
    [warning] = [line for line in logs if line["event"] == "annotations_invalid"]
    assert warning["problems"] == ['vllm-queue-autoscaler.io/paused = "yes", must be "true" or "false"']


def test_a_target_with_invalid_annotations_never_stops_the_others(
    tmp_path: Path, kube: FakeKube, prometheus: FakePrometheus
) -> None:
    path = tmp_path / "autoscaler.yaml"
    path.write_text(yaml.safe_dump({"targets": [{"namespace": NS, "deployment": "other"},
                                                {"namespace": NS, "deployment": NAME, "max_replicas": 8}]}))
    other = deployment("other", NS, replicas=1, labels={"app": "other"},
                       annotations={P + "slo": "fast", P + "paused": "true"})
    reads(kube, prometheus, annotated({}, extra=[other]), fleet(2, BUSY))
    kube.script("emit_event", {}).script("write_state", STORED).script("set_replicas", True).script("emit_event", {})
    outcomes = controller(path, kube, prometheus).tick()
    assert [(o.deployment, o.action) for o in outcomes] == [("other", "paused"), (NAME, "patched")]
    assert kube.writes[0].args["deployment"] == "other" and "slo = fast, must be a mapping" in (
        kube.writes[0].args["message"])


def test_the_selector_finds_targets_in_every_namespace_and_they_scale(
    tmp_path: Path, kube: FakeKube, prometheus: FakePrometheus
) -> None:
    path = tmp_path / "autoscaler.yaml"
    path.write_text(yaml.safe_dump({"defaults": {"max_replicas": 3}, "targets": [],
                                    "target_selector": {"match_labels": {"team": "a"}}}))
    unlabelled = deployment("unlabelled", "elsewhere", replicas=1, labels={"app": "unlabelled"})
    reads(kube, prometheus, annotated({}, namespace="team-a", labels={"team": "a"}, extra=[unlabelled]),
          {("team-a", f"{NAME}-{i}"): pod_metrics(BUSY) for i in range(2)})
    kube.script("write_state", STORED).script("set_replicas", True).script("emit_event", {})
    with capture_logs() as logs:
        [outcome] = controller(path, kube, prometheus).tick()
    assert (outcome.namespace, outcome.deployment, outcome.action) == ("team-a", NAME, "patched")
    assert outcome.decision is not None and outcome.decision.desired_replicas == 3  # defaults.max_replicas
    assert kube.called("snapshot")[0].args == {"namespaces": []}  # every namespace
    assert prometheus.called("fetch")[0].args["namespaces"] == ["team-a"]  # only where targets are
    assert "team-a.qwen" in kube.writes[0].args["data"]  # its state is kept like a listed target's
    [line] = decisions(logs)
    assert line["sources"] == {"max_replicas": "configmap-defaults"}


def test_a_selector_that_finds_nothing_idles(tmp_path: Path, kube: FakeKube, prometheus: FakePrometheus) -> None:
    path = tmp_path / "autoscaler.yaml"
    path.write_text(yaml.safe_dump({"targets": [], "target_selector": {
        "namespaces": ["team-a", "team-b"], "match_labels": {"team": "a"}}}))
    kube.script("snapshot", annotated({}, namespace="team-a"))  # no Prometheus query, no state read
    assert controller(path, kube, prometheus).tick() == []
    assert kube.called("snapshot")[0].args == {"namespaces": ["team-a", "team-b"]}


def test_a_deployment_marked_managed_that_is_no_target_is_warned_once(
    config: Path, kube: FakeKube, prometheus: FakePrometheus
) -> None:
    clock = Clock()
    c = controller(config, kube, prometheus, clock=clock)
    forgotten = deployment("forgotten", NS, replicas=1, labels={"app": "forgotten"}, annotations={P + "managed": "true"})
    reads(kube, prometheus, annotated({P + "paused": "true"}, extra=[forgotten]), fleet(2, BUSY))
    kube.script("emit_event", {})
    with capture_logs() as logs:
        c.tick()
    assert written(kube) == [("emit_event", "NotATarget")] and kube.writes[0].args["deployment"] == "forgotten"
    assert [line["deployment"] for line in logs if line["event"] == "managed_not_a_target"] == ["forgotten"]
    clock.now += 15
    reads(kube, prometheus, annotated({P + "paused": "true"}, extra=[forgotten]), fleet(2, BUSY), first=False)
    c.tick()  # nothing more scripted: no second Event


def test_the_run_once_table_shows_paused_targets_and_annotated_keys(capsys: pytest.CaptureFixture[str]) -> None:
    from autoscaler.cli.run import outcomes_json, print_outcomes
    from autoscaler.controller.loop import TargetOutcome
    from autoscaler.policy import Decision
    from autoscaler.policy.types import Reason

    print_outcomes([
        TargetOutcome("llm", "qwen", "paused", sources={"max_replicas": "annotation"}),
        TargetOutcome("llm", "llama", "hold", Decision(3, 3, Reason.HOLD_STEADY),
                      sources={"slo.ttft_seconds": "annotation", "min_replicas": "configmap-target"}),
        TargetOutcome("llm", "gone", "error", error="boom"),
    ], dry_run=False)
    err = capsys.readouterr().out
    rows = {line.split()[1]: line for line in err.splitlines() if "llm/" in line}
    assert "paused (annotated: max_replicas)" in rows["llm/qwen"] and "error" not in rows["llm/qwen"]
    assert "hold (annotated:" in rows["llm/llama"]  # the cell wraps: its keys on the next line
    assert "slo.ttft_seconds)" in err and "min_replicas" not in err  # a ConfigMap key is not annotated
    assert "error: boom" in rows["llm/gone"]
    doc = outcomes_json([TargetOutcome("llm", "qwen", "paused", sources={"max_replicas": "annotation"})], False)
    assert doc["decisions"][0] | {"values": None} == {
        "namespace": "llm", "deployment": "qwen", "action": "paused", "error": None, "current": None,
        "desired": None, "reason": None, "clamp": None, "values": None, "sources": {"max_replicas": "annotation"}}


def test_in_a_dry_run_a_managed_deployment_no_target_is_only_logged(
    config: Path, kube: FakeKube, prometheus: FakePrometheus
) -> None:
    forgotten = deployment("forgotten", NS, replicas=1, labels={"app": "forgotten"}, annotations={P + "managed": "true"})
    reads(kube, prometheus, annotated({P + "paused": "true"}, extra=[forgotten]), fleet(2, BUSY))
    with capture_logs() as logs:
        controller(config, kube, prometheus, dry_run=True).tick()
    assert kube.writes == []  # no Event scripted: one would fail the test
    assert [line["deployment"] for line in logs if line["event"] == "managed_not_a_target"] == ["forgotten"]
