"""autoscaler.config: the ConfigMap document, its error lines, the shipped file and live reload."""

from __future__ import annotations

import math
import os
import re
import shutil
import subprocess
import sys
import typing
from pathlib import Path
from typing import Any

import annotated_types
import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, ValidationError

from autoscaler.config import (
    AutoscalerConfig,
    ConfigError,
    ConfigWatcher,
    ControllerSettings,
    PolicyOverrides,
    PrometheusSettings,
    SloOverrides,
    TargetConfig,
    format_path,
    load_config_file,
    load_config_text,
)
from autoscaler.config.bounded import SafeBuilder, load_yaml
from autoscaler.policy.params import PolicyParams, SloParams

REPO = Path(__file__).resolve().parent.parent
FIXTURES = Path(__file__).resolve().parent / "fixtures" / "config"

TARGET = "targets:\n  - namespace: llm\n    deployment: qwen3-8b\n"


def problems_of(text: str, source: str = "f.yaml") -> list[str]:
    with pytest.raises(ConfigError) as info:
        load_config_text(text, source=source)
    return info.value.problems


# --- error lines, one kind each ------------------------------------------------------------------

DNS_LABEL = (
    "must be a DNS-1123 label (lowercase a-z, 0-9 and '-', alphanumeric at both ends, at most 63 characters)"
)
DNS_SUBDOMAIN = (
    "must be a DNS-1123 subdomain (lowercase a-z, 0-9, '-' and '.', alphanumeric at both ends, "
    "at most 253 characters)"
)

FIXTURE_CASES = {
    "negative_window.yaml": ["defaults.scale_down_window_seconds = -5, must be >= 0"],
    "wrong_type.yaml": [
        "defaults.scale_down_window_seconds = 10m, must be a number >= 0 and <= 86400",
        'targets[0].max_replicas = "8", must be an integer >= 1 and <= 10000',
    ],
    "unknown_key.yaml": [
        "defaults.scale_down_windw_seconds = 600, unknown key (did you mean scale_down_window_seconds?)"
    ],
    "min_gt_max.yaml": [
        "targets[0].min_replicas = 4, must be <= max_replicas (2) in the effective policy of llm/qwen3-8b"
    ],
    "duplicate_target.yaml": [
        "targets[1] = llm/qwen, must be unique (namespace, deployment), already at targets[0]"
    ],
    "bad_dns_name.yaml": [
        f"targets[0].namespace = LLM, {DNS_LABEL}",
        f"targets[0].deployment = qwen3_8b, {DNS_SUBDOMAIN}",
    ],
    "invalid_yaml.yaml": ["{path}:3:16: invalid YAML: mapping values are not allowed here"],
    "empty.yaml": ["{path}: empty document, must be a mapping with keys controller, defaults, targets"],
    "comments_only.yaml": ["{path}: empty document, must be a mapping with keys controller, defaults, targets"],
    "slo_out_of_range.yaml": [
        "defaults.slo.tpot_seconds = 0, must be > 0",
        "defaults.slo.attainment_target = 1, must be <= 0.999",
        "targets[1].slo.ttft_seconds = -1, must be > 0",
        "targets[1].slo.ttft_seconds_per_1k_prompt_tokens = 3601, must be <= 3600",
    ],
}


@pytest.mark.parametrize("name", sorted(FIXTURE_CASES))
def test_fixture_problems(name: str) -> None:
    path = FIXTURES / name
    with pytest.raises(ConfigError) as info:
        load_config_file(path)
    expected = [line.format(path=path) for line in FIXTURE_CASES[name]]
    assert info.value.problems == expected
    assert str(info.value) == "\n".join(expected)
    assert info.value.source == str(path)


