"""Closed-loop single-replica benchmarks, as `vllm bench serve --max-concurrency C` runs them.

`sharegpt_like(n, mean_in, mean_out)` makes a deterministic request set with ShareGPT-like
(log-normal, heavy-tailed) lengths whose totals equal the reference run's exactly (the
GPUStack table: 100 prompts, 23,260 input / 22,061 output tokens). `closed_loop()` keeps C
requests in flight on one replica until all are done and reports what the benchmark prints.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from autoscaler.sim.engine import Engine
from autoscaler.sim.profile import Profile


def _scaled_lognormal(rng: np.random.Generator, n: int, total: int, sigma: float, lo: int, hi: int) -> npt.NDArray[np.int64]:
    x = rng.lognormal(0.0, sigma, n)
    for _ in range(50):  # rescale to the exact total within [lo, hi]
        x = np.clip(x * (total / x.sum()), lo, hi)
    v = np.floor(x).astype(np.int64)
    short = total - int(v.sum())
    order = np.argsort(-(x - v))
    v[order[: max(short, 0)]] += 1
    return v


def sharegpt_like(n: int = 100, total_in: int = 23_260, total_out: int = 22_061, seed: int = 0) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """Input and output lengths of n requests, log-normal, summing exactly to the totals."""
    rng = np.random.default_rng(seed)
    n_in = _scaled_lognormal(rng, n, total_in, 1.3, 4, 4096)
    n_out = _scaled_lognormal(rng, n, total_out, 0.8, 2, 2048)
    return n_in, n_out


@dataclass(frozen=True)
class BenchResult:
    concurrency: int
    requests: int
    duration_s: float
    output_tok_per_s: float
    total_tok_per_s: float
    ttft_mean_ms: float
    ttft_median_ms: float
    tpot_mean_ms: float
    preemptions: int


def closed_loop(profile: Profile, n_in: npt.NDArray[np.int64], n_out: npt.NDArray[np.int64], concurrency: int,
                dt: float = 0.002, max_s: float = 3600.0) -> BenchResult:
    """Run the requests on one replica, at most `concurrency` in flight (released at once when
    concurrency >= len), the next one sent as soon as one finishes. Returns the benchmark's
    summary: output and total tokens/s over the run, TTFT mean/median, TPOT mean."""
    eng = Engine(profile, 1)
    n = len(n_in)
    sent = min(concurrency, n)
    z = np.zeros(sent, dtype=np.int64)
    eng.enqueue(z, np.zeros(sent), n_in[:sent], n_out[:sent])
    ttft: list[npt.NDArray[np.float64]] = []
    tpot: list[npt.NDArray[np.float64]] = []
    done = 0
    t = 0.0
    last_end = 0.0
    while done < n and t < max_s:
        fin = eng.step(t, dt)
        t += dt
        k = fin.arrival.size
        if k:
            done += k
            ttft.append(fin.ttft)
            tpot.append(fin.tpot)
            last_end = max(last_end, float(fin.end.max()))
            m = min(k, n - sent)
            if m > 0:
                ends = np.sort(fin.end)[:m]
                idx = slice(sent, sent + m)
                eng.enqueue(np.zeros(m, dtype=np.int64), ends, n_in[idx], n_out[idx])
                sent += m
    tt = np.concatenate(ttft) if ttft else np.zeros(1)
    tp = np.concatenate(tpot) if tpot else np.zeros(1)
    dur = max(last_end, 1e-9)
    return BenchResult(
        concurrency=concurrency,
        requests=done,
        duration_s=dur,
        output_tok_per_s=float(n_out.sum()) / dur,
        total_tok_per_s=float(n_in.sum() + n_out.sum()) / dur,
        ttft_mean_ms=float(tt.mean() * 1e3),
        ttft_median_ms=float(np.median(tt) * 1e3),
        tpot_mean_ms=float(tp[tp > 0].mean() * 1e3) if (tp > 0).any() else 0.0,
        preemptions=eng.preemptions,
    )
