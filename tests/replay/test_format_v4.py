"""Recording format version 4 (issue 15, a month read in <= 3 s): a histogram's rates are
written in full the first time a file has that vector (without its repeated tail) and then by
the vector's number; equal histograms read back as one object; versions 1-3 still read."""

from __future__ import annotations

import gzip
import json
import math
from pathlib import Path
from typing import Any

import pytest

from autoscaler.policy.types import LatencyHistogram, MetricSample
from autoscaler.replay import format as fmt
from autoscaler.replay.format import (
    FORMAT_VERSION,
    BucketLayouts,
    Header,
    RecordedPod,
    RecordingError,
    Step,
    decode_step,
    write_recording,
)
from autoscaler.replay.reader import read_recording
from tests.replay.recording_lines import read_lines as _lines
from tests.replay.recording_lines import write_lines as _write_lines

INF = math.inf
LE = (0.1, 0.5, 1.0, 2.5, INF)
TTFT_LE = (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, INF)
V1 = ["qwen-0", True, None, [1.0, 99.0], None, None, None, None, 10.0, None, None]


def _pod(name: str, rates: tuple[float, ...], ts: float, le: tuple[float, ...] = LE) -> RecordedPod:
    s = MetricSample(1.0, ts)
    h = LatencyHistogram(le, rates, ts)
    return RecordedPod(name, True, None, s, s, s, "vllm:kv_cache_usage_perc", s, 10.0, 11.0, 50.0, s, s, h, h, None)


def test_rates_are_written_once_without_their_tail_and_read_back_shared(tmp_path: Path) -> None:
    a, b = (1.0, 3.0, 4.0, 4.0, 4.0), (0.0, 0.0, 2.0, 2.0, 2.0)
    steps = [Step(100.0, 2, 2, False, (_pod("qwen-0", a, 99.0), _pod("qwen-1", a, 99.0))),
             Step(115.0, 2, 2, False, (_pod("qwen-0", b, 114.0), _pod("qwen-1", a, 114.0))),
             Step(130.0, 2, 2, False, (_pod("qwen-0", b, 114.0), _pod("qwen-1", b, 129.0)))]
    path = tmp_path / "r.jsonl.gz"
    write_recording(path, Header("llm", "qwen", 15.0, 100.0, 130.0), steps)
    lines = _lines(path)
    assert lines[0]["version"] == FORMAT_VERSION == 4
    # the pod's samples and histograms share a timestamp: written once, in the first sample
    assert [line["pods"][0][3:8] for line in lines[1:-1]] == [[[1.0, 99.0], 1.0, 1.0, "vllm:kv_cache_usage_perc", 1.0],
                                                              [[1.0, 114.0], 1.0, 1.0, "vllm:kv_cache_usage_perc", 1.0],
                                                              [[1.0, 114.0], 1.0, 1.0, "vllm:kv_cache_usage_perc", 1.0]]
    hists = [[p[13], p[14]] for line in lines[1:-1] for p in line["pods"]]
    assert hists[0] == [[[0.1, 0.5, 1.0, 2.5], [1.0, 3.0, 4.0]], [0, 0]]  # a: vector 0, tail left out
    assert hists[1] == [[0, 0], [0, 0]]
    assert hists[2] == [[0, [0.0, 0.0, 2.0]], [0, 1]]  # b: vector 1
    assert hists[3:] == [[[0, 0]] * 2, [[0, 1]] * 2, [[0, 1]] * 2]
    rec = read_recording(path)
    assert rec.header.version == 4 and rec.steps == tuple(steps)
    read = [(p.ttft, p.tpot) for s in rec.steps for p in s.pods]
    assert all(h is not None and h.cumulative_per_second is read[0][0].cumulative_per_second  # type: ignore[union-attr]
               for h in (read[0][0], read[0][1], read[1][0], read[3][0]))
    # equal histograms (layout, rates, timestamp) are one object: within a step and between steps
    assert read[0][1] is read[1][0] is read[1][1] and read[2][1] is read[4][0] and read[5][0] is not read[4][0]