INLINE_CASES: list[tuple[str, str, list[str]]] = [
    ("lead-time window above its range", "defaults:\n  scale_down_window_lead_times: 11\n" + TARGET,
     ["defaults.scale_down_window_lead_times = 11, must be <= 10"]),
    ("lead-time window negative", "defaults:\n  scale_down_window_lead_times: -1\n" + TARGET,
     ["defaults.scale_down_window_lead_times = -1, must be >= 0"]),
    ("bool is not an integer", "defaults:\n  min_replicas: true\n" + TARGET,
     ["defaults.min_replicas = true, must be an integer >= 1 and <= 10000"]),
    ("float is not an integer", "defaults:\n  scale_down_max_pods: 1.5\n" + TARGET,
     ["defaults.scale_down_max_pods = 1.5, must be an integer >= 1 and <= 10000"]),
    ("optional says null", "defaults:\n  max_gpus: lots\n" + TARGET,
     ["defaults.max_gpus = lots, must be an integer >= 1 and <= 100000, or null"]),
    ("exclusive bound", "defaults:\n  target_kv_cache_usage_ratio: 0\n" + TARGET,
     ["defaults.target_kv_cache_usage_ratio = 0, must be > 0"]),
    ("upper bound", TARGET + "    target_kv_cache_usage_ratio: 1.5\n",
     ["targets[0].target_kv_cache_usage_ratio = 1.5, must be <= 1"]),
    ("nan", "defaults:\n  stale_after_seconds: .nan\n" + TARGET,
     ["defaults.stale_after_seconds = nan, must be a number >= 1 and <= 3600"]),
    ("infinity", "defaults:\n  stale_after_seconds: .inf\n" + TARGET,
     ["defaults.stale_after_seconds = inf, must be <= 3600"]),
    ("list value", "defaults:\n  max_replicas: [1, 2]\n" + TARGET,
     ["defaults.max_replicas = [1, 2], must be an integer >= 1 and <= 10000"]),
    ("unknown key in a target", TARGET + "    max_replica: 4\n",
     ["targets[0].max_replica = 4, unknown key (did you mean max_replicas?)"]),
    ("unknown key without a close match", "defaults:\n  colour: blue\n" + TARGET,
     ["defaults.colour = blue, unknown key"]),
    ("key in the wrong section", "defaults:\n  tick_seconds: 30\n" + TARGET,
     ["defaults.tick_seconds = 30, unknown key here (it belongs under controller)"]),
    ("policy key under controller", "controller:\n  max_replicas: 3\n" + TARGET,
     ["controller.max_replicas = 3, unknown key here (it belongs under defaults or a target)"]),
    ("unknown top-level key", "default:\n  max_replicas: 3\n" + TARGET,
     ["default = {\"max_replicas\": 3}, unknown key (did you mean defaults?)"]),
    ("non-string key", "defaults:\n  1: 2\n" + TARGET, ["defaults.1 = 2, unknown key (keys are names)"]),
    ("missing deployment", "targets:\n  - namespace: llm\n",
     ["targets[0].deployment = (missing), must be set"]),
    ("missing targets", "defaults: {}\n", ["targets = (missing), must be set"]),
    ("target not a mapping", "targets:\n  - llm/qwen3-8b\n",
     ["targets[0] = llm/qwen3-8b, must be a mapping"]),
    ("targets not a list", "targets:\n  llm: qwen3-8b\n",
     ['targets = {"llm": "qwen3-8b"}, must be a list']),
    ("section not a mapping", "defaults: 600\n" + TARGET, ["defaults = 600, must be a mapping"]),
    ("bad namespace type", "targets:\n  - namespace: no\n    deployment: qwen3-8b\n",
     ["targets[0].namespace = false, must be a string (YAML reads an unquoted yes, no, on, off, true or false "
      "as a boolean: quote it)"]),
    ("namespace too long", f"targets:\n  - namespace: {'a' * 64}\n    deployment: qwen3-8b\n",
     [f"targets[0].namespace = {'a' * 57}..., {DNS_LABEL}"]),
    ("deployment with dots is fine, uppercase is not", "targets:\n  - {namespace: llm, deployment: Qwen.v1}\n",
     [f"targets[0].deployment = Qwen.v1, {DNS_SUBDOMAIN}"]),
    ("controller range", "controller:\n  metrics_port: 70000\n" + TARGET,
     ["controller.metrics_port = 70000, must be <= 65535"]),
    ("prometheus url", "controller:\n  prometheus:\n    url: prometheus:9090\n" + TARGET,
     ["controller.prometheus.url = prometheus:9090, must be an http:// or https:// URL"]),
    # found by a fuzzer: accepted, then every query failed
    ("prometheus url, unclosed bracket", "controller:\n  prometheus:\n    url: 'http://[::1'\n" + TARGET,
     ["controller.prometheus.url = http://[::1, must be an http:// or https:// URL"]),
    ("prometheus url, port out of range", "controller:\n  prometheus:\n    url: 'http://p:99999'\n" + TARGET,
     ["controller.prometheus.url = http://p:99999, must be an http:// or https:// URL"]),
    ("relative token path", "controller:\n  prometheus:\n    bearer_token_file: token\n" + TARGET,
     ["controller.prometheus.bearer_token_file = token, must be an absolute path (or null)"]),
    ("timeout longer than a tick", "controller:\n  tick_seconds: 2\n" + TARGET,
     ["controller.prometheus.timeout_seconds = 5, must be <= tick_seconds (2)"]),
    ("state configmap name", "controller:\n  state_configmap: State\n" + TARGET,
     [f"controller.state_configmap = State, {DNS_SUBDOMAIN}"]),
    ("gpu budget below min", TARGET + "    gpus_per_replica: 4\n    min_replicas: 2\n    max_gpus: 4\n",
     ["targets[0].max_gpus = 4, must be >= gpus_per_replica * min_replicas (8) "
      "in the effective policy of llm/qwen3-8b"]),
    ("scale-up impossible", "defaults:\n  scale_up_max_percent: 0\n  scale_up_max_pods: 0\n" + TARGET,
     ["targets[0].scale_up_max_pods = 0, must be >= 1 when scale_up_max_percent is 0 "
      "(scale-up would be impossible) in the effective policy of llm/qwen3-8b"]),
    ("string quoted when it reads as a number", "defaults:\n  tolerance_ratio: '0.2'\n" + TARGET,
     ['defaults.tolerance_ratio = "0.2", must be a number >= 0 and <= 1']),
    ("value with a newline stays on one line", "defaults:\n  tolerance_ratio: \"a\\nb\"\n" + TARGET,
     ['defaults.tolerance_ratio = "a\\nb", must be a number >= 0 and <= 1']),
    ("odd key is quoted", "defaults:\n  \"a b\": 1\n" + TARGET, ['defaults["a b"] = 1, unknown key']),
    ("document is a list", "- a\n- b\n",
     ["f.yaml: document is a list, must be a mapping with keys controller, defaults, targets"]),
    ("document is a scalar", "hello\n",
     ["f.yaml: document is a string, must be a mapping with keys controller, defaults, targets"]),
    ("duplicate YAML key", TARGET + "    max_replicas: 4\n    max_replicas: 8\n",
     ["f.yaml:5:5: invalid YAML: duplicate key 'max_replicas' (first at line 4)"]),
    ("two documents", TARGET + "---\n" + TARGET,
     ["f.yaml:4:1: invalid YAML: expected a single document in the stream: but found another document"]),
    ("tab indentation", "targets:\n\t- namespace: llm\n",
     ["f.yaml:2:1: invalid YAML: while scanning for the next token: "
      "found character '\\t' that cannot start any token"]),
    # the slo section: each key out of range (both ends), wrong types, unknown keys, misplaced keys
    ("slo ttft zero", "defaults:\n  slo:\n    ttft_seconds: 0\n" + TARGET,
     ["defaults.slo.ttft_seconds = 0, must be > 0"]),
    ("slo ttft above", TARGET + "    slo:\n      ttft_seconds: 3601\n",
     ["targets[0].slo.ttft_seconds = 3601, must be <= 3600"]),
    ("slo tpot negative", TARGET + "    slo: {tpot_seconds: -0.1}\n",
     ["targets[0].slo.tpot_seconds = -0.1, must be > 0"]),
    ("slo tpot above", "defaults:\n  slo: {tpot_seconds: 61}\n" + TARGET,
     ["defaults.slo.tpot_seconds = 61, must be <= 60"]),
    ("slo attainment below", "defaults:\n  slo: {attainment_target: 0.4}\n" + TARGET,
     ["defaults.slo.attainment_target = 0.4, must be >= 0.5"]),
    ("slo attainment 1 is not attainable", TARGET + "    slo: {attainment_target: 1.0}\n",
     ["targets[0].slo.attainment_target = 1.0, must be <= 0.999"]),
    ("slo length-aware negative", "defaults:\n  slo: {ttft_seconds_per_1k_prompt_tokens: -1}\n" + TARGET,
     ["defaults.slo.ttft_seconds_per_1k_prompt_tokens = -1, must be >= 0"]),
    ("slo length-aware above", "defaults:\n  slo: {ttft_seconds_per_1k_prompt_tokens: 4000}\n" + TARGET,
     ["defaults.slo.ttft_seconds_per_1k_prompt_tokens = 4000, must be <= 3600"]),
    ("slo string value", "defaults:\n  slo: {ttft_seconds: 2s}\n" + TARGET,
     ["defaults.slo.ttft_seconds = 2s, must be a number > 0 and <= 3600"]),
    ("slo quoted number", TARGET + "    slo: {tpot_seconds: '0.1'}\n",
     ['targets[0].slo.tpot_seconds = "0.1", must be a number > 0 and <= 60']),
    ("slo bool", "defaults:\n  slo: {attainment_target: true}\n" + TARGET,
     ["defaults.slo.attainment_target = true, must be a number >= 0.5 and <= 0.999"]),
    ("slo null key", "defaults:\n  slo: {ttft_seconds_per_1k_prompt_tokens: null}\n" + TARGET,
     ["defaults.slo.ttft_seconds_per_1k_prompt_tokens = null, must be a number >= 0 and <= 3600"]),
    ("slo nan", "defaults:\n  slo: {ttft_seconds: .nan}\n" + TARGET,
     ["defaults.slo.ttft_seconds = nan, must be a number > 0 and <= 3600"]),
    ("slo not a mapping", "defaults:\n  slo: 2\n" + TARGET, ["defaults.slo = 2, must be a mapping"]),
    ("slo a list", TARGET + "    slo: [2, 0.1]\n", ["targets[0].slo = [2, 0.1], must be a mapping"]),
    ("unknown slo key", TARGET + "    slo: {ttft_seconds: 2, p99: true}\n",
     ["targets[0].slo.p99 = true, unknown key"]),
    ("slo key without its unit", "defaults:\n  slo: {ttft: 2}\n" + TARGET,
     ["defaults.slo.ttft = 2, unknown key (did you mean ttft_seconds?)"]),
    ("slo key misspelt", "defaults:\n  slo: {attainment_targt: 0.9}\n" + TARGET,
     ["defaults.slo.attainment_targt = 0.9, unknown key (did you mean attainment_target?)"]),
    ("slo key outside slo", TARGET + "    ttft_seconds: 2\n",
     ["targets[0].ttft_seconds = 2, unknown key here (it belongs under defaults.slo or a target's slo)"]),
    ("controller key in slo", "defaults:\n  slo: {tick_seconds: 2}\n" + TARGET,
     ["defaults.slo.tick_seconds = 2, unknown key here (it belongs under controller)"]),
    ("slo under controller", "controller:\n  slo: {ttft_seconds: 2}\n" + TARGET,
     ['controller.slo = {"ttft_seconds": 2}, unknown key here (it belongs under defaults or a target)']),
    ("slo non-string key", "defaults:\n  slo: {1: 2}\n" + TARGET,
     ["defaults.slo.1 = 2, unknown key (keys are names)"]),
    ("duplicate slo key", TARGET + "    slo:\n      ttft_seconds: 1\n      ttft_seconds: 2\n",
     ["f.yaml:6:7: invalid YAML: duplicate key 'ttft_seconds' (first at line 5)"]),
    # the capacity keys: flat policy keys
    ("capacity profile empty", "defaults:\n  capacity_profile: ''\n" + TARGET,
     ['defaults.capacity_profile = "", must be a string of 1 to 253 characters, or null']),
    ("capacity profile too long", TARGET + f"    capacity_profile: {'m' * 254}\n",
     [f"targets[0].capacity_profile = {'m' * 57}..., must be a string of 1 to 253 characters, or null"]),
    ("capacity profile not a string", "defaults:\n  capacity_profile: 8\n" + TARGET,
     ["defaults.capacity_profile = 8, must be a string of 1 to 253 characters, or null"]),
    ("capacity zero", TARGET + "    capacity_prompt_tokens_per_second: 0\n",
     ["targets[0].capacity_prompt_tokens_per_second = 0, must be > 0"]),
    ("capacity wrong type", "defaults:\n  capacity_generation_tokens_per_second: fast\n" + TARGET,
     ["defaults.capacity_generation_tokens_per_second = fast, must be a number > 0 and <= 1000000000, or null"]),
]


