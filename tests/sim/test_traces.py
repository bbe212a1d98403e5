"""Trace readers: the canonical CSV and ServeGen's per-window rates."""

from __future__ import annotations

import gzip
from pathlib import Path

import numpy as np
import pytest

from autoscaler.sim.traces import CsvTrace, ServeGenTrace, open_trace


def _csv(tmp_path: Path) -> Path:
    p = tmp_path / "t.csv"
    rows = ["arrival_s,input_tokens,output_tokens"] + [f"{i * 0.5:.3f},{100 + i},{10 + i}" for i in range(240)]
    p.write_text("\n".join(rows) + "\n")
    return p


def test_csv_reads_slices_and_scales(tmp_path: Path) -> None:
    tr = open_trace(_csv(tmp_path), start=30.0, duration=60.0)
    assert isinstance(tr, CsvTrace)
    ch = list(tr.chunks())[0]
    assert ch.arrival.size == 120 and ch.arrival[0] == 0.0 and ch.n_in[0] == 160
    assert tr.peak_rate() == pytest.approx(2.0)  # 120 requests per minute
    scaled = CsvTrace(_csv(tmp_path), start=30.0, duration=60.0, scale=2.5)
    n = list(scaled.chunks())[0].arrival.size
    assert 270 <= n <= 330  # 2.5 x 120 = 300
    assert scaled.peak_rate() == pytest.approx(5.0)


def test_csv_rejects_unsorted(tmp_path: Path) -> None:
    p = tmp_path / "bad.csv"
    p.write_text("arrival_s,input_tokens,output_tokens\n1.0,1,1\n0.5,1,1\n")
    with pytest.raises(ValueError, match="non-decreasing"):
        CsvTrace(p)


def _servegen(tmp_path: Path) -> Path:
    prefix = tmp_path / "m-test"
    with gzip.open(f"{prefix}_client_windows.csv.gz", "wt") as f:
        f.write("window_start_s,client_id,rate_rps,cv,iat_dist,iat_shape,iat_scale\n")
        f.write("0,1,2.0,1.0,Gamma,0.5,1.0\n0,2,1.0,1.0,Weibull,0.8,1.0\n")
        # window 1 (600 s): a collection gap, no rows
        f.write("1200,1,4.0,1.0,Gamma,2.0,1.0\n")
    Path(f"{prefix}_lengths_6h.csv").write_text(
        "window_start_s,requests_in_window,requests_with_length_data,input_tokens_mean,input_tokens_p50,"
        "input_tokens_p90,input_tokens_p99,output_tokens_mean,output_tokens_p50,output_tokens_p90,output_tokens_p99\n"
        "0,1,1,300.0,200.0,600.0,1500.0,80.0,50.0,200.0,400.0\n")
    return prefix


def test_servegen_generates_each_clients_rate_and_masks_gaps(tmp_path: Path) -> None:
    tr = open_trace(_servegen(tmp_path))
    assert isinstance(tr, ServeGenTrace)
    assert tr.masked == [1]
    assert [r for _, r in tr.window_rates()] == [3.0, 3.0, 4.0]  # the gap carries window 0
    chunks = list(tr.chunks())
    counts = [c.arrival.size for c in chunks]
    assert abs(counts[0] - 1800) < 200 and abs(counts[2] - 2400) < 200  # rate x 600 s
    assert chunks[2].arrival.min() >= 1200 and chunks[2].arrival.max() < 1800
    n_in = np.concatenate([c.n_in for c in chunks])
    assert abs(n_in.mean() / 300.0 - 1) < 0.1  # the quantile sampler keeps the mean
    assert abs(np.median(n_in) / 200.0 - 1) < 0.1
    half = ServeGenTrace(_servegen(tmp_path), scale=0.5)
    assert abs(list(half.chunks())[0].arrival.size - 900) < 120


def test_servegen_is_deterministic(tmp_path: Path) -> None:
    a = [c.arrival for c in open_trace(_servegen(tmp_path), seed=3).chunks()]
    b = [c.arrival for c in open_trace(_servegen(tmp_path), seed=3).chunks()]
    assert all(np.array_equal(x, y) for x, y in zip(a, b))


