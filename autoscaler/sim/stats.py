"""Streaming request statistics: SLO attainment and log-binned latency histograms.

A simulated day holds tens of millions of requests; they are counted as they finish, never
stored. Percentiles come from histograms with 200 bins per decade (about 1.2 % resolution).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from autoscaler.sim.engine import Finished

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
    ttft_s: float = 2.0  # MLPerf Inference conversational (Llama-2-70B interactive) TTFT target
    tpot_s: float = 0.1  # ... and TPOT target


class RequestStats:
    """Counts as requests finish. Besides the totals, the SLO misses per `bin_s` of ARRIVAL time
    (`missed_by_arrival`; requests still unfinished after the slice's tail have no attributed
    arrival and count only in the totals): when the misses happened, e.g. all before the first
    added replica could serve.

    Example: bin_s = 60, requests arriving at 10 s (TTFT 0.5 s) and 70 s and 130 s (TTFT 3 s,
    over the 2 s target) -> missed_by_arrival = [0, 1, 1]."""

    def __init__(self, slo: Slo, bin_s: float = 60.0) -> None:
        self.slo = slo
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
        good = (fin.ttft <= self.slo.ttft_s) & (fin.tpot <= self.slo.tpot_s)
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

    def add_unfinished(self, n: int) -> None:
        self.total += n
        self.failed += n
        inf = np.full(n, np.inf)
        self.ttft.add(inf)
        self.wait.add(inf)

    @property
    def attainment(self) -> float:
        return self.ok / self.total if self.total else 1.0