@pytest.mark.parametrize(("text", "expected"), [c[1:] for c in INLINE_CASES], ids=[c[0] for c in INLINE_CASES])
def test_problem_lines(text: str, expected: list[str]) -> None:
    assert problems_of(text) == expected


def test_every_problem_is_reported_at_once() -> None:
    text = (
        "controller:\n  tick_seconds: 0\n  metrics_port: x\n"
        "defaults:\n  scale_down_window_seconds: -5\n  scale_down_windw_seconds: 600\n"
        "targets:\n  - namespace: LLM\n    deployment: qwen3-8b\n    max_replicas: 0\n"
    )
    assert problems_of(text) == [
        "controller.tick_seconds = 0, must be >= 1",
        "controller.metrics_port = x, must be an integer >= 1 and <= 65535",
        "defaults.scale_down_window_seconds = -5, must be >= 0",
        "defaults.scale_down_windw_seconds = 600, unknown key (did you mean scale_down_window_seconds?)",
        f"targets[0].namespace = LLM, {DNS_LABEL}",
        "targets[0].max_replicas = 0, must be >= 1",
    ]


def test_each_target_is_checked_and_named() -> None:
    text = (
        "defaults:\n  min_replicas: 3\n"
        "targets:\n"
        "  - {namespace: llm, deployment: a, max_replicas: 4}\n"
        "  - {namespace: llm, deployment: b, max_replicas: 2}\n"
        "  - {namespace: llm, deployment: c, max_replicas: 1}\n"
    )
    assert problems_of(text) == [
        "targets[1].min_replicas = 3, must be <= max_replicas (2) in the effective policy of llm/b",
        "targets[2].min_replicas = 3, must be <= max_replicas (1) in the effective policy of llm/c",
    ]


