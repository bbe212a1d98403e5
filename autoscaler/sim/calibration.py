"""Closed-loop single-replica benchmarks, as `vllm bench serve --max-concurrency C` runs them,
and the held-out checks of the calibrated step-time model (docs/calibration.md).

`sharegpt_like(n, mean_in, mean_out)` makes a deterministic request set with ShareGPT-like
(log-normal, heavy-tailed) lengths whose totals equal the reference run's exactly (the
GPUStack table: 100 prompts, 23,260 input / 22,061 output tokens). `closed_loop()` keeps C
requests in flight on one replica until all are done and reports what the benchmark prints;
concurrency >= the number of requests is a burst (all released at t = 0).

`holdout_points()` lists every held-out measurement (simulations/data/vllm-perf tables 5, 6, 9),
each with the simulation that reproduces its setting and the engine profile of its source
(autoscaler.sim.engine_profile); `evaluate_holdout(profile)` runs them all, under the source's
engine profile and under the simulator's default (vLLM V1) profile.
"""

from __future__ import annotations

import csv
from collections.abc import Callable
from dataclasses import dataclass, replace
from functools import cache, partial
from pathlib import Path

import numpy as np
import numpy.typing as npt

from autoscaler.sim.engine import Engine
from autoscaler.sim.engine_profile import (
    LAMBDA_PREFILL_STEP_EXTRA_S,
    TRTLLM_IFB,
    VLLM_V0,
    VLLM_V0_MULTISTEP,
    VLLM_V1,
    EngineProfile,
    v0_burst,
    v0_prefill_step_s,
    v0_run,
)
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


def sharegpt_like(n: int = 100, total_in: int = 23_260, total_out: int = 22_061, seed: int = 0,
                  max_in: int = 4096, max_out: int = 2048) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """Input and output lengths of n requests, log-normal, summing exactly to the totals."""
    rng = np.random.default_rng(seed)
    n_in = _scaled_lognormal(rng, n, total_in, 1.3, 4, max_in)
    n_out = _scaled_lognormal(rng, n, total_out, 0.8, 2, max_out)
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
    tpot_median_ms: float = 0.0
    rejected: int = 0


def closed_loop(profile: Profile, n_in: npt.NDArray[np.int64], n_out: npt.NDArray[np.int64], concurrency: int,
                dt: float = 0.002, max_s: float = 3600.0, warmup: int = 0) -> BenchResult:
    """Run the requests on one replica, at most `concurrency` in flight (released at once when
    concurrency >= len), the next one sent as soon as one finishes. Returns the benchmark's
    summary: output and total tokens/s over the run, TTFT mean/median, TPOT mean/median; the
    latency statistics leave out the first `warmup` requests to finish (a warm-up phase)."""
    eng = Engine(profile, 1)
    eng.export_counters = False  # no Prometheus counters are read here (cheaper; same timings)
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
    tt = np.concatenate(ttft)[warmup:] if ttft else np.zeros(1)
    tp = np.concatenate(tpot)[warmup:] if tpot else np.zeros(1)
    tt, tp = (tt, tp) if tt.size else (np.zeros(1), np.zeros(1))
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
        tpot_median_ms=float(np.median(tp[tp > 0]) * 1e3) if (tp > 0).any() else 0.0,
        rejected=eng.rejected,
    )


# ---------------------------------------------------------------------------------- hold-out checks
PERF = Path(__file__).resolve().parents[2] / "simulations" / "data" / "vllm-perf"
TABLE5 = PERF / "lambdalabs_llama3-8b_h100-sxm_vllm0.6-multistep_sharegpt_burst.csv"
TABLE6 = PERF / "argonne_llama3-8b_h100_vllm-offline-static-batch_fp16.csv"
TABLE9 = PERF / "aiconfigurator_llama3.1-8b_h100-sxm_trtllm1.0.0rc3_random-isl-osl_concurrency.csv"


@dataclass(frozen=True)
class HoldoutPoint:
    source: str  # table and file stem
    point: str  # e.g. "isl1024-osl128-c64"
    metric: str  # "TPOT ms", "TTFT median ms", "batch latency s"
    measured: float
    simulate: Callable[[Profile, EngineProfile], float]
    engine: EngineProfile = VLLM_V1  # how the source's engine schedules (autoscaler.sim.engine_profile)


@dataclass(frozen=True)
class HoldoutResult:
    source: str
    point: str
    metric: str
    measured: float
    model: float  # under the source's engine profile
    engine: str = VLLM_V1.name
    model_v1: float = float("nan")  # under the simulator's default profile (vLLM V1)

    @property
    def error(self) -> float:
        return self.model / self.measured - 1.0

    @property
    def error_v1(self) -> float:
        return self.model_v1 / self.measured - 1.0


