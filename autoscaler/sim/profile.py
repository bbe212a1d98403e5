"""A model-on-GPU profile: every number the replica model and the pod lifecycle need.

Profiles live in `simulations/profiles/<name>.yaml`, each number with its public source in a
comment. `load_profile("qwen3-8b-h100")` finds one by name; a path works too. A scenario can
override single fields (`profile_overrides: {scheduler: {max_num_batched_tokens: 2048}}`, the
vLLM flag an operator would set for that workload); unknown keys are rejected.

Step-time model (docs/calibration.md; fitted by simulations/tools/calibrate.py on measured
per-layer kernel times, simulations/data/vllm-perf table 8). One engine step with B decoding
sequences reading K KV tokens in total, plus P prefill tokens chunked into it (vLLM V1):

    decode step(B, K) = overhead + seq_overhead * B + lin(B) + head(B) + attn0 + attn_seq * B + attn_kv * K
    prefill(L)        = L * lin(M) / M + pf0 + pf1 * L + pf2 * L^2     (GPU-seconds of one L-token prompt)

lin(m) = max(lin_floor + lin_slope * m, lin_compute * m) is the time of the 36 layers' linear
ops for m tokens (memory-bound floor, then compute-bound), head(m) the same form for the LM head
(only the sampled rows: one per decoding sequence), M = max_num_batched_tokens (a prefill token
sits in a full chunk), pf2 * L^2 the causal attention of a prompt over its own earlier tokens.
`overhead` is the constant per-step cost outside the kernels, `seq_overhead` the per-sequence
per-step one (vLLM's sampling, scheduler and output processing per running request), fitted on
the 1,000-prompt saturation run (vllm-perf table 2) jointly with `overhead` on table 1.
lin(m) / m and head(m) / m are non-increasing in m, which `work_lower_bound_s` relies on. TTFT
adds `ttft_overhead_s`, the non-GPU part (HTTP, chat template, tokenisation).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
import numpy.typing as npt

from autoscaler.config.bounded import load_yaml_mapping

PROFILE_DIR = Path(__file__).resolve().parents[2] / "simulations" / "profiles"

X = TypeVar("X", float, npt.NDArray[np.float64])


def _roofline(m: X, floor: float, slope: float, compute: float) -> X:
    """max(floor + slope * m, compute * m): a GEMM's time for m rows (weights read once, then
    compute-bound). Its value per row is non-increasing in m for floor >= 0."""
    out: X = np.maximum(floor + slope * m, compute * m)
    return out


@dataclass(frozen=True)
class Profile:
    name: str
    model: str
    gpu: str
    gpus_per_replica: int
    # --- KV cache and scheduler limits
    kv_cache_tokens: int
    block_size: int
    max_num_seqs: int
    max_num_batched_tokens: int
    max_model_len: int
    # --- step time (seconds), see the module docstring
    overhead_s: float
    seq_overhead_s: float
    lin_floor_s: float
    lin_slope_s: float
    lin_compute_s: float
    head_floor_s: float
    head_slope_s: float
    head_compute_s: float
    attn0_s: float
    attn_seq_s: float
    attn_kv_s: float
    pf0_s: float
    pf1_s: float
    pf2_s: float
    ttft_overhead_s: float
    # --- lifecycle (seconds)
    node_provision_s: float
    container_start_s: float  # scheduled -> container running (stage SCHEDULED), part of model_load_s
    model_load_s: float  # scheduled -> ready
    drain_grace_s: float
    node_idle_remove_s: float
    gpus_per_node: int

    @property
    def kv_blocks(self) -> int:
        return self.kv_cache_tokens // self.block_size

    def linear_s(self, m: X) -> X:
        """The 36 layers' linear ops (QKV, O, gate/up, down) for m tokens in one step."""
        return _roofline(m, self.lin_floor_s, self.lin_slope_s, self.lin_compute_s)

    def head_s(self, m: X) -> X:
        """The LM head for m sampled rows."""
        return _roofline(m, self.head_floor_s, self.head_slope_s, self.head_compute_s)

    def decode_step_s(self, batch: X, context_tokens: X) -> X:
        """One decode step of `batch` sequences reading `context_tokens` KV tokens (arrays work)."""
        b = np.maximum(batch, 1.0) if isinstance(batch, np.ndarray) else max(batch, 1.0)
        out: X = (self.overhead_s + self.linear_s(b) + self.head_s(b) + self.attn0_s
                  + (self.seq_overhead_s + self.attn_seq_s) * b + self.attn_kv_s * context_tokens)
        return out

    @property
    def prefill_linear_per_token_s(self) -> float:
        """Linear-op time of a prefill token in a full chunk of max_num_batched_tokens."""
        m = float(self.max_num_batched_tokens)
        return float(self.linear_s(m)) / m

    @property
    def prefill_per_token_s(self) -> float:
        """Prefill GPU time per prompt token without the quadratic attention term (a lower bound
        per token for any prompt length; `prefill_s` is the exact cost of a prompt)."""
        return self.prefill_linear_per_token_s + self.pf1_s

    def prefill_s(self, n_in: X) -> X:
        """GPU-seconds of prefilling prompts of n_in tokens (0 for an empty one)."""
        n = np.asarray(n_in, dtype=np.float64) if isinstance(n_in, np.ndarray) else float(n_in)
        per = self.prefill_linear_per_token_s + self.pf1_s
        out: X = np.where(n > 0, self.pf0_s + per * n + self.pf2_s * n * n, 0.0) if isinstance(n, np.ndarray) \
            else (self.pf0_s + per * n + self.pf2_s * n * n if n > 0 else 0.0)
        return out

    def idle_ttft_s(self, n_in: npt.NDArray[np.int64]) -> npt.NDArray[np.float64]:
        """TTFT of each prompt alone on an idle replica, as the engine times it: non-GPU overhead,
        the prompt's prefill (plus its share of the chunked steps' fixed cost), and the step that
        emits the first token. The reference of a length-aware TTFT SLO. Worked example (Qwen3-8B/
        H100 profile, docs/calibration.md has the table): 8,192 tokens -> 0.049 s overhead + 0.1765 s
        prefill + 0.0072 s share of the chunk steps (8,192 x 7.17 ms / 8,192) + 0.0072 s first step
        = 0.240 s."""
        n = np.asarray(n_in, dtype=np.float64)
        step1 = float(self.decode_step_s(1.0, 0.0))
        out: npt.NDArray[np.float64] = (self.ttft_overhead_s + self.prefill_s(n)
                                        + n * step1 / self.max_num_batched_tokens + step1)
        return out

    def work_lower_bound_s(self, n_in: npt.NDArray[np.int64], n_out: npt.NDArray[np.int64]) -> npt.NDArray[np.float64]:
        """GPU-seconds a replica must spend on each request in any schedule of the engine: a proven
        lower bound, the input of the fluid lower bound (autoscaler.sim.bound).

        Prefill: `prefill_s(n_in)` exactly (the engine charges a prompt that, or more when a
        preempted request recomputes its prompt plus generated tokens). Decode: each of the
        n_out - 1 tokens after the first is one decode step of some batch B <= cap = max(
        max_num_seqs, max_num_batched_tokens); the engine charges a token step(B, K) / B of GPU
        time plus attn_kv * (its context - mean context), i.e. at least
        overhead / max_num_seqs + lin(cap) / cap + head(cap) / cap + attn0 / max_num_seqs
        + seq_overhead + attn_seq + attn_kv * n_in (seq_overhead and attn_seq are paid per
        sequence per step, i.e. exactly once per decode token), since lin(m) / m and head(m) / m are non-increasing and
        B <= max_num_seqs. The context growth (n_in + j at the j-th step) is left out: a tick
        reads the context at its start, so a coarse tick under-counts it.
        Worked example (Qwen3-8B/H100, 1,000 in / 101 out, cap = 8,192): prefill_s(1000) =
        0.0187 s; per decode token (1.21 + 0.26) ms / 1024 + lin(8192) / 8192 (17.84 us) + head(8192)
        / 8192 (1.75 us) + seq_overhead 32.77 us + attn_seq 5.99 us + 4.75e-8 x 1000 (47.5 us) = 107.3 us;
        total 0.0187 + 100 x 107.3e-6 = 0.0294 s."""
        steps = np.maximum(n_out.astype(np.float64) - 1.0, 0.0)
        out: npt.NDArray[np.float64] = self.prefill_s(n_in.astype(np.float64)) + steps * (
            self.decode_token_floor_s + self.attn_kv_s * n_in)
        return out

    @property
    def decode_token_floor_s(self) -> float:
        """The context-free part of the least GPU time one decode token can cost (see
        `work_lower_bound_s`)."""
        cap = float(max(self.max_num_seqs, self.max_num_batched_tokens))
        return ((self.overhead_s + self.attn0_s) / self.max_num_seqs + float(self.linear_s(cap)) / cap
                + float(self.head_s(cap)) / cap + self.seq_overhead_s + self.attn_seq_s)

    def capacity_rps(self, mean_input: float, mean_output: float, tpot_budget_s: float = 0.05,
                     kv_fill: float = 0.9) -> float:
        """Sustainable requests/s of one replica for a length mix: the best batch B whose TPOT
        stays within `tpot_budget_s` and whose KV stays below `kv_fill` of capacity.

        Each request costs its prefill (`prefill_s(mean_input)`) plus its share of the decode steps:
        rate(B) = 1 / (prefill_s(mean_input) + mean_output * step(B) / B) requests/s.
        The TPOT counts the prefill that shares the GPU with the decodes (chunked prefill puts
        the prompt tokens into the decode steps, vLLM V1): a fraction f = rate * prefill_s of each
        second goes to prefill, so a decoding request gets a token every step(B) / (1 - f)
        seconds; with Little's law (B = rate * mean_output * TPOT) that is
        TPOT(B) = step(B) + B * prefill_s(mean_input) / mean_output.
        Worked example (Qwen3-8B/H100 profile, ShareGPT 233 in / 221 out): B = 506 (TPOT-bound), step
        40.1 ms, prefill share 9.8 ms, TPOT 49.9 ms, 45.9 req/s (71.3 at B = 737, KV-bound, before the
        per-sequence CPU term; 34.9 with the uncalibrated model before 2026-12-03, whose step grew 50 us
        per sequence); Azure code (2,048 / 28): B = 27, step 11.1 ms + prefill share 37.8 ms, 19.8
        req/s. The per-sequence CPU term is vLLM 0.9.2's (docs/calibration.md): a leaner engine
        (TRT-LLM, vLLM multi-step) would sustain more at large B.
        """
        best = 0.0
        ctx = mean_input + mean_output / 2.0
        pf = float(self.prefill_s(float(mean_input)))
        prefill_per_decode = pf / max(mean_output, 1e-9)
        for b in range(1, self.max_num_seqs + 1):
            if b * (mean_input + mean_output) > kv_fill * self.kv_cache_tokens:
                break
            step = float(self.decode_step_s(float(b), b * ctx))
            if step + b * prefill_per_decode > tpot_budget_s:
                break
            rate = 1.0 / (pf + mean_output * step / b)
            best = max(best, rate)
        return best


