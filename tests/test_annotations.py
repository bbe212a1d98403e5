"""Annotations on a target Deployment merged over the ConfigMap (`autoscaler.config.annotations`),
and the `target_selector` key: parsing, validation messages, precedence and provenance."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from autoscaler.config import AutoscalerConfig, ConfigError, load_config_text
from autoscaler.config.annotations import (
    ANNOTATION,
    BUILTIN,
    CONFIGMAP_DEFAULTS,
    CONFIGMAP_TARGET,
    PAUSED,
    PREFIX,
    key_problems,
    not_allowed,
    managed,
    resolve,
    scalar,
)


def config(**doc: Any) -> AutoscalerConfig:
    doc.setdefault("targets", [{"namespace": "llm", "deployment": "qwen", "max_replicas": 8}])
    return load_config_text(yaml.safe_dump(doc))


def target(cfg: AutoscalerConfig, ns: str = "llm", name: str = "qwen") -> Any:
    [found] = [t for t in cfg.targets_with([(ns, name, {"team": "a"})]) if t.key == (ns, name)]
    return found


@pytest.mark.parametrize(("text", "value"), [
    ("2", 2), (" 2 ", 2), ("-3", -3), ("0.5", 0.5), (".5", 0.5), ("1e3", 1000.0), ("null", None), ("", None),
    ("~", None), ("true", True), ("False", False), ("qwen3-8b/h100", "qwen3-8b/h100"), ("nan", "nan"),
    ("inf", "inf"), ("1e999", "1e999"), ("yes", "yes"), ("0x10", "0x10"),
])
def test_a_value_is_one_scalar(text: str, value: object) -> None:
    assert scalar(text) == value and type(scalar(text)) is type(value)


def test_a_hostile_value_is_a_problem_not_a_crash() -> None:
    cfg = config()
    digits = "9" * 5000  # more digits than int() converts
    settings = resolve(cfg, target(cfg), {PREFIX + "max_replicas": digits, PREFIX + "x" * 40: "y" * 100_000})
    assert settings.policy == cfg.policy_for(target(cfg)) and len(settings.problems) == 2
    assert all(len(p) < 200 for p in settings.problems)  # values are cut in the message


def test_no_annotation_keeps_the_configmap_policy_and_says_where_each_value_came_from() -> None:
    cfg = config(defaults={"scale_down_window_seconds": 600, "slo": {"ttft_seconds": 1.5}})
    settings = resolve(cfg, target(cfg), {"unrelated.io/x": "1"})
    assert settings.policy == cfg.policy_for(target(cfg))
    assert not settings.paused and settings.problems == ()
    assert settings.overridden() == {"max_replicas": CONFIGMAP_TARGET, "slo.ttft_seconds": CONFIGMAP_DEFAULTS,
                                     "scale_down_window_seconds": CONFIGMAP_DEFAULTS}
    assert settings.sources["min_replicas"] == BUILTIN


def test_annotations_win_over_the_target_entry_and_defaults_key_by_key() -> None:
    cfg = config(defaults={"slo": {"ttft_seconds": 1.5, "tpot_seconds": 0.05}})
    settings = resolve(cfg, target(cfg), {
        PREFIX + "max_replicas": "3", PREFIX + "min_replicas": "2", PREFIX + "slo.ttft_seconds": "0.8",
        PREFIX + "slo.attainment_target": "0.95", PREFIX + "scale_down_window_seconds": "900",
    })
    assert settings.problems == ()
    p = settings.policy
    assert (p.min_replicas, p.max_replicas, p.scale_down_window_seconds) == (2, 3, 900.0)
    assert (p.slo.ttft_seconds, p.slo.tpot_seconds, p.slo.attainment_target) == (0.8, 0.05, 0.95)
    assert settings.sources["max_replicas"] == ANNOTATION
    assert settings.sources["slo.tpot_seconds"] == CONFIGMAP_DEFAULTS  # the section is merged per key
    assert settings.annotations["slo.ttft_seconds"] == 0.8


def test_a_target_found_by_the_selector_starts_from_defaults() -> None:
    cfg = config(defaults={"max_replicas": 6}, targets=[],
                 target_selector={"match_labels": {"team": "a"}})
    [found] = cfg.targets_with([("team-a", "llama", {"team": "a"}), ("team-b", "other", {"team": "b"})])
    settings = resolve(cfg, found, {PREFIX + "min_replicas": "2"})
    assert (settings.policy.min_replicas, settings.policy.max_replicas) == (2, 6)
    assert settings.overridden() == {"min_replicas": ANNOTATION, "max_replicas": CONFIGMAP_DEFAULTS}


@pytest.mark.parametrize(("annotations", "problem"), [
    ({"max_replicas": "0"}, "vllm-queue-autoscaler.io/max_replicas = 0, must be >= 1"),
    ({"max_replicas": "many"}, "vllm-queue-autoscaler.io/max_replicas = many, must be an integer >= 1 and <= 10000"),
    ({"max_replicas": "2.5"}, "vllm-queue-autoscaler.io/max_replicas = 2.5, must be an integer >= 1 and <= 10000"),
    ({"slo.ttft_seconds": "0"}, "vllm-queue-autoscaler.io/slo.ttft_seconds = 0, must be > 0"),
    ({"slo.attainment_target": "nan"},
     'vllm-queue-autoscaler.io/slo.attainment_target = nan, must be a number >= 0.5 and <= 0.999'),
    ({"max-replicas": "3"}, "vllm-queue-autoscaler.io/max-replicas = 3, unknown key (did you mean max_replicas?)"),
    ({"slo.ttft": "1"}, "vllm-queue-autoscaler.io/slo.ttft = 1, unknown key (did you mean ttft_seconds?)"),
    # valid alone, not over the ConfigMap: the ConfigMap's target says max_replicas 8
    ({"min_replicas": "9"}, "vllm-queue-autoscaler.io/min_replicas = 9, must be <= max_replicas (8)"),
])
def test_an_invalid_annotation_keeps_the_configmap_policy_with_the_configmaps_message(
    annotations: dict[str, str], problem: str
) -> None:
    cfg = config()
    valid = {PREFIX + "scale_down_window_seconds": "900"}  # voided too: no half-applied set
    settings = resolve(cfg, target(cfg), valid | {PREFIX + k: v for k, v in annotations.items()})
    assert settings.problems == (problem,)
    assert settings.policy == cfg.policy_for(target(cfg))
    assert settings.annotations == {} and ANNOTATION not in settings.sources.values()


def test_the_same_value_in_the_configmap_reads_the_same() -> None:
    """One message per problem, whether the value stands in the ConfigMap or an annotation."""
    with pytest.raises(ConfigError) as exc:
        config(targets=[{"namespace": "llm", "deployment": "qwen", "max_replicas": 0}])
    assert exc.value.problems == ["targets[0].max_replicas = 0, must be >= 1"]
    cfg = config()
    assert resolve(cfg, target(cfg), {PREFIX + "max_replicas": "0"}).problems == (
        PREFIX + "max_replicas = 0, must be >= 1",)


def test_a_cross_field_rule_on_a_configmap_key_names_the_target() -> None:
    cfg = config(targets=[{"namespace": "llm", "deployment": "qwen", "min_replicas": 4}])
    assert resolve(cfg, target(cfg), {PREFIX + "max_replicas": "3"}).problems == (
        "min_replicas = 4, must be <= max_replicas (3) in the effective policy of llm/qwen with "
        "vllm-queue-autoscaler.io/max_replicas = 3",)


@pytest.mark.parametrize(("value", "paused"), [("true", True), ("TRUE", True), (" true ", True), ("false", False)])
def test_pause(value: str, paused: bool) -> None:
    cfg = config()
    settings = resolve(cfg, target(cfg), {PAUSED: value})
    assert settings.paused is paused and settings.problems == ()
    assert settings.policy == cfg.policy_for(target(cfg))


@pytest.mark.parametrize("value", ["yes", "1", "", "paused"])
def test_an_invalid_pause_is_not_a_pause_and_says_so(value: str) -> None:
    cfg = config()
    settings = resolve(cfg, target(cfg), {PAUSED: value})
    assert not settings.paused
    assert settings.problems[0].startswith(f"{PAUSED} = ") and settings.problems[0].endswith(
        'must be "true" or "false"')


def test_a_valid_pause_holds_even_when_policy_annotations_are_invalid() -> None:
    cfg = config()
    settings = resolve(cfg, target(cfg), {PAUSED: "true", PREFIX + "max_replicas": "0"})
    assert settings.paused and len(settings.problems) == 1


def test_managed_and_lint_ignore_are_not_policy_keys() -> None:
    cfg = config()
    settings = resolve(cfg, target(cfg), {PREFIX + "managed": "true", PREFIX + "lint-ignore": "VQA001"})
    assert settings.problems == () and settings.annotations == {}
    assert managed({PREFIX + "managed": "true"}) and not managed({PREFIX + "managed": "false"}) and not managed({})


# --- target_selector ---------------------------------------------------------------------------


def test_the_selector_finds_labelled_deployments_beside_the_listed_ones() -> None:
    cfg = config(target_selector={
        "namespaces": ["llm", "team-a"],
        "match_labels": {"vllm-queue-autoscaler.io/autoscale": "true"},
        "match_expressions": [{"key": "tier", "operator": "NotIn", "values": ["batch"]}],
    })
    label = {"vllm-queue-autoscaler.io/autoscale": "true"}
    found = cfg.targets_with([
        ("team-a", "zeta", label), ("team-a", "alpha", label), ("llm", "qwen", label),  # qwen is listed
        ("team-a", "batchy", label | {"tier": "batch"}), ("team-b", "elsewhere", label),
        ("team-a", "unlabelled", {}),
    ])
    assert [t.name for t in found] == ["llm/qwen", "team-a/alpha", "team-a/zeta"]
    assert found[0] is cfg.targets[0]  # the listed entry, with its own keys
    assert cfg.namespaces_to_list() == ["llm", "team-a"]


def test_a_selector_without_namespaces_lists_every_namespace() -> None:
    cfg = config(targets=[], target_selector={"match_expressions": [{"key": "team", "operator": "Exists"}]})
    assert cfg.namespaces_to_list() == []
    assert [t.name for t in cfg.targets_with([("x", "a", {"team": ""}), ("y", "b", {})])] == ["x/a"]
    assert cfg.warnings() == []  # not idle: the selector may find targets


def test_without_a_selector_only_listed_targets() -> None:
    cfg = config()
    assert [t.name for t in cfg.targets_with([("llm", "other", {"team": "a"})])] == ["llm/qwen"]
    assert cfg.namespaces_to_list() == ["llm"]


@pytest.mark.parametrize(("selector", "problem"), [
    ({}, "target_selector.match_labels = {}, must hold at least one label (or match_expressions one "
         "requirement): an empty selector would take every Deployment"),
    ({"match_labels": {"team": "a b"}}, "target_selector.match_labels.team = a b, must be a label value"),
    ({"match_labels": {"-bad": "a"}}, "target_selector.match_labels.-bad"),
    ({"match_labels": {"a": "b"}, "namespaces": ["Not_A_Label"]}, "target_selector.namespaces[0] = Not_A_Label"),
    ({"match_expressions": [{"key": "team", "operator": "Equals", "values": ["a"]}]},
     "target_selector.match_expressions[0].operator = Equals, must be one of In, NotIn, Exists, DoesNotExist"),
    ({"match_expressions": [{"key": "team", "operator": "In"}]},
     "target_selector.match_expressions[0].values = [], must be non-empty for operator In"),
    ({"match_expressions": [{"key": "team", "operator": "Exists", "values": ["a"]}]},
     'target_selector.match_expressions[0].values = ["a"], must be empty for operator Exists'),
    ({"matchLabels": {"team": "a"}}, "target_selector.matchLabels = "),
])
def test_an_invalid_selector_names_key_value_and_what_it_must_be(selector: dict[str, Any], problem: str) -> None:
    with pytest.raises(ConfigError) as exc:
        config(target_selector=selector)
    assert any(p.startswith(problem) for p in exc.value.problems), exc.value.problems


def test_defaults_alone_must_validate_when_a_selector_is_set() -> None:
    with pytest.raises(ConfigError) as exc:
        config(targets=[], defaults={"min_replicas": 20}, target_selector={"match_labels": {"a": "b"}})
    assert exc.value.problems == ["defaults.min_replicas = 20, must be <= max_replicas (10) in the effective "
                                  "policy of the Deployments target_selector finds"]


# --- the documents stay in step --------------------------------------------------------------


def test_the_docs_list_every_selector_key_and_every_annotation() -> None:
    from pathlib import Path

    from autoscaler.config.annotations import NOT_POLICY
    from autoscaler.config.model import TargetSelector

    docs = Path(__file__).resolve().parents[1] / "docs"
    configuration = (docs / "configuration.md").read_text()
    missing = [k for k in TargetSelector.model_fields if f"| `target_selector.{k}` |" not in configuration]
    annotations = (docs / "annotations.md").read_text()
    missing += [name for name in sorted(NOT_POLICY) if f"| `{name}` |" not in annotations]
    missing += [key for key in ("slo.ttft_seconds", "slo.tpot_seconds", "slo.attainment_target")
                if f"`{key}`" not in annotations]
    assert not missing, missing


def test_key_problems_docstring() -> None:
    # worked example: a bad paused and an out-of-range value; a cross-key rule is not checked here
    assert key_problems({PAUSED: "yes", PREFIX + "max_replicas": "0"}) == [
        f'{PAUSED} = "yes", must be "true" or "false"', f"{PREFIX}max_replicas = 0, must be >= 1"]
    assert key_problems({PREFIX + "min_replicas": "20"}) == []
    assert key_problems({}) == []


def test_not_allowed_docstring() -> None:
    # worked example: max_gpus is not among the keys teams may set; None allows every key
    raw = {"max_replicas": "6", "max_gpus": "16"}
    assert not_allowed(raw, ["min_replicas", "max_replicas"]) == [
        f"{PREFIX}max_gpus = 16, not allowed here (controller.annotation_keys: min_replicas, max_replicas)"]
    assert not_allowed(raw, None) == []
    assert not_allowed({"max_replica": "3"}, []) == []  # an unknown key gets its own message


def test_a_key_the_configmap_does_not_allow_keeps_the_configmap_policy_but_pause_holds() -> None:
    config = AutoscalerConfig.model_validate({
        "controller": {"annotation_keys": ["min_replicas", "max_replicas"]},
        "targets": [{"namespace": "llm", "deployment": "q", "max_replicas": 8}]})
    target = config.targets[0]
    refused = resolve(config, target, {PREFIX + "max_replicas": "6", PREFIX + "max_gpus": "16", PAUSED: "true"})
    assert refused.paused and refused.policy.max_replicas == 8 and refused.policy.max_gpus is None
    assert refused.problems == (
        f"{PREFIX}max_gpus = 16, not allowed here (controller.annotation_keys: min_replicas, max_replicas)",)
    assert refused.sources["max_replicas"] == CONFIGMAP_TARGET
    allowed = resolve(config, target, {PREFIX + "max_replicas": "6"})
    assert allowed.problems == () and allowed.policy.max_replicas == 6 and allowed.sources["max_replicas"] == ANNOTATION
    nothing = AutoscalerConfig.model_validate({"controller": {"annotation_keys": []}, "targets": [{"namespace": "llm", "deployment": "q"}]})
    assert resolve(nothing, nothing.targets[0], {PREFIX + "min_replicas": "2"}).problems == (
        f"{PREFIX}min_replicas = 2, not allowed here (controller.annotation_keys: none)",)


def test_annotation_keys_must_be_policy_keys() -> None:
    with pytest.raises(ValueError, match="must be a policy key"):
        AutoscalerConfig.model_validate({"controller": {"annotation_keys": ["max_replica"]}, "targets": []})