def test_a_version_4_file_is_smaller_and_reads_the_same_as_version_3(tmp_path: Path) -> None:
    def rates(k: int) -> tuple[float, ...]:  # zeros, a few buckets, then the count (vLLM's TTFT on a busy pod)
        return (0.0,) * 8 + (1.0 * (k % 5), 5.5, 6.25) + (7.0,) * 6

    steps = [Step(100.0 + 15 * k, 3, 3, False, tuple(_pod(f"qwen-{i}", rates(k), 99.0 + 15 * k, TTFT_LE)
                                                     for i in range(3))) for k in range(200)]
    write_recording(tmp_path / "v4.jsonl.gz", Header("llm", "qwen", 15.0, 100.0, 100.0 + 15 * 199), steps)
    v4 = len(gzip.decompress((tmp_path / "v4.jsonl.gz").read_bytes()))
    layouts: dict[tuple[float, ...], int] = {}
    v3_lines = [fmt.encode_step(s, layouts) for s in steps]  # layouts numbered, rates in full: version 3
    v3 = sum(len(fmt._dumps(x)) + 1 for x in v3_lines)  # noqa: SLF001
    assert v4 < 0.6 * v3
    assert read_recording(_write_lines(tmp_path / "v3.jsonl.gz", 3, v3_lines)).steps == tuple(steps)
    assert read_recording(tmp_path / "v4.jsonl.gz").steps == tuple(steps)


def test_nan_and_negative_zero_vectors_are_never_numbered_and_read_back_exactly(tmp_path: Path) -> None:
    neg = (-0.0, 0.0, 0.0, 0.0, 1.0)
    pos = (0.0, 0.0, 0.0, 0.0, 1.0)
    nan = (math.nan, 1.0, 1.0, 1.0, 1.0)
    steps = [Step(100.0 + 15 * k, 1, 1, False, (_pod("qwen-0", (pos, neg, nan, neg)[k], 99.0 + 15 * k),))
             for k in range(4)]
    path = tmp_path / "r.jsonl.gz"
    write_recording(path, Header("llm", "qwen", 15.0, 100.0, 145.0), steps)
    written = [line["pods"][0][13][1] for line in _lines(path)[1:-1]]
    assert written == [[0.0, 0.0, 0.0, 0.0, 1.0], [-0.0, 0.0, 0.0, 0.0, 1.0], ["NaN", 1.0],
                       [-0.0, 0.0, 0.0, 0.0, 1.0]]
    assert math.copysign(1.0, written[1][0]) < 0  # -0.0 is neither numbered as 0.0 nor trimmed into it
    read = [s.pods[0].ttft for s in read_recording(path).steps]
    assert [repr(h.cumulative_per_second) for h in read if h is not None] == [repr(pos), repr(neg), repr(nan), repr(neg)]


@pytest.mark.parametrize(
    "hists",
    [
        [[[0.5, 1.0], [2.0, 6.0], 99.0], [0, 0, 99.0], [0, [2.0, 6.0, 6.0], 99.0]],  # short, by number, in full
        [[[0.5, 1.0], [2.0], 99.0], [0, [1, 6.0], 99.0], [0, 0, 99]],  # ints: the reference path
        [[[0.5, 1.0], ["NaN", 6.0], 99.0], [0, [0.0, -0.0], 99.0], [0, [2.0], 99.0]],  # no number for NaN, -0.0
        [[[], [4.0], 99.0], [0, 0, 99.0], [0, [4.0], 0.0]],
    ],
)
def test_fast_and_reference_decoders_agree_on_version_4(tmp_path: Path, hists: list[Any]) -> None:
    lines = [{"t": 100.0 + 15 * k, "pods": [V1 + [None, None, *hists], ["qwen-1", *V1[1:], None, None, *hists]]}
             for k in range(2)]
    rec = read_recording(_write_lines(tmp_path / "r.jsonl.gz", 4, lines))
    layouts = BucketLayouts(numbers=True, vectors=True)
    reference = tuple(decode_step(line, f"line {i}", 4, layouts) for i, line in enumerate(lines, start=2))
    assert repr(rec.steps) == repr(reference)