# (low, high, whole number): what each number of a profile may be (docs/limits.md); a value out
# of range made the model divide by zero (block_size 0, a zero step time) or loop for ever
# (max_num_seqs 10^18) before.
RANGES: dict[str, tuple[float, float, bool]] = {
    "gpus_per_replica": (1, 64, True),
    "tokens": (1, 1e9, True), "block_size": (1, 1024, True),
    "max_num_seqs": (1, 65_536, True), "max_num_batched_tokens": (1, 1e7, True), "max_model_len": (1, 1e8, True),
    # step-time terms: the per-step overhead keeps every step > 0 s (no division by zero)
    "overhead_s": (1e-6, 60.0, False), "seq_overhead_s": (0.0, 1.0, False), "lin_floor_s": (0.0, 60.0, False),
    "lin_slope_s": (0.0, 1.0, False),
    "lin_compute_s": (0.0, 1.0, False), "head_floor_s": (0.0, 60.0, False), "head_slope_s": (0.0, 1.0, False),
    "head_compute_s": (0.0, 1.0, False), "attn0_s": (0.0, 1.0, False), "attn_seq_s": (0.0, 1.0, False),
    "attn_kv_s": (0.0, 1.0, False), "pf0_s": (0.0, 1.0, False), "pf1_s": (0.0, 1.0, False), "pf2_s": (0.0, 1.0, False),
    "ttft_overhead_s": (0.0, 60.0, False),
    "node_provision_s": (0.0, 86_400.0, False), "container_start_s": (0.0, 86_400.0, False),
    "model_load_s": (0.0, 86_400.0, False), "drain_grace_s": (0.0, 86_400.0, False),
    "node_idle_remove_s": (0.0, 86_400.0, False), "gpus_per_node": (1, 64, True),
}


