"""The SLO signals of the Prometheus adapter (issue 15): token rates and latency histograms per
pod, their PromQL (one query per family), and the parsing of bucket series, against a fake
Prometheus. The same through a real Prometheus: tests/test_prometheus_source.py."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest

from autoscaler.adapters.prometheus import (
    FIELD_LABEL,
    MAX_HISTOGRAM_BUCKETS,
    QUERIES_PER_FETCH,
    PrometheusBadResponse,
    PrometheusSource,
    build_queries,
    build_target_queries,
)
from autoscaler.adapters.prometheus.queries import _buckets_of, _parse_le, _per_pod_histograms
from autoscaler.policy.types import LatencyHistogram, SampleHealth
from autoscaler.replay.format import MAX_BUCKETS
from tests.test_prometheus_source import FakePrometheus, fake, responder_for, tagged  # noqa: F401

INF = math.inf


def buckets(ns: str, pod: str, rates: dict[str, str], ts: float = 1700000090.0) -> list[tuple[dict[str, str], str]]:
    """The tagged answer of one histogram query for one pod: a value series per `le`, one timestamp."""
    out = [({"namespace": ns, "pod": pod, "le": le, FIELD_LABEL: "value"}, v) for le, v in rates.items()]
    out.append(({"namespace": ns, "pod": pod, FIELD_LABEL: "timestamp"}, repr(ts)))
    return out


def samples(items: list[tuple[dict[str, str], str]]) -> list[tuple[dict[str, str], float, float]]:
    return [(labels, float(v), 1.0) for labels, v in items]


# ============================================================================ PromQL


def test_token_rate_queries_sum_engines_per_pod() -> None:
    q = build_queries(["a"], rate_window_seconds=30)
    sel = 'vllm:prompt_tokens_total{namespace=~"^(?:a)$"}'
    assert q["prompt_tokens"] == (
        f'label_replace(sum by (namespace, pod) (max by (namespace, pod, engine, model_name) (rate({sel}[30s]))),'
        ' "vqa_field", "value", "", "")'
        f" or label_replace(min by (namespace, pod) (max by (namespace, pod, engine, model_name) (timestamp({sel}))),"
        ' "vqa_field", "timestamp", "", "")'
    )
    assert "vllm:generation_tokens_total{" in q["generation_tokens"]


def test_histogram_query_text() -> None:
    q = build_queries(["a"])
    m = 'namespace=~"^(?:a)$"'

    def parts(family: str) -> tuple[str, str]:
        value = (f"sum by (namespace, pod, le) (max by (namespace, pod, engine, model_name, le) "
                 f"(rate({family}_bucket{{{m}}}[60s])))")
        ts = (f"min by (namespace, pod) (max by (namespace, pod, engine, model_name) "
              f'(timestamp({family}_bucket{{{m}, le="+Inf"}})))')
        return value, ts

    v, t = parts("vllm:time_to_first_token_seconds")
    assert q["ttft"] == (f'label_replace({v}, "vqa_field", "value", "", "")'
                         f' or label_replace({t}, "vqa_field", "timestamp", "", "")')
    new_v, new_t = parts("vllm:request_time_per_output_token_seconds")
    old_v, old_t = parts("vllm:time_per_output_token_seconds")
    old_v = f'label_replace({old_v}, "vqa_unit", "token", "", "")'  # counts tokens, not requests
    assert q["tpot"] == (
        f"label_replace({new_v} or on (namespace, pod) ({old_v} unless on (namespace, pod) {new_t}),"
        ' "vqa_field", "value", "", "")'
        f' or label_replace({new_t} or {old_t}, "vqa_field", "timestamp", "", "")'
    )
    assert "vllm:request_queue_time_seconds_bucket{" in q["queue_time"]
    assert len(q) == QUERIES_PER_FETCH == 10
    target = build_target_queries("a", "qwen-.*")
    assert set(target) == set(q) and 'pod=~"qwen-.*"' in target["tpot"]


def test_bucket_caps_agree() -> None:
    assert MAX_BUCKETS == MAX_HISTOGRAM_BUCKETS == 64


# ============================================================================ parsing


@pytest.mark.parametrize(
    ("raw", "bound"),
    [("+Inf", INF), ("Inf", INF), ("1", 1.0), ("1.0", 1.0), ("2.5e+00", 2.5), ("0.001", 0.001), (".5", 0.5),
     ("1e3", 1000.0), ("", None), ("NaN", None), ("-1", None), ("abc", None), (None, None), ("1.0 ", None),
     ("-Inf", None), ("0x10", None)],
)
def test_parse_le(raw: str | None, bound: float | None) -> None:
    assert _parse_le(raw) == bound


def test_buckets_sorted_and_spellings_of_one_bound_add_up() -> None:
    parsed = _buckets_of([("+Inf", 10.0), ("2.5e+00", 9.0), ("1", 2.0), ("1.0", 4.0)])
    assert parsed == ((1.0, 2.5, INF), (6.0, 9.0, 10.0))


@pytest.mark.parametrize(
    "raw",
    [
        [("1.0", 1.0)],  # no +Inf
        [("1.0", 1.0), ("x", 2.0), ("+Inf", 3.0)],  # an le that is no bound
        [(None, 1.0), ("+Inf", 3.0)],  # no le at all
        [(str(i), 1.0) for i in range(MAX_HISTOGRAM_BUCKETS)] + [("+Inf", 1.0)],  # over the cap
    ],
)
def test_buckets_that_are_no_histogram(raw: list[tuple[str | None, float]]) -> None:
    assert _buckets_of(raw) is None


def test_per_pod_histograms() -> None:
    answer = (
        buckets("a", "ok", {"0.5": "2", "1.0": "6", "+Inf": "8"}, ts=50.0)
        + buckets("a", "nan", {"0.5": "NaN", "+Inf": "1"})
        + buckets("a", "decreasing", {"0.5": "3", "+Inf": "1"})
        + buckets("a", "bad-le", {"half": "3", "+Inf": "4"})
        + buckets("a", "no-inf", {"1.0": "3"})
        + buckets("a", "no-stamp", {"+Inf": "1"})[:-1]  # a rate without timestamp: gone
        + buckets("a", "stamp-only", {})  # a counter with one sample in the window: no rate yet
        + [({"namespace": "a", "le": "+Inf", FIELD_LABEL: "value"}, "1")]  # no pod label: skipped
    )
    out = _per_pod_histograms(samples(answer), "ttft")
    assert set(out) == {("a", "ok"), ("a", "nan"), ("a", "decreasing")}
    ok = out[("a", "ok")]
    assert ok == LatencyHistogram((0.5, 1.0, INF), (2.0, 6.0, 8.0), 50.0)
    assert ok.health(55.0, 30.0) is SampleHealth.FRESH and ok.fraction_within(0.75) == pytest.approx(0.5)
    assert out[("a", "nan")].health(1700000091.0, 30.0) is SampleHealth.NAN  # never read as zero
    assert out[("a", "decreasing")].health(1700000091.0, 30.0) is SampleHealth.NAN


@pytest.mark.parametrize(
    ("answer", "match"),
    [
        ([({"namespace": "a", "pod": "p", "le": "1"}, "1")], FIELD_LABEL),
        (buckets("a", "p", {"+Inf": "1"}) + buckets("a", "p", {})[-1:], "two timestamp series"),
        ([({"namespace": "a", "pod": "p", FIELD_LABEL: "timestamp"}, "inf")], "not finite"),
    ],
)
def test_per_pod_histograms_refuses_what_prometheus_cannot_answer(answer: Any, match: str) -> None:
    with pytest.raises(PrometheusBadResponse, match=match):
        _per_pod_histograms(samples(answer), "ttft")


# ============================================================================ fetch() on the fake


def test_fetch_fills_every_new_signal_and_leaves_missing_ones_absent(fake: FakePrometheus) -> None:
    fake.responder = responder_for({
        "waiting": tagged("a", "new", "1", 90.0) + tagged("a", "old", "2", 90.0),
        "prompt_tokens": tagged("a", "new", "888.5", 91.0),
        "generation_tokens": tagged("a", "new", "5730", 91.0),
        "ttft": buckets("a", "new", {"0.04": "3", "0.08": "6", "+Inf": "6"}, ts=92.0),
        "tpot": buckets("a", "new", {"0.05": "6", "+Inf": "6"}, ts=92.0)
        + buckets("a", "old", {"0.05": "955", "0.15": "1910", "+Inf": "1910"}, ts=93.0),
        "queue_time": buckets("a", "only-queue", {"1.0": "4.5", "+Inf": "6"}, ts=94.0),
    })
    source = PrometheusSource(fake.url, sleep=lambda s: None)
    out = source.fetch(["a"], now=100.0)
    assert set(out) == {("a", "new"), ("a", "old"), ("a", "only-queue")}
    new = out[("a", "new")]
    assert new.prompt_tokens_per_second is not None and new.prompt_tokens_per_second.value == 888.5
    assert new.generation_tokens_per_second is not None and new.generation_tokens_per_second.timestamp == 91.0
    assert new.ttft == LatencyHistogram((0.04, 0.08, INF), (3.0, 6.0, 6.0), 92.0)
    assert new.tpot is not None and new.tpot.fraction_within(0.05) == 1.0 and new.queue_time is None
    old = out[("a", "old")]
    assert old.tpot is not None and old.tpot.count_per_second == 1910.0
    assert (old.prompt_tokens_per_second, old.ttft, old.queue_time) == (None, None, None)  # absent, not zero
    assert out[("a", "only-queue")].waiting is None and out[("a", "only-queue")].queue_time is not None
    assert len(fake.queries) == QUERIES_PER_FETCH


def test_fetch_query_count_is_the_same_for_1_and_50_targets(fake: FakePrometheus) -> None:
    pods = [(f"ns{i}", f"p{i}") for i in range(50)]
    answers: dict[str, Any] = {"waiting": [s for ns, p in pods for s in tagged(ns, p, "1", 5.0)],
                               "ttft": [s for ns, p in pods for s in buckets(ns, p, {"+Inf": "1"})],
                               "tpot": [s for ns, p in pods for s in buckets(ns, p, {"1": "1", "+Inf": "1"})]}
    fake.responder = responder_for(answers)
    source = PrometheusSource(fake.url, sleep=lambda s: None)
    for namespaces in (["ns0"], [ns for ns, _ in pods]):
        fake.seen.clear()
        out = source.fetch(namespaces)
        assert len(out) == 50 and all(m.ttft is not None and m.tpot is not None for m in out.values())
        assert len(fake.queries) == QUERIES_PER_FETCH
    assert len(json.dumps([s.params["query"] for s in fake.queries])) < 20_000  # no per-pod text


def test_one_malformed_pod_does_not_spoil_the_others(fake: FakePrometheus) -> None:
    too_many = {f"{i / 10:g}": str(i) for i in range(MAX_HISTOGRAM_BUCKETS)} | {"+Inf": "100"}
    fake.responder = responder_for({"ttft": buckets("a", "big", too_many) + buckets("a", "fine", {"+Inf": "2"})})
    out = PrometheusSource(fake.url, sleep=lambda s: None).fetch(["a"])
    assert ("a", "big") not in out and out[("a", "fine")].ttft is not None  # None: no pod with no signal



def test_pods_with_one_bucket_layout_share_one_bounds_tuple() -> None:
    """The decision core recognises a shared layout without comparing bounds (constant cost per
    pod, issue 15): pods of one fetch with equal bounds get the very same tuple; another layout
    its own; the histograms are equal to ones built apart."""
    answer = (buckets("a", "p1", {"0.5": "2", "1.0": "6", "+Inf": "8"})
              + buckets("a", "p2", {"0.5": "1", "1": "3", "+Inf": "3"})  # "1" and "1.0": one bound
              + buckets("b", "p3", {"0.5": "0", "1.0": "0", "+Inf": "0"})
              + buckets("b", "p4", {"0.25": "1", "+Inf": "2"}))
    out = _per_pod_histograms(samples(answer), "ttft")
    p1, p2, p3, p4 = (out[k] for k in [("a", "p1"), ("a", "p2"), ("b", "p3"), ("b", "p4")])
    assert p1.upper_bounds is p2.upper_bounds is p3.upper_bounds
    assert p4.upper_bounds is not p1.upper_bounds and p4.upper_bounds == (0.25, INF)
    assert p2 == LatencyHistogram((0.5, 1.0, INF), (1.0, 3.0, 3.0), 1700000090.0)