@pytest.mark.parametrize(
    ("version", "histogram", "message"),
    [
        (4, [[0.5, 1.0], 0, 99.0], (r"rate vector 0 \(allowed: the number of a rate vector written in full before, "
                                    "none so far")),
        (4, [[0.5, 1.0], -1, 99.0], "rate vector -1"),
        (4, [[0.5, 1.0], True, 99.0], "expected a histogram"),
        (4, [[0.5, 1.0], [], 99.0], "2 bounds and 0 rates"),
        (4, [[0.5, 1.0], [1.0, 2.0, 3.0, 4.0], 99.0], "2 bounds and 4 rates"),
        (4, [[0.5, 1.0], [1.0, "NaN", -1.0], 99.0], "histogram rates"),
        (3, [[0.5, 1.0], [2.0, 6.0], 99.0], "2 bounds and 2 rates"),  # no tail left out before version 4
        (3, [[0.5, 1.0], 0, 99.0], r"expected a histogram \[bounds or layout number, rates, timestamp\]"),
    ],
)
def test_rate_vectors_that_name_nothing_fail_with_one_line(tmp_path: Path, version: int, histogram: Any,
                                                           message: str) -> None:
    line = {"t": 100.0, "pods": [V1 + [None, None, histogram, None, None]]}
    with pytest.raises(RecordingError, match=message) as info:
        read_recording(_write_lines(tmp_path / "r.jsonl.gz", version, [line]))
    assert "\n" not in str(info.value)


def test_a_numbered_vector_of_another_layout_is_refused(tmp_path: Path) -> None:
    lines = [{"t": 100.0, "pods": [V1 + [None, None, [[0.5, 1.0], [2.0, 6.0, 8.0], 99.0], None, None]]},
             {"t": 115.0, "pods": [V1 + [None, None, [[0.5], 0, 99.0], None, None]]}]
    with pytest.raises(RecordingError, match="1 bounds and 3 rates"):
        read_recording(_write_lines(tmp_path / "r.jsonl.gz", 4, lines))