def _leaf_fields(model: type[BaseModel] = PolicyParams, prefix: tuple[str, ...] = ()) -> list[tuple[tuple[str, ...], Any]]:
    """Every policy key as its path (`("slo", "ttft_seconds")` for a key of a nested section)."""
    out: list[tuple[tuple[str, ...], Any]] = []
    for name, info in model.model_fields.items():
        if isinstance(info.annotation, type) and issubclass(info.annotation, BaseModel):
            out += _leaf_fields(info.annotation, (*prefix, name))
        else:
            out.append(((*prefix, name), info))
    return out


def _nested_doc(path: tuple[str, ...], value: object) -> dict[str, Any]:
    doc: Any = value
    for part in reversed(path):
        doc = {part: doc}
    return dict(doc)


def test_bounds_in_messages_come_from_the_model() -> None:
    # Every numeric policy key (nested ones too), one below its lower bound and one above its
    # upper bound: the line quotes the Field's bound. A string key: its lengths.
    for path, info in _leaf_fields():
        where = "defaults." + ".".join(path)
        if _base_type(info.annotation) is str:
            for bad in ("", "x" * 254):
                text = yaml.safe_dump({"defaults": _nested_doc(path, bad), "targets": []})
                assert problems_of(text) == [
                    f"{where} = {_fmt(bad)}, must be a string of 1 to 253 characters, or null"], path
            continue
        lower = next(m for m in info.metadata if isinstance(m, annotated_types.Ge | annotated_types.Gt))
        upper = next(m for m in info.metadata if isinstance(m, annotated_types.Le))
        if isinstance(lower, annotated_types.Ge):
            bad, op, bound = float(lower.ge) - 1, ">=", lower.ge
        else:
            bad, op, bound = float(lower.gt), ">", lower.gt
        is_int = _base_type(info.annotation) is int
        for value, expected_op, expected_bound in ((bad, op, bound), (float(upper.le) + 1, "<=", upper.le)):
            value = int(value) if is_int else value
            text = yaml.safe_dump({"defaults": _nested_doc(path, value), "targets": []})
            expected = f"{where} = {value}, must be {expected_op} {_num(expected_bound)}"
            assert problems_of(text) == [expected], path


def _fmt(value: str) -> str:
    return '""' if not value else value[:57] + "..." if len(value) > 60 else value


def test_null_sections_are_empty() -> None:
    config = load_config_text("controller:\ndefaults:\ntargets:\n")
    assert config.controller == ControllerSettings()
    assert config.defaults.as_dict() == {}
    assert config.targets == []
    assert config.warnings() == ["targets = [], no targets: the controller runs but scales nothing"]


def test_error_form() -> None:
    error = ConfigError(["a = 1, must be >= 2", "b = 2, must be >= 3", "a = 1, must be >= 2"], source="x")
    assert error.problems == ["a = 1, must be >= 2", "b = 2, must be >= 3"]  # de-duplicated
    assert str(error) == "a = 1, must be >= 2\nb = 2, must be >= 3"
    assert format_path(("targets", 3, "max_replicas")) == "targets[3].max_replicas"
    assert format_path(("controller", "prometheus", "url")) == "controller.prometheus.url"
    assert format_path(("controller", "annotation_keys", 0)) == "controller.annotation_keys[0]"
    assert format_path(("target_selector", "match_expressions", 1, "values", 0)) == (
        "target_selector.match_expressions[1].values[0]")
    assert format_path(("defaults", 1)) == "defaults.1"  # a key that is a number, not an index