def test_materialized_trace_yields_the_same_requests(tmp_path: Path) -> None:
    from autoscaler.sim.traces import MaterializedTrace

    src = CsvTrace(_csv(tmp_path), start=0.0, duration=120.0, scale=2.5, seed=3)
    mat = MaterializedTrace(CsvTrace(_csv(tmp_path), start=0.0, duration=120.0, scale=2.5, seed=3))
    mat.CHUNK_S = 7.0  # several chunks
    a = list(src.chunks())
    b = list(mat.chunks())
    assert len(b) > 1
    for f in ("arrival", "n_in", "n_out"):
        x = np.concatenate([getattr(c, f) for c in a])
        y = np.concatenate([getattr(c, f) for c in b])
        assert np.array_equal(x, y) and y.dtype == x.dtype
    assert mat.peak_rate() == src.peak_rate() and mat.describe() == src.describe()


def test_materialized_servegen_trace_keeps_every_generated_chunk(tmp_path: Path) -> None:
    from autoscaler.sim.traces import MaterializedTrace

    src = list(open_trace(_servegen(tmp_path), seed=3).chunks())
    assert len(src) > 1  # the generator yields several chunks, each narrowed on its own
    mat = MaterializedTrace(open_trace(_servegen(tmp_path), seed=3))
    for f in ("arrival", "n_in", "n_out"):
        x = np.concatenate([getattr(c, f) for c in src])
        y = np.concatenate([getattr(c, f) for c in mat.chunks()])
        assert np.array_equal(x, y)
    assert mat._in.dtype == np.int32 and mat._out.dtype == np.int32 and mat.requests == x.size


def test_a_corrupt_servegen_file_is_one_line_naming_it(tmp_path: Path) -> None:
    # a gzip whose body is damaged (not truncated): zlib.error used to escape as a traceback
    prefix = _servegen(tmp_path)
    gz = Path(f"{prefix}_client_windows.csv.gz")
    raw = bytearray(gz.read_bytes())
    raw[12:40] = bytes(28)  # the deflate stream, after the 10-byte header
    gz.write_bytes(bytes(raw))
    with pytest.raises(ValueError, match="client_windows.csv.gz: cannot read"):
        ServeGenTrace(prefix)


@pytest.mark.parametrize(
    ("text", "accepted"),
    [
        ("arrival_s,input_tokens,output_tokens\n0.0,100,10\n", True),
        ("\ufeffarrival_s, input_tokens, output_tokens\r\n0.0,100,10\n", True),  # a BOM, spaces, CRLF
        ("output_tokens,arrival_s,input_tokens\n10,0.0,100\n", False),  # read by position: wrong numbers
        ("0.0,100,10\n1.0,100,10\n", False),  # no header: the first request was skipped silently
        ("", False),
    ],
)
def test_the_csv_header_names_the_canonical_columns_in_order(tmp_path: Path, text: str, accepted: bool) -> None:
    path = tmp_path / "t.csv"
    path.write_text(text, encoding="utf-8")
    if accepted:
        assert CsvTrace(path).mean_lengths() == (100.0, 10.0)
    else:
        with pytest.raises(ValueError, match="expected arrival_s,input_tokens,output_tokens"):
            CsvTrace(path)


@pytest.mark.parametrize("raw, says", [
    (b"\x1f\x8b\x08\x00garbage\n", "not a text CSV (binary data in its first line)"),
    (b"\x00\x01garbage,\xff\n1,2,3\n", "not a text CSV (binary data in its first line)"),
    (b"arrival_s,input_tokens,sortie\xe9\n0,1,2\n", "its first line is not UTF-8 text"),  # Latin-1
    (b"arrival_s\tinput_tokens\toutput_tokens\n0\t1\t2\n", "header 'arrival_s\\tinput_tokens"),  # a TSV: text
])
def test_a_binary_file_given_as_a_trace_is_named_not_echoed(tmp_path: Path, raw: bytes, says: str) -> None:
    path = tmp_path / "t.csv"
    path.write_bytes(raw)
    with pytest.raises(ValueError) as err:
        CsvTrace(path)
    message = str(err.value)
    assert says in message and "garbage" not in message
