"""Fuzzing every parser users feed (issue 13): recording files and Prometheus exports, CSV
traces, scenario files, profiles, lint input, `--config hpa-queue:...` specs, with nesting depth,
size and alias expansion around the limits (autoscaler.config.bounded, docs/limits.md).

Each reader either returns a value within the documented ranges or raises its own error type
with a one-line message: `RecordingError` (replay), `ValueError` (simulator: scenario, profile,
trace; OSError for a file that is not there), `InputError` (lint; and `lint()` never raises on
what was read), `ConfigError` (config), `yaml.YAMLError` (`config.bounded`). Never RecursionError,
OverflowError, ZeroDivisionError, KeyError, TypeError, or a value out of range let through."""

from __future__ import annotations

import gzip
import json
import math
import time
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from autoscaler.baselines.hpa import parse_baseline
from autoscaler.cli.replay import check_baseline
from autoscaler.config import ConfigError, load_config_text
from autoscaler.config.bounded import (
    MAX_ALIAS_NODES,
    MAX_DEPTH,
    LimitError,
    YamlLimitError,
    check_depth,
    load_yaml,
    load_yaml_all,
)
from autoscaler.lint import LintOptions, lint
from autoscaler.lint.loader import InputError, load_text
from autoscaler.replay.format import MAX_TIMESTAMP, MAX_VALUE, RecordingError
from autoscaler.replay.reader import read_recording
from autoscaler.sim.experiment import Scenario
from autoscaler.sim.profile import PROFILE_DIR, load_profile
from autoscaler.sim.traces import MAX_SPAN_S, MAX_TOKENS, CsvTrace

FUZZ = settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))

# --------------------------------------------------------------------------- values

SPECIAL_NUMBERS = [0, -0.0, 1, -1, 0.5, 1e-320, 1e15, 1e16, 1e300, -1e300, 9e18, 2**63, 2**64, 10**30,
                   1764547200.0, MAX_TIMESTAMP, MAX_TIMESTAMP + 1]
NUMBERS = st.one_of(st.sampled_from(SPECIAL_NUMBERS), st.floats(allow_nan=False, allow_infinity=False),
                    st.integers(min_value=-(10**40), max_value=10**40))
JSON_SCALARS = st.one_of(st.none(), st.booleans(), NUMBERS, st.sampled_from(["NaN", "+Inf", "-Inf", "Inf", "x", ""]),
                         st.text(max_size=8))


def nested(depth: int, inner: Any = 1) -> Any:
    for _ in range(depth):
        inner = [inner]
    return inner


JSON_VALUES = st.recursive(JSON_SCALARS, lambda kids: st.one_of(st.lists(kids, max_size=4),
                                                                 st.dictionaries(st.text(max_size=5), kids, max_size=4)),
                           max_leaves=12) | st.integers(90, 1200).map(nested)

# --------------------------------------------------------------------------- recordings


def _header(**over: Any) -> dict[str, Any]:
    h = {"format": "vqa-recording", "version": 1, "target": {"namespace": "llm", "deployment": "qwen"},
         "step_seconds": 15.0, "start": 1764547200.0, "end": 1764547215.0, "metadata": {}}
    h.update(over)
    return h


def _pod(values: list[Any]) -> list[Any]:
    sample = [values[0], values[1]]
    return ["qwen-0", True, None, sample, sample, [0.5, values[1]], "vllm:kv_cache_usage_perc", sample,
            values[2], values[2], values[2]]


STEPS = st.fixed_dictionaries(
    {"t": st.one_of(NUMBERS, st.sampled_from(["NaN", "+Inf"])),
     "spec": st.one_of(st.none(), NUMBERS), "ready": st.one_of(st.none(), NUMBERS)},
    optional={"rollout": JSON_SCALARS, "demand": st.one_of(JSON_VALUES, st.dictionaries(
        st.sampled_from(["requests_per_second", "prompt_tokens_per_second", "prompt_tokens_buckets", "x"]),
        st.one_of(JSON_SCALARS, st.dictionaries(st.sampled_from(["128", "+Inf", "abc", "1e99", "-1"]), JSON_SCALARS,
                                                max_size=3)), max_size=3)),
        "pods": st.one_of(JSON_VALUES, st.lists(st.lists(JSON_SCALARS, min_size=3, max_size=3).map(_pod), max_size=3))},
)
HEADERS = st.one_of(
    st.builds(_header, step_seconds=st.one_of(NUMBERS, JSON_SCALARS), start=st.one_of(NUMBERS, JSON_SCALARS),
              end=NUMBERS, metadata=st.one_of(JSON_VALUES, st.just({}))),
    JSON_VALUES,
)