def test_unreadable_file(tmp_path: Path) -> None:
    missing = tmp_path / "nope.yaml"
    with pytest.raises(ConfigError) as info:
        load_config_file(missing)
    assert info.value.problems == [f"{missing}: cannot read: No such file or directory"]
    binary = tmp_path / "bin.yaml"
    binary.write_bytes(b"targets: []\n\xff\xfe")
    with pytest.raises(ConfigError) as info:
        load_config_file(binary)
    assert info.value.problems == [f"{binary}: cannot read: not UTF-8 (invalid start byte at byte 12)"]


# --- valid documents, merging, API --------------------------------------------------------------


def test_minimal_document_gets_every_default() -> None:
    config = load_config_file(FIXTURES / "minimal.yaml")
    assert config.controller == ControllerSettings()
    [(target, policy)] = list(config.effective_policies())
    assert target.name == "llm/qwen3-8b"
    assert target.key == ("llm", "qwen3-8b")
    assert target.overrides() == {}
    assert policy == PolicyParams()


def test_defaults_then_target_overrides() -> None:
    config = load_config_file(FIXTURES / "overrides.yaml")
    qwen, llama = config.targets
    assert config.defaults.as_dict() == {"max_gpus": 32, "scale_down_window_seconds": 900.0}
    assert qwen.overrides() == {"max_replicas": 8}
    assert llama.overrides() == {"min_replicas": 2, "gpus_per_replica": 4, "max_gpus": None}

    q = config.policy_for(qwen)
    assert (q.max_replicas, q.max_gpus, q.scale_down_window_seconds) == (8, 32, 900.0)
    assert q.min_replicas == PolicyParams().min_replicas  # built-in default
    ll = config.policy_for(llama)
    assert (ll.max_gpus, ll.gpus_per_replica, ll.min_replicas) == (None, 4, 2)  # explicit null wins
    assert ll.scale_down_window_seconds == 900.0

    assert [(t.name, p) for t, p in config.effective_policies()] == [("llm/qwen3-8b", q), ("llm/llama-3-70b", ll)]
    assert config.find_target("llm", "llama-3-70b") is llama
    assert config.find_target("llm", "nope") is None


def test_policy_for_a_foreign_target() -> None:
    config = load_config_file(FIXTURES / "minimal.yaml")
    stranger = TargetConfig(namespace="llm", deployment="other")
    with pytest.raises(KeyError, match="llm/other is not a target"):
        config.policy_for(stranger)


def test_models_are_frozen_and_usable_from_python() -> None:
    config = load_config_file(FIXTURES / "minimal.yaml")
    with pytest.raises(ValidationError):
        config.controller.tick_seconds = 1  # type: ignore[misc]
    with pytest.raises(ValidationError):
        config.targets[0].namespace = "x"  # type: ignore[misc]
    built = AutoscalerConfig(
        defaults=PolicyOverrides(max_replicas=4),
        targets=[TargetConfig(namespace="llm", deployment="a", min_replicas=2)],
    )
    assert built.policy_for(built.targets[0]).max_replicas == 4
    with pytest.raises(ValidationError):  # the effective policy is checked however it is built
        AutoscalerConfig(targets=[TargetConfig(namespace="llm", deployment="a", min_replicas=20)])


def test_generated_models_mirror_policy_params() -> None:
    keys = list(PolicyParams.model_fields)
    assert list(PolicyOverrides.model_fields) == keys
    assert list(TargetConfig.model_fields) == ["namespace", "deployment", *keys]
    assert list(SloOverrides.model_fields) == list(SloParams.model_fields)
    for name, info in SloParams.model_fields.items():
        assert SloOverrides.model_fields[name].metadata == info.metadata
        assert not SloOverrides.model_fields[name].is_required()
    for name, info in PolicyParams.model_fields.items():
        for generated in (PolicyOverrides, TargetConfig):
            field = generated.model_fields[name]
            assert not field.is_required()
            if info.annotation is SloParams:  # a nested section: a mapping of its own optional keys
                assert field.annotation is SloOverrides
            else:
                assert field.metadata == info.metadata


def test_slo_is_merged_key_by_key() -> None:
    config = load_config_file(FIXTURES / "slo_overrides.yaml")
    qwen, llama = config.targets
    assert config.defaults.as_dict() == {"slo": {"ttft_seconds": 1.0}}
    assert qwen.overrides() == {"slo": {"tpot_seconds": 0.05}}
    assert llama.overrides() == {
        "slo": {"ttft_seconds": 4.0, "ttft_seconds_per_1k_prompt_tokens": 0.25},
        "capacity_profile": "llama-3-8b/a100-80gb",
        "capacity_prompt_tokens_per_second": 12000.0,
    }
    default = SloParams()
    # qwen: ttft from defaults, tpot its own, the rest built-in
    assert config.policy_for(qwen).slo == SloParams(ttft_seconds=1.0, tpot_seconds=0.05)
    ll = config.policy_for(llama)  # llama: its ttft wins over defaults', tpot built-in
    assert ll.slo == SloParams(ttft_seconds=4.0, ttft_seconds_per_1k_prompt_tokens=0.25)
    assert ll.slo.attainment_target == default.attainment_target
    assert (ll.capacity_profile, ll.capacity_prompt_tokens_per_second, ll.capacity_generation_tokens_per_second) == (
        "llama-3-8b/a100-80gb", 12000.0, None)