STEP_KEYS = ("overhead_s", "seq_overhead_s", "lin_floor_s", "lin_slope_s", "lin_compute_s", "head_floor_s", "head_slope_s",
             "head_compute_s", "attn0_s", "attn_seq_s", "attn_kv_s", "pf0_s", "pf1_s", "pf2_s", "ttft_overhead_s")


def _short(value: object) -> str:
    """repr cut to 80 characters: a message stays one short line whatever the file holds."""
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _section(raw: dict[str, Any], key: str, where: str) -> dict[str, Any]:
    section = raw.get(key)
    if not isinstance(section, dict):
        raise ValueError(f"{where}: {key}: expected a mapping, got {_short(section)}")
    return section


def _num(d: dict[str, Any], key: str, where: str = "profile") -> float:
    if key not in d:
        raise ValueError(f"{where}: profile key {key}: missing")
    v = d[key]
    lo, hi, whole = RANGES.get(key, (-math.inf, math.inf, False))
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not (isinstance(v, int) or math.isfinite(v)):
        raise ValueError(f"{where}: profile key {key}: expected a number, got {_short(v)}")
    if not lo <= v <= hi or (whole and v != int(v)):  # int vs float compares exactly, also past float range
        kind = "a whole number" if whole else "a number"
        raise ValueError(f"{where}: profile key {key} = {_short(v)} is out of range (allowed: {kind} {lo:g} .. {hi:g})")
    return float(v)


