"""Recording format version 2 (issue 15): the SLO signals of each pod (token rates, TTFT/TPOT/
queue-time histograms) written, read back by the fast and the reference decoder alike, checked
within bounds; version 1 files still read, with those fields None."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

from autoscaler.policy.types import LatencyHistogram, MetricSample, SampleHealth
from autoscaler.replay.format import (
    FORMAT_VERSION,
    MAX_BUCKETS,
    Header,
    RecordedPod,
    RecordingError,
    Step,
    decode_step,
    encode_step,
    write_recording,
)
from autoscaler.replay.open_loop import observation_of
from autoscaler.replay.reader import read_recording
from tests.replay.recording_lines import write_lines as _write_lines

INF = math.inf
TTFT = LatencyHistogram((0.04, 0.08, INF), (3.0, 6.0, 6.0), 99.5)
TPOT = LatencyHistogram((0.05, 0.15, INF), (955.0, 1910.0, 1910.0), 99.5)
QUEUE = LatencyHistogram((0.3, 1.0, INF), (1.5, 4.5, 6.0), 99.5)


def _pod(name: str = "qwen-0", **slo: Any) -> RecordedPod:
    s = MetricSample(1.0, 99.0)
    return RecordedPod(name, True, None, s, s, MetricSample(0.5, 99.0), "vllm:kv_cache_usage_perc", s,
                       10.0, 11.0, 50.0, **slo)


FULL = _pod(prompt_tokens=MetricSample(888.0, 99.0), generation_tokens=MetricSample(5730.0, 99.0),
            ttft=TTFT, tpot=TPOT, queue_time=QUEUE)


def test_round_trip_of_every_slo_field(tmp_path: Path) -> None:
    steps = [Step(100.0, 2, 2, False, (FULL, _pod("qwen-1"))),
             Step(115.0, 2, 2, False, (FULL._replace(ttft=None, tpot=TPOT), _pod("qwen-1", queue_time=QUEUE)))]
    header = Header("llm", "qwen", 15.0, 100.0, 115.0)
    write_recording(tmp_path / "r.jsonl.gz", header, steps)
    rec = read_recording(tmp_path / "r.jsonl.gz")
    assert rec.header.version == FORMAT_VERSION == 4
    assert rec.steps == tuple(steps)
    first = encode_step(steps[0])["pods"]  # version 2 style: bounds and rates in full
    assert len(first[0]) == 16 and len(first[1]) == 11  # SLO fields left out when all null
    assert first[0][13] == [[0.04, 0.08], [3.0, 6.0, 6.0], 99.5]
    obs = observation_of(rec.steps[0])
    pod = obs.ready_pods[0]
    assert (pod.prompt_tokens_per_second, pod.ttft, pod.tpot, pod.queue_time) == (
        MetricSample(888.0, 99.0), TTFT, TPOT, QUEUE)
    assert obs.ready_pods[1].ttft is None
    assert obs.slo_series is None  # a pod without the SLO series: decide() reads the pods


def test_the_replayed_observation_carries_the_pods_slo_series_read_once(tmp_path: Path) -> None:
    """`open_loop` sums the SLO series where it builds the observation, as the live loop does:
    the very reading `read_slo` makes of the pods."""
    from autoscaler.policy.slo_capacity import read_slo

    steps = [Step(100.0, 2, 2, False, (FULL, FULL._replace(name="qwen-1")))]
    write_recording(tmp_path / "r.jsonl.gz", Header("llm", "qwen", 15.0, 100.0, 100.0), steps)
    obs = observation_of(read_recording(tmp_path / "r.jsonl.gz").steps[0])
    assert obs.slo_series is not None and obs.slo_series.pods is obs.ready_pods
    assert obs.slo_series.reading == read_slo(obs.ready_pods, 2, 100.0, 60.0)
    assert obs.slo_series.reading.ttft_count == 12.0 and obs.slo_series.oldest == 99.0


def test_rates_that_are_no_number_are_written_nan_and_unwritable_histograms_null(tmp_path: Path) -> None:
    bad_rates = LatencyHistogram((1.0, INF), (-1.0, INF), 99.0)
    nan = LatencyHistogram((1.0, INF), (math.nan, 2.0), 99.0)
    huge_bound = LatencyHistogram((2e9, INF), (1.0, 2.0), 99.0)
    too_many = LatencyHistogram((*map(float, range(MAX_BUCKETS)), INF), (1.0,) * (MAX_BUCKETS + 1), 99.0)
    step = Step(100.0, 1, 1, False, (_pod(ttft=bad_rates, tpot=nan, queue_time=huge_bound),
                                     _pod("qwen-1", ttft=too_many)))
    write_recording(tmp_path / "r.jsonl.gz", Header("llm", "qwen", 15.0, 100.0, 100.0), [step])
    a, b = read_recording(tmp_path / "r.jsonl.gz").steps[0].pods
    assert a.ttft is not None and all(math.isnan(r) for r in a.ttft.cumulative_per_second)
    assert a.ttft.health(100.0, 30.0) is SampleHealth.NAN  # NaN health either way, never zero
    assert a.tpot is not None and math.isnan(a.tpot.cumulative_per_second[0]) and a.tpot.cumulative_per_second[1] == 2.0
    assert a.queue_time is None and b.ttft is None and b.prompt_tokens is None


def test_a_version_1_file_reads_with_the_slo_fields_none(tmp_path: Path) -> None:
    v1_pod = ["qwen-0", True, None, [1.0, 99.0], [2.0, 99.0], [0.5, 99.0], "vllm:kv_cache_usage_perc", [1.5, 99.0],
              10.0, 11.0, 50.0]
    rec = read_recording(_write_lines(tmp_path / "v1.jsonl.gz", 1, [{"t": 100.0, "spec": 1, "ready": 1,
                                                                       "pods": [v1_pod]}]))
    assert rec.header.version == 1
    [pod] = rec.steps[0].pods
    assert pod.waiting == MetricSample(1.0, 99.0) and pod.ready_at == 50.0
    assert (pod.prompt_tokens, pod.generation_tokens, pod.ttft, pod.tpot, pod.queue_time) == (None,) * 5
    ready = observation_of(rec.steps[0]).ready_pods[0]
    assert (ready.prompt_tokens_per_second, ready.ttft, ready.tpot, ready.queue_time) == (None,) * 4
    # a version 1 file holds no SLO fields: 16 fields are refused there
    v2_pod = v1_pod + [None, None, None, None, None]
    with pytest.raises(RecordingError, match=r"pods\[0\]: not a valid pod entry \(11 fields"):
        read_recording(_write_lines(tmp_path / "bad.jsonl.gz", 1, [{"t": 100.0, "pods": [v2_pod]}]))


V1 = ["qwen-0", True, None, [1.0, 99.0], None, None, None, None, 10.0, None, None]
GOOD_HIST = [[0.5, 1.0], [2.0, 6.0, 8.0], 99.0]


@pytest.mark.parametrize(
    ("slo", "message"),
    [
        ([None, None, [[1.0, 0.5], [1.0, 2.0, 3.0], 99.0], None, None], "histogram bounds"),  # not ascending
        ([None, None, [[-1.0], [1.0, 2.0], 99.0], None, None], "histogram bounds"),
        ([None, None, [[2e9], [1.0, 2.0], 99.0], None, None], "histogram bounds"),
        ([None, None, [["NaN"], [1.0, 2.0], 99.0], None, None], "histogram bounds"),
        ([None, None, None, [[1.0], [1.0], 99.0], None], "1 bounds and 1 rates"),
        ([None, None, None, [[float(i) for i in range(MAX_BUCKETS)], [1.0] * (MAX_BUCKETS + 1), 99.0], None],
         "at most 63 finite bounds"),
        ([None, None, None, None, [[1.0], [-1.0, 2.0], 99.0]], "histogram rates"),
        ([None, None, None, None, [[1.0], ["+Inf", 2.0], 99.0]], "histogram rates"),
        ([None, None, None, None, [[1.0], [1e16, 2e16], 99.0]], "histogram rates"),
        ([None, None, None, None, [[1.0], [True, 2.0], 99.0]], "expected a number"),
        ([None, None, None, None, [[1.0], [1.0, 2.0], 1e300]], "histogram timestamp"),
        ([None, None, None, None, [[1.0], [1.0, 2.0]]], "expected a histogram"),
        ([None, None, None, None, {"bounds": [1.0]}], "expected a histogram"),
        ([[1e300, 99.0], None, None, None, None], "out of range"),
        ([None, ["x", 99.0], None, None, None], "expected \\[value, timestamp\\]"),
        ([None, None, None, None], "not a valid pod entry"),  # 15 fields
    ],
)
def test_bounded_checks_of_the_slo_fields(tmp_path: Path, slo: list[Any], message: str) -> None:
    line = {"t": 100.0, "spec": 1, "ready": 1, "pods": [V1 + slo]}
    with pytest.raises(RecordingError, match=message) as info:
        read_recording(_write_lines(tmp_path / "r.jsonl.gz", 2, [line]))
    assert "\n" not in str(info.value)
    with pytest.raises(RecordingError, match=message):  # the reference decoder says the same
        decode_step(line, "line 2", 2)


@pytest.mark.parametrize(
    "slo",
    [
        [[888.0, 99.0], [5730.5, 99.0], GOOD_HIST, GOOD_HIST, GOOD_HIST],
        [None, None, [[], [4.0], 99.0], None, None],  # only the +Inf bucket
        [["NaN", 99.0], [1, 99], [[0.5, 1], [2, 6.0, 8], 99], None, None],  # ints: the reference path
        [None, None, [[0.5, 1.0], ["NaN", 6.0, 8.0], 99.0], None, [[0.5], [3.0, 1.0], 99.0]],  # NaN, decreasing
        [None, None, [[-0.0, 1.0], [0.0, -0.0, 1.0], 0.0], None, None],
    ],
)
def test_fast_and_reference_decoders_agree(tmp_path: Path, slo: list[Any]) -> None:
    lines = [{"t": 100.0 + 15 * k, "spec": 1, "ready": 1, "pods": [V1 + slo, ["qwen-1", *V1[1:]]]}
             for k in range(3)]
    rec = read_recording(_write_lines(tmp_path / "r.jsonl.gz", 2, lines))
    reference = [decode_step(json.loads(json.dumps(line)), f"line {i}") for i, line in enumerate(lines, start=2)]
    assert repr(rec.steps) == repr(tuple(reference))
    first = rec.steps[0].pods[0]
    if first.ttft is not None and rec.steps[1].pods[0].ttft is not None:
        assert first.ttft.upper_bounds[-1] == INF


def test_bounds_are_shared_between_steps(tmp_path: Path) -> None:
    lines = [{"t": 100.0 + 15 * k, "pods": [V1 + [None, None, GOOD_HIST, GOOD_HIST, None]]} for k in range(3)]
    rec = read_recording(_write_lines(tmp_path / "r.jsonl.gz", 2, lines))
    hists = [h for s in rec.steps for h in (s.pods[0].ttft, s.pods[0].tpot)]
    assert all(h is not None and h.upper_bounds is hists[0].upper_bounds for h in hists)  # type: ignore[union-attr]


def _hostile_histograms() -> Any:
    from tests.hardening.test_fuzz_readers import JSON_SCALARS, NUMBERS

    from hypothesis import strategies as st

    rates = st.lists(st.one_of(NUMBERS, JSON_SCALARS), max_size=5)
    histogram = st.one_of(st.none(), JSON_SCALARS, st.tuples(rates, rates, st.one_of(NUMBERS, JSON_SCALARS)).map(list),
                          st.lists(JSON_SCALARS, max_size=4))
    sample = st.one_of(st.none(), st.tuples(st.one_of(NUMBERS, JSON_SCALARS), NUMBERS).map(list))
    return st.tuples(sample, sample, histogram, histogram, histogram).map(list)


def test_hostile_slo_fields_read_or_fail_with_one_line(tmp_path_factory: pytest.TempPathFactory) -> None:
    from hypothesis import HealthCheck, given, settings

    @settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
    @given(slo=_hostile_histograms())
    def check(slo: list[Any]) -> None:
        path = _write_lines(tmp_path_factory.mktemp("fuzz") / "r.jsonl.gz", 2,
                            [{"t": 100.0, "pods": [V1 + slo]}])
        try:
            rec = read_recording(path)
        except RecordingError as exc:
            assert "\n" not in str(exc)
            return
        pod = rec.steps[0].pods[0]
        for h in (pod.ttft, pod.tpot, pod.queue_time):
            if h is not None:
                assert h.upper_bounds[-1] == INF and len(h.upper_bounds) == len(h.cumulative_per_second) <= MAX_BUCKETS
                assert all(0 <= b <= 1e9 for b in h.upper_bounds[:-1]) and 0 <= h.timestamp <= 253402300799
                assert all(r != r or 0 <= r <= 1e15 for r in h.cumulative_per_second)
                assert h.health(h.timestamp, 1.0) in (SampleHealth.FRESH, SampleHealth.NAN)

    check()
