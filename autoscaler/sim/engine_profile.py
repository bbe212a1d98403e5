"""Engine profiles: how the engine that produced a held-out measurement schedules its steps.

The step-time model (autoscaler.sim.profile, fitted on vllm-perf tables 1, 2 and 8) times the
kernels of a step plus vLLM V1's CPU cost per step and per running sequence. The hold-out rows
(docs/calibration.md) were measured on other engines; each is replayed under the profile of its
source engine. A profile changes only what the engine does around the kernels, never the kernel
model, and every parameter comes from documented engine behaviour or from the fit data:

* `VLLM_V1` (the simulator's default; every published simulation uses it): the fitted profile as
  is, on the chunked-prefill engine of autoscaler.sim.engine. `step_profile` returns the profile
  object itself, so results under it are bit-identical to the simulator's.
* `TRTLLM_IFB` (table 9, TensorRT-LLM 1.0.0rc3): in-flight batching mixes context and generation
  requests in one step (the V1 engine's structure), and the overlap scheduler prepares step n + 1
  on the CPU while the GPU runs step n, so the per-sequence CPU cost is hidden behind the GPU:
  `seq_overhead_s` is 0; the per-step constant (norms, RoPE, launches) is kept. (The overlap
  scheduler is TRT-LLM's default and stays on in aiconfigurator's aggregated configs, the
  source of table 9: generator/rule_plugin/trtllm.rule, `agg disable_overlap_scheduler = false`.)
* `VLLM_V0` (table 6, vLLM 0.5.x offline, single-step V0): `_schedule_default` in
  vllm/core/scheduler.py, no chunked prefill (on by default only above 32k context): while a
  waiting request fits (`max_num_batched_tokens` = max(max_model_len, 2048) = 8,192 for
  Llama-3-8B, `max_num_seqs` 256, the V0 defaults) the step is prefill-only and the decodes wait;
  otherwise one decode step. Per-sequence CPU cost every step, as the fit target's engine.
* `VLLM_V0_MULTISTEP` (table 5, vLLM 0.6 with `--num-scheduler-steps 10`, max_model_len 2048):
  the same policy with a 2,048-token budget; a prefill step is a single step (it gets no
  lookahead slots, so vllm/engine/llm_engine.py does not cache it for multi-step), a decode batch
  runs 10 steps per scheduler call and streams its outputs at the end of the run; the
  per-sequence CPU cost (scheduling, input preparation, output processing) is paid once per
  run, i.e. 1/10 per step (vllm-project/vllm PR #7000, RFC #6854). Two terms of the source's
  serving stack, not of the kernels (docs/calibration.md, "Table 5's TTFT"): every prefill step
  costs `prefill_step_extra_s` more than its kernels, measured from the prefill cadence of the
  N = 40 burst (a row outside the hold-out), and a burst of N requests reaches the engine only
  after `frontend_s_per_request` x N (the single-threaded client and API server run every
  request's handler before the first one is forwarded), least-squares fitted on the N = 10 / 20 /
  40 medians (`autoscaler.sim.calibration.fit_table5_frontend`); it replaces `ttft_overhead_s`.

`v0_run` simulates both V0 profiles with a per-step loop on one replica (bursts and static
batches of a few hundred requests); sources and assumptions: docs/calibration.md.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, replace

import numpy as np
import numpy.typing as npt

from autoscaler.sim.profile import Profile

F = npt.NDArray[np.float64]
I = npt.NDArray[np.int64]


@dataclass(frozen=True)
class EngineProfile:
    """How an engine schedules around the kernels (see the module docstring)."""

    name: str
    seq_cpu_share: float  # fraction of seq_overhead_s charged per decode step
    scheduler: str  # "v1-chunked" (autoscaler.sim.engine) or "v0-prefill-first" (v0_run)
    num_scheduler_steps: int = 1  # decode steps per scheduler call (V0 multi-step)
    max_num_seqs: int = 0  # 0: the profile's own
    max_num_batched_tokens: int = 0  # 0: the profile's own
    prefill_step_extra_s: float = 0.0  # added to every V0 prefill step (v0_run)
    frontend_s_per_request: float = 0.0  # burst of N reaches the engine at N x this (v0_burst); 0: at t = 0

    def step_profile(self, p: Profile) -> Profile:
        """The step-time profile under this engine: `p` itself when nothing changes (bit-identical
        results), else `p` with the per-sequence CPU cost scaled and the scheduler limits set."""
        if self.seq_cpu_share == 1.0 and not self.max_num_seqs and not self.max_num_batched_tokens:
            return p
        return replace(p, seq_overhead_s=p.seq_overhead_s * self.seq_cpu_share,
                       max_num_seqs=self.max_num_seqs or p.max_num_seqs,
                       max_num_batched_tokens=self.max_num_batched_tokens or p.max_num_batched_tokens)


VLLM_V1 = EngineProfile("vllm-v1", 1.0, "v1-chunked")
TRTLLM_IFB = EngineProfile("trtllm-ifb-overlap", 0.0, "v1-chunked")
VLLM_V0 = EngineProfile("vllm-v0.5-single-step", 1.0, "v0-prefill-first", max_num_seqs=256, max_num_batched_tokens=8192)
# Table 5's serving-stack terms (docs/calibration.md, "Table 5's TTFT"); tests/sim/test_calibration.py refits both
# (`autoscaler.sim.calibration.table5_prefill_step_extra_s`, `fit_table5_frontend`) and checks these values.
LAMBDA_PREFILL_STEP_EXTRA_S = 0.01427  # measured: N = 40 burst's prefill cadence minus the model's prefill steps
LAMBDA_FRONTEND_S_PER_REQUEST = 0.00236  # least squares on the N = 10 / 20 / 40 median TTFTs, given the above
VLLM_V0_MULTISTEP = EngineProfile("vllm-v0.6-multistep10", 0.1, "v0-prefill-first", num_scheduler_steps=10,
                                  max_num_seqs=256, max_num_batched_tokens=2048,
                                  prefill_step_extra_s=LAMBDA_PREFILL_STEP_EXTRA_S,
                                  frontend_s_per_request=LAMBDA_FRONTEND_S_PER_REQUEST)


def v0_prefill_step_s(p: Profile, lengths: I, seq_overhead_s: float) -> float:
    """One V0 prefill-only step of whole prompts (no chunking): the linear ops over all their
    tokens, the LM head for one sampled row each, each prompt's causal attention, the per-step
    constant and the per-sequence CPU cost (a prefill step is scheduled on its own)."""
    n = lengths.astype(np.float64)
    b = float(n.size)
    attn = float(np.sum(p.pf0_s + p.pf1_s * n + p.pf2_s * n * n))
    return float(p.linear_s(float(n.sum()))) + float(p.head_s(b)) + attn + p.overhead_s + seq_overhead_s * b


def _admit_v0(waiting: deque[int], running: int, n_in: I, p: Profile) -> list[int]:
    """V0 `_schedule_prefills`: FCFS, whole prompts, while the token budget and max_num_seqs allow
    (a prompt longer than the budget alone is let through; the source's client never sends one)."""
    batch: list[int] = []
    tokens = 0
    while waiting and running + len(batch) < p.max_num_seqs:
        nxt = int(n_in[waiting[0]])
        if batch and tokens + nxt > p.max_num_batched_tokens:
            break
        batch.append(waiting.popleft())
        tokens += nxt
    return batch


def _decode_run(p: Profile, steps: int, run: I, n_in: I, gen: F, t: float) -> float:
    """One multi-step decode run of the batch `run` (fixed for the run: a sequence that reaches its
    length mid-run is still computed until the run ends); returns the time the run ends."""
    b = float(run.size)
    for _ in range(steps):
        t += float(p.decode_step_s(b, float(np.sum(n_in[run] + gen[run]))))
        gen[run] += 1.0
    return t


def v0_run(p: Profile, e: EngineProfile, n_in: I, n_out: I, arrival: F | None = None) -> tuple[F, F]:
    """Engine times (s) at which each of n requests on one V0 replica gets its first token and its last
    one; request i reaches the engine at `arrival[i]` (default: all at t = 0). The replica schedules
    prefill first (whole prompts) and decodes in runs of `e.num_scheduler_steps` steps; a request that
    arrives during a run waits for the run's end (the scheduler is called only between runs). The first
    token streams when its prefill step ends, the others at the end of each decode run (chunks of up to
    10 tokens under multi-step, as table 5's ITL shows). Every prefill step costs
    `e.prefill_step_extra_s` on top of `v0_prefill_step_s`. The KV cache is not simulated (no
    preemption): the requests must fit it together (table 5's and 6's do: <= 262k tokens against 372k)."""
    q = e.step_profile(p)
    if int(np.sum(n_in + n_out)) > q.kv_cache_tokens:
        raise ValueError("v0_run does not model preemption: the requests must fit the KV cache together")
    n = n_in.size
    arr = np.zeros(n) if arrival is None else np.asarray(arrival, dtype=np.float64)
    order = np.argsort(arr, kind="stable")
    first, end, gen = np.full(n, np.nan), np.full(n, np.nan), np.zeros(n)
    waiting: deque[int] = deque()
    running = np.zeros(0, dtype=np.int64)
    t, k = 0.0, 0
    while k < n or waiting or running.size:
        while k < n and arr[order[k]] <= t:
            waiting.append(int(order[k]))
            k += 1
        if not waiting and not running.size:
            t = float(arr[order[k]])  # idle until the next request reaches the engine
            continue
        batch = _admit_v0(waiting, int(running.size), n_in, q)
        if batch:
            idx = np.array(batch, dtype=np.int64)
            t += v0_prefill_step_s(q, n_in[idx], p.seq_overhead_s) + e.prefill_step_extra_s
            first[idx], gen[idx] = t, 1.0
            running = np.concatenate((running, idx))
        else:
            t = _decode_run(q, e.num_scheduler_steps, running, n_in, gen, t)
        done = running[gen[running] >= n_out[running]]
        end[done] = t
        running = running[gen[running] < n_out[running]]
    return first, end


def v0_burst(p: Profile, e: EngineProfile, n_in: I, n_out: I) -> tuple[F, F]:
    """TTFT and TPOT (seconds, per request) of n requests released at t = 0 by the client on one V0
    replica (`v0_run`). With `e.frontend_s_per_request` the burst reaches the engine at n times it and
    TTFT is the engine's first-token time (the front end's share is in that delay); without, every
    request is at the engine at t = 0 and TTFT adds the non-GPU `ttft_overhead_s` (HTTP path). TPOT
    is `vllm bench serve`'s (last - first token) / (output tokens - 1)."""
    n = n_in.size
    if e.frontend_s_per_request > 0.0:
        first, end = v0_run(p, e, n_in, n_out, np.full(n, n * e.frontend_s_per_request))
        ttft = first
    else:
        first, end = v0_run(p, e, n_in, n_out)
        ttft = first + p.ttft_overhead_s
    tpot = np.where(n_out > 1, (end - first) / np.maximum(n_out - 1, 1), 0.0)
    return ttft, tpot
