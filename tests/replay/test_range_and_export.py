"""`query_range` helpers of the Prometheus source, and reading a plain query_range export."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from autoscaler.adapters.prometheus import (
    FIELD_LABEL,
    PrometheusBadResponse,
    build_target_queries,
    parse_matrix,
    split_range,
)
from autoscaler.policy.types import LatencyHistogram, MetricSample
from autoscaler.replay.format import RecordingError
from autoscaler.replay.reader import read_recording
from autoscaler.replay.recorder import RawResults, assemble, deployment_pod_regex

FIXTURE = Path(__file__).parents[1] / "fixtures" / "prometheus_api" / "prometheus_api_query_range_matrix_example.json"


def test_split_range_keeps_every_step_once_under_the_point_limit() -> None:
    assert split_range(0, 30, 15) == [(0, 30)]
    chunks = split_range(0, 86_400 * 30, 15)  # 172,801 steps
    assert all(round((b - a) / 15) + 1 <= 11_000 for a, b in chunks)
    steps = [t for a, b in chunks for t in range(int(a), int(b) + 1, 15)]
    assert steps == list(range(0, 86_400 * 30 + 1, 15))
    with pytest.raises(ValueError):
        split_range(10, 0, 15)
    with pytest.raises(ValueError):
        split_range(0, 10, 0)


def test_parse_matrix_is_strict() -> None:
    series = parse_matrix(json.loads(FIXTURE.read_text()))
    assert series[0][0]["job"] == "prometheus" and series[0][1][0] == (1435781430.781, 1.0)
    with pytest.raises(PrometheusBadResponse, match="range vector"):
        parse_matrix({"status": "success", "data": {"resultType": "vector", "result": []}})
    with pytest.raises(PrometheusBadResponse, match="not a number"):
        parse_matrix({"status": "success", "data": {"resultType": "matrix",
                                                     "result": [{"metric": {}, "values": [[1, "x"]]}]}})
    nan = parse_matrix({"status": "success", "data": {"result": [{"metric": {}, "values": [[1, "NaN"]]}]}})
    assert math.isnan(nan[0][1][0][1])


def test_target_queries_restrict_to_the_pods() -> None:
    q = build_target_queries("llm", deployment_pod_regex("qwen.v2"))
    assert 'pod=~"qwen\\\\.v2-[a-z0-9]{1,10}-[a-z0-9]{5}"' in q["waiting"]
    assert set(q) == {"waiting", "running", "kv", "kv_legacy", "completed", "prompt_tokens", "generation_tokens", "ttft",
                      "tpot", "queue_time"}


def _signal(pod: str, value: float, ts: float, times: list[float]) -> list[tuple[dict[str, str], list[tuple[float, float]]]]:
    base = {"namespace": "llm", "pod": pod}
    return [({**base, FIELD_LABEL: "value"}, [(t, value) for t in times]),
            ({**base, FIELD_LABEL: "timestamp"}, [(t, ts) for t in times])]


def test_assemble_without_kube_state_metrics_says_so() -> None:
    times = [100.0, 115.0]
    raw = RawResults(
        signals={"waiting": _signal("qwen-a-b", 4, 99, times), "running": _signal("qwen-a-b", 2, 99, times),
                 "kv_legacy": _signal("qwen-a-b", 0.5, 99, times[:1])},
        kube={}, demand={"requests_per_second": [({}, [(100.0, 2.0)])]},
    )
    header, steps = assemble("llm", "qwen", 100, 115, 15, raw, {})
    assert header.metadata["readiness_source"] == "vllm_series" and header.metadata["spec_source"] == "ready_pods"
    assert [s.spec for s in steps] == [1, 1]
    assert steps[0].pods[0].kv_metric == "vllm:gpu_cache_usage_perc" and steps[1].pods[0].kv is None
    assert steps[0].demand == {"requests_per_second": 2.0} and steps[1].demand == {}


def test_assemble_weights_a_per_token_tpot_by_the_finished_requests() -> None:
    """vLLM <= 0.10's TPOT histogram counts tokens (the query tags it `vqa_unit="token"`): the
    recording holds it weighted by the pod's finished requests, as the live fetch does
    (`prometheus_source.per_request`), so a replay decides on what the live loop saw."""
    times = [100.0]
    buckets = [({"namespace": "llm", "pod": "qwen-a-b", "le": le, FIELD_LABEL: "value", "vqa_unit": "token"},
                [(100.0, rate)]) for le, rate in (("0.1", 900.0), ("+Inf", 1000.0))]
    stamp = [({"namespace": "llm", "pod": "qwen-a-b", FIELD_LABEL: "timestamp"}, [(100.0, 99.0)])]
    raw = RawResults(signals={"completed": _signal("qwen-a-b", 2.0, 99, times), "tpot": buckets + stamp},
                     kube={}, demand={})
    _, steps = assemble("llm", "qwen", 100, 100, 15, raw, {})
    assert steps[0].pods[0].tpot == LatencyHistogram((0.1, math.inf), (1.8, 2.0), 99.0)
    # without the pod's finished requests it cannot be weighted: absent, never the token counts
    raw = RawResults(signals={"tpot": buckets + stamp, "waiting": _signal("qwen-a-b", 1, 99, times)}, kube={}, demand={})
    _, steps = assemble("llm", "qwen", 100, 100, 15, raw, {})
    assert steps[0].pods[0].tpot is None


def test_plain_prometheus_export_is_read(tmp_path: Path) -> None:
    def series(name: str, pod: str, values: list[str], **labels: str) -> dict[str, object]:
        return {"metric": {"__name__": name, "namespace": "llm", "pod": pod, **labels},
                "values": [[1000 + 15 * i, v] for i, v in enumerate(values)]}

    doc = {"status": "success", "data": {"resultType": "matrix", "result": [
        series("vllm:num_requests_waiting", "qwen-0", ["1", "2", "3"], engine="0"),
        series("vllm:num_requests_waiting", "qwen-0", ["1", "1", "1"], engine="1"),
        series("vllm:num_requests_running", "qwen-0", ["4", "4", "4"], engine="0"),
        series("vllm:kv_cache_usage_perc", "qwen-0", ["0.2", "NaN", "0.3"], engine="0"),
        series("vllm:request_success_total", "qwen-0", ["10", "40", "70"], finished_reason="stop"),
        {"metric": {"__name__": "kube_deployment_spec_replicas", "namespace": "llm", "deployment": "qwen"},
         "values": [[1000, "1"], [1015, "2"], [1030, "2"]]},
    ]}}
    path = tmp_path / "export.json"
    path.write_text(json.dumps(doc, indent=2))
    rec = read_recording(path)
    assert rec.header.target == "llm/qwen" and rec.header.step_seconds == 15
    assert [s.spec for s in rec.steps] == [1, 2, 2]
    p = rec.steps[1].pods[0]
    assert p.waiting is not None and p.waiting.value == 3  # summed over engines
    assert p.kv is not None and math.isnan(p.kv.value)
    assert p.completed is not None and p.completed.value == 2.0  # 30 requests in 15 s
    bad = tmp_path / "bad.json"
    bad.write_text('{"status": "error", "errorType": "bad_data", "error": "x"}')
    with pytest.raises(RecordingError, match="bad query_range answer"):
        read_recording(bad)


def test_an_export_of_two_deployments_spec_replicas_is_refused(tmp_path: Path) -> None:
    """Two Deployments' kube_deployment_spec_replicas in one export were read as one (the last
    written won: the replay showed the other Deployment's 7 replicas; found by a review)."""
    doc = {"status": "success", "data": {"resultType": "matrix", "result": [
        {"metric": {"__name__": "vllm:num_requests_waiting", "namespace": "llm", "pod": "qwen-a-1"},
         "values": [[1000, "1"], [1015, "1"]]},
        *({"metric": {"__name__": "kube_deployment_spec_replicas", "namespace": "llm", "deployment": name},
           "values": [[1000, n], [1015, n]]} for name, n in (("qwen", "1"), ("llama", "7"))),
    ]}}
    path = tmp_path / "export.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(RecordingError, match=r"spans Deployments \['llama', 'qwen'\]: export one Deployment"):
        read_recording(path)


