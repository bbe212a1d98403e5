"""vLLM replicas with continuous batching, vectorised over requests (numpy), advanced in ticks.

One `Engine` holds every replica of the fleet ("slots" 0..max_slots-1) and every request in it,
in flat arrays: a per-request Python event loop cannot simulate a day of a 30-replica fleet
(tens of millions of requests, ~10^9 tokens) in seconds; a fixed tick over numpy arrays can.

What one replica does, per tick of `dt` seconds (vLLM V1 scheduler, FCFS policy):

* **Admission** (FCFS, no skipping): the head of a replica's waiting queue is scheduled while
  it has fewer than `max_num_seqs` running and enough free KV blocks for the request's prompt
  (`ceil(tokens / block_size)` blocks, as `KVCacheManager.allocate_slots`); the first one that
  does not fit stops admission for that replica.
* **Rejection**: a request whose prompt plus requested output (the trace's output length as
  `max_tokens`) exceeds `max_model_len` is refused at once, as vLLM's OpenAI server answers
  HTTP 400 "This model's maximum context length is ..." (`_validate_prompt_and_tokenize` in
  vllm/entrypoints/openai/serving_engine.py: `token_num + max_tokens > max_model_len`). It is
  returned as failed (ttft = tpot = wait = inf) by the next `step()` and counted in `rejected`.
* **Prefill**: admitted requests are prefilled first-come first-served; a prompt of L tokens
  costs `prefill_s(L)` GPU-seconds (linear ops + its causal attention, docs/calibration.md) plus
  its share of the decode part of the mixed chunked steps (`step / (max_num_batched_tokens -
  B)` per token). A request's first token comes out with the step that finishes its prefill;
  TTFT adds `ttft_overhead_s` (HTTP, templating).
* **Decode**: the replica spends the tick's time not taken by prefill on decode steps of
  `decode_step_s(B, K)` seconds; each step adds one token to each of the B decoding requests.
  `gpu_busy_s` adds up, per replica, the GPU time so spent (prefill + decode steps).
  Within a tick progress is fluid (fractional tokens), so completions get exact sub-tick times.
* **Preemption**: when decode growth needs more KV blocks than the replica has, the most
  recently admitted requests are preempted (vLLM V1 `_preempt_request`, RECOMPUTE): their
  blocks are freed, they go back to the *front* of the waiting queue and must prefill their
  prompt plus the tokens already generated again.

* **Backlog**: a replica's waiting queue keeps at most `2 * max_num_seqs` fresh requests in the
  arrays admission scans (plus any preempted ones); the rest wait, in order, in a per-replica
  overflow FIFO and move up as the head drains. Admission never looks past `max_num_seqs`
  requests, so decisions are the same as with one long queue, but a policy that lets the backlog
  grow to millions (hpa-cpu, an under-scaled fleet) no longer makes every tick O(backlog).

It exports what vLLM exports: per replica `num_requests_waiting`, `num_requests_running`,
`kv_cache_usage_perc` (used blocks / total) and the `request_success_total` counter; and per
finished request its queue wait (arrival -> first scheduled), TTFT and TPOT
((end - first token) / (output tokens - 1), the definition of `vllm bench serve`).

Per replica it also keeps the counters and histograms vLLM V1's Prometheus logger exports
(`counters()`, one row per slot, columns `COUNTER_COLUMNS`), as vLLM 0.12 computes them
(vllm/v1/metrics/stats.py `IterationStats.update_from_output` / `update_from_finished_request`,
vllm/v1/metrics/loggers.py `PrometheusStatLogger.record`; vllm-project/vllm at 28ed1fb87ed5):

* `vllm:prompt_tokens_total`: a request's whole prompt (`prompt_len`), counted once, in the
  iteration that emits its first token (`is_prefilling` and a new token), not per prefill chunk;
  a preempted request's recomputation is not counted again.
* `vllm:generation_tokens_total`: every emitted token (`len(output.new_token_ids)`), as it is
  emitted: the tokens of finished requests plus the whole tokens emitted so far by those still
  on the replica (decode progress is fluid within a tick; the counter takes its floor).
* `vllm:time_to_first_token_seconds`: observed when the first token comes out (TTFT = first
  token - arrival, the value `Finished.ttft` reports and the SLO judges: it includes the
  profile's `ttft_overhead_s`, HTTP and templating, which vLLM's own clock, started when the
  frontend takes the request, partly leaves out), bounds `TTFT_BOUNDS`;
* `vllm:request_time_per_output_token_seconds`: observed when the request finishes, its mean
  TPOT (decode time / (tokens - 1), 0 for a one-token request, as 0.12 observes it), bounds
  `TPOT_BOUNDS`;
* `vllm:request_queue_time_seconds`: observed when it finishes, QUEUED -> first SCHEDULED
  (`Finished.wait`; a preemption does not restart it), bounds `QUEUE_BOUNDS`
  (`request_latency_buckets`).

Recording is cheap: a step only keeps references to arrays it has built anyway (the admitted
requests' first-token times, the finished requests' TPOT and queue time); `counters()` (a
scrape, every 15 s) bins them in one batch, a `searchsorted` into ~20 bounds and a `bincount`
per histogram; a first token not out yet by the engine's clock waits for the next scrape.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from itertools import pairwise
from typing import Final

import numpy as np
import numpy.typing as npt

from autoscaler.sim.profile import Profile

F = npt.NDArray[np.float64]
I = npt.NDArray[np.int64]

_SEQ_BASE = 1 << 40  # waiting keys: slot * 2^41 + seq; fresh seqs above, preempted below
_SLOT_SHIFT = 1 << 41
_BIG = 1.0e6  # group offset for the per-replica running maximum (times are rebased to the tick)

# vLLM 0.12.0 V1 histogram bounds (tests/data/vllm-metrics/vllm_metric_definitions_by_version.csv;
# vllm/v1/metrics/loggers.py), the +Inf bucket implied
TTFT_BOUNDS: tuple[float, ...] = (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0,
                                  7.5, 10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0)
TPOT_BOUNDS: tuple[float, ...] = (0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5,
                                  10.0, 20.0, 40.0, 80.0)
QUEUE_BOUNDS: tuple[float, ...] = (0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0,
                                   120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0)  # request_latency_buckets


class CounterColumns:
    """Where each exported series sits in a row of `Engine.counters()`: the two token counters,
    then each histogram's cumulative bucket counts (one per finite bound, then +Inf)."""

    prompt: Final = 0
    generation: Final = 1
    ttft: Final = slice(2, 2 + len(TTFT_BOUNDS) + 1)
    tpot: Final = slice(ttft.stop, ttft.stop + len(TPOT_BOUNDS) + 1)
    queue: Final = slice(tpot.stop, tpot.stop + len(QUEUE_BOUNDS) + 1)
    width: Final = queue.stop