def test_beyond_the_vector_cap_rates_are_written_in_full_and_read_alike(tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(fmt, "MAX_RATE_VECTORS", 2)
    vectors = [(0.0, 0.0, 0.0, float(k), float(k)) for k in range(1, 5)]
    steps = [Step(100.0 + 15 * k, 1, 1, False, (_pod("qwen-0", vectors[k % 4], 99.0 + 15 * k),)) for k in range(8)]
    path = tmp_path / "r.jsonl.gz"
    write_recording(path, Header("llm", "qwen", 15.0, 100.0, 205.0), steps)
    written = [line["pods"][0][13][1] for line in _lines(path)[1:-1]]
    # vector 1 is number 0 (TTFT and TPOT alike), 2 number 1; then no room: 3 and 4 always in full
    assert written == [[0.0, 0.0, 0.0, 1.0], [0.0, 0.0, 0.0, 2.0], [0.0, 0.0, 0.0, 3.0], [0.0, 0.0, 0.0, 4.0],
                       0, 1, [0.0, 0.0, 0.0, 3.0], [0.0, 0.0, 0.0, 4.0]]
    assert read_recording(path).steps == tuple(steps)


@pytest.mark.parametrize("negative_zero", ["-0.0", "-1e-400", "-12.5E-400", "-0e3"])
def test_a_negative_zero_keeps_its_sign_next_to_a_zero_read_before(tmp_path: Path, negative_zero: str) -> None:
    """The fast path interns samples by (value, timestamp), where -0.0 equals 0.0: a line that
    may hold one (a pod named qwen-0.5 too) is read by the reference decoder, which keeps it."""
    zero = '["qwen-00001",true,null,[0.0,99.0],[0.0,99.0],null,null,null,10.0,null,null]'
    lines = [f'{{"t":100.0,"pods":[{zero}]}}',
             (f'{{"t":115.0,"pods":[["qwen-0.5",true,null,[0.0,99.0],[{negative_zero},99.0],null,null,null,10.0,'
              f'null,null],{zero}]}}')]
    header = json.dumps({"format": "vqa-recording", "version": 4, "target": {"namespace": "llm", "deployment": "q"},
                         "step_seconds": 15.0, "start": 100.0, "end": 115.0})
    path = tmp_path / "r.jsonl.gz"
    path.write_bytes(gzip.compress("\n".join([header, *lines, '{"end":true,"steps":2}', ""]).encode()))
    second = read_recording(path).steps[1]
    assert repr(second.pods[0].running) == "MetricSample(value=-0.0, timestamp=99.0)"
    assert repr(second.pods[0].waiting) == repr(second.pods[1].waiting) == "MetricSample(value=0.0, timestamp=99.0)"


def test_timestamps_are_written_once_a_pod_unless_they_differ(tmp_path: Path) -> None:
    s, later = MetricSample(2.0, 99.0), MetricSample(math.nan, 98.0)
    h = LatencyHistogram(LE, (1.0, 2.0, 2.0, 2.0, 2.0), 99.0)
    pod = RecordedPod("qwen-0", True, None, s, later, later, "vllm:kv_cache_usage_perc", s, 10.0, 11.0, 50.0,
                      None, s, h, LatencyHistogram(LE, (1.0, 2.0, 2.0, 2.0, 2.0), 97.0), None)
    path = tmp_path / "r.jsonl.gz"
    write_recording(path, Header("llm", "qwen", 15.0, 100.0, 100.0), [Step(100.0, 1, 1, False, (pod,))])
    entry = _lines(path)[1]["pods"][0]
    assert entry[3:8] == [[2.0, 99.0], ["NaN", 98.0], "NaN", "vllm:kv_cache_usage_perc", [2.0, 99.0]]
    assert entry[11:] == [None, 2.0, [[0.1, 0.5, 1.0, 2.5], [1.0, 2.0]], [0, 0, 97.0], None]
    assert repr(read_recording(path).steps[0].pods) == repr((pod,))  # repr: NaN equals nothing


@pytest.mark.parametrize(
    ("version", "pod", "message"),
    [
        (4, ["qwen-0", True, None, 1.0, None, None, None, None, 10.0, None, None],
         r"a value without its timestamp, 1.0, before any sample with one \(allowed: \[value, timestamp\] first"),
        (4, V1[:3] + [None] * 5 + [10.0, None, None, None, None, [[0.5], [1.0, 2.0]], None, None],
         "a histogram without its timestamp before any sample with one"),
        (4, ["qwen-0", True, None, [1.0, 99.0], "x", None, None, None, 10.0, None, None],
         r"expected \[value, timestamp\] or null"),
        (3, ["qwen-0", True, None, [1.0, 99.0], 2.0, None, None, None, 10.0, None, None],
         r"expected \[value, timestamp\] or null, got 2.0"),
        (3, V1 + [None, None, [[0.5], [1.0, 2.0]], None, None], "expected a histogram"),
    ],
)
def test_values_without_a_timestamp_before_them_fail_with_one_line(tmp_path: Path, version: int, pod: list[Any],
                                                                   message: str) -> None:
    with pytest.raises(RecordingError, match=message) as info:
        read_recording(_write_lines(tmp_path / "r.jsonl.gz", version, [{"t": 100.0, "pods": [pod]}]))
    assert "\n" not in str(info.value)


@pytest.mark.parametrize(
    "pod",
    [
        ["qwen-0", True, None, [1.0, 99.0], 2.0, "NaN", "vllm:kv_cache_usage_perc", 3, 10.0, None, None,
         [4.0, 98], 5.0, [[0.5], [1.0]], [0, [1.0, 2.0], 97.0], [0, 0]],
        ["qwen-0", True, None, [1, 99], 2, "+Inf", None, "-Inf", 10.0, None, None, None, None, [[], [1]], None, None],
    ],
)
def test_fast_and_reference_decoders_agree_on_values_without_timestamps(tmp_path: Path, pod: list[Any]) -> None:
    lines = [{"t": 100.0 + 15 * k, "pods": [pod, ["qwen-1", *pod[1:]]]} for k in range(2)]
    rec = read_recording(_write_lines(tmp_path / "r.jsonl.gz", 4, lines))
    layouts = BucketLayouts(numbers=True, vectors=True)
    reference = tuple(decode_step(line, f"line {i}", 4, layouts) for i, line in enumerate(lines, start=2))
    assert repr(rec.steps) == repr(reference)
    assert rec.steps[0].pods[0].running is not None and rec.steps[0].pods[0].running.timestamp == 99.0


def test_hostile_version_4_entries_read_as_the_reference_decoder_reads_them_or_fail_with_one_line(
        tmp_path_factory: pytest.TempPathFactory) -> None:
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    from tests.hardening.test_fuzz_readers import JSON_SCALARS, NUMBERS

    small = st.sampled_from([0.0, 1.0, 2.5, 99.0, 0, 1, -0.0, "NaN"])
    stamp = st.sampled_from([99.0, 98.0, 99, 0.0, -0.0])
    good_sample = st.one_of(st.none(), small, st.tuples(small, stamp).map(list))
    bad_sample = st.one_of(JSON_SCALARS, st.tuples(NUMBERS, NUMBERS).map(list))
    good_histogram = st.tuples(st.sampled_from(
        [[[0.5], [1.0, 2.0]], [[0.5], [1.0]], [[0.5], [-0.0]], [[0.5, 1.0], [0.0, 2.0]], [[], [3]], [0, [1.0]], [0, 0],
         [0, 1], [1, [2.0]], [1, 0], [2, [1.0, 1.0]]]), st.one_of(st.none(), stamp)).map(
        lambda x: x[0] if x[1] is None else [*x[0], x[1]])
    rates = st.one_of(st.integers(-1, 2), st.lists(st.one_of(small, NUMBERS, JSON_SCALARS), max_size=4))
    bounds = st.one_of(st.integers(-1, 2), st.sampled_from([[], [0.5], [0.5, 1.0]]))
    bad_histogram = st.one_of(st.tuples(bounds, rates).map(list), st.tuples(bounds, rates, stamp).map(list),
                              JSON_SCALARS)

    @st.composite
    def pod(draw: Any) -> list[Any]:  # each field valid 9 times in 10: whole entries read often enough
        def field(good: Any, bad: Any) -> Any:
            return draw(bad if draw(st.integers(0, 9)) == 0 else good)

        f = [field(st.tuples(small, stamp).map(list), bad_sample)] + [field(good_sample, bad_sample) for _ in range(5)]
        h = [field(st.one_of(st.none(), good_histogram), bad_histogram) for _ in range(3)]
        return ["qwen-0", True, None, f[0], f[1], f[2], None, f[3], 10.0, None, None, f[4], f[5], *h]

    @settings(max_examples=200, deadline=None, suppress_health_check=list(HealthCheck))
    @given(pods=st.lists(pod(), min_size=2, max_size=2))
    def check(pods: list[Any]) -> None:
        lines = [{"t": 100.0 + 15 * k, "pods": [p]} for k, p in enumerate([*pods, *pods])]
        path = _write_lines(tmp_path_factory.mktemp("fuzz") / "r.jsonl.gz", 4, lines)
        try:
            rec = read_recording(path)
        except RecordingError as exc:
            assert "\n" not in str(exc)
            return
        layouts = BucketLayouts(numbers=True, vectors=True)
        reference = tuple(decode_step(json.loads(json.dumps(x)), f"line {i}", 4, layouts)
                          for i, x in enumerate(lines, start=2))
        assert repr(rec.steps) == repr(reference)

    check()