@pytest.mark.parametrize("empty", ["slo:", "slo: {}", "slo: null"])
def test_an_empty_slo_section_sets_nothing(empty: str) -> None:
    config = load_config_text(f"defaults:\n  slo: {{ttft_seconds: 1}}\n{TARGET}    {empty}\n")
    assert config.targets[0].overrides() == {}
    assert config.policy_for(config.targets[0]).slo.ttft_seconds == 1.0
    config = load_config_text(f"defaults:\n  {empty}\n" + TARGET)
    assert config.defaults.as_dict() == {}
    assert config.policy_for(config.targets[0]).slo == SloParams()


def test_slo_from_python() -> None:
    built = AutoscalerConfig(
        defaults=PolicyOverrides(slo=SloOverrides(ttft_seconds=1.5)),
        targets=[TargetConfig(namespace="llm", deployment="a", slo={"tpot_seconds": 0.2}),
                 TargetConfig(namespace="llm", deployment="b", slo=None)],
    )
    a, b = (built.policy_for(t).slo for t in built.targets)
    assert (a.ttft_seconds, a.tpot_seconds, b.ttft_seconds, b.tpot_seconds) == (1.5, 0.2, 1.5, 0.1)
    with pytest.raises(ValidationError):
        SloOverrides(ttft_seconds=-1)
    with pytest.raises(ValidationError):
        SloOverrides(ttft_seconds="2")  # strict: no coercion


def test_warnings() -> None:
    config = load_config_file(FIXTURES / "no_targets.yaml")
    assert config.targets == []
    assert list(config.effective_policies()) == []
    assert config.warnings() == ["targets = [], no targets: the controller runs but scales nothing"]
    config = load_config_text(
        "controller:\n  prometheus:\n    ca_file: /etc/ca.pem\n    insecure_skip_tls_verify: true\n" + TARGET
    )
    assert config.warnings() == [
        "controller.prometheus.ca_file = /etc/ca.pem, ignored because insecure_skip_tls_verify is true"
    ]


# --- the shipped file ------------------------------------------------------------------------


def _base_type(annotation: Any) -> Any:
    args = [a for a in typing.get_args(annotation) if a is not type(None)]
    return args[0] if typing.get_origin(annotation) is not None and args else annotation


def _num(value: object) -> str:
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


# The shipped file and its `_example` block: tests/test_config_example.py.


def test_fixture_files_are_what_their_tests_say() -> None:
    checked = set(FIXTURE_CASES) | {"minimal.yaml", "no_targets.yaml", "overrides.yaml", "slo_overrides.yaml"}
    assert {p.name for p in FIXTURES.glob("*.yaml")} == checked


# --- live reload -----------------------------------------------------------------------------

GOOD = TARGET
GOOD_8 = TARGET + "    max_replicas: 8\n"
BAD = TARGET + "    max_replicas: 0\n"


def test_watcher_refuses_to_start_on_an_invalid_file(tmp_path: Path) -> None:
    path = tmp_path / "autoscaler.yaml"
    path.write_text(BAD)
    with pytest.raises(ConfigError, match=re.escape("targets[0].max_replicas = 0, must be >= 1")):
        ConfigWatcher(path)
    with pytest.raises(ConfigError, match="cannot read"):
        ConfigWatcher(tmp_path / "missing.yaml")


def test_watcher_applies_valid_and_rejects_invalid_changes(tmp_path: Path) -> None:
    path = tmp_path / "autoscaler.yaml"
    path.write_text(GOOD)
    changes: list[tuple[AutoscalerConfig, AutoscalerConfig]] = []
    watcher = ConfigWatcher(path, on_change=lambda old, new: changes.append((old, new)))
    first = watcher.current
    assert (watcher.generation, watcher.rejected_total, watcher.last_error) == (1, 0, None)
    assert watcher.poll() is False  # unchanged

    path.write_text(GOOD_8)
    assert watcher.poll() is True
    assert watcher.generation == 2
    assert watcher.current.policy_for(watcher.current.targets[0]).max_replicas == 8
    assert changes == [(first, watcher.current)]
    good = watcher.current

    path.write_text(BAD)
    for _ in range(3):  # one bad version is counted once, however many ticks it stays
        assert watcher.poll() is False
    assert watcher.current is good
    assert (watcher.generation, watcher.rejected_total) == (2, 1)
    assert watcher.last_error is not None
    assert watcher.last_error.problems == ["targets[0].max_replicas = 0, must be >= 1"]

    path.write_text(BAD + "    min_replicas: 0\n")  # another bad version: counted again
    assert watcher.poll() is False
    assert watcher.rejected_total == 2

    path.write_text(GOOD_8)  # back to the version in force: nothing to apply, error cleared
    assert watcher.poll() is False
    assert (watcher.current, watcher.generation, watcher.last_error) == (good, 2, None)
    assert len(changes) == 1