COUNTER_COLUMNS = CounterColumns()
_MAX_PENDING = 256  # chunks of observations kept before they are counted without a scrape
_TTFT_B = np.array(TTFT_BOUNDS)
_TPOT_B = np.array(TPOT_BOUNDS)
_QUEUE_B = np.array(QUEUE_BOUNDS)


@dataclass
class Finished:
    """Requests that finished (or failed) during one tick, as arrays."""

    arrival: F
    ttft: F  # inf for a failed request (killed at the end of a drain, or refused: longer than max_model_len)
    tpot: F
    wait: F
    out_tokens: I
    end: F
    in_tokens: I | None = None  # prompt tokens (a length-aware TTFT SLO needs them); None: unknown

    @staticmethod
    def empty() -> Finished:
        z = np.zeros(0)
        zi = np.zeros(0, dtype=np.int64)
        return Finished(z, z, z, z, zi, z, zi)


class Engine:
    """Every replica of the fleet. Slots are reused; `reset_slot` before a new pod uses one."""

    # running-request fields
    _RUN = ("r_slot", "r_in", "r_out", "r_gen", "r_arr", "r_first", "r_dstart", "r_adm", "r_wait")
    # waiting-request fields
    _WAIT = ("w_key", "w_slot", "w_in", "w_out", "w_gen", "w_arr", "w_first", "w_wait")

    def __init__(self, profile: Profile, max_slots: int) -> None:
        self.p = profile
        self.n = max_slots
        self.kv_total = float(profile.kv_blocks)
        self.completed = np.zeros(max_slots, dtype=np.int64)  # request_success_total
        self.preemptions = 0
        self.rejected = 0  # requests refused for exceeding max_model_len
        self._rejects: list[Finished] = []  # refused, returned by the next step()
        self.gpu_busy_s = np.zeros(max_slots)  # GPU-seconds of prefill and decode work, per replica
        self._pf_pure = np.zeros(max_slots)  # of _pf_work: the prompts' own GPU time (prefill_s)
        self._pf_busy = np.zeros(max_slots)  # prefill server busy until (absolute time)
        self._pf_work = np.zeros(max_slots)  # prefill seconds queued on the GPU
        self._idle_step = profile.decode_step_s(1, 0)  # a decode step of one short sequence
        self._step = np.full(max_slots, self._idle_step)  # last decode step time
        self._batch = np.zeros(max_slots)  # last decode batch
        self._seq = 0
        self._adm = 0
        self._pre = 0
        e_i = np.zeros(0, dtype=np.int64)
        e_f = np.zeros(0)
        self.r_slot, self.r_in, self.r_out, self.r_adm = e_i, e_i, e_i, e_i
        self.r_gen, self.r_arr, self.r_first, self.r_dstart, self.r_wait = e_f, e_f, e_f, e_f, e_f
        self.w_key, self.w_slot, self.w_in, self.w_out = e_i, e_i, e_i, e_i
        self.w_gen, self.w_arr, self.w_first, self.w_wait = e_f, e_f, e_f, e_f
        # backlog beyond the head: per slot, chunks of (n_in, n_out, arrival) in FIFO order
        self.head_cap = 2 * profile.max_num_seqs
        self._ovf: dict[int, deque[tuple[npt.NDArray[np.int32], npt.NDArray[np.int32], F]]] = {}
        self.ovf_n = np.zeros(max_slots, dtype=np.int64)
        self._ovf_total = 0
        # vLLM's per-replica counters and histograms (see the module docstring; `counters()`)
        self._t = 0.0  # end of the last step: the engine's clock
        self._prompt_tok = np.zeros(max_slots)  # prompt tokens of first tokens already out
        self._gen_done = np.zeros(max_slots)  # output tokens of requests finished here
        self._h_ttft = np.zeros((max_slots, len(TTFT_BOUNDS) + 1), dtype=np.int64)  # per bucket, not cumulative
        self._h_tpot = np.zeros((max_slots, len(TPOT_BOUNDS) + 1), dtype=np.int64)
        self._h_queue = np.zeros((max_slots, len(QUEUE_BOUNDS) + 1), dtype=np.int64)
        # observations not yet counted (counted by `counters()`, a scrape, in batches):
        # admissions' (first-token time, slot, prompt, arrival, first: NaN = fresh) ...
        self._first_pending: list[tuple[F, I, I, F, F]] = []
        # ... and finished requests' (slot, output tokens, TPOT, queue time)
        self._fin_pending: list[tuple[I, I, F, F]] = []
        self.export_counters = True  # False: record none of them (no policy reads them; cheaper)

    # ------------------------------------------------------------------ gauges
    def waiting(self) -> I:
        w: I = np.bincount(self.w_slot, minlength=self.n)
        if self._ovf_total:
            w = w + self.ovf_n
        return w

    def running(self) -> I:
        return np.bincount(self.r_slot, minlength=self.n)

    def kv_blocks_used(self) -> F:
        blocks = np.ceil((self.r_in + self.r_gen) / self.p.block_size)
        out: F = np.bincount(self.r_slot, weights=blocks, minlength=self.n).astype(np.float64)
        return out

    def kv_usage(self) -> F:
        return self.kv_blocks_used() / self.kv_total

    def outstanding(self) -> I:
        return self.waiting() + self.running()

    def in_system(self) -> int:
        return int(self.w_slot.size + self.r_slot.size + self._ovf_total)

    def reset_slot(self, slot: int) -> None:
        """A new pod takes the slot: its scheduler state and its exported counters start afresh
        (first tokens the slot's previous pod never counted are dropped)."""
        self._flush()
        for h in (self._h_ttft, self._h_tpot, self._h_queue):
            h[slot] = 0
        self._prompt_tok[slot] = 0.0
        self._gen_done[slot] = 0.0
        if self._first_pending:
            t, s, n_in, arr, first = self._first_pending[0]
            keep = s != slot
            self._first_pending = [(t[keep], s[keep], n_in[keep], arr[keep], first[keep])]
        self._pf_busy[slot] = 0.0
        self._pf_work[slot] = 0.0
        self._pf_pure[slot] = 0.0
        self._batch[slot] = 0.0
        self._step[slot] = self.p.decode_step_s(1, 0)

    # ------------------------------------------------------------------ requests in
    def enqueue(self, slot: I, arrival: F, n_in: I, n_out: I) -> None:
        """Append new requests to the tail of their replicas' waiting queues; refuse (see the
        module docstring) those longer than max_model_len."""
        if slot.size == 0:
            return
        slot = slot.astype(np.int64)
        too_long = n_in.astype(np.int64) + n_out.astype(np.int64) > self.p.max_model_len
        if too_long.any():
            self._reject(arrival[too_long], n_in[too_long], n_out[too_long])
            ok = ~too_long
            slot, arrival, n_in, n_out = slot[ok], arrival[ok], n_in[ok], n_out[ok]
            if slot.size == 0:
                return
        if self._ovf_total or self.w_slot.size + slot.size > self.head_cap:
            to_head = self._head_room(slot)
            if not to_head.all():
                self._to_overflow(slot[~to_head], arrival[~to_head], n_in[~to_head], n_out[~to_head])
                slot, arrival, n_in, n_out = slot[to_head], arrival[to_head], n_in[to_head], n_out[to_head]
                if slot.size == 0:
                    return
        self._enqueue_head(slot, arrival, n_in, n_out)

    def _reject(self, arrival: F, n_in: I, n_out: I) -> None:
        inf = np.full(arrival.size, np.inf)
        self._rejects.append(Finished(arrival=arrival.astype(np.float64), ttft=inf, tpot=inf, wait=inf,
                                      out_tokens=n_out.astype(np.int64), end=arrival.astype(np.float64),
                                      in_tokens=n_in.astype(np.int64)))
        self.rejected += int(arrival.size)

    def _take_rejects(self) -> Finished | None:
        if not self._rejects:
            return None
        r = self._rejects
        self._rejects = []
        return Finished(*(np.concatenate([getattr(f, k) for f in r]) for k in
                          ("arrival", "ttft", "tpot", "wait", "out_tokens", "end", "in_tokens")))

    def _enqueue_head(self, slot: I, arrival: F, n_in: I, n_out: I) -> None:
        seq = _SEQ_BASE + self._seq + np.arange(slot.size, dtype=np.int64)
        self._seq += int(slot.size)
        key = slot.astype(np.int64) * _SLOT_SHIFT + seq
        nan = np.full(slot.size, np.nan)
        self._insert_waiting(key, slot.astype(np.int64), n_in.astype(np.int64), n_out.astype(np.int64),
                             np.zeros(slot.size), arrival.astype(np.float64), nan, nan)

    def _head_room(self, slot: I) -> npt.NDArray[np.bool_]:
        """Which of these new requests (in arrival order) join the head arrays: those of a slot
        with no overflow, while the slot's head holds fewer than `head_cap` requests."""
        head_n = np.bincount(self.w_slot, minlength=self.n)
        order = np.argsort(slot, kind="stable")
        ss = slot[order]
        rank_sorted = np.arange(ss.size) - np.searchsorted(ss, ss, side="left")
        rank = np.empty_like(rank_sorted)
        rank[order] = rank_sorted
        ok: npt.NDArray[np.bool_] = (self.ovf_n[slot] == 0) & (head_n[slot] + rank < self.head_cap)
        return ok

    def _to_overflow(self, slot: I, arrival: F, n_in: I, n_out: I) -> None:
        order = np.argsort(slot, kind="stable")
        ss = slot[order]
        bounds = np.flatnonzero(np.concatenate(([True], ss[1:] != ss[:-1], [True])))
        for a, b in pairwise(bounds):
            s = int(ss[a])
            idx = order[a:b]
            self._ovf.setdefault(s, deque()).append(  # int32 lengths: a backlog can hold 10^8 requests
                (n_in[idx].astype(np.int32), n_out[idx].astype(np.int32), arrival[idx].astype(np.float64)))
            self.ovf_n[s] += b - a
        self._ovf_total += int(slot.size)

    def _refill_head(self) -> None:
        """Move backlog up into the head arrays (as fresh arrivals, behind what is there)."""
        head_n = np.bincount(self.w_slot, minlength=self.n)
        parts_slot: list[I] = []
        parts: list[tuple[npt.NDArray[np.int32], npt.NDArray[np.int32], F]] = []
        for s in np.flatnonzero(self.ovf_n):
            need = min(int(self.head_cap - head_n[s]), int(self.ovf_n[s]))
            if need <= 0:
                continue
            q = self._ovf[int(s)]
            got = 0
            while got < need:
                c_in, c_out, c_arr = q[0]
                take = min(need - got, c_in.size)
                parts.append((c_in[:take], c_out[:take], c_arr[:take]))
                parts_slot.append(np.full(take, s, dtype=np.int64))
                if take == c_in.size:
                    q.popleft()
                else:
                    q[0] = (c_in[take:], c_out[take:], c_arr[take:])
                got += take
            self.ovf_n[s] -= need
            self._ovf_total -= need
        if parts:
            self._enqueue_head(np.concatenate(parts_slot), np.concatenate([p[2] for p in parts]),
                               np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts]))

    def _insert_waiting(self, key: I, slot: I, n_in: I, n_out: I, gen: F, arr: F, first: F, wait: F) -> None:
        # one merge for all fields (same result as np.insert per field at searchsorted positions)
        order = np.argsort(key, kind="stable")
        key = key[order]
        m = key.size
        total = self.w_key.size + m
        new_at = np.searchsorted(self.w_key, key) + np.arange(m, dtype=np.int64)
        old_mask = np.ones(total, dtype=bool)
        old_mask[new_at] = False
        old_at = np.flatnonzero(old_mask)
        for name, vals in (("w_key", key), ("w_slot", slot[order]), ("w_in", n_in[order]), ("w_out", n_out[order]),
                           ("w_gen", gen[order]), ("w_arr", arr[order]), ("w_first", first[order]),
                           ("w_wait", wait[order])):
            cur = getattr(self, name)
            out = np.empty(total, dtype=cur.dtype)
            out[new_at] = vals
            out[old_at] = cur
            setattr(self, name, out)

    # ------------------------------------------------------------------ one tick
    def step(self, t: float, dt: float) -> Finished:
        """Advance every replica from t to t + dt; the requests that finished (or were refused
        since the last step) come back."""
        fin = self._advance(t, dt)
        self._t = t + dt
        if len(self._fin_pending) + len(self._first_pending) > _MAX_PENDING:  # nobody scrapes: bound it
            self._flush()
        rej = self._take_rejects()
        if rej is None:
            return fin
        if fin.arrival.size == 0:
            return rej
        return Finished(*(np.concatenate((getattr(rej, k), getattr(fin, k))) for k in
                          ("arrival", "ttft", "tpot", "wait", "out_tokens", "end", "in_tokens")))

    def _advance(self, t: float, dt: float) -> Finished:
        p = self.p
        t_end = t + dt
        if self._ovf_total:
            self._refill_head()
        if self.w_slot.size:
            self._admit(t)
        if self.r_slot.size == 0:
            self._prefill_only(dt)
            return Finished.empty()
        # --- decode: who decodes in this tick, and for how long
        overlap = np.minimum(np.maximum(t_end - np.maximum(self.r_dstart, t), 0.0), dt)
        frac = overlap / dt
        n = self.n
        batch: F = np.bincount(self.r_slot, weights=frac, minlength=n).astype(np.float64, copy=False)
        ctx: F = np.bincount(self.r_slot, weights=(self.r_in + self.r_gen) * frac, minlength=n).astype(np.float64, copy=False)
        step = p.decode_step_s(batch, ctx)
        pure = self._consume_prefill(dt)
        decode_time = np.where(batch > 0, np.maximum(dt - pure, 0.0), 0.0)
        self.gpu_busy_s += decode_time
        rate = decode_time / dt / step  # decode steps per second of this tick
        self._step = np.where(batch > 0, step, self._idle_step)
        self._batch = batch
        r_rate = rate[self.r_slot]
        self.r_gen = self.r_gen + r_rate * overlap
        done = (self.r_gen >= self.r_out) & (self.r_dstart <= t_end)
        fin = Finished.empty()
        if done.any():
            extra = self.r_gen[done] - self.r_out[done]
            rr = r_rate[done]
            end = np.where(rr > 0, t_end - extra / np.maximum(rr, 1e-12), t_end)
            first = self.r_first[done]
            end = np.maximum(end, first)
            outs = self.r_out[done]
            tpot = np.where(outs > 1, (end - first) / np.maximum(outs - 1, 1), 0.0)
            arr = self.r_arr[done]
            wait = self.r_wait[done]
            fin = Finished(arrival=arr, ttft=first - arr, tpot=tpot, wait=wait,
                           out_tokens=outs, end=end, in_tokens=self.r_in[done])
            slots = self.r_slot[done]
            self.completed += np.bincount(slots, minlength=n)
            if self.export_counters:  # vLLM observes TPOT and queue time at finish
                self._fin_pending.append((slots, outs, tpot, wait))
            self._keep_running(~done)
        self._preempt_if_full()
        return fin

    def _consume_prefill(self, dt: float) -> F:
        """Run up to dt of each replica's queued prefill (wall time, the prompts' own GPU time
        plus their share of the mixed steps); returns the prompts' own GPU time spent (zeros, at
        once, when no prefill is queued: most ticks of a decode-bound replica)."""
        if not self._pf_work.any():
            return np.zeros(self.n)
        pf_time = np.minimum(self._pf_work, dt)
        share = np.divide(self._pf_pure, self._pf_work, out=np.zeros_like(self._pf_work), where=self._pf_work > 0)
        pure: F = pf_time * share
        self._pf_work -= pf_time
        self._pf_pure -= pure
        self.gpu_busy_s += pure
        return pure

    def _prefill_only(self, dt: float) -> None:
        if self._pf_work.any():
            self._consume_prefill(dt)

    def _keep_running(self, keep: npt.NDArray[np.bool_]) -> None:
        idx = np.flatnonzero(keep)
        for name in self._RUN:
            setattr(self, name, getattr(self, name).take(idx))

    def _admit(self, t: float) -> None:
        p = self.p
        n = self.n
        run_n = np.bincount(self.r_slot, minlength=n)
        free_seq = p.max_num_seqs - run_n
        free_blk = self.kv_total - self.kv_blocks_used()
        ws = self.w_slot
        # groups: ws is sorted (keys sort by slot first)
        first_idx = np.searchsorted(ws, np.arange(n))
        rank = np.arange(ws.size) - first_idx[ws]
        need = np.ceil((self.w_in + self.w_gen) / p.block_size)
        cs = np.cumsum(need)
        before = np.concatenate(([0.0], cs))[first_idx]  # cumsum before each group's start
        wcs = cs - before[ws]
        ok = (rank < free_seq[ws]) & (wcs <= free_blk[ws])
        if not ok.any():
            return
        idx = np.flatnonzero(ok)
        s = ws[idx]
        n_in, n_out, gen = self.w_in[idx], self.w_out[idx], self.w_gen[idx]
        arr, first, wait = self.w_arr[idx], self.w_first[idx], self.w_wait[idx]
        fresh = np.isnan(first)
        # earliest prefill start: arrival at the engine (client arrival + non-GPU overhead) or now
        # a request reaching a busy replica waits for the step in progress: half a step on average
        busy_wait = np.where(run_n[s] > 0, 0.5 * self._step[s], 0.0)
        start = np.where(fresh, np.maximum(arr + p.ttft_overhead_s + busy_wait, t), t)
        wait = np.where(np.isnan(wait), np.maximum(start - arr - p.ttft_overhead_s, 0.0), wait)
        pf_tokens = n_in + np.floor(gen)
        budget = np.maximum(p.max_num_batched_tokens - self._batch[s], 1.0)
        pure = p.prefill_s(pf_tokens.astype(np.float64))
        service = pure + pf_tokens * (self._step[s] / budget)
        # FCFS prefill per replica: finish_j = S_j + max(busy - S_before_group, max_{i<=j} (a_i - S_{i-1}))
        S = np.cumsum(service)
        S_prev = S - service
        gstart = np.concatenate(([True], s[1:] != s[:-1]))
        gid = np.cumsum(gstart) - 1
        base = S_prev[gstart][gid]
        x = (start - t) - S_prev + gid * _BIG
        cm = np.maximum.accumulate(x) - gid * _BIG
        busy = np.maximum(self._pf_busy[s] - t, 0.0) - base
        finish = t + S + np.maximum(busy, cm)
        last = np.concatenate((gstart[1:], [True]))
        self._pf_busy[s[last]] = finish[last]
        np.add.at(self._pf_work, s, service)
        np.add.at(self._pf_pure, s, pure)
        tok = finish + self._step[s]  # the step that completes the prefill emits a token
        new_first = np.where(fresh, tok, first)
        # vLLM counts a first token, its TTFT and the prompt when it comes out (the fresh ones)
        if self.export_counters:
            self._first_pending.append((tok, s, n_in, arr, first))
        new_gen = np.where(fresh, 1.0, gen)
        self._adm += idx.size
        adm = self._adm - idx.size + np.arange(idx.size, dtype=np.int64)
        self.r_slot = np.concatenate((self.r_slot, s))
        self.r_in = np.concatenate((self.r_in, n_in))
        self.r_out = np.concatenate((self.r_out, n_out))
        self.r_gen = np.concatenate((self.r_gen, new_gen))
        self.r_arr = np.concatenate((self.r_arr, arr))
        self.r_first = np.concatenate((self.r_first, new_first))
        self.r_dstart = np.concatenate((self.r_dstart, tok))
        self.r_adm = np.concatenate((self.r_adm, adm))
        self.r_wait = np.concatenate((self.r_wait, wait))
        keep = np.flatnonzero(~ok)
        for name in self._WAIT:
            setattr(self, name, getattr(self, name).take(keep))

    def _preempt_if_full(self) -> None:
        used = self.kv_blocks_used()
        over = np.flatnonzero(used > self.kv_total)
        if over.size == 0:
            return
        bs = self.p.block_size
        victims: list[npt.NDArray[np.int64]] = []
        for slot in over:
            mine = np.flatnonzero(self.r_slot == slot)
            order = mine[np.argsort(-self.r_adm[mine], kind="stable")]  # newest first
            blocks = np.ceil((self.r_in[order] + self.r_gen[order]) / bs)
            excess = used[slot] - self.kv_total
            k = int(np.searchsorted(np.cumsum(blocks), excess) + 1)
            victims.append(order[:k])
        v = np.concatenate(victims)
        self.preemptions += int(v.size)
        # back to the front of their queues, newest preempted frontmost (V1 prepends each one)
        k0 = self._pre
        self._pre += int(v.size)
        seq = _SEQ_BASE - 1 - k0 - np.arange(v.size, dtype=np.int64)
        key = self.r_slot[v] * _SLOT_SHIFT + seq
        self._insert_waiting(key, self.r_slot[v], self.r_in[v], self.r_out[v], np.floor(self.r_gen[v]),
                             self.r_arr[v], self.r_first[v], self.r_wait[v])
        keep = np.ones(self.r_slot.size, dtype=bool)
        keep[v] = False
        self._keep_running(keep)

    # ------------------------------------------------------------------ vLLM's counters
    def _flush(self) -> None:
        """Count what happened by the engine's clock: the finished requests (output tokens, TPOT
        and queue time observed) and the first tokens out (TTFT observed, prompt counted)."""
        n = self.n
        if self._fin_pending:
            parts = self._fin_pending
            self._fin_pending = []
            slots, outs, tpot, wait = parts[0] if len(parts) == 1 else (
                np.concatenate([c[k] for c in parts]) for k in range(4))
            self._gen_done += np.bincount(slots, weights=outs, minlength=n)
            _bin(self._h_tpot, slots, _bucket(_TPOT_B, tpot))
            _bin(self._h_queue, slots, _bucket(_QUEUE_B, wait))
        if self._first_pending:
            chunks = self._first_pending
            t, s, n_in, arr, first = chunks[0] if len(chunks) == 1 else (
                np.concatenate([c[k] for c in chunks]) for k in range(5))
            fresh = np.isnan(first)
            out = fresh & (t <= self._t)
            if out.any():
                so = s[out]
                self._prompt_tok += np.bincount(so, weights=n_in[out], minlength=n)
                _bin(self._h_ttft, so, _bucket(_TTFT_B, t[out] - arr[out]))
            keep = fresh & ~out
            self._first_pending = [(t[keep], s[keep], n_in[keep], arr[keep], first[keep])] if keep.any() else []

    def counters(self) -> F:
        """vLLM's counters per slot at the engine's clock (the end of the last step), one row per
        slot, columns `COUNTER_COLUMNS`: prompt tokens, generation tokens, then the cumulative
        bucket counts (`le` = each bound, then +Inf) of TTFT, TPOT and queue time. What a scrape
        of each replica's /metrics would read (see the module docstring for each series)."""
        self._flush()
        c = COUNTER_COLUMNS
        out = np.empty((self.n, c.width))
        out[:, c.prompt] = self._prompt_tok
        now = self._t
        # tokens out so far of the requests still here: whole tokens, once the first one is out
        r_tok = np.where(self.r_first <= now, np.minimum(np.floor(self.r_gen), self.r_out), 0.0)
        w_tok = np.where(self.w_first <= now, self.w_gen, 0.0)  # preempted ones (fresh: nan, 0)
        out[:, c.generation] = (self._gen_done + np.bincount(self.r_slot, weights=r_tok, minlength=self.n)
                                + np.bincount(self.w_slot, weights=w_tok, minlength=self.n))
        out[:, c.ttft] = np.cumsum(self._h_ttft, axis=1)
        out[:, c.tpot] = np.cumsum(self._h_tpot, axis=1)
        out[:, c.queue] = np.cumsum(self._h_queue, axis=1)
        return out

    # ------------------------------------------------------------------ end of a pod
    def kill_slot(self, slot: int, now: float) -> Finished:
        """Drop everything on a replica (its drain grace ran out): the requests fail."""
        wm = self.w_slot == slot
        rm = self.r_slot == slot
        q = self._ovf.pop(slot, None) or ()  # the backlog behind the head, in queue order
        arr = np.concatenate([self.w_arr[wm]] + [c[2] for c in q] + [self.r_arr[rm]])
        outs = np.concatenate([self.w_out[wm]] + [c[1] for c in q] + [self.r_out[rm]])
        ins = np.concatenate([self.w_in[wm]] + [c[0] for c in q] + [self.r_in[rm]]).astype(np.int64)
        self._ovf_total -= int(self.ovf_n[slot])
        self.ovf_n[slot] = 0
        if wm.any():
            for name in self._WAIT:
                setattr(self, name, getattr(self, name)[~wm])
        if rm.any():
            self._keep_running(~rm)
        inf = np.full(arr.size, np.inf)
        return Finished(arrival=arr, ttft=inf, tpot=inf, wait=inf, out_tokens=outs, end=np.full(arr.size, now),
                        in_tokens=ins)

    def slot_empty(self, slot: int) -> bool:
        return not (bool(self.ovf_n[slot]) or bool((self.w_slot == slot).any()) or bool((self.r_slot == slot).any()))


def _bucket(bounds: F, x: F) -> npt.NDArray[np.integer]:
    """The `le` bucket of each observation: the first bound >= x (len(bounds) = +Inf), as
    `np.searchsorted(bounds, x, side="left")`. For many observations (a busy fleet's scrape) a
    branch-free count of the bounds below x is ~3x faster than the binary search."""
    if x.size < 2048:
        out: npt.NDArray[np.integer] = np.searchsorted(bounds, x, side="left")
        return out
    idx = np.zeros(x.size, dtype=np.int8)
    for b in bounds:
        np.add(idx, x > b, out=idx, casting="unsafe")
    return idx


def _bin(h: npt.NDArray[np.int64], slots: I, bucket: npt.NDArray[np.integer]) -> None:
    """One observation per (slot, bucket) pair into the per-slot bucket counts `h`."""
    if slots.size:
        w = h.shape[1]
        h += np.bincount(slots * w + bucket, minlength=h.size).reshape(h.shape)
