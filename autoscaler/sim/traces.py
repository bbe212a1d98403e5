"""Request traces: the canonical per-request CSV and ServeGen's per-window rate traces.

Both give the simulator the same thing: chunks of requests `(arrival_s, input_tokens,
output_tokens)` in time order, with arrivals in seconds from the start of the chosen slice.

* `CsvTrace`: `arrival_s,input_tokens,output_tokens` with a header (shared/traces/README.md).
  Rate scaling by X keeps the trace's own burst shape: every request is sent floor(X) times,
  plus once more with probability frac(X); the copies are jittered uniformly within +/-0.5 s.
* `ServeGenTrace`: `<model>_client_windows.csv.gz` (per client and 10-minute window: rate,
  inter-arrival distribution Gamma/Weibull with shape and scale) and `<model>_lengths_6h.csv`
  (token-length quantiles per 6 h). Arrivals are generated per client and window the way
  ServeGen does (alibaba/ServeGen): sample gaps from the fitted distribution and rescale them so
  their mean is 1 / rate. Scaling the rate by X divides every gap by X (the burstiness of each
  client is kept). Token lengths are drawn from a piecewise-linear quantile function through
  (0, 1), (0.5, p50), (0.9, p90), (0.99, p99), (1, max), with max chosen so the mean matches.
  Collection gaps (windows where no client has traffic, see servegen/README.md) are masked by
  carrying the clients of the last window that had traffic (documented with every result).

Everything is deterministic for a given seed.

Reading is bounded (docs/limits.md): a CSV trace holds at most 512 MiB, ServeGen files at most
512 MiB decompressed; arrivals are finite seconds within 31 days, token counts whole numbers
0 .. 10,000,000, ServeGen rates and distribution parameters finite and in range. Anything else is
a ValueError of one line naming the file, the row, the value and what is allowed.
"""

from __future__ import annotations

import csv
import gzip
import io
import math
import warnings
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, Final

import numpy as np
import numpy.typing as npt

from autoscaler.config.bounded import MiB, LimitError, describe_size, read_bytes

F = npt.NDArray[np.float64]
I = npt.NDArray[np.int64]

MAX_TRACE_BYTES: Final = 512 * MiB
"""A CSV trace; a ServeGen file, decompressed."""
MAX_SPAN_S: Final = 31 * 86_400.0
"""Arrivals, ServeGen window starts, slice start and length: at most 31 days."""
MAX_TOKENS: Final = 10_000_000
"""Input or output tokens of one request."""
MAX_RATE_RPS: Final = 1_000_000.0
"""A ServeGen client's rate in one window."""


@dataclass
class Chunk:
    arrival: F  # seconds from the slice start, sorted
    n_in: I
    n_out: I


class Trace:
    """A trace slice [start, start + duration) at a rate scale."""

    name: str
    start: float
    duration: float
    scale: float

    def chunks(self) -> Iterator[Chunk]:
        raise NotImplementedError

    def peak_rate(self) -> float:
        """Highest arrival rate (req/s) at the trace's own resolution, after scaling."""
        raise NotImplementedError

    def mean_lengths(self) -> tuple[float, float]:
        raise NotImplementedError

    def describe(self) -> str:
        return f"{self.name} [{self.start:.0f}s +{self.duration:.0f}s] x{self.scale:.3g}"

    def expected_requests(self) -> float:
        """About how many requests the slice yields at its scale (before generating them)."""
        raise NotImplementedError

    def arrays(self) -> tuple[F, I, I]:
        """(arrival, n_in, n_out) of every request of the slice, its chunks joined."""
        chunks = list(self.chunks())
        if not chunks:
            return np.zeros(0), np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
        return (np.concatenate([c.arrival for c in chunks]), np.concatenate([c.n_in for c in chunks]),
                np.concatenate([c.n_out for c in chunks]))