def _check_recording(rec: Any) -> None:
    h = rec.header
    assert 0 <= h.start <= MAX_TIMESTAMP and 0 <= h.end <= MAX_TIMESTAMP and 0.001 <= h.step_seconds <= 86400
    check_depth(h.metadata, "metadata")
    for step in rec.steps:
        assert 0 <= step.t <= MAX_TIMESTAMP
        for pod in step.pods:
            for sample in (pod.waiting, pod.running, pod.kv, pod.completed):
                if sample is not None:
                    assert not math.isfinite(sample.value) or abs(sample.value) <= MAX_VALUE
                    assert 0 <= sample.timestamp <= MAX_TIMESTAMP
            for t in (pod.created, pod.scheduled, pod.ready_at):
                assert t is None or 0 <= t <= MAX_TIMESTAMP


@FUZZ
@given(header=HEADERS, steps=st.lists(STEPS, max_size=4), gz=st.booleans(), trailer=st.booleans(),
       junk=st.sampled_from(["", "\n\n", "{", "[" * 2000, "\x00", "1" * 5000]))
def test_recording_files_read_or_fail_with_recording_error(tmp_path_factory: pytest.TempPathFactory, header: Any,
                                                            steps: list[Any], gz: bool, trailer: bool, junk: str) -> None:
    lines = [json.dumps(header)] + [json.dumps(s) for s in steps]
    if trailer:
        lines.append(json.dumps({"end": True, "steps": len(steps)}))
    data = ("\n".join(lines) + "\n" + junk).encode()
    path = tmp_path_factory.mktemp("rec") / "r.jsonl.gz"
    path.write_bytes(gzip.compress(data) if gz else data)
    try:
        rec = read_recording(path)
    except RecordingError as exc:
        assert len(str(exc).splitlines()) == 1 and len(str(exc)) < 2000, str(exc)[:300]
        return
    _check_recording(rec)


MATRIX_POINTS = st.lists(st.tuples(NUMBERS, st.one_of(st.sampled_from(["1", "NaN", "+Inf", "1e400", "-5", "x"]),
                                                      NUMBERS.map(str))), max_size=4)
SERIES = st.fixed_dictionaries({"metric": st.fixed_dictionaries({
    "__name__": st.sampled_from(["vllm:num_requests_waiting", "vllm:num_requests_running", "vllm:kv_cache_usage_perc",
                                 "vllm:request_success_total", "kube_deployment_spec_replicas", "up"]),
    "namespace": st.sampled_from(["llm", "other"]), "pod": st.sampled_from(["a", "b", ""])}),
    "values": MATRIX_POINTS.map(lambda ps: [list(p) for p in ps])})


@FUZZ
@given(result=st.lists(SERIES, max_size=4), wrap=st.integers(0, 3), gz=st.booleans())
def test_prometheus_exports_read_or_fail_with_recording_error(tmp_path_factory: pytest.TempPathFactory,
                                                              result: list[Any], wrap: int, gz: bool) -> None:
    doc: Any = {"status": "success", "data": {"resultType": "matrix", "result": result}}
    for _ in range(wrap):
        doc = [doc]
    data = json.dumps(doc).encode()
    path = tmp_path_factory.mktemp("exp") / "e.json"
    path.write_bytes(gzip.compress(data) if gz else data)
    try:
        rec = read_recording(path)
    except RecordingError as exc:
        assert len(str(exc).splitlines()) == 1, str(exc)[:300]
        return
    assert all(0 <= s.t <= MAX_TIMESTAMP for s in rec.steps)


def test_deep_json_is_refused_at_the_limit(tmp_path: Path) -> None:
    ok, deep = tmp_path / "ok.jsonl", tmp_path / "deep.jsonl"
    for path, depth in ((ok, MAX_DEPTH - 2), (deep, MAX_DEPTH + 1)):
        lines = [json.dumps(_header(metadata={"x": nested(depth)})), json.dumps({"end": True, "steps": 0})]
        path.write_text("\n".join(lines) + "\n")
    assert read_recording(ok).header.metadata
    with pytest.raises(RecordingError, match=f"nested deeper than {MAX_DEPTH} levels"):
        read_recording(deep)


# --------------------------------------------------------------------------- CSV traces

CELLS = st.one_of(st.sampled_from(["nan", "inf", "-inf", "-5", "1e300", "9000000000000000000", "100.5", "", "x",
                                   "1" * 400, "0", "10000000", "10000001", str(MAX_SPAN_S + 1)]),
                  st.integers(0, 10**6).map(str), st.floats(allow_nan=False, allow_infinity=False).map(repr))