def profile_path(name_or_path: str) -> Path:
    p = Path(name_or_path)
    if p.suffix in (".yaml", ".yml") and p.exists():
        return p
    cand = PROFILE_DIR / f"{name_or_path}.yaml"
    if cand.exists():
        return cand
    known = sorted(x.stem for x in PROFILE_DIR.glob("*.yaml"))
    raise FileNotFoundError(f"profile {_short(name_or_path)} not found (known: {', '.join(known)})")


def apply_overrides(raw: dict[str, Any], overrides: Mapping[str, Any] | None, where: str = "profile_overrides"
                    ) -> dict[str, Any]:
    """`raw` with `overrides` merged in, section by section (`{scheduler: {max_num_batched_tokens:
    2048}}`). Only keys the profile already has may be overridden: an unknown section or field
    (a typo would otherwise be silently ignored) raises ValueError naming the known ones."""
    if not overrides:
        return raw
    if not isinstance(overrides, Mapping):
        raise ValueError(f"{where}: expected a mapping of profile sections, got {_short(overrides)}")
    out = dict(raw)
    for section, fields in overrides.items():
        if section not in raw:
            raise ValueError(f"{where}: unknown profile key {_short(section)} (known: {', '.join(sorted(raw))})")
        cur = raw[section]
        if isinstance(cur, dict):
            if not isinstance(fields, Mapping):
                raise ValueError(f"{where}.{section}: expected a mapping, got {_short(fields)}")
            merged = dict(cur)
            for key, value in fields.items():
                if key not in cur:
                    raise ValueError(f"{where}.{section}: unknown key {_short(key)} (known: {', '.join(sorted(cur))})")
                merged[key] = value
            out[section] = merged
        elif isinstance(fields, Mapping):
            raise ValueError(f"{where}.{section}: {_short(section)} is a single value, not a section")
        else:
            out[section] = fields
    return out


def _override_suffix(overrides: Mapping[str, Any]) -> str:
    parts = []
    for section, fields in overrides.items():
        if isinstance(fields, Mapping):
            parts += [f"{section}.{k}={v}" for k, v in fields.items()]
        else:
            parts.append(f"{section}={fields}")
    return "+" + ",".join(parts)


def load_profile(name_or_path: str, overrides: Mapping[str, Any] | None = None) -> Profile:
    """The profile `name_or_path` with `overrides` (see `apply_overrides`) applied; an overridden
    profile's name says what changed (`qwen3-8b-h100+scheduler.max_num_batched_tokens=2048`)."""
    path = profile_path(name_or_path)
    raw = load_yaml_mapping(path, "profile")
    raw = apply_overrides(raw, overrides)
    where = str(path) + (" with profile_overrides" if overrides else "")
    kv, step, life = (_section(raw, k, where) for k in ("kv_cache", "step_time", "lifecycle"))
    sched = _section(raw, "scheduler", where)
    for key in ("model", "gpu"):
        if key not in raw:
            raise ValueError(f"{where}: profile key {key}: missing")
    name = str(raw.get("name", path.stem))
    if overrides:
        name += _override_suffix(overrides)
    per_replica = int(_num({"gpus_per_replica": 1, **raw}, "gpus_per_replica", where))
    per_node = int(_num(life, "gpus_per_node", where))
    if per_node < per_replica:  # no pod would ever be scheduled
        raise ValueError(f"{where}: profile key lifecycle.gpus_per_node = {per_node}: must be >= gpus_per_replica "
                         f"({per_replica}), a replica's GPUs on one node")
    return Profile(
        name=name,
        model=str(raw["model"]),
        gpu=str(raw["gpu"]),
        gpus_per_replica=per_replica,
        kv_cache_tokens=int(_num(kv, "tokens", where)),
        block_size=int(_num(kv, "block_size", where)),
        max_num_seqs=int(_num(sched, "max_num_seqs", where)),
        max_num_batched_tokens=int(_num(sched, "max_num_batched_tokens", where)),
        max_model_len=int(_num(sched, "max_model_len", where)),
        **{key: _num(step, key, where) for key in STEP_KEYS},
        node_provision_s=_num(life, "node_provision_s", where),
        container_start_s=_num(life, "container_start_s", where),
        model_load_s=_num(life, "model_load_s", where),
        drain_grace_s=_num(life, "drain_grace_s", where),
        node_idle_remove_s=_num(life, "node_idle_remove_s", where),
        gpus_per_node=per_node,
    )