def _jitter_copies(arr: F, n_in: I, n_out: I, scale: float, rng: np.random.Generator) -> tuple[F, I, I]:
    if scale == 1.0:
        return arr, n_in, n_out
    base = int(math.floor(scale))
    frac = scale - base
    copies = np.full(arr.size, base, dtype=np.int64) + (rng.random(arr.size) < frac)
    idx = np.repeat(np.arange(arr.size), copies)
    t = arr[idx]
    # the first copy of each request keeps its time, the others are jittered
    first = np.concatenate(([True], idx[1:] != idx[:-1])) if idx.size else np.zeros(0, dtype=bool)
    t = np.where(first, t, t + rng.uniform(-0.5, 0.5, idx.size))
    order = np.argsort(t, kind="stable")
    return t[order], n_in[idx][order], n_out[idx][order]


def _check_slice(source: object, start: float, duration: float, span: float) -> None:
    """A slice must be finite, start inside the trace and have a positive length."""
    if not (math.isfinite(start) and start >= 0.0):
        raise ValueError(f"{source}: slice start {start:g} s must be >= 0")
    if start >= span:
        raise ValueError(f"{source}: slice start {start:g} s is past the trace's end ({span:.0f} s)")
    if not (math.isfinite(duration) and duration > 0.0):
        raise ValueError(f"{source}: slice duration {duration:g} s must be > 0")