@FUZZ
@given(rows=st.lists(st.lists(CELLS, min_size=2, max_size=4), max_size=6), sort=st.booleans())
def test_csv_traces_read_or_fail_with_value_error(tmp_path_factory: pytest.TempPathFactory, rows: list[list[str]],
                                                  sort: bool) -> None:
    if sort:
        rows = sorted(rows, key=lambda r: r[0])
    path = tmp_path_factory.mktemp("trace") / "t.csv"
    path.write_text("arrival_s,input_tokens,output_tokens\n" + "".join(",".join(r) + "\n" for r in rows))
    try:
        trace = CsvTrace(path)
    except ValueError as exc:  # LimitError is one too
        assert len(str(exc).splitlines()) == 1, str(exc)
        return
    (chunk,) = list(trace.chunks())
    assert all(0 <= a <= MAX_SPAN_S for a in chunk.arrival)
    assert all(1 <= n <= MAX_TOKENS for n in list(chunk.n_in) + list(chunk.n_out))


# --------------------------------------------------------------------------- scenarios and profiles

SCENARIO_VALUES = st.one_of(JSON_SCALARS, st.sampled_from([".nan", ".inf", "1e-300", "[1, 2]", "{a: 1}", "9" * 400,
                                                           "[queue-lead, bogus]", "{static-peak: [1e300]}"]))
SCENARIO_KEYS = ["name", "trace", "profile", "profile_overrides", "start", "duration", "rate_scale", "peak_replicas",
                 "dt", "min_replicas", "max_replicas", "max_nodes", "seed", "slo", "input_scale", "queue_lead",
                 "policies", "knobs", "bogus"]


def _yaml_value(v: Any) -> str:
    return v if isinstance(v, str) and v[:1] in ".[{9" else json.dumps(v)


@FUZZ
@given(entries=st.dictionaries(st.sampled_from(SCENARIO_KEYS), SCENARIO_VALUES, max_size=5))
def test_scenario_files_load_or_fail_with_value_error(tmp_path_factory: pytest.TempPathFactory,
                                                      entries: dict[str, Any]) -> None:
    folder = tmp_path_factory.mktemp("sc")
    body = {"trace": json.dumps(str(folder / "t.csv")), "policies": "[hpa-queue]"}
    body.update({k: _yaml_value(v) for k, v in entries.items()})
    path = folder / "s.yaml"
    path.write_text("".join(f"{k}: {v}\n" for k, v in body.items()))
    try:
        sc = Scenario.load(path)
    except (ValueError, OSError) as exc:  # OSError: a profile that is no file
        assert len(str(exc).splitlines()) == 1, str(exc)
        return
    assert sc.dt >= 0.01 and 0 <= sc.start <= MAX_SPAN_S and 1 <= sc.min_replicas <= sc.max_replicas <= 10_000


PROFILE = (PROFILE_DIR / "qwen3-8b-h100.yaml").read_text()
PROFILE_KEYS = ["tokens", "block_size", "max_num_seqs", "max_num_batched_tokens", "max_model_len", "overhead_s", "seq_overhead_s",
                "lin_floor_s", "lin_slope_s", "lin_compute_s", "head_floor_s", "head_slope_s", "head_compute_s",
                "attn0_s", "attn_seq_s", "attn_kv_s", "pf0_s", "pf1_s", "pf2_s", "ttft_overhead_s", "node_provision_s",
                "container_start_s", "model_load_s", "drain_grace_s", "node_idle_remove_s", "gpus_per_node"]


@FUZZ
@given(changes=st.dictionaries(st.sampled_from(PROFILE_KEYS), SCENARIO_VALUES, max_size=3))
def test_profiles_load_or_fail_with_value_error(tmp_path_factory: pytest.TempPathFactory,
                                                changes: dict[str, Any]) -> None:
    lines = PROFILE.splitlines()
    for i, line in enumerate(lines):
        key = line.strip().split(":")[0]
        if key in changes and not line.lstrip().startswith("#"):
            lines[i] = line[: len(line) - len(line.lstrip())] + f"{key}: {_yaml_value(changes[key])}"
    path = tmp_path_factory.mktemp("prof") / "p.yaml"
    path.write_text("\n".join(lines) + "\n")
    try:
        profile = load_profile(str(path))
    except ValueError as exc:
        assert len(str(exc).splitlines()) == 1, str(exc)
        return
    assert profile.capacity_rps(230, 220) >= 0.0  # no division by zero, no endless loop


# --------------------------------------------------------------------------- lint input and config

MANIFEST_FRAGMENTS = [
    "apiVersion: apps/v1", "kind: Deployment", "kind: List", "items: []", "metadata: {name: vllm}", "spec:",
    "  replicas: .inf", "  replicas: 9e18", "  template:", "    spec:", "      containers:", "      - name: vllm",
    "        image: vllm/vllm-openai:latest", "        args: [vllm, serve, m]", "        resources: {limits: {nvidia.com/gpu: 1e400}}",
    "        startupProbe: {failureThreshold: .nan, periodSeconds: 1e300}", "---", "&a [*a]", "x: &x [1, 2]", "y: *x",
    "data: {autoscaler.yaml: '" + "[" * 500 + "'}", "kind: ConfigMap", "- " * 50 + "x", "a: !!binary AAA",
    "b: 2001-02-30", "c: " + "9" * 5000, "\t", "{", "]",
]