def test_watcher_keeps_the_last_good_slo_on_a_bad_one(tmp_path: Path) -> None:
    path = tmp_path / "autoscaler.yaml"
    path.write_text("defaults:\n  slo: {ttft_seconds: 1}\n" + TARGET + "    slo: {tpot_seconds: 0.05}\n")
    watcher = ConfigWatcher(path)
    good = watcher.current
    assert good.policy_for(good.targets[0]).slo == SloParams(ttft_seconds=1, tpot_seconds=0.05)
    bad = {
        TARGET + "    slo: {tpot_seconds: 0}\n": ["targets[0].slo.tpot_seconds = 0, must be > 0"],
        TARGET + "    slo: {tpot: 0.05}\n": ["targets[0].slo.tpot = 0.05, unknown key (did you mean tpot_seconds?)"],
        "defaults:\n  slo: 1\n" + TARGET: ["defaults.slo = 1, must be a mapping"],
    }
    for n, (text, problems) in enumerate(bad.items(), 1):
        path.write_text(text)
        assert watcher.poll() is False
        assert (watcher.current, watcher.generation, watcher.rejected_total) == (good, 1, n)
        assert watcher.last_error is not None and watcher.last_error.problems == problems
    path.write_text(TARGET + "    slo: {ttft_seconds: 3}\n")  # a good one applies, merged with the built-in slo
    assert watcher.poll() is True and watcher.last_error is None
    assert watcher.current.policy_for(watcher.current.targets[0]).slo == SloParams(ttft_seconds=3)


def test_watcher_survives_the_file_disappearing(tmp_path: Path) -> None:
    path = tmp_path / "autoscaler.yaml"
    path.write_text(GOOD)
    watcher = ConfigWatcher(path)
    path.unlink()
    assert watcher.poll() is False
    assert watcher.poll() is False
    assert watcher.rejected_total == 1
    assert watcher.last_error is not None and "cannot read" in str(watcher.last_error)
    path.write_text(GOOD_8)
    assert watcher.poll() is True
    assert watcher.last_error is None


def _configmap_volume(root: Path, content: str) -> Path:
    """The layout the kubelet gives a ConfigMap volume: key -> ..data/key, ..data -> ..<timestamp>."""
    version = root / "..2025_01_01_00_00_00.000000001"
    version.mkdir()
    (version / "autoscaler.yaml").write_text(content)
    (root / "..data").symlink_to(version.name)
    (root / "autoscaler.yaml").symlink_to("..data/autoscaler.yaml")
    return root / "autoscaler.yaml"


def _kubelet_update(root: Path, content: str, n: int) -> None:
    """Write a new timestamped directory, swap `..data` atomically, delete the old directory."""
    old = (root / "..data").resolve()
    new = root / f"..2025_01_01_00_00_0{n}.000000001"
    new.mkdir()
    (new / "autoscaler.yaml").write_text(content)
    stat = (old / "autoscaler.yaml").stat()
    os.utime(new / "autoscaler.yaml", ns=(stat.st_atime_ns, stat.st_mtime_ns))  # same mtime: no help
    (root / "..data_tmp").symlink_to(new.name)
    os.replace(root / "..data_tmp", root / "..data")
    shutil.rmtree(old)


def test_watcher_follows_a_configmap_symlink_swap(tmp_path: Path) -> None:
    path = _configmap_volume(tmp_path, GOOD)
    watcher = ConfigWatcher(path)
    link_mtime = os.lstat(path).st_mtime_ns
    _kubelet_update(tmp_path, GOOD_8, 1)
    assert os.lstat(path).st_mtime_ns == link_mtime  # the file we watch did not change itself
    assert watcher.poll() is True
    assert watcher.current.policy_for(watcher.current.targets[0]).max_replicas == 8
    _kubelet_update(tmp_path, BAD, 2)
    assert watcher.poll() is False
    assert watcher.rejected_total == 1
    assert watcher.current.policy_for(watcher.current.targets[0]).max_replicas == 8
    _kubelet_update(tmp_path, GOOD, 3)
    assert watcher.poll() is True
    assert watcher.generation == 3


# --- property: any policy values either load within bounds or fail with located lines ---------

_POLICY_KEYS = list(PolicyParams.model_fields)
_values = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-10**6, max_value=10**7),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([0, 1, 2, 8, 0.5, 0.9, 1.0, 60, 600.0]),
    st.text(max_size=12),
    st.lists(st.integers(), max_size=2),
)
_keys = st.one_of(st.sampled_from(_POLICY_KEYS), st.sampled_from(_POLICY_KEYS), st.text(min_size=1, max_size=12))
_SLO_KEYS = list(SloParams.model_fields)
_slo = st.dictionaries(st.one_of(st.sampled_from(_SLO_KEYS), st.sampled_from(_SLO_KEYS), st.text(min_size=1, max_size=8)),
                       _values, max_size=4)
_ABSENT = object()
_sections = st.tuples(st.dictionaries(_keys, _values, max_size=6), st.one_of(st.just(_ABSENT), _slo, _values)).map(
    lambda t: t[0] if t[1] is _ABSENT else {**t[0], "slo": t[1]})  # slo: a mapping of slo keys, or anything


def _input_paths(doc: dict[str, Any]) -> set[str]:
    def section(loc: tuple[str | int, ...], keys: dict[Any, Any]) -> set[str]:
        out = {format_path((*loc, k)) for k in keys}
        if isinstance(keys.get("slo"), dict):
            out |= {format_path((*loc, "slo", k)) for k in keys["slo"]}
        return out

    paths = section(("defaults",), doc["defaults"])
    for i, target in enumerate(doc["targets"]):
        paths.add(format_path(("targets", i)))
        paths |= section(("targets", i), target)
    return paths


def _merged_value(layers: list[dict[str, Any]], path: tuple[str, ...]) -> tuple[bool, Any]:
    """(set, value) of a key path in the last of `layers` that sets it (defaults < target)."""
    found: tuple[bool, Any] = (False, None)
    for layer in layers:
        node: Any = layer
        for part in path:
            if not isinstance(node, dict) or part not in node:
                break
            node = node[part]
        else:
            found = (True, node)
    return found