class CsvTrace(Trace):
    """The canonical per-request CSV."""

    def __init__(self, path: str | Path, start: float = 0.0, duration: float | None = None,
                 scale: float = 1.0, seed: int = 0) -> None:
        self.path = Path(path)
        self.name = self.path.stem
        data = _read_csv(self.path)
        if data.size == 0:
            raise ValueError(f"{self.path}: no requests")
        if data.shape[1] != 3:
            raise ValueError(f"{self.path}: expected 3 columns arrival_s,input_tokens,output_tokens")
        _check_rows(self.path, data)
        arr = data[:, 0]
        if np.any(np.diff(arr) < 0):
            raise ValueError(f"{self.path}: arrival_s must be non-decreasing")
        end = float(arr[-1]) + 1e-9
        self.start = float(start)
        self.duration = float(duration) if duration is not None else end - self.start
        _check_slice(self.path, self.start, self.duration, end)
        m = (arr >= self.start) & (arr < self.start + self.duration)
        if not m.any():
            raise ValueError(f"{self.path}: no request in the slice [{self.start:g} s, {self.start + self.duration:g} s)")
        self._arr = arr[m] - self.start
        self._in = np.maximum(data[m, 1].astype(np.int64), 1)
        self._out = np.maximum(data[m, 2].astype(np.int64), 1)
        self.scale = float(scale)
        self.seed = seed

    def chunks(self) -> Iterator[Chunk]:
        rng = np.random.default_rng(self.seed)
        arr, n_in, n_out = _jitter_copies(self._arr, self._in, self._out, self.scale, rng)
        keep = (arr >= 0) & (arr < self.duration)
        yield Chunk(arr[keep], n_in[keep], n_out[keep])

    def peak_rate(self) -> float:
        """Peak of the per-minute arrival rate."""
        if self._arr.size == 0:
            return 0.0
        counts = np.bincount((self._arr // 60).astype(np.int64))
        return float(counts.max()) / 60.0 * self.scale

    def mean_lengths(self) -> tuple[float, float]:
        return float(self._in.mean()), float(self._out.mean())

    def expected_requests(self) -> float:
        return float(self._arr.size) * self.scale


def _read_csv(path: Path) -> npt.NDArray[np.float64]:
    """The numbers of a canonical CSV (header skipped), at most MAX_TRACE_BYTES; ValueError."""
    try:
        raw = read_bytes(path, MAX_TRACE_BYTES, "trace")
    except FileNotFoundError:
        raise FileNotFoundError(f"{path} not found.") from None  # as np.loadtxt said it
    except OSError as exc:
        raise ValueError(f"{path}: cannot read: {exc.strerror or exc}") from None
    _check_header(path, raw)
    try:
        with warnings.catch_warnings():  # "input contained no data": said below, in one line
            warnings.simplefilter("ignore")
            return np.loadtxt(io.BytesIO(raw), delimiter=",", skiprows=1, dtype=np.float64, ndmin=2)
    except ValueError as exc:
        raise ValueError(f"{path}: {' '.join(str(exc).split())} (expected arrival_s,input_tokens,output_tokens "
                         "numbers, one request a line)") from None


CSV_HEADER: Final = ("arrival_s", "input_tokens", "output_tokens")


def _check_header(path: Path, raw: bytes) -> None:
    """The first line names the canonical columns in their order: columns read by position
    from another order, or a file without a header (whose first request would be skipped),
    would run on wrong numbers. Spaces and a UTF-8 BOM are allowed.

    Example: `output_tokens,arrival_s,input_tokens` is refused, naming what it found."""
    line = raw.split(b"\n", 1)[0]
    first = line.decode("utf-8", "replace").lstrip("\ufeff").strip()
    if tuple(c.strip() for c in first.split(",")) != CSV_HEADER:
        if any(b < 0x20 and b not in b"\t\r" for b in line[:4096]):  # NUL, ESC...: a .gz, a model, not text
            raise ValueError(f"{path}: not a text CSV (binary data in its first line): expected the header "
                             f"{','.join(CSV_HEADER)} (the canonical trace format)")
        if "\ufffd" in first:
            raise ValueError(f"{path}: its first line is not UTF-8 text: expected the header "
                             f"{','.join(CSV_HEADER)} (the canonical trace format)")
        raise ValueError(f"{path}: header {first[:80]!r}: expected {','.join(CSV_HEADER)} "
                         "(the canonical trace format, in that order)")


def _check_rows(path: Path, data: npt.NDArray[np.float64]) -> None:
    """Arrivals finite seconds 0 .. MAX_SPAN_S; token counts whole numbers 0 .. MAX_TOKENS."""
    with np.errstate(invalid="ignore"):
        arr = data[:, 0]
        bad = ~np.isfinite(arr) | (arr < 0.0) | (arr > MAX_SPAN_S)
        if bad.any():
            i = int(np.argmax(bad))
            raise ValueError(f"{path}: data row {i + 1}: arrival_s = {arr[i]:g} (allowed: seconds since the first "
                             f"request, 0 .. {MAX_SPAN_S:,.0f}, 31 days)")
        for col, name in ((1, "input_tokens"), (2, "output_tokens")):
            tok = data[:, col]
            bad = ~np.isfinite(tok) | (tok < 0.0) | (tok > MAX_TOKENS) | (tok != np.floor(tok))
            if bad.any():
                i = int(np.argmax(bad))
                raise ValueError(f"{path}: data row {i + 1}: {name} = {tok[i]:g} (allowed: a whole number "
                                 f"0 .. {MAX_TOKENS:,})")


class _BoundedText:
    """Lines of a text stream, LimitError after `limit` characters (a decompressed file)."""

    def __init__(self, inner: IO[str], limit: int, source: str) -> None:
        self.inner, self.limit, self.source, self.count = inner, limit, source, 0

    def readline(self) -> str:
        line = self.inner.readline(self.limit + 1 - self.count)
        self.count += len(line)
        if self.count > self.limit:
            size_text = describe_size(self.limit)
            raise LimitError(f"{self.source}: larger than {size_text} decompressed (allowed: at most {size_text})")
        return line

    def __iter__(self) -> Iterator[str]:
        return iter(self.readline, "")


def _number(row: dict[str, Any], key: str, where: str, lo: float, hi: float, *, positive: bool = False) -> float:
    try:
        value = float(row[key])
    except KeyError:
        raise ValueError(f"{where}: no column {key!r:.80}") from None
    except (TypeError, ValueError):
        raise ValueError(f"{where}: {key} = {row[key]!r:.80} is not a number") from None
    if not (math.isfinite(value) and lo <= value <= hi) or (positive and value <= 0.0):
        low = f"> {lo:g}" if positive else f">= {lo:g}"
        raise ValueError(f"{where}: {key} = {row[key]!r:.80} (allowed: {low}, <= {hi:,g})")
    return value


@dataclass(frozen=True)
class _ClientWindow:
    rate: float
    dist: str
    shape: float
    scale: float


class _LengthSampler:
    """Inverse-CDF sampler through (0,1), (.5,p50), (.9,p90), (.99,p99), (1,max), mean-matched."""

    def __init__(self, mean: float, p50: float, p90: float, p99: float) -> None:
        q = [0.0, 0.5, 0.9, 0.99]
        v = [1.0, max(p50, 1.0), max(p90, p50, 1.0), max(p99, p90, p50, 1.0)]
        partial = sum((q[i + 1] - q[i]) * (v[i] + v[i + 1]) / 2 for i in range(3))
        vmax = 2 * (mean - partial) / 0.01 - v[3]
        self.q = np.array(q + [1.0])
        self.v = np.array(v + [max(vmax, v[3])])

    def sample(self, rng: np.random.Generator, n: int) -> I:
        out: I = np.maximum(np.rint(np.interp(rng.random(n), self.q, self.v)), 1).astype(np.int64)
        return out


class ServeGenTrace(Trace):
    """ServeGen per-client 10-minute windows; `prefix` is e.g. .../servegen/m-mid."""

    WINDOW = 600.0

    def __init__(self, prefix: str | Path, start: float = 0.0, duration: float | None = None,
                 scale: float = 1.0, seed: int = 0, max_len: int = 32768) -> None:
        prefix = Path(str(prefix).removesuffix("_client_windows.csv.gz"))
        self.name = prefix.name
        self.seed = seed
        self.scale = float(scale)
        self.max_len = max_len
        windows: dict[int, list[_ClientWindow]] = {}
        source = f"{prefix}_client_windows.csv.gz"
        try:
            with gzip.open(source, "rt") as f:
                for i, row in enumerate(csv.DictReader(_BoundedText(f, MAX_TRACE_BYTES, source)), start=1):
                    where = f"{source}: data row {i}"
                    w = int(_number(row, "window_start_s", where, 0.0, MAX_SPAN_S) // self.WINDOW)
                    dist = row.get("iat_dist")
                    if dist not in ("Gamma", "Weibull"):
                        raise ValueError(f"{where}: iat_dist = {dist!r:.80} (allowed: Gamma, Weibull)")
                    windows.setdefault(w, []).append(_ClientWindow(
                        _number(row, "rate_rps", where, 0.0, MAX_RATE_RPS), dist,
                        _number(row, "iat_shape", where, 0.0, 1e6, positive=True),
                        _number(row, "iat_scale", where, 0.0, 1e9, positive=True)))
        except (OSError, EOFError, UnicodeDecodeError, csv.Error, zlib.error) as exc:  # zlib: a corrupt body
            raise ValueError(f"{source}: cannot read: {exc}") from None
        if not windows:
            raise ValueError(f"{source}: no client windows")
        n_windows = max(windows) + 1
        self.masked: list[int] = []
        last: list[_ClientWindow] = []
        self._windows: list[list[_ClientWindow]] = []
        for w in range(n_windows):
            cur = windows.get(w, [])
            if not cur:
                self.masked.append(w)
                cur = last
            else:
                last = cur
            self._windows.append(cur)
        self._lengths: list[tuple[float, _LengthSampler, _LengthSampler]] = []
        source = f"{prefix}_lengths_6h.csv"
        try:
            with open(source) as f:
                for i, row in enumerate(csv.DictReader(_BoundedText(f, MAX_TRACE_BYTES, source)), start=1):
                    where = f"{source}: data row {i}"
                    li, lo = (_LengthSampler(*(_number(row, f"{side}_tokens_{k}", where, 0.0, MAX_TOKENS)
                                               for k in ("mean", "p50", "p90", "p99"))) for side in ("input", "output"))
                    self._lengths.append((_number(row, "window_start_s", where, 0.0, MAX_SPAN_S), li, lo))
        except (OSError, UnicodeDecodeError, csv.Error) as exc:
            raise ValueError(f"{source}: cannot read: {exc}") from None
        if not self._lengths:
            raise ValueError(f"{source}: no rows")
        self.start = float(start)
        total = n_windows * self.WINDOW
        self.duration = float(duration) if duration is not None else total - self.start
        _check_slice(prefix, self.start, self.duration, total)

    def _window_range(self) -> range:
        w0 = int(self.start // self.WINDOW)
        w1 = int(math.ceil((self.start + self.duration) / self.WINDOW))
        return range(w0, min(w1, len(self._windows)))

    def window_rates(self) -> list[tuple[float, float]]:
        """(window start from slice start, total rate after scaling) per window."""
        return [(w * self.WINDOW - self.start, self.scale * sum(c.rate for c in self._windows[w])) for w in self._window_range()]

    def peak_rate(self) -> float:
        return max((r for _, r in self.window_rates()), default=0.0)

    def expected_requests(self) -> float:
        return sum(r for _, r in self.window_rates()) * self.WINDOW

    def _samplers(self, t_abs: float) -> tuple[_LengthSampler, _LengthSampler]:
        pick = self._lengths[0]
        for row in self._lengths:
            if row[0] <= t_abs:
                pick = row
        return pick[1], pick[2]

    def mean_lengths(self) -> tuple[float, float]:
        ws = list(self._window_range())
        w_in = w_out = tot = 0.0
        for w in ws:
            r = sum(c.rate for c in self._windows[w])
            li, lo = self._samplers(w * self.WINDOW)
            w_in += r * _mean(li)
            w_out += r * _mean(lo)
            tot += r
        return (w_in / tot, w_out / tot) if tot > 0 else (1.0, 1.0)

    def chunks(self) -> Iterator[Chunk]:
        for w in self._window_range():
            rng = np.random.default_rng((self.seed, w))
            times: list[F] = []
            for c in self._windows[w]:
                rate = c.rate * self.scale
                if rate <= 0:
                    continue
                expected = rate * self.WINDOW
                n = int(expected * 1.3 + 5 * math.sqrt(expected) + 10)
                gaps = rng.gamma(c.shape, c.scale, n) if c.dist == "Gamma" else c.scale * rng.weibull(c.shape, n)
                m = float(gaps.mean())
                if not m > 0:
                    continue
                gaps *= (1.0 / rate) / m  # ServeGen: rescale so the mean gap is 1 / rate
                t = np.cumsum(gaps) - gaps[0] * rng.random()
                times.append(t[t < self.WINDOW])
            t_all = np.sort(np.concatenate(times)) if times else np.zeros(0)
            t_all = t_all + w * self.WINDOW - self.start
            keep = (t_all >= 0) & (t_all < self.duration)
            t_all = t_all[keep]
            li, lo = self._samplers(w * self.WINDOW)
            n_out = np.minimum(lo.sample(rng, t_all.size), self.max_len // 2)
            n_in = np.minimum(li.sample(rng, t_all.size), self.max_len - n_out)
            yield Chunk(t_all, n_in, n_out)


def _mean(s: _LengthSampler) -> float:
    return float(np.sum(np.diff(s.q) * (s.v[1:] + s.v[:-1]) / 2))


class MaterializedTrace(Trace):
    """Another trace's requests, generated once and kept (arrival float64, lengths int32: 16 bytes
    a request, ~0.75 GB for a ServeGen day at peak 30), so that `work_per_bin` and every run of
    a sweep (forked workers share the arrays) read the same arrays instead of each re-sampling
    the trace. Yields exactly the requests of the wrapped trace, in the same order."""

    CHUNK_S = 600.0

    def __init__(self, inner: Trace) -> None:
        self.inner = inner
        self.name, self.start, self.duration, self.scale = inner.name, inner.start, inner.duration, inner.scale
        # each chunk is narrowed as it comes (16 B a request), so the build peaks at twice the
        # final arrays, not at the generator's int64 lengths plus int64 copies of everything
        arr: list[npt.NDArray[np.float64]] = []
        n_in: list[npt.NDArray[np.int32]] = []
        n_out: list[npt.NDArray[np.int32]] = []
        for c in inner.chunks():
            arr.append(np.asarray(c.arrival, dtype=np.float64))
            n_in.append(c.n_in.astype(np.int32))
            n_out.append(c.n_out.astype(np.int32))
        self._arr = np.concatenate(arr) if arr else np.zeros(0)
        self._in = np.concatenate(n_in) if n_in else np.zeros(0, dtype=np.int32)
        self._out = np.concatenate(n_out) if n_out else np.zeros(0, dtype=np.int32)
        del arr, n_in, n_out

    @property
    def requests(self) -> int:
        return int(self._arr.size)

    def expected_requests(self) -> float:
        return float(self._arr.size)

    def chunks(self) -> Iterator[Chunk]:
        n_chunks = max(1, int(math.ceil(self.duration / self.CHUNK_S)))
        cuts = np.searchsorted(self._arr, np.arange(1, n_chunks) * self.CHUNK_S, side="left")
        lo = 0
        for hi in [*cuts.tolist(), self._arr.size]:
            yield Chunk(self._arr[lo:hi], self._in[lo:hi].astype(np.int64), self._out[lo:hi].astype(np.int64))
            lo = hi

    def peak_rate(self) -> float:
        return self.inner.peak_rate()

    def mean_lengths(self) -> tuple[float, float]:
        return self.inner.mean_lengths()

    def describe(self) -> str:
        return self.inner.describe()


class InputScaledTrace(Trace):
    """Another trace with every prompt `factor` times as long (rounded, at least 1 token, at most
    MAX_TOKENS); arrivals and output lengths unchanged. A synthetic stress (scenario field
    `input_scale`), e.g. long-context prompts on a real arrival process."""

    def __init__(self, inner: Trace, factor: float) -> None:
        if not (math.isfinite(factor) and 0.0 < factor <= 1000.0):
            raise ValueError(f"input_scale = {factor!r} is out of range (allowed: > 0, <= 1000)")
        self.inner = inner
        self.factor = factor
        self.name, self.start, self.duration, self.scale = inner.name, inner.start, inner.duration, inner.scale

    def _scaled(self, n_in: I) -> I:
        out: I = np.clip(np.rint(n_in * self.factor), 1, MAX_TOKENS).astype(np.int64)
        return out

    def chunks(self) -> Iterator[Chunk]:
        for c in self.inner.chunks():
            yield Chunk(c.arrival, self._scaled(c.n_in), c.n_out)

    def peak_rate(self) -> float:
        return self.inner.peak_rate()

    def mean_lengths(self) -> tuple[float, float]:
        mean_in, mean_out = self.inner.mean_lengths()
        return mean_in * self.factor, mean_out

    def expected_requests(self) -> float:
        return self.inner.expected_requests()

    def describe(self) -> str:
        return f"{self.inner.describe()} prompts x{self.factor:g}"


def open_trace(path: str | Path, start: float = 0.0, duration: float | None = None, scale: float = 1.0,
               seed: int = 0, input_scale: float = 1.0) -> Trace:
    """A CSV file (canonical format) or a ServeGen prefix / `*_client_windows.csv.gz` file;
    with `input_scale` != 1 every prompt is that many times as long (`InputScaledTrace`)."""
    p = str(path)
    inner: Trace
    if p.endswith("_client_windows.csv.gz") or Path(p + "_client_windows.csv.gz").exists():
        inner = ServeGenTrace(p, start, duration, scale, seed)
    else:
        inner = CsvTrace(p, start, duration, scale, seed)
    return inner if input_scale == 1.0 else InputScaledTrace(inner, input_scale)