@FUZZ
@given(fragments=st.lists(st.one_of(st.sampled_from(MANIFEST_FRAGMENTS), st.text(max_size=10)), max_size=14))
def test_lint_input_loads_or_fails_with_input_error_and_lint_never_raises(fragments: list[str]) -> None:
    text = "\n".join(fragments)
    try:
        docs = load_text(text, "m.yaml")
    except InputError as exc:
        assert len(str(exc).splitlines()) == 1 and str(exc).startswith("m.yaml"), str(exc)
        return
    lint(docs, LintOptions())


@FUZZ
@given(fragments=st.lists(st.sampled_from(MANIFEST_FRAGMENTS + ["targets: []", "defaults: {max_replicas: .inf}",
                                                                  "defaults: {slo: {ttft_seconds: .inf}}"]),
                          max_size=10))
def test_config_text_loads_or_fails_with_config_error(fragments: list[str]) -> None:
    try:
        load_config_text("\n".join(fragments), source="cm.yaml")
    except ConfigError as exc:
        assert all(len(line.splitlines()) == 1 for line in exc.problems)


# --------------------------------------------------------------------------- hpa-queue specs

OPTIONS = ["target", "min", "max", "tolerance", "down_window", "gpus_per_replica", "speed", ""]
OPTION_VALUES = st.one_of(st.sampled_from(["nan", "inf", "-inf", "1e-320", "1e308", "-5", "0", "1" * 5000, "", "x"]),
                          NUMBERS.map(str))


@FUZZ
@given(options=st.lists(st.tuples(st.sampled_from(OPTIONS), OPTION_VALUES), max_size=4), colon=st.booleans())
def test_hpa_queue_specs_parse_in_range_or_fail(options: list[tuple[str, str]], colon: bool) -> None:
    spec = "hpa-queue" + (":" if colon or options else "") + ",".join(f"{k}={v}" for k, v in options)
    try:
        params = parse_baseline(spec)
        assert params is not None
        check_baseline(spec, type("P", (), {"params": params})())
    except (ValueError, RecordingError):
        return
    assert math.isfinite(params.target_average_value) and params.target_average_value > 0
    assert 0 <= params.min_replicas <= params.max_replicas <= 10_000 and 0 <= params.tolerance < 1


# --------------------------------------------------------------------------- limits themselves


@settings(max_examples=60, deadline=None)
@given(depth=st.integers(1, 400), flow=st.booleans())
def test_yaml_nesting_is_refused_exactly_beyond_the_limit(depth: int, flow: bool) -> None:
    if flow:
        text = "[" * depth + "]" * depth
    else:
        text = "".join(" " * (2 * i) + "a:\n" for i in range(depth)) + " " * (2 * depth) + "b: 1\n"
    expected_depth = depth if flow else depth + 1  # block: `depth` mappings with a key each, and the innermost
    try:
        load_yaml(text)
    except YamlLimitError as exc:
        assert expected_depth > MAX_DEPTH, exc
        return
    assert expected_depth <= MAX_DEPTH


@settings(max_examples=40, deadline=None)
@given(levels=st.integers(1, 12), width=st.integers(1, 12), anchors_first=st.booleans())
def test_alias_expansion_is_bounded_and_quick(levels: int, width: int, anchors_first: bool) -> None:
    lines = ["a0: &a0 [x, x]"] + [f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * width) + "]" for i in range(1, levels)]
    expanded = 3 * sum(width ** i for i in range(levels))  # roughly what the aliases add
    started = time.monotonic()
    try:
        data = load_yaml_all("\n".join(lines))
    except YamlLimitError as exc:
        assert "aliases expand" in str(exc) or "nested deeper" in str(exc)
        assert expanded > MAX_ALIAS_NODES // 10 or levels > MAX_DEPTH
    else:
        assert data and expanded <= 10 * MAX_ALIAS_NODES
    assert time.monotonic() - started < 5


def test_json_depth_check_is_exact() -> None:
    check_depth(nested(MAX_DEPTH), "x")
    with pytest.raises(LimitError, match="nested deeper than 100 levels"):
        check_depth(nested(MAX_DEPTH + 1), "x")
    check_depth({"a": [{"b": nested(MAX_DEPTH - 3)}]}, "x")
    with pytest.raises(yaml.YAMLError, match="recursive alias"):
        load_yaml("a: &a {b: *a}")