def _csv(path: Path) -> list[dict[str, str]]:
    with path.open() as f:
        return list(csv.DictReader(f))


# Table 9's client: aiconfigurator's benchmark template
# (src/aiconfigurator/generator/config/backend_templates/benchmark/bench_run.sh.j2, ai-dynamo/aiconfigurator
# @ f6b02f8c and @ 00fe6de3) runs `aiperf profile --concurrency c --num-requests c*50 --warmup-request-count c*2`.
AIPERF_ROUNDS = 50  # measured requests per unit of concurrency (`--num-requests c*50`)


@cache
def steady_fixed_tpot_ms(profile: Profile, isl: int, osl: int, c: int, rounds: int = AIPERF_ROUNDS) -> float:
    """Mean TPOT of a closed loop at concurrency c with fixed ISL/OSL, as table 9's aiperf run
    measures it: 2c warm-up requests (`--warmup-request-count 2c`), then `rounds * c` measured
    requests (`--num-requests 50c`), the last c of which finish while the loop drains (no request
    is sent after the last one, as in aiperf). The first c requests get staggered output lengths
    osl * (i + 1) / c so that the loop reaches the steady phase mix real clients reach by jitter
    (identical lengths released at once would stay in lockstep in a deterministic simulation);
    the next c settle. TPOT is the mean over the measured requests. (`rounds=3` is the harness
    before the template's 50 rounds were read: a third of its measured requests drained.)"""
    lead = np.maximum((osl * (np.arange(c) + 1)) // c, 2).astype(np.int64)
    n_out = np.concatenate((lead, np.full((1 + rounds) * c, osl, dtype=np.int64)))
    n_in = np.full(n_out.size, isl, dtype=np.int64)
    return closed_loop(profile, n_in, n_out, c, dt=0.004, warmup=2 * c).tpot_mean_ms


@cache
def burst(profile: Profile, n: int, total_in: int, total_out: int) -> BenchResult:
    """n ShareGPT-like requests released at t = 0 (table 5: `--request-rate inf --num-prompts n`)."""
    n_in, n_out = sharegpt_like(n, total_in, total_out)
    return closed_loop(profile, n_in, n_out, n, dt=0.004)


@cache
def static_batch_s(profile: Profile, b: int, length: int) -> float:
    """Latency of one static batch of b prompts of `length` tokens, each generating `length` tokens
    (table 6, offline `LLM.generate`: no HTTP path, so no TTFT overhead)."""
    offline = replace(profile, ttft_overhead_s=0.0)
    n = np.full(b, length, dtype=np.int64)
    return closed_loop(offline, n, n, b, dt=0.002).duration_s


def accelmark_offline(profile: Profile) -> BenchResult:
    """Table 3's offline batch (AccelMark, vLLM 0.7.3 `LLM.generate`, 100 ShareGPT prompts at once,
    max_tokens 512, max_model_len 4096; a check, not fitted). Its totals are not published: derived
    from the stored rates and the median elapsed time, 5,128.31 output tok/s x 6.7 s = 34,360 output
    and (8,934.81 - 5,128.31) x 6.7 s = 25,500 input tokens (elapsed is rounded to 0.1 s: +-1.5 %).
    Offline: no HTTP path, so no TTFT overhead."""
    n_in, n_out = sharegpt_like(100, 25_500, 34_360, seed=2, max_in=4096 - 512, max_out=512)
    return closed_loop(replace(profile, ttft_overhead_s=0.0), n_in, n_out, 100, dt=0.004)


@cache
def v0_burst_ms(profile: Profile, engine: EngineProfile, n: int, total_in: int, total_out: int) -> tuple[float, float]:
    """(median TPOT, median TTFT) in ms of table 5's burst on a V0 engine (`v0_burst`). The lengths
    follow the source client's ShareGPT pruning (vLLM benchmarks/benchmark_serving.py
    `sample_sharegpt_requests`: prompt <= 1,024 and prompt + output <= 2,048 tokens)."""
    n_in, n_out = sharegpt_like(n, total_in, total_out, max_in=1024, max_out=1024)
    ttft, tpot = v0_burst(profile, engine, n_in, n_out)
    return float(np.median(tpot[tpot > 0]) * 1e3), float(np.median(ttft) * 1e3)


# ------------------------------------------------------------- table 5's serving-stack terms (fit rows only)
# The N = 40 burst (a table-5 row the data README does not hold out): its per-request first-token times
# (LambdaLabsML/vllm-benchmark results/prompt_40/1xH100-80GB-SXM/Meta-Llama-3-8B-Instruct_tp1_len2048.json
# @ a4f9f437, `ttfts` and `input_lens`, in send order) fall on plateaus, one per V0 prefill step of FCFS
# requests under the 2,048-token budget: requests 0-10, 12, 13 at 0.1874 s (mean of the plateau), then
# 11, 14-19 at 0.2286 s, then 20, 22, 23 at 0.2803 s. Back-to-back prefill steps, so the two gaps are the
# step times of the second and third groups; their prompt lengths are the JSON's `input_lens`.
N40_PLATEAU_S = (0.18739, 0.22863, 0.28030)
N40_GROUP_PROMPTS = ((372, 12, 770, 227, 8, 14, 390), (659, 76, 744))
TABLE5_FIT_ROWS = (10, 20, 40)  # the rows outside the hold-out; never N >= 80


def table5_prefill_step_extra_s(p: Profile) -> float:
    """Measured per-prefill-step cost of table 5's engine beyond the model's V0 prefill step: the mean
    of the N = 40 burst's plateau gaps minus the model's steps of the same requests (`N40_PLATEAU_S`)."""
    q = VLLM_V0_MULTISTEP.step_profile(p)
    gaps = np.diff(np.array(N40_PLATEAU_S))
    model = [v0_prefill_step_s(q, np.array(g, dtype=np.int64), p.seq_overhead_s) for g in N40_GROUP_PROMPTS]
    return float(np.mean(gaps - np.array(model)))


def table5_rows() -> list[tuple[int, int, int, float, float]]:
    """(N, total input, total output, median TTFT ms, median TPOT ms) of every table-5 row."""
    return [(int(r["num_prompts"]), int(r["total_input_tokens"]), int(r["total_output_tokens"]),
             float(r["ttft_median_ms"]), float(r["tpot_median_ms"])) for r in _csv(TABLE5)]


def table5_ttft_errors(p: Profile, engine: EngineProfile, ns: tuple[int, ...]) -> dict[int, float]:
    """Median-TTFT error (model / measured - 1) of the table-5 rows with N in `ns` under `engine`."""
    return {n: v0_burst_ms(p, engine, n, ti, to)[1] / ttft - 1.0
            for n, ti, to, ttft, _ in table5_rows() if n in ns}


def fit_table5_frontend(p: Profile, prefill_step_extra_s: float = LAMBDA_PREFILL_STEP_EXTRA_S,
                        lo: float = 0.001, hi: float = 0.004, step: float = 0.00001) -> tuple[float, dict[int, float]]:
    """Least squares (relative errors) of the per-request front-end delay on the median TTFT of the
    N = 10 / 20 / 40 rows only, with the measured prefill-step cost; a 0.01 ms scan (the median is
    piecewise in the delay, so no gradient). Returns the delay and the residuals of the fit rows."""
    best, best_ss, best_res = lo, float("inf"), {}
    for t in np.arange(lo, hi + step / 2, step):
        e = replace(VLLM_V0_MULTISTEP, prefill_step_extra_s=prefill_step_extra_s, frontend_s_per_request=float(t))
        res = table5_ttft_errors(p, e, TABLE5_FIT_ROWS)
        ss = sum(v * v for v in res.values())
        if ss < best_ss:
            best, best_ss, best_res = float(t), ss, res
    return best, best_res


def table5_sensitivity(p: Profile, factor: float = 0.2) -> dict[str, dict[int, float]]:
    """Hold-out median-TTFT errors (N = 80 / 160 / 320) with each table-5 serving-stack term scaled by
    1 -+ `factor`, the other kept; with the prefill-step cost taken from one N = 40 gap only and the
    front end refitted on N = 10 / 20 / 40 (the spread of the two gaps); and with neither term (every
    request at the engine at t = 0)."""
    e = VLLM_V0_MULTISTEP
    held = (80, 160, 320)
    out = {"as fitted": table5_ttft_errors(p, e, held),
           "neither term": table5_ttft_errors(p, replace(e, prefill_step_extra_s=0.0, frontend_s_per_request=0.0), held)}
    for f in (1.0 - factor, 1.0 + factor):
        out[f"frontend x{f:.1f}"] = table5_ttft_errors(p, replace(e, frontend_s_per_request=e.frontend_s_per_request * f), held)
        out[f"prefill step x{f:.1f}"] = table5_ttft_errors(p, replace(e, prefill_step_extra_s=e.prefill_step_extra_s * f), held)
    q = e.step_profile(p)
    gaps = np.diff(np.array(N40_PLATEAU_S))
    for k, g in enumerate(N40_GROUP_PROMPTS):
        extra = float(gaps[k]) - v0_prefill_step_s(q, np.array(g, dtype=np.int64), p.seq_overhead_s)
        frontend, _ = fit_table5_frontend(p, extra)
        out[f"prefill step from N = 40 gap {k + 1} only ({extra * 1e3:.1f} ms), frontend refitted "
            f"({frontend * 1e3:.2f} ms)"] = table5_ttft_errors(
            p, replace(e, prefill_step_extra_s=extra, frontend_s_per_request=frontend), held)
    return out


def _t9_tpot(p: Profile, e: EngineProfile, *, isl: int, osl: int, c: int) -> float:
    return steady_fixed_tpot_ms(e.step_profile(p), isl, osl, c)


def _t5_tpot(p: Profile, e: EngineProfile, *, args: tuple[int, int, int]) -> float:
    if e.scheduler == "v0-prefill-first":
        return v0_burst_ms(p, e, *args)[0]
    return burst(e.step_profile(p), *args).tpot_median_ms


def _t5_ttft(p: Profile, e: EngineProfile, *, args: tuple[int, int, int]) -> float:
    if e.scheduler == "v0-prefill-first":
        return v0_burst_ms(p, e, *args)[1]
    return burst(e.step_profile(p), *args).ttft_median_ms


@cache
def v0_static_batch_s(profile: Profile, engine: EngineProfile, b: int, length: int) -> float:
    """Table 6's static batch (`static_batch_s`) on a V0 engine (`v0_run`): offline, so no TTFT
    overhead; the latency is the last request's last token."""
    n = np.full(b, length, dtype=np.int64)
    return float(np.max(v0_run(profile, engine, n, n)[1]))


def _t6_latency(p: Profile, e: EngineProfile, *, b: int, length: int) -> float:
    if e.scheduler == "v0-prefill-first":
        return v0_static_batch_s(p, e, b, length)
    return static_batch_s(e.step_profile(p), b, length)


def _table9_points() -> list[HoldoutPoint]:
    out = []
    for r in _csv(TABLE9):
        c, isl, osl = int(r["concurrency"]), int(r["input_tokens"]), int(r["output_tokens"])
        if c < 16:
            continue
        out.append(HoldoutPoint("table 9 (TRT-LLM, TPOT)", f"isl{isl}-osl{osl}-c{c}", "TPOT ms", float(r["silicon_tpot_ms"]),
                                partial(_t9_tpot, isl=isl, osl=osl, c=c), TRTLLM_IFB))
    return out


def _table5_points() -> list[HoldoutPoint]:
    out = []
    for r in _csv(TABLE5):
        n = int(r["num_prompts"])
        if n < 80:
            continue
        args = (n, int(r["total_input_tokens"]), int(r["total_output_tokens"]))
        out.append(HoldoutPoint("table 5 (Lambda burst)", f"N{n}", "TPOT median ms", float(r["tpot_median_ms"]),
                                partial(_t5_tpot, args=args), VLLM_V0_MULTISTEP))
        out.append(HoldoutPoint("table 5 (Lambda burst)", f"N{n}", "TTFT median ms", float(r["ttft_median_ms"]),
                                partial(_t5_ttft, args=args), VLLM_V0_MULTISTEP))
    return out


def _table6_points() -> list[HoldoutPoint]:
    out = []
    for r in _csv(TABLE6):
        b, length = int(r["concurrency"]), int(r["input_tokens"])
        if b != 64:
            continue
        out.append(HoldoutPoint("table 6 (Argonne static batch)", f"B64-L{length}", "batch latency s",
                                float(r["batch_latency_s"]), partial(_t6_latency, b=b, length=length), VLLM_V0))
    return out


def holdout_points() -> list[HoldoutPoint]:
    """Every held-out measurement: table 9 TPOT at c = 16-128, table 5 bursts N = 80-320 (median
    TPOT and TTFT), table 6 static batches B = 64."""
    return _table9_points() + _table5_points() + _table6_points()


def evaluate_holdout(profile: Profile) -> list[HoldoutResult]:
    """Every hold-out point under its source's engine profile and under the default (vLLM V1) one."""
    return [HoldoutResult(h.source, h.point, h.metric, h.measured, h.simulate(profile, h.engine), h.engine.name,
                          h.simulate(profile, VLLM_V1)) for h in holdout_points()]
