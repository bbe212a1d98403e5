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
"""

from __future__ import annotations

import csv
import gzip
import math
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt

F = npt.NDArray[np.float64]
I = npt.NDArray[np.int64]


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
        data = np.loadtxt(self.path, delimiter=",", skiprows=1, dtype=np.float64, ndmin=2)
        if data.size == 0:
            raise ValueError(f"{self.path}: no requests")
        if data.shape[1] != 3:
            raise ValueError(f"{self.path}: expected 3 columns arrival_s,input_tokens,output_tokens")
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
        with gzip.open(f"{prefix}_client_windows.csv.gz", "rt") as f:
            for row in csv.DictReader(f):
                w = int(float(row["window_start_s"]) // self.WINDOW)
                windows.setdefault(w, []).append(
                    _ClientWindow(float(row["rate_rps"]), row["iat_dist"], float(row["iat_shape"]), float(row["iat_scale"]))
                )
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
        with open(f"{prefix}_lengths_6h.csv") as f:
            for row in csv.DictReader(f):
                li = _LengthSampler(*(float(row[f"input_tokens_{k}"]) for k in ("mean", "p50", "p90", "p99")))
                lo = _LengthSampler(*(float(row[f"output_tokens_{k}"]) for k in ("mean", "p50", "p90", "p99")))
                self._lengths.append((float(row["window_start_s"]), li, lo))
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


def open_trace(path: str | Path, start: float = 0.0, duration: float | None = None, scale: float = 1.0,
               seed: int = 0) -> Trace:
    """A CSV file (canonical format) or a ServeGen prefix / `*_client_windows.csv.gz` file."""
    p = str(path)
    if p.endswith("_client_windows.csv.gz") or Path(p + "_client_windows.csv.gz").exists():
        return ServeGenTrace(p, start, duration, scale, seed)
    return CsvTrace(p, start, duration, scale, seed)
