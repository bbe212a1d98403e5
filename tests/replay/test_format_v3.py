"""Recording format version 3 (issue 15): a histogram's bucket bounds are written in full the
first time a file has that layout, then by the layout's number; versions 1 and 2 still read."""

from __future__ import annotations

import gzip
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
TTFT_LE = (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, INF)
TPOT_LE = (0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, INF)
V1 = ["qwen-0", True, None, [1.0, 99.0], None, None, None, None, 10.0, None, None]


def _pod(name: str, k: int, ttft_le: tuple[float, ...] = TTFT_LE) -> RecordedPod:
    s = MetricSample(1.0 + k, 99.0 + 15 * k)

    def h(le: tuple[float, ...]) -> LatencyHistogram:
        return LatencyHistogram(tuple(le), tuple(float(min(i, 7 + k)) for i in range(len(le))), 99.0 + 15 * k)

    return RecordedPod(name, True, None, s, s, MetricSample(0.5, 99.0), "vllm:kv_cache_usage_perc", s, 10.0, 11.0,
                       50.0, s, s, h(ttft_le), h(TPOT_LE), None)


def _steps(n: int) -> list[Step]:
    return [Step(100.0 + 15 * k, 2, 2, False, (_pod("qwen-0", k), _pod("qwen-1", k, (0.5, 1.0, INF))))
            for k in range(n)]


def test_bounds_are_written_once_per_layout_and_read_back_shared(tmp_path: Path) -> None:
    steps = _steps(4)
    path = tmp_path / "r.jsonl.gz"
    write_recording(path, Header("llm", "qwen", 15.0, 100.0, 145.0), steps)
    lines = _lines(path)
    assert lines[0]["version"] == FORMAT_VERSION == 4  # version 4 numbers layouts as version 3 does
    first, second = lines[1]["pods"], lines[2]["pods"]
    # step 1: TTFT layout in full (number 0), then TPOT (1); pod 2's TTFT layout (2), its TPOT by number
    assert first[0][13][0] == list(TTFT_LE[:-1]) and first[0][14][0] == list(TPOT_LE[:-1])
    assert first[1][13][0] == [0.5, 1.0] and first[1][14][0] == 1
    assert [second[0][13][0], second[0][14][0], second[1][13][0], second[1][14][0]] == [0, 1, 2, 1]
    rec = read_recording(path)
    assert rec.steps == tuple(steps)
    tpots = [p.tpot for s in rec.steps for p in s.pods]
    assert all(h is not None and h.upper_bounds is tpots[0].upper_bounds for h in tpots)  # type: ignore[union-attr]


def test_a_version_3_file_is_smaller_than_the_same_written_in_full(tmp_path: Path) -> None:
    steps = _steps(200)
    write_recording(tmp_path / "v3.jsonl.gz", Header("llm", "qwen", 15.0, 100.0, 100.0 + 15 * 199), steps)
    numbered = len(gzip.decompress((tmp_path / "v3.jsonl.gz").read_bytes()))
    full = sum(len(fmt._dumps(fmt.encode_step(s))) + 1 for s in steps)  # noqa: SLF001 - version 2 style lines
    assert numbered < 0.8 * full


def test_fast_and_reference_decoders_agree_on_numbered_layouts(tmp_path: Path) -> None:
    hist = [[0.5, 1.0], [2.0, 6.0, 8.0], 99.0]
    lines = [{"t": 100.0, "pods": [V1 + [None, None, hist, [0, [1.0, 2.0, 3.0], 99.0], None]]},
             {"t": 115.0, "pods": [V1 + [None, None, [0, [1, 2.0, 3.0], 99.0], [0, ["NaN", 2.0, 3.0], 99.0], None]]},
             {"t": 130.0, "pods": [V1 + [None, None, [[], [4.0], 99.0], [1, [5.0], 99.0], [0, [0.0, 0.0, 0.0], 99]]]}]
    rec = read_recording(_write_lines(tmp_path / "r.jsonl.gz", 3, lines))
    layouts = BucketLayouts(numbers=True)
    reference = tuple(decode_step(line, f"line {i}", 3, layouts) for i, line in enumerate(lines, start=2))
    assert repr(rec.steps) == repr(reference)
    assert layouts.ordered == [(0.5, 1.0, INF), (INF,)]


@pytest.mark.parametrize(
    ("version", "histogram", "message"),
    [
        (3, [0, [1.0, 2.0], 99.0], r"bucket layout 0 \(allowed: the number of a layout written in full before"),
        (3, [-1, [1.0, 2.0], 99.0], "bucket layout -1"),
        (3, [7, [1.0, 2.0], 99.0], "bucket layout 7"),
        (3, [True, [1.0, 2.0], 99.0], r"expected a histogram \[bounds or layout number, rates, timestamp\]"),
        (3, [0.0, [1.0, 2.0], 99.0], "expected a histogram"),
        (2, [0, [1.0, 2.0], 99.0], r"expected a histogram \[bounds, rates, timestamp\]"),  # no numbers in version 2
    ],
)
def test_layout_numbers_that_name_nothing_fail_with_one_line(tmp_path: Path, version: int, histogram: Any,
                                                              message: str) -> None:
    line = {"t": 100.0, "pods": [V1 + [None, None, histogram, None, None]]}
    with pytest.raises(RecordingError, match=message) as info:
        read_recording(_write_lines(tmp_path / "r.jsonl.gz", version, [line]))
    assert "\n" not in str(info.value)


def test_a_numbered_layout_with_other_rates_is_refused(tmp_path: Path) -> None:
    lines = [{"t": 100.0, "pods": [V1 + [None, None, [[0.5, 1.0], [2.0, 6.0, 8.0], 99.0], None, None]]},
             {"t": 115.0, "pods": [V1 + [None, None, [0, [2.0, 6.0], 99.0], None, None]]}]
    with pytest.raises(RecordingError, match="2 bounds and 2 rates"):
        read_recording(_write_lines(tmp_path / "r.jsonl.gz", 3, lines))


def test_beyond_the_layout_cap_bounds_are_written_in_full_and_read_alike(tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(fmt, "MAX_LAYOUTS", 2)
    layouts = [(float(k), INF) for k in range(1, 5)]
    steps = [Step(100.0 + 15 * k, 1, 1, False, (_pod("qwen-0", k, layouts[k % 4]),)) for k in range(8)]
    path = tmp_path / "r.jsonl.gz"
    write_recording(path, Header("llm", "qwen", 15.0, 100.0, 205.0), steps)
    written = [line["pods"][0][13][0] for line in _lines(path)[1:-1]]
    # TTFT (1.0) is 0, TPOT 1; then no room: 2.0, 3.0, 4.0 always in full
    assert written == [[1.0], [2.0], [3.0], [4.0], 0, [2.0], [3.0], [4.0]]
    assert read_recording(path).steps == tuple(steps)


def test_version_2_files_still_read(tmp_path: Path) -> None:
    hist = [[0.5, 1.0], [2.0, 6.0, 8.0], 99.0]
    lines = [{"t": 100.0 + 15 * k, "pods": [V1 + [None, None, hist, hist, None]]} for k in range(3)]
    rec = read_recording(_write_lines(tmp_path / "r.jsonl.gz", 2, lines))
    assert rec.header.version == 2
    assert [s.pods[0].ttft for s in rec.steps] == [LatencyHistogram((0.5, 1.0, INF), (2.0, 6.0, 8.0), 99.0)] * 3