def test_plain_export_gives_token_rates_and_histograms_per_step(tmp_path: Path) -> None:
    def series(name: str, pod: str, values: list[float], **labels: str) -> dict[str, object]:
        return {"metric": {"__name__": name, "namespace": "llm", "pod": pod, **labels},
                "values": [[1000 + 15 * i, repr(v)] for i, v in enumerate(values)]}

    ttft, new, old = ("vllm:time_to_first_token_seconds_bucket", "vllm:request_time_per_output_token_seconds_bucket",
                      "vllm:time_per_output_token_seconds_bucket")
    doc = {"status": "success", "data": {"resultType": "matrix", "result": [
        series("vllm:num_requests_waiting", "qwen-0", [1, 1, 1]),
        series("vllm:num_requests_waiting", "qwen-1", [1, 1, 1]),
        series("vllm:prompt_tokens_total", "qwen-0", [0, 1500, 3000], engine="0"),
        series("vllm:prompt_tokens_total", "qwen-0", [0, 1500, 3000], engine="1"),
        series("vllm:generation_tokens_total", "qwen-0", [0, 150, 100]),  # a reset: 100 since
        series(ttft, "qwen-0", [0, 15, 30], le="0.5", engine="0"),
        series(ttft, "qwen-0", [0, 30, 60], le="+Inf", engine="0"),
        series(ttft, "qwen-0", [0, 15, 15], le="5e-01", engine="1"),  # another spelling, summed
        series(ttft, "qwen-0", [0, 15, 15], le="+Inf", engine="1"),
        series(new, "qwen-0", [0, 15, 30], le="+Inf"),
        series(old, "qwen-0", [0, 150, 300], le="+Inf"),  # the per-request TPOT wins
        series(old, "qwen-1", [0, 150, 300], le="0.1"),
        series(old, "qwen-1", [0, 300, 600], le="+Inf"),
        series("vllm:request_success_total", "qwen-1", [0, 30, 60], finished_reason="stop"),  # 2 requests/s
        series("vllm:request_queue_time_seconds_bucket", "qwen-1", [0, 15, 30], le="1.0"),  # no +Inf: none
    ]}}
    path = tmp_path / "export.json"
    path.write_text(json.dumps(doc))
    rec = read_recording(path)
    first, [a, b] = rec.steps[0].pods, rec.steps[1].pods
    assert all(p.prompt_tokens is None and p.ttft is None for p in first)  # no increase before the 2nd sample
    assert a.prompt_tokens == MetricSample(200.0, 1015.0) and a.generation_tokens == MetricSample(10.0, 1015.0)
    assert a.ttft == LatencyHistogram((0.5, math.inf), (2.0, 3.0), 1015.0)
    assert a.tpot == LatencyHistogram((math.inf,), (1.0,), 1015.0) and a.queue_time is None
    # vLLM <= 0.10's TPOT counts tokens (20/s): weighted by the 2 finished requests/s, as the live fetch
    assert b.tpot == LatencyHistogram((0.1, math.inf), (1.0, 2.0), 1015.0) and b.queue_time is None
    assert b.prompt_tokens is None
    assert rec.steps[2].pods[0].generation_tokens == MetricSample(100 / 15, 1030.0)
