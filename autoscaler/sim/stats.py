"""Streaming request statistics: SLO attainment and log-binned latency histograms.

A simulated day holds tens of millions of requests; they are counted as they finish, never
stored. Percentiles come from histograms with 200 bins per decade (about 1.2 % resolution).

A request meets the SLO when its TTFT is within its TTFT bound (`Slo.ttft_bound_s`) and its
TPOT within `tpot_s`. A failed request (TTFT inf: killed at the end of a drain, or rejected by
the engine, e.g. a prompt longer than max_model_len) always misses, whatever its prompt length.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from autoscaler.sim.engine import Finished

F = npt.NDArray[np.float64]
I = npt.NDArray[np.int64]
IdleTtft = Callable[[I], F]  # prompt tokens -> TTFT alone on an idle replica (Profile.idle_ttft_s)

_PER_DECADE = 200
_LO = -4.0  # 0.1 ms
_BINS = int((5.0 - _LO) * _PER_DECADE) + 2  # up to 1e5 s, +inf bin


class Histogram:
    def __init__(self) -> None:
        self.counts = np.zeros(_BINS, dtype=np.int64)

    def add(self, x: npt.NDArray[np.float64]) -> None:
        if x.size == 0:
            return
        with np.errstate(divide="ignore", invalid="ignore"):
            idx = np.floor((np.log10(np.maximum(x, 1e-12)) - _LO) * _PER_DECADE) + 1
        idx = np.where(np.isfinite(idx), idx, _BINS - 1)
        idx = np.clip(idx, 0, _BINS - 1).astype(np.int64)
        self.counts += np.bincount(idx, minlength=_BINS)

    def quantile(self, q: float) -> float:
        total = int(self.counts.sum())
        if total == 0:
            return float("nan")
        k = int(np.searchsorted(np.cumsum(self.counts), q * total, side="left"))
        if k >= _BINS - 1:
            return float("inf")
        if k == 0:
            return float(10.0**_LO)
        return float(10.0 ** (_LO + k / _PER_DECADE))  # upper edge of the bin


@dataclass(frozen=True)
class Slo:
    """TTFT and TPOT targets. With `ttft_idle_factor` the TTFT target is length-aware: a
    request's bound is max(ttft_s, ttft_idle_factor x its TTFT alone on an idle replica), so a
    long prompt whose prefill alone takes longer than `ttft_s` is not a miss by construction."""

    ttft_s: float = 2.0  # MLPerf Inference conversational (Llama-2-70B interactive) TTFT target
    tpot_s: float = 0.1  # ... and TPOT target
    ttft_idle_factor: float | None = None  # None: the flat ttft_s for every request

    def __post_init__(self) -> None:
        f = self.ttft_idle_factor
        if f is not None and not (np.isfinite(f) and f > 0.0):
            raise ValueError(f"slo: ttft_idle_factor must be a positive number, got {f!r}")

    def ttft_bound_s(self, in_tokens: I, idle_ttft: IdleTtft | None) -> F:
        """Each request's TTFT bound (vectorised over prompt lengths); `idle_ttft` is the
        profile's `idle_ttft_s`, needed only when `ttft_idle_factor` is set.

        Worked example (Qwen3-8B/H100: idle TTFT = 0.050 s + 3.7e-5 s per prompt token), ttft_s 2,
        factor 5: 1,000 tokens -> max(2, 5 x 0.087) = 2 s; 20,000 tokens -> max(2, 5 x 0.79)
        = 3.95 s. Without a factor every bound is 2 s."""
        flat = np.full(np.shape(in_tokens), self.ttft_s, dtype=np.float64)
        if self.ttft_idle_factor is None:
            return flat
        if idle_ttft is None:
            raise ValueError("slo: ttft_idle_factor is set but no idle TTFT function (Profile.idle_ttft_s) was given")
        out: F = np.maximum(flat, self.ttft_idle_factor * idle_ttft(np.asarray(in_tokens, dtype=np.int64)))
        return out


class RequestStats:
    """Counts as requests finish. Besides the totals, the SLO misses per `bin_s` of ARRIVAL time
    (`missed_by_arrival`; requests still unfinished after the slice's tail have no attributed
    arrival and count only in the totals): when the misses happened, e.g. all before the first
    added replica could serve.

    Example: bin_s = 60, requests arriving at 10 s (TTFT 0.5 s) and 70 s and 130 s (TTFT 3 s,
    over the 2 s target) -> missed_by_arrival = [0, 1, 1].

    `idle_ttft` (the profile's `idle_ttft_s`) is required when the SLO is length-aware
    (`slo.ttft_idle_factor` set); requests then must carry their prompt lengths."""

    def __init__(self, slo: Slo, bin_s: float = 60.0, idle_ttft: IdleTtft | None = None) -> None:
        if slo.ttft_idle_factor is not None and idle_ttft is None:
            raise ValueError("RequestStats: a length-aware SLO (ttft_idle_factor) needs idle_ttft (Profile.idle_ttft_s)")
        self.slo = slo
        self.idle_ttft = idle_ttft
        self.bin_s = bin_s
        self.total = 0
        self.ok = 0
        self.failed = 0
        self.ttft = Histogram()
        self.tpot = Histogram()
        self.wait = Histogram()
        self.missed_by_arrival = np.zeros(0, dtype=np.int64)

    def add(self, fin: Finished) -> None:
        n = fin.arrival.size
        if n == 0:
            return
        self.total += n
        good = self._met(fin)
        self.ok += int(good.sum())
        if not good.all():
            b = np.bincount((fin.arrival[~good] // self.bin_s).astype(np.int64).clip(0))
            if b.size > self.missed_by_arrival.size:
                b[: self.missed_by_arrival.size] += self.missed_by_arrival
                self.missed_by_arrival = b
            else:
                self.missed_by_arrival[: b.size] += b
        self.failed += int(np.isinf(fin.ttft).sum())
        self.ttft.add(fin.ttft)
        self.tpot.add(fin.tpot[fin.out_tokens > 1])
        self.wait.add(fin.wait)

    def _met(self, fin: Finished) -> npt.NDArray[np.bool_]:
        """Which requests met the SLO (TTFT within its bound, TPOT within target; inf misses)."""
        if self.slo.ttft_idle_factor is None:
            ttft_ok = fin.ttft <= self.slo.ttft_s
        elif fin.in_tokens is None:
            raise ValueError("RequestStats: a length-aware SLO needs the prompt lengths (Finished.in_tokens)")
        else:
            ttft_ok = fin.ttft <= self.slo.ttft_bound_s(fin.in_tokens, self.idle_ttft)
        met: npt.NDArray[np.bool_] = ttft_ok & (fin.tpot <= self.slo.tpot_s)
        return met

    def add_unfinished(self, n: int) -> None:
        self.total += n
        self.failed += n
        inf = np.full(n, np.inf)
        self.ttft.add(inf)
        self.wait.add(inf)

    @property
    def attainment(self) -> float:
        return self.ok / self.total if self.total else 1.0
