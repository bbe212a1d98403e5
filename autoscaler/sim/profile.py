"""A model-on-GPU profile: every number the replica model and the pod lifecycle need.

Profiles live in `simulations/profiles/<name>.yaml`, each number with its public source in a
comment. `load_profile("qwen3-8b-h100")` finds one by name; a path works too. A scenario can
override single fields (`profile_overrides: {scheduler: {max_num_batched_tokens: 2048}}`, the
vLLM flag an operator would set for that workload); unknown keys are rejected.

Step-time model of one engine step (one decode token for every running sequence, plus any
prefill tokens chunked into the same step, vLLM V1 chunked prefill):

    step = base_s + per_seq_s * B + per_kv_token_s * K + prefill_per_token_s * P

B running sequences in decode, K their context tokens (the KV cache read by attention), P
prefill tokens in the step. TTFT adds `ttft_overhead_s`, the non-GPU part (HTTP, chat
template, tokenisation) measured at concurrency 1.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt


from autoscaler.config.bounded import load_yaml_mapping

PROFILE_DIR = Path(__file__).resolve().parents[2] / "simulations" / "profiles"


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
    # --- step time (seconds)
    base_s: float
    per_seq_s: float
    per_kv_token_s: float
    prefill_per_token_s: float
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

    def decode_step_s(self, batch: float, context_tokens: float) -> float:
        return self.base_s + self.per_seq_s * batch + self.per_kv_token_s * context_tokens

    def idle_ttft_s(self, n_in: npt.NDArray[np.int64]) -> npt.NDArray[np.float64]:
        """TTFT of each prompt alone on an idle replica: non-GPU overhead, the prompt's prefill and
        the step that emits the first token. The reference of a length-aware TTFT SLO.
        Worked example (Qwen3-8B/H100 profile): 1,000 tokens -> 0.043 + 0.037 + 0.0071 = 0.087 s."""
        out = np.asarray(self.ttft_overhead_s + self.decode_step_s(1, 0) + n_in * self.prefill_per_token_s, dtype=np.float64)
        return out

    def work_lower_bound_s(self, n_in: npt.NDArray[np.int64], n_out: npt.NDArray[np.int64]) -> npt.NDArray[np.float64]:
        """GPU-seconds a replica must spend on each request in any schedule of the engine: a proven
        lower bound, the input of the fluid lower bound (autoscaler.sim.bound).

        Prefill costs at least `prefill_per_token_s` per prompt token. Each of the n_out - 1 decode
        steps after the first token costs the request its share of the step, at least
        base / max_num_seqs + per_seq + per_kv_token * context, with context >= n_in + j at the
        j-th step. Worked example (Qwen3-8B/H100, 1,000 in / 101 out): 0.037 + 100 x (6.9e-6 +
        5e-5) + 6.5e-8 x (100 x 1000 + 100 x 101 / 2) = 0.037 + 0.00569 + 0.00683 = 0.0495 s."""
        steps = np.maximum(n_out.astype(np.float64) - 1.0, 0.0)
        per_step = self.base_s / self.max_num_seqs + self.per_seq_s
        context = steps * n_in + steps * (steps + 1.0) / 2.0
        out: npt.NDArray[np.float64] = n_in * self.prefill_per_token_s + steps * per_step + self.per_kv_token_s * context
        return out

    def capacity_rps(self, mean_input: float, mean_output: float, tpot_budget_s: float = 0.05,
                     kv_fill: float = 0.9) -> float:
        """Sustainable requests/s of one replica for a length mix: the best batch B whose TPOT
        stays within `tpot_budget_s` and whose KV stays below `kv_fill` of capacity.

        Each request costs its prefill (input tokens) plus its share of the decode steps:
        rate(B) = 1 / (mean_input * prefill_per_token_s + mean_output * step(B) / B) requests/s.
        The TPOT counts the prefill that shares the GPU with the decodes (chunked prefill puts
        the prompt tokens into the decode steps, vLLM V1): a fraction f = rate * mean_input *
        prefill_per_token_s of each second goes to prefill, so a decoding request gets a token
        every step(B) / (1 - f) seconds; with Little's law (B = rate * mean_output * TPOT) that is
        TPOT(B) = step(B) + B * mean_input * prefill_per_token_s / mean_output.
        Without that second term (the estimate before 2026-12-03) a prefill-heavy mix looked
        decode-only: Azure code (2,048 in / 28 out) 12.2 req/s at B = 161, whose TPOT in this
        model is 0.47 s.
        Worked example (Qwen3-8B/H100 profile, ShareGPT 233 in / 221 out): B = 385, step 34.9 ms,
        TPOT 49.9 ms, 34.9 req/s (36.7 at B = 593 without the prefill term);
        Azure code (2,048 / 28): B = 14, 10.5 req/s.
        """
        best = 0.0
        ctx = mean_input + mean_output / 2.0
        prefill_per_decode = mean_input * self.prefill_per_token_s / max(mean_output, 1e-9)
        for b in range(1, self.max_num_seqs + 1):
            if b * (mean_input + mean_output) > kv_fill * self.kv_cache_tokens:
                break
            step = self.decode_step_s(b, b * ctx)
            if step + b * prefill_per_decode > tpot_budget_s:
                break
            rate = 1.0 / (mean_input * self.prefill_per_token_s + mean_output * step / b)
            best = max(best, rate)
        return best


# (low, high, whole number): what each number of a profile may be (docs/limits.md); a value out
# of range made the model divide by zero (block_size 0, a zero step time) or loop for ever
# (max_num_seqs 10^18) before.
RANGES: dict[str, tuple[float, float, bool]] = {
    "gpus_per_replica": (1, 64, True),
    "tokens": (1, 1e9, True), "block_size": (1, 1024, True),
    "max_num_seqs": (1, 65_536, True), "max_num_batched_tokens": (1, 1e7, True), "max_model_len": (1, 1e8, True),
    "base_s": (1e-6, 60.0, False), "per_seq_s": (0.0, 1.0, False), "per_kv_token_s": (0.0, 1.0, False),
    "prefill_per_token_s": (0.0, 1.0, False), "ttft_overhead_s": (0.0, 60.0, False),
    "node_provision_s": (0.0, 86_400.0, False), "container_start_s": (0.0, 86_400.0, False),
    "model_load_s": (0.0, 86_400.0, False), "drain_grace_s": (0.0, 86_400.0, False),
    "node_idle_remove_s": (0.0, 86_400.0, False), "gpus_per_node": (1, 64, True),
}


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
    return Profile(
        name=name,
        model=str(raw["model"]),
        gpu=str(raw["gpu"]),
        gpus_per_replica=int(_num({"gpus_per_replica": 1, **raw}, "gpus_per_replica", where)),
        kv_cache_tokens=int(_num(kv, "tokens", where)),
        block_size=int(_num(kv, "block_size", where)),
        max_num_seqs=int(_num(sched, "max_num_seqs", where)),
        max_num_batched_tokens=int(_num(sched, "max_num_batched_tokens", where)),
        max_model_len=int(_num(sched, "max_model_len", where)),
        base_s=_num(step, "base_s", where),
        per_seq_s=_num(step, "per_seq_s", where),
        per_kv_token_s=_num(step, "per_kv_token_s", where),
        prefill_per_token_s=_num(step, "prefill_per_token_s", where),
        ttft_overhead_s=_num(step, "ttft_overhead_s", where),
        node_provision_s=_num(life, "node_provision_s", where),
        container_start_s=_num(life, "container_start_s", where),
        model_load_s=_num(life, "model_load_s", where),
        drain_grace_s=_num(life, "drain_grace_s", where),
        node_idle_remove_s=_num(life, "node_idle_remove_s", where),
        gpus_per_node=int(_num(life, "gpus_per_node", where)),
    )