def _within_bounds(info: Any, value: Any) -> bool:
    if value is None:
        return type(None) in typing.get_args(info.annotation)
    for m in info.metadata:
        if isinstance(m, annotated_types.Ge) and not value >= m.ge:
            return False
        if isinstance(m, annotated_types.Gt) and not value > m.gt:
            return False
        if isinstance(m, annotated_types.Le) and not value <= m.le:
            return False
    return not (isinstance(value, float) and not math.isfinite(value))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(defaults=_sections, overrides=st.lists(_sections, max_size=2))
def test_random_policy_values_never_crash(defaults: dict[Any, Any], overrides: list[dict[Any, Any]]) -> None:
    doc = {
        "defaults": defaults,
        "targets": [{"namespace": "llm", "deployment": f"m{i}", **o} for i, o in enumerate(overrides)],
    }
    text = yaml.safe_dump(doc, sort_keys=False, allow_unicode=True)
    # what the file says, as the controller reads YAML (it folds some characters, e.g. U+0085;
    # and reads an unquoted `0e0`, which PyYAML's dumper leaves unquoted, as a number)
    doc = load_yaml(text, SafeBuilder)
    defaults = doc["defaults"]
    try:
        config = load_config_text(text)
    except ConfigError as exc:
        assert exc.problems
        paths = _input_paths(doc)
        for line in exc.problems:
            assert len(line.splitlines()) == 1, line
            if " in the effective policy of " in line:  # a cross-field check of one target
                assert any(line.startswith(p + ".") for p in paths if re.fullmatch(r"targets\[\d+\]", p)), line
            else:
                assert any(line.startswith(p + " = ") for p in paths), line
        return
    for target, policy in config.effective_policies():
        for path, info in _leaf_fields():
            value: Any = policy
            for part in path:
                value = getattr(value, part)
            assert _within_bounds(info, value), (target.name, path, value)
            found, expected = _merged_value([defaults, target.overrides()], path)
            if found:
                assert value == expected, (target.name, path)


_scalars = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), st.text(max_size=8))
_trees = st.recursive(
    _scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3),
        st.dictionaries(st.one_of(st.sampled_from(["controller", "defaults", "targets", "prometheus",
                                                   "namespace", "deployment", *_POLICY_KEYS, *_SLO_KEYS]),
                                  st.text(max_size=6), st.integers()), inner, max_size=4),
    ),
    max_leaves=12,
)


@settings(max_examples=300, deadline=None)
@given(doc=_trees)
def test_any_document_loads_or_fails_with_one_line_problems(doc: Any) -> None:
    text = yaml.safe_dump(doc, allow_unicode=True)
    try:
        load_config_text(text, source="doc.yaml")
    except ConfigError as exc:
        assert exc.problems and all(len(line.splitlines()) == 1 for line in exc.problems)


@pytest.mark.parametrize(("written", "value"), [("1e5", 1e5), ("1.5e5", 1.5e5), ("2E5", 2e5), ("1.0e+5", 1e5)])
def test_exponent_numbers_are_numbers(written: str, value: float) -> None:
    """YAML 1.1 (PyYAML) read `1e5` as a string, refused as "must be a number" although the docs
    write ranges that way and kubectl reads it as one (found by a review)."""
    config = load_config_text(f"targets: []\ndefaults: {{capacity_prompt_tokens_per_second: {written}}}\n")
    assert config.defaults.as_dict()["capacity_prompt_tokens_per_second"] == value


@pytest.mark.parametrize("written", ["010", "-07", "00"])
def test_a_leading_zero_is_refused_not_read_as_octal(written: str) -> None:
    """`max_replicas: 010` was 8, silently (YAML 1.1 octal; found by a review)."""
    with pytest.raises(ConfigError, match=f"'{written}': a number with a leading zero is read as octal"):
        load_config_text(f"targets: []\ndefaults: {{max_replicas: {written}}}\n")
    assert load_config_text("targets: []\ndefaults: {max_replicas: 10}\n").defaults.as_dict()["max_replicas"] == 10


def test_stdin_counts_bytes_as_a_file_does(tmp_path: Path) -> None:
    """A 1.2 MB file of 0.6 M characters (UTF-8 comments) was too large as a file and valid on
    stdin, which counted characters (found by a review): both refuse it now."""
    big = tmp_path / "big.yaml"
    big.write_text("targets: []\n" + "".join("# " + "é" * 300 + "\n" for _ in range(2000)), encoding="utf-8")
    as_file = subprocess.run([sys.executable, "-m", "autoscaler", "check-config", str(big)], capture_output=True)
    on_stdin = subprocess.run([sys.executable, "-m", "autoscaler", "check-config", "-"], input=big.read_bytes(),
                              capture_output=True)
    assert as_file.returncode == on_stdin.returncode == 2
    assert b"larger than 1 MiB" in as_file.stderr and b"larger than 1 MiB" in on_stdin.stderr


def test_problems_are_listed_up_to_a_hundred() -> None:
    """A config of 60,000 unknown keys printed 60,000 lines (and `run` logged them as one line;
    found by a review): the first 100, then how many more."""
    text = "targets: []\ndefaults:\n" + "".join(f"  bogus_{i}: 1\n" for i in range(1_000))
    with pytest.raises(ConfigError) as exc:
        load_config_text(text)
    assert len(exc.value.problems) == 101 and exc.value.problems[-1] == "... and 900 more problems"

